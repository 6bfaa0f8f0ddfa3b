#!/usr/bin/env bash
# The shim as NCCL's profiler plugin (NCCLWATCH_PROFILER=1) on real NCCL (>= 2.28; another through
# with_nccl.sh): torch_plans.py's two ranks, and each collective's OpPlan record of rank 0 against
# NCCL's own log of the same launch (NCCL_DEBUG_SUBSYS=TUNING: "AllReduce: 8 Bytes -> Algo RING
# proto LL channel{Lo..Hi}={0..1}"), op by op: function, bytes, algorithm, protocol, channels. Then
# `latency` must name the plan on its rows.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/profiler-plans"; rm -rf "$dir"; mkdir -p "$dir"
port=$((29600 + RANDOM % 300))
pids=""
for r in 0 1; do
  NCCL_HOSTID="plans-$r" NCCLWATCH_PROFILER=1 NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING,INIT NCCL_DEBUG_FILE="$dir/nccl-$r.log" \
    timeout 180 python3 "$ROOT/tests/gpu/torch_plans.py" "$r" "$port" >"$dir/rank$r.out" 2>"$dir/rank$r.err" &
  pids="$pids $!"
done
status=0
for p in $pids; do wait "$p" || status=1; done
[ "$status" -eq 0 ] || tail -5 "$dir"/rank*.err
grep -h 'profiler' "$dir"/nccl-*.log | head -3
report dump --json "$dir/traces" >"$dir/dump.jsonl"
report latency "$dir/traces" | tee "$dir/latency.txt"
expect "rank 0's OpPlan records are NCCL's own log of each launch, op by op" python3 - "$dir" <<'PY'
import json, re, sys
d = sys.argv[1]
sizes = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}  # ncclDataType_t
log = []
for line in open(f"{d}/nccl-0.log"):
    m = re.search(r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}", line)
    if m: log.append((m.group(1), int(m.group(2)), m.group(3), m.group(4), int(m.group(6)) - int(m.group(5)) + 1))
pid0 = None
plans = []
for line in open(f"{d}/dump.jsonl"):
    r = json.loads(line)
    if r.get("type") == "op_plan" and r["rank"] == 0 and r["op"] not in ("ncclSend", "ncclRecv"):
        # PyTorch broadcasts with ncclBcast, which NCCL runs, and logs, as Broadcast.
        plans.append((r["op"].removeprefix("nccl").replace("Bcast", "Broadcast"), r["count"] * sizes.get(r["datatype"], 0), r["algo"], r["proto"], r["channels"]))
print(f"NCCL's log: {len(log)} launches; the trace: {len(plans)} collective plans on rank 0")
for want, got in list(zip(log, plans))[:12]:
    print(f"  NCCL {want}  shim {got}")
mismatches = [(i, w, g) for i, (w, g) in enumerate(zip(log, plans)) if w != g]
for m in mismatches[:5]: print("  MISMATCH", m)
sys.exit(0 if log and len(log) == len(plans) and not mismatches else 1)
PY
expect "latency names the plan on its rows" grep -q 'nccl plan' "$dir/latency.txt"
finish
