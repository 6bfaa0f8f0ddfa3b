#!/usr/bin/env bash
# SIGKILL mid-job on 2 GPUs (or 2 ranks sharing one): the ranks of a hung PyTorch job
# (examples/torch_hang.py) are killed with SIGKILL; their traces must still hold every record:
# communicators, ops, the stall.
source "$(dirname "$0")/common.sh"
# One GPU: the two ranks share it, each claiming a host (examples/torch_hang.py).
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/torch-sigkill"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_STALL_SEC=3 NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" \
  torchrun --nproc-per-node 2 "$ROOT/examples/torch_hang.py" >"$dir/stdout" 2>"$dir/stderr" &
launcher=$!
for _ in $(seq 1 60); do grep -q 'has not completed' "$dir/stderr" 2>/dev/null && break; sleep 1; done
pkill -KILL -f 'examples/torch_hang.py' ; wait "$launcher" 2>/dev/null
report summary "$dir/traces" | tee "$dir/summary.txt"
report hang --json "$dir/traces" >"$dir/hang.json"
expect "both killed ranks left a trace without a final record" grep -q '2 process(es) ended without a final record' "$dir/summary.txt"
expect "their communicators read as leaked" grep -q 'LEAKS' "$dir/summary.txt"
expect "the ops and the stall before the kill are all there" python3 - "$dir/hang.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
world = max(d["comms"], key=lambda c: c.get("last_seq_issued", 0))
stalls = world.get("stall_records", [])
print("last seq issued:", world.get("last_seq_issued"), "stall records:", stalls if isinstance(stalls, int) else len(stalls))
assert world.get("last_seq_issued", 0) >= 19
assert any(x["rank"] == 1 for c in d["comms"] for x in c.get("divergence", []))
PY
finish
