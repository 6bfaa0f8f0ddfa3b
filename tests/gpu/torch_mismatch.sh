#!/usr/bin/env bash
# A silent mismatch on 2 GPUs: rank 1 all-reduces half the elements at step 4
# (examples/torch_mismatch.py). NCCL notices nothing: the job exits 0 with wrong data or, as on
# H200 with NCCL 2.28.9, hangs; either way `summary` and `hang` must flag seq 4's count.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 2 ]; then echo "SKIP: needs 2 GPUs"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/torch-mismatch"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_DIR="$dir/traces" NCCLWATCH_STALL_SEC=5 LD_PRELOAD="$SHIM" timeout 60 \
  torchrun --nproc-per-node 2 "$ROOT/examples/torch_mismatch.py" >"$dir/stdout" 2>"$dir/stderr"
status=$?
echo "torchrun exit $status"
report summary "$dir/traces" | tee "$dir/summary.txt"
report hang --json "$dir/traces" >"$dir/hang.json"
expect "summary flags the mismatch" grep -qi 'mismatch' "$dir/summary.txt"
expect "hang reports a count mismatch at the 4th all-reduce" python3 - "$dir/hang.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
mm = [m for c in d["comms"] for m in c["mismatches"]]
print("mismatches:", mm)
assert any(m["field"] == "count" for m in mm), mm
PY
finish
