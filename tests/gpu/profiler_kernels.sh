#!/usr/bin/env bash
# Each op's kernel time by the GPU's own timer, through the shim's profiler plugin
# (NCCLWATCH_PROFILER=kernels: NCCL's KernelCh events) on real NCCL (>= 2.28; another through
# with_nccl.sh), against CUPTI's kernel durations of the same launches (torch.profiler on rank 0):
# op by op in launch order, then per op and size, within 5 % where the kernel runs 20 us or more.
# `latency` must give the kernel column.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/profiler-kernels"; rm -rf "$dir"; mkdir -p "$dir"
port=$((29600 + RANDOM % 300))
pids=""
for r in 0 1; do
  NCCL_HOSTID="kernels-$r" NCCLWATCH_PROFILER=kernels NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" \
    timeout 240 python3 "$ROOT/tests/gpu/torch_kernels.py" "$r" "$port" "$dir/cupti.json" \
    >"$dir/rank$r.out" 2>"$dir/rank$r.err" &
  pids="$pids $!"
done
status=0
for p in $pids; do wait "$p" || status=1; done
[ "$status" -eq 0 ] || tail -5 "$dir"/rank*.err
report dump --json "$dir/traces" >"$dir/dump.jsonl"
report latency "$dir/traces" | tee "$dir/latency.txt"
expect "rank 0's kernel times by NCCL's KernelCh are CUPTI's, op by op, within 5 % from 20 us" python3 - "$dir" <<'PY'
import json, statistics, sys
d = sys.argv[1]
cupti = json.load(open(f"{d}/cupti.json"))
ops = {}
for line in open(f"{d}/dump.jsonl"):
    r = json.loads(line)
    if r.get("type") == "op_kernel" and r["rank"] == 0:
        key = (r["launch_id"], r["op"], r["seq"], r["peer"])
        start, stop, what = ops.get(key, (float("inf"), 0, (r["op"], r["count"])))
        ops[key] = (min(start, r["gpu_start_ns"]), max(stop, r["gpu_stop_ns"]), what)
ours = sorted(ops.values())  # launch order, by the GPU's timer
print(f"CUPTI: {len(cupti)} NCCL kernels on rank 0; the trace: {len(ours)} ops with kernel times")
if not cupti or len(cupti) != len(ours):
    sys.exit(1)
groups = {}
for (start, stop, what), (name, dur) in zip(ours, cupti):
    groups.setdefault(what, []).append(((stop - start) / 1e3, dur))
worst = 0.0
for what, pairs in sorted(groups.items(), key=lambda g: statistics.mean(p[1] for p in g[1])):
    mine, theirs = statistics.mean(p[0] for p in pairs), statistics.mean(p[1] for p in pairs)
    off = mine / theirs - 1
    print(f"  {what[0]:<22} count {what[1]:>9}: shim {mine:9.1f} us, CUPTI {theirs:9.1f} us ({off:+.1%}, {len(pairs)} ops)")
    if theirs >= 20: worst = max(worst, abs(off))
print(f"largest difference from 20 us: {worst:.1%}")
sys.exit(0 if worst <= 0.05 else 1)
PY
expect "latency gives the kernel time by NCCL's clock" grep -q 'kernel us' "$dir/latency.txt"
finish
