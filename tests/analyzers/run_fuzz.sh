#!/bin/sh
# Builds the trace reader's libFuzzer target with clang++ (the main build uses g++) and runs it.
#   tests/analyzers/run_fuzz.sh [SECONDS] [WORKDIR]
# SECONDS: how long to fuzz (default $NCCLWATCH_FUZZ_SECONDS, else 60).
# WORKDIR: keeps the objects (rebuilt only when a source changed, when ninja is at hand) and the
# corpus the fuzzer grows (default $NCCLWATCH_FUZZ_WORK, else a new temporary folder). The seeds in
# tests/analyzers/corpus/ are read, never written.
# Exit status: 0 no finding; 77 (skipped) without clang++ or libFuzzer's runtime; 1 a crash, a
# sanitizer report, a timeout or an out-of-memory input: the input is left as WORKDIR/crash-*,
# timeout-*, oom-* or leak-*, and `WORKDIR/fuzz_reader FILE` replays it.
set -eu
seconds=${1:-${NCCLWATCH_FUZZ_SECONDS:-60}}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${2:-${NCCLWATCH_FUZZ_WORK:-}}
[ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/ncclwatch-fuzz.XXXXXX")
mkdir -p "$work/corpus" "$work/obj"
work=$(cd "$work" && pwd)
jobs=${NCCLWATCH_FUZZ_JOBS:-2}

cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "SKIP: $cxx not found (install clang to fuzz the trace reader)"
  exit 77
fi
# libFuzzer's runtime ships apart from clang on Debian (libclang-rt-N-dev): link a probe first.
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$work/probe.cc"
if ! "$cxx" -fsanitize=fuzzer "$work/probe.cc" -o "$work/probe" >"$work/probe.log" 2>&1; then
  echo "SKIP: $cxx cannot link libFuzzer targets (install libclang-rt-dev for clang's version):"
  cat "$work/probe.log"
  exit 77
fi

sources="$(ls "$root"/analyzers/model/*.cc "$root"/analyzers/parquet/*.cc "$root"/analyzers/reports/*.cc) $here/fuzz_reader.cc"
# fmt from its library (libfmt-dev), not header-only as in the main build: that halves the build
# time, and fmt itself is not what is fuzzed. Line tables are all the crash reports need.
# The header meson generates (common/meson.build), made here from meson.build's version.
mkdir -p "$work/gen"
version=$(sed -n "s/^ *version: '\([^']*\)',.*/\1/p" "$root/meson.build" | head -1)
printf '#pragma once\n#define NCCLWATCH_VERSION "%s"\n' "${version:-unknown}" >"$work/gen/ncclwatch_version.h.new"
cmp -s "$work/gen/ncclwatch_version.h.new" "$work/gen/ncclwatch_version.h" 2>/dev/null ||
  mv "$work/gen/ncclwatch_version.h.new" "$work/gen/ncclwatch_version.h"
flags="-std=c++20 -O1 -gline-tables-only -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -I$root/analyzers -I$root/common -I$work/gen"
link="-fsanitize=fuzzer,address,undefined"
libs="-lfmt -ldw -lelf -lz -lzstd -lpthread"
start=$(date +%s)
if command -v ninja >/dev/null 2>&1; then
  # A ninja file: objects build in parallel and only when their source or a header changed.
  {
    echo "rule cxx"
    echo "  command = $cxx $flags -MD -MF \$out.d -c \$in -o \$out"
    echo "  depfile = \$out.d"
    echo "  deps = gcc"
    echo "rule link"
    echo "  command = $cxx $link \$in $libs -o \$out"
    objs=""
    for src in $sources; do
      obj="obj/$(basename "$src" .cc).o"
      echo "build $obj: cxx $src"
      objs="$objs $obj"
    done
    echo "build fuzz_reader: link$objs"
  } >"$work/build.ninja"
  ninja -C "$work" -j "$jobs" fuzz_reader
else
  objs=""
  for src in $sources; do
    obj="$work/obj/$(basename "$src" .cc).o"
    "$cxx" $flags -c "$src" -o "$obj"
    objs="$objs $obj"
  done
  "$cxx" $link $objs $libs -o "$work/fuzz_reader"
fi
echo "built in $(($(date +%s) - start)) s; fuzzing for ${seconds} s in $work"

# -close_fd_mask=2: the reports name every damaged input on stderr; libFuzzer and the sanitizers
# keep a copy of it for their own reports. Exit codes are pinned: libFuzzer's default for a crash is
# 77, which a test harness reads as "skipped".
cd "$work"
export TMPDIR="$work"  # where the target writes each input for the reports to read
status=0
./fuzz_reader -max_total_time="$seconds" -max_len=65536 -timeout=20 -rss_limit_mb=2048 -close_fd_mask=2 \
  -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$work/" -print_final_stats=1 \
  corpus "$here/corpus" || status=$?
rm -f "$work"/ncclwatch-fuzz-*.nwt
if [ "$status" -ne 0 ]; then
  echo "FAILED: the fuzzer found an input that breaks a report (exit $status); see $work/crash-* / timeout-* / oom-*"
  [ "$status" -eq 77 ] && status=1
fi
exit "$status"
