#!/usr/bin/env bash
# NCCL inside CUDA graphs, on real NCCL and CUDA:
#   - graph_replays.cc (the CUDA runtime, linked statically, reaching the driver through
#     cuGetProcAddress): 1,000 launches of a graph holding a 1 MiB all-reduce on two ranks sharing
#     the GPU: 1,000 replays per rank recorded with seqs, and the latency report's replay row
#     against the program's own CUDA events around each launch (median within 10 %);
#   - PyTorch (torch_teardown_hang.py): 3 eager all-reduces, one captured in torch.cuda.graph, 10
#     replays per rank: every replay an op with GPU times, `hang` consistent; and the same job where
#     rank 1 replays 9 times: rank 1 and the missing replay named;
#   - the in-process A/B of a graph launch through the shim against the driver's own cuGraphLaunch.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
dir="$RESULTS/graph-replays"; rm -rf "$dir"; mkdir -p "$dir"
build_gpu_program "$ROOT/tests/gpu/graph_replays.cc" "$dir/graph_replays"
case $? in 0) ;; 2) echo "SKIP: needs nvcc and NCCL's headers"; exit 0 ;; *) fail "graph_replays builds"; finish; exit ;; esac

NCCLWATCH_DIR="$dir/cpp" LD_PRELOAD="$SHIM" timeout 120 "$dir/graph_replays" replays 1000 "$dir/own_us.txt" >"$dir/cpp.out" 2>&1
echo "graph_replays replays: exit $?"; cat "$dir/cpp.out" | tail -5
report latency --json "$dir/cpp" >"$dir/cpp.latency.json"
report latency "$dir/cpp" | head -12
for f in "$dir"/cpp/*.nwt; do report dump "$f"; done >"$dir/cpp.dump"
expect "C++: 1000 replays per rank, seqs 4..1003, a graph record per rank" python3 - "$dir/cpp.dump" <<'PY'
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
by_rank = collections.defaultdict(list)
for r in recs:
    if r["type"] == "op" and r["flags"] & 16:
        by_rank[r["rank"]].append(r["seq"])
timed = collections.Counter(r["rank"] for r in recs if r["type"] == "op" and r["flags"] & 16 and r["flags"] & 2)
print({k: (len(v), min(v), max(v)) for k, v in by_rank.items()}, "timed:", dict(timed))
assert sorted(by_rank) == [0, 1] and all(v == list(range(4, 1004)) for v in by_rank.values())
assert sum(1 for r in recs if r["type"] == "graph" and r["event"] == "instantiated") == 2
PY
expect "C++: the replay row's GPU median within 10 % of the program's own CUDA events" \
  python3 - "$dir/cpp.latency.json" "$dir/own_us.txt" <<'PY'
import json, statistics, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r["timing"] == "gpu_graph_replay"]
own = statistics.median(float(l) for l in open(sys.argv[2]) if l.strip())
print(f"replay rows: {[(r['op'], r['bytes'], r['timed_calls'], r['p50_us']) for r in rows]}; own events median {own:.1f} us")
assert len(rows) == 1 and abs(rows[0]["p50_us"] / own - 1) <= 0.10, rows
PY

torch_job() {  # torch_job NAME REPLAYS_RANK1: traces in $dir/NAME; both ranks stopped 5 s after rank 1 enters teardown
  local name=$1 pids=()
  for rank in 0 1; do
    NCCLWATCH_DIR="$dir/$name" LD_PRELOAD="$SHIM" RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=29592 REPLAYS_RANK1=$2 python3 "$ROOT/tests/gpu/torch_teardown_hang.py" \
      >"$dir/$name.stdout.$rank" 2>"$dir/$name.stderr.$rank" &
    pids+=($!)
  done
  for _ in $(seq 1 240); do grep -q 'destroy_process_group at' "$dir/$name.stdout.1" 2>/dev/null && break; sleep 0.5; done
  sleep 5
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid"; done
  cat "$dir/$name".stdout.*
  report hang --json "$dir/$name" >"$dir/$name.hang.json"
  report summary --json "$dir/$name" >"$dir/$name.summary.json"
  report hang "$dir/$name" | head -8
  for f in "$dir/$name"/*.nwt; do report dump "$f"; done >"$dir/$name.dump"
}
if python3 -c 'import torch' 2>/dev/null; then
  torch_job torch10 10
  expect "PyTorch: per rank 10 replays with GPU times; hang consistent; no 'never completed'" \
    python3 - "$dir/torch10.dump" "$dir/torch10.hang.json" "$dir/torch10.summary.json" <<'PY'
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
hang, summary = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
timings = {(r["launch_id"]) for r in recs if r["type"] == "gpu_timing"}
replays = collections.defaultdict(list)
for r in recs:
    if r["type"] == "op" and r["flags"] & 16:
        replays[r["rank"]].append((r["seq"], r["launch_id"] in timings))
print({k: v for k, v in replays.items()})
assert sorted(replays) == [0, 1] and all(len(v) == 10 and all(t for _, t in v) for v in replays.values())
world = max(hang["comms"], key=lambda c: c["last_seq_issued"])
print("verdict:", hang["verdict"], "| first look:", summary["first_look"])
assert not world["missing"] and not world["incomplete"] and not world["mismatches"], world
assert "never completed" not in json.dumps(summary)
PY
  torch_job torch9 9
  expect "PyTorch: rank 1 replaying 9 times is named, with the missing replay" \
    python3 - "$dir/torch9.hang.json" <<'PY'
import json, sys
hang = json.load(open(sys.argv[1]))
world = max(hang["comms"], key=lambda c: c["last_seq_issued"])
print("missing:", world["missing"], "| verdict:", hang["verdict"])
m = world["missing"]
assert len(m) == 1 and m[0]["rank"] == 1 and m[0].get("replay") == 10 and m[0].get("graph"), m
assert "replay 10 of CUDA graph" in hang["verdict"]
PY
else
  echo "SKIP: no PyTorch for the torch.cuda.graph job"
fi

# Three runs (the figure moves by ~0.1 us from run to run): their median.
for run in 1 2 3; do
  LD_PRELOAD="$SHIM" NCCLWATCH_DIR="$dir/ab" timeout 300 "$dir/graph_replays" ab 40
done | tee "$dir/ab.txt"
expect "A/B: a launch of a graph holding NCCL ops costs at most 0.3 us more through the shim (median of 3 runs)" \
  python3 - "$dir/ab.txt" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
runs = [float(x) for x in re.findall(r"with an NCCL all-reduce: added (-?[\d.]+) us", text)]
print("added per launch:", runs)
assert len(runs) == 3 and statistics.median(runs) <= 0.3, runs
PY
finish
