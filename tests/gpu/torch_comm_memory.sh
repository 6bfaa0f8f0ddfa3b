#!/usr/bin/env bash
# GPU memory per communicator (torch_comm_memory.py): the shim's figure for each group's init and
# destroy against the free memory PyTorch read around the same calls.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/comm-memory"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" timeout 300 python3 "$ROOT/tests/gpu/torch_comm_memory.py" \
  >"$dir/stdout" 2>"$dir/stderr"
echo "exit $?: $(tail -1 "$dir/stdout")"
report leaks --json "$dir/traces" >"$dir/leaks.json"
expect "each group's GPU memory at init and at destroy is what PyTorch saw the free memory change by" \
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
torch_rows = json.loads(open(f"{d}/stdout").read().strip().splitlines()[-1])
comms = json.load(open(f"{d}/leaks.json"))["communicators"]
groups = sorted((c for c in comms if c["api"] == "ncclCommSplit"), key=lambda c: c["age_s"], reverse=True)
mib = 1 << 20
problems = []
for row, c in zip(torch_rows, groups):
    made, freed = c["gpu_memory"], c["gpu_memory_freed"]
    print(f"init: shim {made and made['bytes'] / mib:.1f} MiB ({made and made['from']}), torch {row['init_drop'] / mib:.1f} MiB; "
          f"first all-reduce took {row['first_use_drop'] / mib:.1f} MiB more; destroy: shim {freed and freed['bytes'] / mib:.1f} MiB, "
          f"torch {row['destroy_rise'] / mib:.1f} MiB")
    if not made or abs(made["bytes"] - row["init_drop"]) > 2 * mib: problems.append(f"init {made} vs {row['init_drop']}")
    if not freed or abs(freed["bytes"] - row["destroy_rise"]) > 2 * mib: problems.append(f"destroy {freed} vs {row['destroy_rise']}")
if len(groups) != 4: problems.append(f"{len(groups)} groups")
print("problems", problems)
sys.exit(1 if problems else 0)
PY
finish
