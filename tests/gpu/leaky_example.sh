#!/usr/bin/env bash
# examples/leaky_nccl on 2 GPUs with the real NCCL, under the shim.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 2 ]; then echo "SKIP: needs 2 GPUs"; exit 0; fi
nccl_dir="$(real_nccl_dir)"
[ -n "$nccl_dir" ] || { echo "SKIP: no real libnccl.so.2 found"; exit 0; }
dir="$RESULTS/leaky-example"
rm -rf "$dir"; mkdir -p "$dir"
LD_LIBRARY_PATH="$nccl_dir:$(real_cuda_dir)" NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" \
  python3 "$ROOT/tests/launcher/mprun.py" -n 2 --logdir "$dir/logs" -- "$BUILD/examples/leaky_nccl"
echo "mprun exit $?"
cat "$dir"/logs/rank*.err
expect "each rank alerts about the world communicator" \
  bash -c "[ \$(grep -c 'ncclwatch: 1 communicator(s) never destroyed' $dir/logs/rank*.err | awk -F: '{s+=\$2} END {print s}') -eq 2 ]"
expect "the alert names it \"world\"" grep -q '"world"' "$dir/logs/rank0.err"
expect "the trace says which NCCL" bash -c "strings $dir/traces/*.nwt | grep -q 'version=22809\|version=2'"
finish
