#!/usr/bin/env bash
# A teardown that hangs, on real NCCL: torch_teardown_hang.py's two ranks (sharing one GPU) enter
# ncclCommFinalize from destroy_process_group() after replaying a CUDA graph, and never return;
# after WAIT_S seconds each is sent SIGTERM. The reports must name the hang as finalize_hung on
# both ranks, with the time inside measured against the ranks' own clock (the time each printed
# before destroy_process_group, and the time it was sent SIGTERM), and look at it first.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
WAIT_S=${WAIT_S:-20}
dir="$RESULTS/torch-teardown-hang"; rm -rf "$dir"; mkdir -p "$dir"
pids=()
for rank in 0 1; do
  NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29591 python3 "$ROOT/tests/gpu/torch_teardown_hang.py" \
    >"$dir/stdout.$rank" 2>"$dir/stderr.$rank" &
  pids+=($!)
done
# Both ranks in destroy_process_group(), then WAIT_S seconds more.
for _ in $(seq 1 240); do [ "$(cat "$dir"/stdout.* 2>/dev/null | grep -c 'destroy_process_group at')" -ge 2 ] && break; sleep 0.5; done
sleep "$WAIT_S"
hung=0
for rank in 0 1; do
  if kill -0 "${pids[$rank]}" 2>/dev/null; then hung=$((hung + 1)); date +%s.%N >"$dir/killed_at.$rank"; kill -TERM "${pids[$rank]}"; fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
cat "$dir"/stdout.*; grep -h -A3 '^ncclwatch:' "$dir"/stderr.* | head -12
if [ "$hung" -eq 0 ]; then echo "NOTE: the teardown did not hang this time (both ranks returned): nothing to name"; finish; fi
report leaks --json "$dir/traces" >"$dir/leaks.json"
report summary --json "$dir/traces" >"$dir/summary.json"
report leaks "$dir/traces" | grep -E 'TEARDOWN|finalize_hung' | head -4
python3 - "$dir" <<'PY' >"$dir/check.txt"
import json, sys, os
d = sys.argv[1]
leaks = json.load(open(f"{d}/leaks.json"))
called = {}
for rank in (0, 1):
    for line in open(f"{d}/stdout.{rank}"):
        if "destroy_process_group at" in line:
            called[rank] = float(line.split()[-1])
for c in leaks["communicators"]:
    if c["state"] not in ("finalize_hung", "destroy_hung", "abort_hung"):
        continue
    rank = c["rank"]
    killed = float(open(f"{d}/killed_at.{rank}").read()) if os.path.exists(f"{d}/killed_at.{rank}") else None
    truth = killed - called[rank] if killed and rank in called else None
    print(f"rank {rank} {c['state']} {c['teardown_call']} inside {c['teardown_inside_s']:.2f} s until {c['teardown_until']}; "
          f"truth {truth:.2f} s" if truth else f"rank {rank} {c['state']} (no truth)")
PY
cat "$dir/check.txt"
first_look=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["first_look"])' "$dir/summary.json")
echo "first look: $first_look"
expect "both ranks hung in teardown and are named finalize_hung in ncclCommFinalize, until SIGTERM" \
  test "$(grep -c 'finalize_hung ncclCommFinalize inside .* until SIGTERM' "$dir/check.txt")" -eq 2
expect "the time inside is the ranks' own to within 10 % (or 0.5 s)" python3 - "$dir/check.txt" <<'PY'
import re, sys
rows = [re.search(r"inside ([\d.]+) s .* truth ([\d.]+) s", l) for l in open(sys.argv[1])]
rows = [(float(m[1]), float(m[2])) for m in rows if m]
sys.exit(0 if rows and all(abs(a - t) <= max(0.5, 0.1 * t) for a, t in rows) else 1)
PY
starts_with() { [[ "$1" == "$2"* ]]; }
expect "the summary looks first at the hung teardown" starts_with "$first_look" "teardown hung: ncclCommFinalize entered on rank(s) 0,1"
expect "each rank's alert names finalize_hung" test "$(grep -l 'finalize_hung (ncclCommFinalize entered' "$dir"/stderr.* | wc -l)" -eq 2
finish
