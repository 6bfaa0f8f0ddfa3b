#!/usr/bin/env bash
# What the world does to a PyTorch job under the shim, on real NCCL (2 ranks may share one GPU):
# its traces truncated mid-job (`: > file`), Ctrl-C on a rank, two copies of the shim preloaded.
# None may change how the job ends; the shim says what it lost and still tells the truth.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
job="$ROOT/tests/gpu/torch_hostile.py"

# 1. Both ranks' traces truncated to nothing 3 s after they appear, in the middle of 15 s of all-reduces.
dir="$RESULTS/torch-truncated"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" \
  torchrun --nproc-per-node 2 --master-port 29581 "$job" spin 15 >"$dir/stdout" 2>"$dir/stderr" &
launcher=$!
for _ in $(seq 1 120); do [ "$(ls "$dir"/traces/*.nwt 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.5; done
sleep 3
for f in "$dir"/traces/*.nwt; do echo "truncating $(basename "$f") at $(stat -c %s "$f") bytes"; : >"$f"; done
wait "$launcher"; status=$?
echo "truncated job: exit $status; $(grep -c 'rank spun' "$dir/stdout") rank(s) finished"
grep 'ncclwatch' "$dir/stderr" | head -5
expect "a job whose traces were truncated mid-run ends normally" test "$status" -eq 0
expect "both ranks ran to their end" test "$(grep -c 'rank spun' "$dir/stdout")" -eq 2
expect "no bus error" bash -c "! grep -qi 'bus error\|SIGBUS\|signal 7' '$dir/stderr'"
expect "each rank said once that its trace was truncated" \
  test "$(grep -c 'was truncated by another process; tracing stopped' "$dir/stderr")" -eq 2

# 2. Ctrl-C on a one-rank job with its process group alive.
dir="$RESULTS/torch-ctrl-c"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" python3 "$job" ctrl-c >"$dir/stdout" 2>"$dir/stderr"
status=$?
grep -A4 '^ncclwatch:' "$dir/stderr" | head -8
report summary "$dir/traces" >"$dir/summary.txt"; cat "$dir/summary.txt" | head -8
expect "Python ends by SIGINT after Ctrl-C (status 130)" test "$status" -eq 130
expect "the trace has its end (no 'ended without a final record')" bash -c "! grep -q 'without a final record' '$dir/summary.txt'"
expect "the summary says it ended by SIGINT" grep -q 'ended by SIGINT' "$dir/summary.txt"

# 3. Two copies of the shim preloaded: one trace, one alert, the other copy only forwards.
dir="$RESULTS/torch-two-shims"; rm -rf "$dir"; mkdir -p "$dir"
cp "$SHIM" "$dir/libncclwatch-second.so"
NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM:$dir/libncclwatch-second.so" python3 - >"$dir/stdout" 2>"$dir/stderr" <<'PY'
import os, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29583", RANK="0", WORLD_SIZE="1")
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
t = torch.ones(16, device="cuda"); dist.all_reduce(t); torch.cuda.synchronize()
print("done")  # no destroy_process_group: one communicator leaks
PY
status=$?
grep 'ncclwatch' "$dir/stderr" | head -4
expect "the job with two shims runs" test "$status" -eq 0
expect "one trace" test "$(ls "$dir"/traces/*.nwt | wc -l)" -eq 1
expect "one alert" test "$(grep -c 'communicator(s) never destroyed' "$dir/stderr")" -eq 1
expect "the second copy is named once" test "$(grep -c 'another copy of the shim is loaded' "$dir/stderr")" -eq 1
finish
