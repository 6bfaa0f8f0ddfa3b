#!/usr/bin/env bash
# A rank that never joins a communicator keeps the others in its init (real NCCL, one GPU): after
# SIGTERM ends the job, `hang` names the rank waiting in ncclCommInitRank and the one it waits for.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: no GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/init-hang"; rm -rf "$dir"; mkdir -p "$dir/rendezvous"
for r in 0 1; do
  NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" python3 "$(dirname "$0")/init_hang.py" $r "$dir/rendezvous" >"$dir/out.$r" 2>"$dir/err.$r" &
  pids[$r]=$!
done
for _ in $(seq 1 300); do
  [ -e "$dir/rendezvous/entering.0" ] && [ -e "$dir/rendezvous/ready.1" ] && break
  sleep 0.1
done
sleep 5  # well inside the init: NCCL's bootstrap waits for rank 1
kill -TERM "${pids[@]}"
status=()
for r in 0 1; do wait "${pids[$r]}"; status[$r]=$?; done
echo "exits ${status[*]} (143: SIGTERM)"
report hang --json "$dir/traces" > "$dir/hang.json"; hang_exit=$?
report hang "$dir/traces" > "$dir/hang.txt"
cat "$dir/hang.txt"
verdict="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$dir/hang.json")"
expect "both ended by SIGTERM" test "${status[0]}" -eq 143 -a "${status[1]}" -eq 143
expect "hang exits 1 (a finding)" test "$hang_exit" -eq 1
expect "verdict names the rank in init and the one never joined" \
  grep -q "rank(s) 0 entered ncclCommInitRank and never returned, waiting for rank(s) 1 of 2" <<<"$verdict"
finish
