#!/usr/bin/env bash
# PyTorch DDP on 2 GPUs under the shim, with and without destroy_process_group().
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 2 ]; then echo "SKIP: needs 2 GPUs"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }

for mode in destroy no-destroy; do
  dir="$RESULTS/torch-$mode"
  rm -rf "$dir"; mkdir -p "$dir"
  extra=""; [ "$mode" = no-destroy ] && extra="--no-destroy"
  NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" \
    torchrun --nproc-per-node 2 --log-dir "$dir/logs" --redirects 3 --tee 3 \
    "$ROOT/examples/torch_ddp.py" $extra >"$dir/stdout" 2>"$dir/stderr"
  echo "torchrun ($mode) exit $?"
  cat "$dir"/logs/*/attempt_0/*/stderr.log > "$dir/rank_stderr" 2>/dev/null || cp "$dir/stderr" "$dir/rank_stderr"
  echo "---- $mode: what the ranks printed on stderr"
  grep -h -A12 '^ncclwatch\|destroy_process_group\|NCCL WARN' "$dir"/logs/*/attempt_0/*/stderr.log 2>/dev/null | head -60
done

no="$RESULTS/torch-no-destroy"; yes="$RESULTS/torch-destroy"
expect "with destroy_process_group: no alert" bash -c "! grep -q 'communicator(s) never destroyed' '$yes/rank_stderr'"
expect "with destroy_process_group: one trace per rank" bash -c "[ \$(ls '$yes/traces' | wc -l) -eq 2 ]"
expect "without: every rank alerts" bash -c "[ \$(grep -c 'communicator(s) never destroyed' '$no/rank_stderr') -eq 2 ]"
expect "without: communicators named released_at_exit" grep -q 'released_at_exit' "$no/rank_stderr"
expect "without: the remedy names destroy_process_group" grep -q 'remedy: call torch.distributed.destroy_process_group' "$no/rank_stderr"
expect "torchrun launcher itself left no trace" bash -c "[ \$(ls '$no/traces' | wc -l) -eq 2 ]"
finish
