#!/bin/sh
# Builds the trace reader's libFuzzer target with clang++ (the main build uses g++) and runs it.
#   tests/analyzers/run_fuzz.sh [SECONDS] [WORKDIR]
# The corpus in tests/analyzers/corpus/ seeds it; new inputs go to WORKDIR/corpus, crashes to WORKDIR.
set -eu
seconds=${1:-120}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${2:-$(mktemp -d "${TMPDIR:-/tmp}/ncclwatch-fuzz.XXXXXX")}
mkdir -p "$work/corpus" "$work/obj"
sources=$(ls "$root"/analyzers/*.cc | grep -v '/main\.cc$')
flags="-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -DFMT_HEADER_ONLY=1 -I$root/analyzers -I$root/common"
objs=""
for src in $sources "$here/fuzz_reader.cc"; do
  obj="$work/obj/$(basename "$src" .cc).o"
  clang++ $flags -c "$src" -o "$obj"
  objs="$objs $obj"
done
clang++ -fsanitize=fuzzer,address,undefined $objs -ldw -lelf -lpthread -o "$work/fuzz_reader"
echo "fuzzing for ${seconds}s in $work"
cd "$work"
./fuzz_reader -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  corpus "$here/corpus"
