#!/usr/bin/env bash
# A teardown that hangs, on real NCCL: torch_teardown_hang.py's two ranks (sharing one GPU) enter
# ncclCommFinalize from destroy_process_group() after replaying a CUDA graph, and never return;
# after WAIT_S seconds each is sent SIGTERM. The reports must name the hang as finalize_hung on
# both ranks, with the time inside measured against the ranks' own clock (the time each printed
# before destroy_process_group, and the time it was sent SIGTERM), and look at it first. A kill
# 0.3 s into the same teardown is named as such, with its sender, and not called a hang.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
WAIT_S=${WAIT_S:-20}
dir="$RESULTS/torch-teardown-hang"; rm -rf "$dir"; mkdir -p "$dir"
# Starts both ranks with their traces in $1/traces; waits until both are in destroy_process_group(),
# then $2 seconds more, and sends SIGTERM to each rank still there. Sets $hung to their number.
run_and_kill() {
  local d="$1" wait_s="$2" pids=() rank port=$((29591 + RANDOM % 100))
  mkdir -p "$d"
  for rank in 0 1; do
    NCCLWATCH_DIR="$d/traces" LD_PRELOAD="$SHIM" RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port python3 "$ROOT/tests/gpu/torch_teardown_hang.py" \
      >"$d/stdout.$rank" 2>"$d/stderr.$rank" &
    pids+=($!)
  done
  for _ in $(seq 1 240); do [ "$(cat "$d"/stdout.* 2>/dev/null | grep -c 'destroy_process_group at')" -ge 2 ] && break; sleep 0.1; done
  sleep "$wait_s"
  hung=0
  for rank in 0 1; do
    if kill -0 "${pids[$rank]}" 2>/dev/null; then hung=$((hung + 1)); date +%s.%N >"$d/killed_at.$rank"; kill -TERM "${pids[$rank]}"; fi
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}

# A kill a moment after the teardown began is not a hang: ended_in_teardown, "killed during
# ncclCommFinalize", the sender (this shell, the ranks' parent) named in the summary. (Nothing
# leaked, so no alert is printed.)
run_and_kill "$dir/killed" 0.3
if [ "$hung" -eq 2 ]; then
  report leaks --json "$dir/killed/traces" >"$dir/killed/leaks.json"
  report summary --json "$dir/killed/traces" >"$dir/killed/summary.json"
  report leaks "$dir/killed/traces" | grep -E 'killed during|_hung' | head -4
  grep -h -A4 '^ncclwatch:' "$dir"/killed/stderr.* | head -12
  expect "killed 0.3 s into the teardown: ended_in_teardown on both ranks, nothing *_hung, the first look not a hang" \
    python3 - "$dir/killed/leaks.json" "$dir/killed/summary.json" <<'PY'
import json, sys
leaks, summary = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
states = [c["state"] for c in leaks["communicators"]]
print("states:", states, "| first look:", summary["first_look"])
sys.exit(0 if states.count("ended_in_teardown") >= 2 and not any(s.endswith("_hung") for s in states)
         and "hung" not in summary["first_look"] else 1)
PY
  expect "the summary names the SIGTERM's sender on both ranks: this shell, the ranks' parent" \
    python3 - "$dir/killed/summary.json" "$$" <<'PY'
import json, sys
summary, shell = json.load(open(sys.argv[1])), int(sys.argv[2])
ends = [e for e in summary["bad_endings"] if f"was killed by SIGTERM, sent by pid {shell} (bash, its parent" in e["ended"]]
print("endings:", [e["ended"] for e in summary["bad_endings"]])
sys.exit(0 if len(ends) == 2 else 1)
PY
else
  echo "NOTE: the teardown returned within 0.3 s on $((2 - hung)) rank(s): no kill inside it to name"
fi

run_and_kill "$dir" "$WAIT_S"
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
expect "each rank's alert names the SIGTERM's sender: this shell, the ranks' parent" \
  test "$(grep -l "ended by SIGTERM, sent by pid $$ (bash, its parent" "$dir"/stderr.* | wc -l)" -eq 2
finish
