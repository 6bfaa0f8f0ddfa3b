#!/usr/bin/env bash
# Every report, in every format, on every trace of the test corpus, the real traces and the
# synthetic jobs, into OUT (one file per run: stdout, stderr and exit status). Two such folders,
# made before and after a reshaping, are diffed to show the reports' output did not change.
# The synthetic jobs carry the time they were made: pass the same INPUTS folder to both runs
# (made by the first when missing).
# usage: report_outputs.sh BUILD_DIR OUT INPUTS
set -uo pipefail
build=$(realpath "$1"); out=$(realpath -m "$2"); inputs=$(realpath -m "$3")
here=$(cd "$(dirname "$0")" && pwd)
report=$build/analyzers/ncclwatch-report
gen=$build/tests/analyzers/gen_job
mkdir -p "$out"
if [ ! -d "$inputs" ]; then
mkdir -p "$inputs"
for s in $("$gen" 2>&1 | sed -n 's/^scenarios://p'); do
  mkdir -p "$inputs/gen_$s"; "$gen" "$s" "$inputs/gen_$s" >/dev/null
done
mkdir -p "$inputs/gen_many_comms"; "$gen" many_comms "$inputs/gen_many_comms" 300 3 >/dev/null
for f in "$here"/corpus/*.nwt; do n=$(basename "$f" .nwt); mkdir -p "$inputs/corpus_$n"; cp "$f" "$inputs/corpus_$n/"; done
for d in "$here"/real/*/; do n=$(basename "$d"); cp -r "$d" "$inputs/real_$n"; done
fi
for d in "$inputs"/*/; do
  n=$(basename "$d")
  run() {  # NAME ARGS...
    local name=$1; shift
    (cd "$inputs" && "$report" "$@" >"$out/$n.$name.out" 2>"$out/$n.$name.err"; echo "exit $?" >>"$out/$n.$name.err")
    sed -i "s|$inputs|INPUTS|g; s|$out|OUT|g" "$out/$n.$name.out" "$out/$n.$name.err"
  }
  for r in summary leaks latency hang; do
    for f in text json; do run "$r.$f" "$r" --format "$f" "$d"; done
  done
  run latency.csv latency --format csv "$d"; run hang.csv hang --format csv "$d"; run leaks.csv leaks --format csv "$d"
  run leaks.nosym leaks --no-symbols "$d"
  run timeline timeline -o "$out/$n.timeline.json" "$d"
  run html html -o "$out/$n.html" "$d"
  run metrics metrics "$d"
  run dump dump "$d"
done
sed -i "s|$inputs|INPUTS|g" "$out"/*.json "$out"/*.html 2>/dev/null
# Reader threads write a timeline's pieces as they finish: its events are a set, compared sorted.
for f in "$out"/*.timeline.json; do sed -i "s/,$//" "$f"; sort -o "$f" "$f"; done
# The time a report took is no output of the reports.
sed -i -E 's/ in [0-9]+\.[0-9] s / in S s /' "$out"/*.timeline.out
echo "$(ls "$out" | wc -l) files in $out"
