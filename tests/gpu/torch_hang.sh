#!/usr/bin/env bash
# A real hang on 2 GPUs (or 2 ranks sharing one): rank 1 skips its 7th world all-reduce
# (examples/torch_hang.py); the watchdog fires, PyTorch's 20 s timeout ends the job, and `hang`
# must name rank 1 and where its program diverged.
source "$(dirname "$0")/common.sh"
# One GPU: the two ranks share it, each claiming a host (examples/torch_hang.py).
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/torch-hang"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_STALL_SEC=5 NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" timeout 120 \
  torchrun --nproc-per-node 2 "$ROOT/examples/torch_hang.py" >"$dir/stdout" 2>"$dir/stderr"
echo "torchrun exit $? (a hang ends in PyTorch's timeout)"
grep -h 'ncclwatch' "$dir/stderr" | head -8
report hang "$dir/traces" | tee "$dir/hang.txt"
report hang --json "$dir/traces" >"$dir/hang.json"
expect "the watchdog wrote a stall line" grep -q 'has not completed after' "$dir/stderr"
expect "hang names rank 1 as where the programs diverged" python3 - "$dir/hang.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
div = [x for c in d["comms"] for x in c.get("divergence", [])]
print("divergence:", div)
assert any(x["rank"] == 1 for x in div), div
PY
finish
