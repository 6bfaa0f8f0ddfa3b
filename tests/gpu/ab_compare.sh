#!/usr/bin/env bash
# The shim's cost per call against another build of it, side by side on one machine:
#     ab_compare.sh OTHER_SHIM [ROUNDS]
# ab_overhead.cc (one process, one GPU, a 1-rank communicator) under this build's shim and under
# OTHER_SHIM (say, one built from an earlier commit), host and gpu modes, the two alternating in
# each of ROUNDS rounds (default 4), with NCCL alone once per round as the floor. Prints each
# run's added µs per 8 B call (complete, issue), then each mode's median over the rounds and the
# median of the rounds' differences, this build minus the other. A figure, not a verdict: the GPU
# machine's noise is the rounds' spread.
source "$(dirname "$0")/common.sh"
other="${1:?usage: ab_compare.sh OTHER_SHIM [ROUNDS]}"; rounds="${2:-4}"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
dir="$RESULTS/ab-compare"; rm -rf "$dir"; mkdir -p "$dir"
build_gpu_program "$ROOT/tests/gpu/ab_overhead.cc" "$dir/ab_overhead"
case $? in 0) ;; 2) echo "SKIP: needs nvcc and NCCL's headers"; exit 0 ;; *) fail "ab_overhead builds"; finish; exit ;; esac
added() { grep -o 'size 8 B: complete .*' "$1" | grep -o 'added [+-][0-9.]*' | awk '{printf "%s ", $2}'; }
for round in $(seq "$rounds"); do
  for mode in host gpu; do
    for which in other this; do
      shim="$SHIM"; [ "$which" = other ] && shim="$other"
      out="$dir/r$round-$mode-$which.txt"
      LD_PRELOAD="$shim" NCCLWATCH_TIMING=$mode NCCLWATCH_DIR="$dir/traces-$round-$mode-$which" \
        timeout 120 "$dir/ab_overhead" single >"$out" 2>&1
      echo "round $round $mode $which: $(added "$out")"
    done
  done
  timeout 120 "$dir/ab_overhead" single >"$dir/r$round-none.txt" 2>&1
  echo "round $round none: $(added "$dir/r$round-none.txt")"
done | tee "$dir/runs.txt"
expect "every run gave its 8 B figures" python3 - "$dir/runs.txt" "$rounds" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"round (\d+) (\w+) ?(\w*): ([+-][0-9.]+)", line)
    if m: runs[(int(m.group(1)), m.group(2), m.group(3))] = float(m.group(4))
rounds = int(sys.argv[2])
for mode in ("host", "gpu"):
    this = [runs.get((r, mode, "this")) for r in range(1, rounds + 1)]
    other = [runs.get((r, mode, "other")) for r in range(1, rounds + 1)]
    if None in this + other: sys.exit(f"{mode}: a run gave no figure")
    diffs = [t - o for t, o in zip(this, other)]
    print(f"{mode}: this {statistics.median(this):+.3f} us, other {statistics.median(other):+.3f} us a call (medians); "
          f"differences per round {', '.join(f'{d:+.3f}' for d in diffs)}, median {statistics.median(diffs):+.3f}")
PY
finish
