#!/usr/bin/env bash
# ncclwatch-report latency on a real torchrun job against nccl-tests on the same GPUs: all-reduce
# busbw at large sizes should agree within 10 %.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 2 ]; then echo "SKIP: needs 2 GPUs"; exit 0; fi
perf="${NCCL_TESTS:-$ROOT/.nccl-tests/build}/all_reduce_perf"
[ -x "$perf" ] || { echo "SKIP: no nccl-tests all_reduce_perf"; exit 0; }
dir="$RESULTS/latency"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" timeout 120 \
  torchrun --nproc-per-node 2 "$ROOT/tests/gpu/torch_collectives.py" >"$dir/torch.log" 2>&1
LD_LIBRARY_PATH="$(real_nccl_dir):${LD_LIBRARY_PATH:-}" "$perf" -b 1K -e 128M -f 2 -g 2 >"$dir/nccl-tests.txt" 2>&1
report latency "$dir/traces" | tee "$dir/latency.txt"
report latency --json "$dir/traces" >"$dir/latency.json"
grep -E '^ +[0-9]' "$dir/nccl-tests.txt"
expect "busbw at 32 MiB and 128 MiB within 10 % of nccl-tests" python3 - "$dir/latency.json" "$dir/nccl-tests.txt" <<'PY'
import json, sys
rows = {r["bytes"]: r for r in json.load(open(sys.argv[1]))["rows"] if r["op"] == "ncclAllReduce" and r["timing"] == "gpu"}
ref = {}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) > 8 and f[0].isdigit():
        ref[int(f[0])] = float(f[7])
ok = True
for size in (32 << 20, 128 << 20):
    ours = rows[size]["busbw_gbps"]; theirs = ref[size]
    print(f"{size >> 20} MiB: ncclwatch {ours:.1f} GB/s, nccl-tests {theirs:.1f} GB/s, ratio {ours / theirs:.3f}")
    ok &= abs(ours / theirs - 1) <= 0.10
sys.exit(0 if ok else 1)
PY
finish
