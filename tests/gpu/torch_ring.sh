#!/usr/bin/env bash
# PyTorch on one GPU in a 1 MiB trace (torch_ring.py): the ring keeps the newest all-reduces and
# the totals count all 20,000; the groups remade each cycle and never destroyed are named as
# piling up. The trace is left in $GPU_RESULTS/torch-ring/traces (the real format-4 trace of
# tests/analyzers/real/torch_ring).
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/torch-ring"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_MAX_MB=1 NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" timeout 300 python3 "$ROOT/tests/gpu/torch_ring.py" \
  >"$dir/stdout" 2>"$dir/stderr"
echo "exit $?: $(cat "$dir/stdout")"
report leaks --json "$dir/traces" >"$dir/leaks.json"
report latency --json "$dir/traces" >"$dir/latency.json"
report leaks "$dir/traces" | grep -E 'PILING|alive at once'
report latency "$dir/traces" | grep -E 'ncclAllReduce|ops kept'
expect "a 1 MiB trace counts all 20,000 all-reduces and keeps the newest with GPU medians" python3 - "$dir" <<'PY'
import json, os, sys
d = sys.argv[1]
trace = [os.path.join(d, "traces", f) for f in os.listdir(os.path.join(d, "traces"))][0]
rows = {r["bytes"]: r for r in json.load(open(os.path.join(d, "latency.json")))["rows"]
        if r["op"] == "ncclAllReduce" and r["bytes"] in (64, 1 << 20) and r["calls"] > 1}  # the world's
window = json.load(open(os.path.join(d, "latency.json")))["window"]
print("size", os.path.getsize(trace), {b: (r["calls"], r["calls_in_window"], r["p50_us"], r["timing"]) for b, r in rows.items()})
sys.exit(0 if os.path.getsize(trace) <= 1 << 20 and not window["complete"] and len(rows) == 2 and
         all(r["calls"] == 10000 and r["calls_in_window"] < 10000 and r["timing"] == "gpu" and r["p50_us"] for r in rows.values())
         else 1)
PY
expect "the 12 groups remade over 3 cycles are named piling up" python3 - "$dir/leaks.json" <<'PY'
import json, sys
piles = json.load(open(sys.argv[1]))["pile_ups"]
print(piles)
sys.exit(0 if len(piles) == 1 and piles[0]["made"] == 12 and piles[0]["bursts"] == 3 and "split" in piles[0]["created_at"]
         else 1)
PY
finish
