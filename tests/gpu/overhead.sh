#!/usr/bin/env bash
# The shim's cost on real GPUs: nccl-tests all_reduce_perf on 2 GPUs without the shim, with it
# in host timing mode and in gpu timing mode, alternating in one run (small-message latency
# varies from one process to the next, so several rounds), reported as median and spread.
#   NCCL_TESTS=dir-with-all_reduce_perf ROUNDS=10 tests/gpu/overhead.sh
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 2 ]; then echo "SKIP: needs 2 GPUs"; exit 0; fi
perf="${NCCL_TESTS:-$ROOT/.nccl-tests/build}/all_reduce_perf"
[ -x "$perf" ] || { echo "SKIP: no nccl-tests all_reduce_perf (build it from its public sources; set NCCL_TESTS)"; exit 0; }
export LD_LIBRARY_PATH="$(real_nccl_dir):${LD_LIBRARY_PATH:-}"
rounds="${ROUNDS:-10}"
log="$RESULTS/overhead"
mkdir -p "$log"
# none: without the shim; host / gpu: NCCLWATCH_TIMING; gpuN: gpu with NCCLWATCH_SAMPLE=N.
read -r -a modes <<<"${MODES:-none host gpu}"
for round in $(seq 1 "$rounds"); do
  # Rotate the order every round so no mode always runs first.
  for i in "${!modes[@]}"; do
    mode="${modes[$(( (i + round) % ${#modes[@]} ))]}"
    out="$log/round$round-$mode.txt"
    if [ "$mode" = none ]; then
      "$perf" -b 8 -e 128M -f 16777216 -g 2 -w 20 -n 500 >"$out" 2>&1
    else
      timing="${mode%%[0-9]*}"; sample="${mode#"$timing"}"
      LD_PRELOAD="$SHIM" NCCLWATCH_TIMING="$timing" NCCLWATCH_SAMPLE="${sample:-1}" NCCLWATCH_DIR="$log/traces-$mode" \
        "$perf" -b 8 -e 128M -f 16777216 -g 2 -w 20 -n 500 >"$out" 2>&1
    fi
  done
done
python3 - "$log" <<'PY'
import glob, os, re, statistics, sys
log = sys.argv[1]
data = {}
for path in glob.glob(os.path.join(log, "round*-*.txt")):
    mode = os.path.basename(path).split("-")[1].split(".")[0]
    for line in open(path):
        f = line.split()
        if len(f) >= 8 and f[0].isdigit() and f[2] == "float":
            size = int(f[0]); time_us = float(f[5]); busbw = float(f[7])
            data.setdefault((size, mode), []).append((time_us, busbw))
def med(xs): return statistics.median(xs)
print(f"{'size':>10} {'mode':>5} {'runs':>4} {'time us (median, min-max)':>28} {'busbw GB/s (median)':>20} {'vs none':>8}")
for size in sorted({s for s, _ in data}):
    base = data.get((size, "none"))
    for mode in sorted({m for s, m in data if s == size}, key=lambda m: (m != "none", m)):
        runs = data.get((size, mode))
        if not runs: continue
        t = [r[0] for r in runs]; b = [r[1] for r in runs]
        metric = med(t) if size < 1 << 20 else med(b)
        ref = (med([r[0] for r in base]) if size < 1 << 20 else med([r[1] for r in base])) if base else None
        ratio = f"{metric / ref:.3f}" if ref else "-"
        print(f"{size:>10} {mode:>5} {len(runs):>4} {med(t):>10.2f} ({min(t):.2f}-{max(t):.2f}) {med(b):>20.2f} {ratio:>8}")
print("ratio: time for 8 B (lower is better), busbw for 128 MiB (higher is better)")
PY
