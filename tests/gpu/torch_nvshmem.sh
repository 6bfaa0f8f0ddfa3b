#!/usr/bin/env bash
# What NVSHMEM makes through NCCL (torch_nvshmem.py): its team communicators are traced, named as
# NVSHMEM's, at the Python line that started NVSHMEM, and their remedy is NVSHMEM's.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch.distributed._symmetric_memory as m; m.set_backend' 2>/dev/null || { echo "SKIP: no PyTorch symmetric memory"; exit 0; }
for mode in keep destroy; do
  dir="$RESULTS/nvshmem-$mode"; rm -rf "$dir"; mkdir -p "$dir"
  extra=""; [ "$mode" = destroy ] && extra="--destroy"
  NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" timeout 300 python3 "$ROOT/tests/gpu/torch_nvshmem.py" $extra \
    >"$dir/stdout" 2>"$dir/stderr"
  echo "$mode: exit $? $(cat "$dir/stdout")"
  report leaks --json "$dir/traces" >"$dir/leaks.json"
  report leaks "$dir/traces" >"$dir/leaks.txt"
done
grep -A12 'communicator(s) never destroyed' "$RESULTS/nvshmem-keep/stderr" | head -12
head -8 "$RESULTS/nvshmem-destroy/leaks.txt"
check() {
  python3 - "$RESULTS/nvshmem-$1" "$ROOT/tests/gpu/torch_nvshmem.py" <<'PY'
import json, re, sys
d, script = sys.argv[1], sys.argv[2]
line = next(n for n, l in enumerate(open(script), 1) if "# SITE nvshmem_init" in l)
report = json.load(open(f"{d}/leaks.json"))
nvshmem = [c for c in report["communicators"] if c["made_by_nvshmem"]]
states = sorted({c["state"] for c in nvshmem})
problems = []
if not nvshmem: problems.append("no communicator made by NVSHMEM")
bad = [c["created_at"] for c in nvshmem if not (c["created_at"].startswith(f"torch_nvshmem.py:{line} (<module>)") and "nvshmem" in c["created_at"])]
if bad: problems.append(f"sites {bad}")
if any(c["state"] in ("leaked", "released_at_exit") for c in nvshmem) and not any(r.startswith("NVSHMEM made") for r in report["remedies"]):
    problems.append(f"remedies {report['remedies']}")
print(len(nvshmem), "made by NVSHMEM, states", states, "GPU memory each",
      sorted({round(c["gpu_memory"]["bytes"] / 2**20) for c in nvshmem if c["gpu_memory"]}), "MiB; remedies",
      report["remedies"], "problems", problems)
sys.exit(1 if problems else 0)
PY
}
expect "NVSHMEM's communicators: traced, named as NVSHMEM's at the Python line that started it, NVSHMEM's remedy" check keep
expect "the same with destroy_process_group() at the end" check destroy
finish
