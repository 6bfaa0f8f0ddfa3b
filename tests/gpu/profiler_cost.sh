#!/usr/bin/env bash
# What the profiler plugin costs per call, at each level (NCCLWATCH_PROFILER=1: plans; =kernels:
# and kernel channels; =peers: plans and proxy steps, which the two ranks' sockets give): ab_overhead's two ranks sharing GPU 0 (a one-rank communicator has no plan
# and no kernel events) in gpu mode without it and at each level,
# alternating, ROUNDS times (default 4) on one warm machine. Inside each run NCCL's own entry point and the shim's wrapper
# alternate; the plugin, once NCCL loaded it, serves both, so its cost is the difference between
# the runs: for the wrapper (what a user pays over the shim alone) and for NCCL's direct call.
#     profiler_cost.sh [ROUNDS]
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
rounds="${1:-4}"
dir="$RESULTS/profiler-cost"; rm -rf "$dir"; mkdir -p "$dir"
build_gpu_program "$ROOT/tests/gpu/ab_overhead.cc" "$dir/ab_overhead"
case $? in 0) ;; 2) echo "SKIP: needs nvcc and NCCL's headers"; exit 0 ;; *) fail "ab_overhead builds"; finish; exit ;; esac
# The added cost per level over the rounds done so far (printed after each round: a run cut short
# still gives its figures).
cat >"$dir/summary.py" <<'PY'
import os, re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
pat = re.compile(r"size (\d+) B: complete ([0-9.]+) us/call direct, ([0-9.]+) through ncclAllReduce.*?issue ([0-9.]+) vs ([0-9.]+)")
def figures(path):
    return {int(m.group(1)): [float(x) for x in m.groups()[1:]] for m in pat.finditer(open(path).read())}
names = ("complete, NCCL direct", "complete, wrapper", "issue, NCCL direct", "issue, wrapper")
for level in ("1", "kernels", "peers"):
    for size in (8, 1 << 20):
        rows = []
        for r in range(1, rounds + 1):
            paths = (f"{d}/round{r}-plugin0.txt", f"{d}/round{r}-plugin{level}.txt")
            if not all(os.path.exists(p) for p in paths): continue
            off, on = figures(paths[0]), figures(paths[1])
            if size in off and size in on:
                rows.append([b - a for a, b in zip(off[size], on[size])])
        if not rows: continue
        print(f"NCCLWATCH_PROFILER={level}, size {size} B: added us per call, per round (on - off):")
        for i, name in enumerate(names):
            vals = [row[i] for row in rows]
            print(f"  {name:<22} " + " ".join(f"{v:+.3f}" for v in vals) + f"   median {statistics.median(vals):+.3f}")
PY
for round in $(seq "$rounds"); do
  for plugin in 0 1 kernels peers; do
    out="$dir/round$round-plugin$plugin.txt"
    SECONDS=0
    LD_PRELOAD="$SHIM" NCCLWATCH_TIMING=gpu NCCLWATCH_PROFILER="$plugin" NCCLWATCH_DIR="$dir/traces-$round-$plugin" \
      timeout 300 "$dir/ab_overhead" shared >"$out" 2>&1
    echo "== round $round, plugin $plugin (exit $?, $SECONDS s)"; grep '^size' "$out"
  done
  python3 "$dir/summary.py" "$dir" "$round"
done
expect "the plugin ran: its runs recorded kernel times" python3 - "$dir" "$REPORT" <<'PY'
import glob, subprocess, sys
d, report = sys.argv[1], sys.argv[2]
out = subprocess.run([report, "dump", *glob.glob(f"{d}/traces-1-kernels/**/*.nwt", recursive=True)], capture_output=True, text=True).stdout
sys.exit(0 if '"op_kernel"' in out else 1)
PY
expect "the peers level recorded proxy steps" python3 - "$dir" "$REPORT" <<'PY'
import glob, subprocess, sys
d, report = sys.argv[1], sys.argv[2]
out = subprocess.run([report, "dump", *glob.glob(f"{d}/traces-1-peers/**/*.nwt", recursive=True)], capture_output=True, text=True).stdout
sys.exit(0 if '"op_proxy"' in out else 1)
PY
finish
