#!/usr/bin/env bash
# The hang verdict while the job still runs (ncclwatch run's watcher), on real PyTorch jobs
# (NCCLWATCH_STALL_SEC=5, PyTorch's timeout 60 s or 20 s):
#   - torch_sleeping_rank.py: rank 1 stops in time.sleep before its 7th all-reduce: the launcher
#     prints, within 2 s of the first stall record, that rank 1 never issued seq 7, with rank 1's
#     sleep line and rank 0's wait line; verdict.json agrees with `hang` run afterwards;
#   - examples/torch_hang.py: rank 1 skips an all-reduce: the verdict before PyTorch's timeout;
#   - torch_sleeping_rank.py again with the watchdog at its default (60 s) and NCCLWATCH_LAG_SEC=3:
#     the job-level rule (rank 1 behind rank 0 in collectives issued) gives the verdict before any
#     stall record, with the same lines.
# The stall's native stack of rank 0's issuing thread is printed from the first job.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/live-verdict"; rm -rf "$dir"; mkdir -p "$dir"
export PATH="$BUILD/analyzers:$PATH" LD_LIBRARY_PATH="$BUILD/analyzers/lib:${LD_LIBRARY_PATH:-}" NCCLWATCH_SHIM="$SHIM"

live_job() {  # live_job NAME KILL_AFTER_S SCRIPT: ncclwatch run, stopped KILL_AFTER_S after its verdict
  local name=$1 kill_after=$2 script=$3
  NCCLWATCH_STALL_SEC=${STALL_SEC:-5} "$ROOT/scripts/ncclwatch" run --dir "$dir/$name" -- \
    torchrun --nproc-per-node 2 --master-port 29611 "$script" >"$dir/$name.out" 2>"$dir/$name.err" &
  local job=$!
  for _ in $(seq 1 240); do [ -f "$dir/$name/verdict.json" ] && break; kill -0 $job 2>/dev/null || break; sleep 0.5; done
  sleep "$kill_after"
  pkill -TERM -f "$script" 2>/dev/null; sleep 2; pkill -KILL -f "$script" 2>/dev/null
  wait $job
  grep -A4 'HANG SUSPECTED' "$dir/$name.err" | head -8
  report hang --json "$dir/$name" >"$dir/$name.hang.json"
  for f in "$dir/$name"/*.nwt; do report dump "$f"; done >"$dir/$name.dump"
}

live_job sleeping 3 "$ROOT/tests/gpu/torch_sleeping_rank.py"
expect "sleeping rank: the verdict within 2 s of the first stall, naming rank 1 at its sleep and rank 0 at its wait" \
  python3 - "$dir/sleeping" "$dir/sleeping.dump" "$dir/sleeping.hang.json" <<'PY'
import json, os, sys
folder, dump, after = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
live = json.load(open(os.path.join(folder, "verdict.json")))
recs = [json.loads(l) for l in open(dump)]
first_stall = None
header = None
for r in recs:
    if r["type"] == "file_header":
        header = r
    elif r["type"] == "stall" and r["state"] == "stalled":
        wall = header["start_wall_ns"] + (r["time_ns"] - header["start_mono_ns"])
        first_stall = wall if first_stall is None else min(first_stall, wall)
delay = os.stat(os.path.join(folder, "verdict.json")).st_mtime - first_stall / 1e9
print(f"verdict.json {delay:.2f} s after the first stall record")
print("live verdict:", live["verdict"])
world = max(live["comms"], key=lambda c: c["last_seq_issued"])
print("per rank:", [(r["rank"], r.get("where")) for r in world["per_rank"]])
assert delay <= 2.0, delay
assert world["missing"][0]["rank"] == 1 and world["missing"][0]["first_missing_seq"] == 7, world["missing"]
where = {r["rank"]: r.get("where", "") for r in world["per_rank"]}
assert where[1].startswith("torch_sleeping_rank.py:") and "(load_batch)" in where[1], where
assert where[0].startswith("torch_sleeping_rank.py:") and "(main)" in where[0], where
later = max(after["comms"], key=lambda c: c["last_seq_issued"])
assert later["missing"][0]["rank"] == 1 and later["missing"][0]["first_missing_seq"] == 7, later["missing"]
PY
expect "sleeping rank: the launcher printed the verdict" grep -q "HANG SUSPECTED" "$dir/sleeping.err"
expect "sleeping rank: rank 0's issuing thread at the stall: its native stack, or that it was running (CUDA's spin-wait)" \
  python3 - "$dir/sleeping.hang.json" <<'PY'
import json, sys
world = max(json.load(open(sys.argv[1]))["comms"], key=lambda c: c["last_seq_issued"])
rank0 = next(r for r in world["per_rank"] if r["rank"] == 0)
print("rank 0 thread", rank0.get("native_tid"), rank0.get("native_unread", ""))
for frame in rank0.get("native_stack", [])[:16]:
    print("   ", frame)
assert rank0.get("native_tid") == rank0["pid"], rank0
assert len(rank0.get("native_stack", [])) >= 3 or "running" in rank0.get("native_unread", ""), rank0
PY

live_job skipped 1 "$ROOT/examples/torch_hang.py"
expect "skipped all-reduce: the launcher printed a verdict naming rank 1 before PyTorch's timeout" \
  python3 - "$dir/skipped" <<'PY'
import json, os, sys
live = json.load(open(os.path.join(sys.argv[1], "verdict.json")))
print("live verdict:", live["verdict"])
assert "rank(s) 1" in live["verdict"] or "rank 1" in live["verdict"], live["verdict"]
PY

STALL_SEC=60 NCCLWATCH_LAG_SEC=3 live_job lagging 1 "$ROOT/tests/gpu/torch_sleeping_rank.py"
expect "host-stuck rank: the job-level rule's verdict before any watchdog, naming rank 1 at its sleep" \
  python3 - "$dir/lagging" "$dir/lagging.dump" "$dir/lagging.err" <<'PY'
import json, os, sys
folder, dump, err = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
live = json.load(open(os.path.join(folder, "verdict.json")))
stalls = [r for r in map(json.loads, open(dump)) if r["type"] == "stall"]
print("live verdict:", live["verdict"])
print([l for l in err.splitlines() if "HANG SUSPECTED" in l])
world = max(live["comms"], key=lambda c: c["last_seq_issued"])
assert not stalls, stalls
assert "has not issued collective" in err, err[-2000:]
assert world["missing"][0]["rank"] == 1 and world["missing"][0]["first_missing_seq"] == 7, world["missing"]
where = {r["rank"]: r.get("where", "") for r in world["per_rank"]}
assert "(load_batch)" in where[1], where
PY
report hang --json "$dir/lagging" >"$dir/lagging.hang.json"
expect "host-stuck rank: rank 1's native stack, read on the watcher's request, is its Python sleep" \
  python3 - "$dir/lagging.hang.json" <<'PY'
import json, sys
world = max(json.load(open(sys.argv[1]))["comms"], key=lambda c: c["last_seq_issued"])
rank1 = next(r for r in world["per_rank"] if r["rank"] == 1)
stack = rank1.get("native_stack", [])
print("rank 1 thread", rank1.get("native_tid"), rank1.get("native_unread", ""))
for frame in stack[:16]:
    print("   ", frame)
assert rank1.get("stacks_reason") == "requested", rank1
assert any("sleep" in f or "select" in f for f in stack[:4]) and any("python" in f.lower() for f in stack), stack
PY
finish
