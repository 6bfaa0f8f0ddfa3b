#!/usr/bin/env bash
# The shim's launch path against real CUDA on one GPU (stream_checks.cc): the watchdog names a
# stream held behind a host function and sees it resolve; CUDA-graph capture is untouched.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
dir="$RESULTS/stream-checks"; rm -rf "$dir"; mkdir -p "$dir"
build_gpu_program "$ROOT/tests/gpu/stream_checks.cc" "$dir/stream_checks"
case $? in 0) ;; 2) echo "SKIP: needs nvcc and NCCL's headers"; exit 0 ;; *) fail "stream_checks builds"; finish; exit ;; esac

NCCLWATCH_STALL_SEC=2 NCCLWATCH_DIR="$dir/stall" LD_PRELOAD="$SHIM" timeout 120 "$dir/stream_checks" stall \
  >"$dir/stall.out" 2>"$dir/stall.err"
echo "stall run: exit $?"; cat "$dir/stall.out"; grep ncclwatch "$dir/stall.err"
report dump --json "$dir/stall" >"$dir/stall.jsonl" 2>/dev/null || report dump "$dir/stall" >"$dir/stall.jsonl"
expect "the watchdog named a launch at or before the first held one (seq 61), at most 31 before" python3 - "$dir/stall.jsonl" "$dir/stall.err" <<'PY'
import json, re, sys
stalls = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "stall"]
print("stall records:", [(s["state"], s["seq"]) for s in stalls])
line = [l for l in open(sys.argv[2]) if "has not completed after" in l]
print("line:", line)
stalled = [s for s in stalls if s["state"] == "stalled"]
sys.exit(0 if len(stalled) == 1 and 61 - 31 <= stalled[0]["seq"] <= 61 and len(line) == 1 else 1)
PY
expect "the stall resolved when the stream moved" python3 - "$dir/stall.jsonl" <<'PY'
import json, sys
stalls = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "stall"]
sys.exit(0 if [s["state"] for s in stalls] == ["stalled", "resolved"] else 1)
PY

timeout 120 "$dir/stream_checks" capture >"$dir/capture-none.out" 2>&1
echo "capture without the shim: exit $? $(cat "$dir/capture-none.out")"
NCCLWATCH_DIR="$dir/capture" LD_PRELOAD="$SHIM" timeout 120 "$dir/stream_checks" capture >"$dir/capture.out" 2>&1
status=$?
echo "capture with the shim: exit $status $(cat "$dir/capture.out")"
expect "capture under the shim succeeds with the same graph nodes as without it (and some)" \
  test "$status" = 0 -a "$(grep 'graph nodes' "$dir/capture.out")" = "$(grep 'graph nodes' "$dir/capture-none.out")" \
  -a "$(grep 'graph nodes' "$dir/capture.out")" != "graph nodes 0"
report dump "$dir/capture" >"$dir/capture.jsonl" 2>/dev/null
# A captured op is the capture itself (format 6): it ran nothing, so it has seq 0 and no timing.
expect "the 3 captured all-reduces are marked captured, with seq 0, and untimed" python3 - "$dir/capture.jsonl" <<'PY'
import json, sys
ops = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "op"]
captured = [o for o in ops if o["flags"] & 1]  # kOpCaptured
print("captured seqs:", [o["seq"] for o in captured], "timed among them:", [o["seq"] for o in captured if o["flags"] & 2])
sys.exit(0 if [o["seq"] for o in captured] == [0, 0, 0] and not any(o["flags"] & 2 for o in captured) else 1)
PY
start=$(date +%s.%N)
# A ring that wraps on real NCCL: 100,000 all-reduces, every launch GPU-timed, in a 1 MiB trace.
NCCLWATCH_MAX_MB=1 NCCLWATCH_SAMPLE=1 NCCLWATCH_DIR="$dir/ring" LD_PRELOAD="$SHIM" timeout 300 "$dir/stream_checks" ring \
  >"$dir/ring.out" 2>&1
echo "ring run: exit $? $(head -3 "$dir/ring.out")"
report dump "$dir/ring" >"$dir/ring.jsonl" 2>/dev/null
report latency --json "$dir/ring" >"$dir/ring-latency.json" 2>/dev/null
expect "a 1 MiB trace keeps the newest ops, GPU-timed, and counts all 100,000" python3 - "$dir/ring" "$dir/ring.jsonl" "$dir/ring-latency.json" <<'PY'
import json, os, sys
trace = [os.path.join(sys.argv[1], f) for f in os.listdir(sys.argv[1])][0]
records = list(map(json.loads, open(sys.argv[2])))
ops = [r for r in records if r.get("type") == "op"]
seqs = [o["seq"] for o in ops]
timed = {r["launch_id"] for r in records if r.get("type") == "gpu_timing"}
rows = {r["bytes"]: r for r in json.load(open(sys.argv[3]))["rows"] if r["op"] == "ncclAllReduce"}
print(f"file {os.path.getsize(trace)} bytes; {len(ops)} ops kept, seqs {seqs[:1]}..{seqs[-1:]}; "
      f"{sum(o['launch_id'] in timed for o in ops)} with their GPU timing in the window")
for size, r in sorted(rows.items()):
    print(f"  {size} B: calls {r['calls']} (window {r['calls_in_window']}), p50 {r['p50_us']} us, timing {r['timing']}")
ok = (os.path.getsize(trace) <= 1 << 20 and seqs == list(range(100001 - len(seqs), 100001)) and len(seqs) > 4000
      and sum(o["launch_id"] in timed for o in ops) >= len(ops) - 200
      and set(rows) == {64, 4096} and all(r["calls"] == 50000 and r["timing"] == "gpu" and r["p50_us"] for r in rows.values()))
sys.exit(0 if ok else 1)
PY

NCCLWATCH_SAMPLE=1 NCCLWATCH_DIR="$dir/exit" LD_PRELOAD="$SHIM" timeout 120 "$dir/stream_checks" exit >"$dir/exit.out" 2>&1
status=$?
took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)")
echo "exit run: exit $status in $took s: $(cat "$dir/exit.out" | head -3)"
report dump "$dir/exit" >"$dir/exit.jsonl" 2>/dev/null
expect "work still running at a normal exit keeps its timings (200 of 200)" python3 - "$dir/exit.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
launches = {r["launch_id"] for r in recs if r.get("type") == "op"}
timed = {r["launch_id"] for r in recs if r.get("type") == "gpu_timing"}
print("launches", len(launches), "with timing", len(launches & timed))
sys.exit(0 if len(launches) == 200 and launches <= timed else 1)
PY
expect "the program still exits 0" test "$status" -eq 0

if python3 -c 'import torch' 2>/dev/null; then
  NCCLWATCH_DIR="$dir/torch-graph" LD_PRELOAD="$SHIM" timeout 120 torchrun --nproc-per-node 1 "$ROOT/tests/gpu/torch_graph.py" \
    >"$dir/torch-graph.out" 2>&1
  expect "a PyTorch job capturing all-reduces into a CUDA graph runs under the shim" grep -q "graph ok" "$dir/torch-graph.out"
fi
finish
