#!/usr/bin/env bash
# The reports' numbers against truths known independently, on real PyTorch jobs (2 GPUs):
#   - a straggler's lateness against the sleep it was given (20 ms, hosts running ahead), over 120
#     all-reduces and over only 20;
#   - no straggler or finding on a clean job of mixed ops;
#   - the divergence of a rank that skipped its 7th all-reduce holds seq 7, and names no other;
#   - busbw of large all-reduces against nccl-tests on the same GPUs (default sampling), and the
#     first call (connection set-up) kept out of the steady-state figures.
# With KEEP_TRACES=DIR, the straggler and skip traces are trimmed and copied there (test corpus).
source "$(dirname "$0")/common.sh"
gpus="$(gpu_count)"
if [ "$gpus" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
# One GPU: the two ranks share it, each claiming a host of its own (torch_numbers.py), so NCCL
# goes through sockets: lateness, seqs and the busbw-against-events check still hold; nccl-tests
# (one process) needs two GPUs.
[ "$gpus" -lt 2 ] && echo "one GPU: both ranks share it, NCCL over its network transport"
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/numbers"; rm -rf "$dir"; mkdir -p "$dir"

run_job() {  # run_job NAME ARGS...: traces in $dir/NAME
  local name="$1"; shift
  NCCLWATCH_DIR="$dir/$name" LD_PRELOAD="$SHIM" timeout 180 torchrun --nproc-per-node 2 "$@" \
    >"$dir/$name.log" 2>&1
  echo "$name: torchrun exit $?"
}
run_job straggler "$ROOT/tests/gpu/torch_numbers.py" straggler
run_job straggler20 "$ROOT/tests/gpu/torch_numbers.py" straggler20 "$dir/straggler20.truth.json"
run_job clean "$ROOT/tests/gpu/torch_numbers.py" clean
NCCLWATCH_STALL_SEC=5 run_job skip "$ROOT/examples/torch_hang.py"
run_job sizes "$ROOT/tests/gpu/torch_numbers.py" sizes "$dir/sizes.events.json"

for name in straggler straggler20 clean skip; do
  report hang --json "$dir/$name" >"$dir/$name.hang.json"
  report summary --json "$dir/$name" >"$dir/$name.summary.json"
done
report hang "$dir/straggler" | head -20
report latency "$dir/sizes" | tee "$dir/sizes.latency.txt"
report latency --json "$dir/sizes" >"$dir/sizes.latency.json"

expect "straggler: rank 1 named, typical lateness within 25 % of the 20 ms slept; summary agrees" \
  python3 - "$dir/straggler.hang.json" "$dir/straggler.summary.json" <<'PY'
import json, sys
hang, summary = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for c in hang["comms"]:
    st = c["stragglers"]
    print(f"comm {c['comm']}: {st['seqs_judged']} seqs judged on {st['measured_on']}; ranks {st['ranks']}")
found = [(c["comm"], r) for c in hang["comms"] for r in c["stragglers"]["ranks"] if r["finding"]]
for comm, r in found:
    print(f"comm {comm}: rank {r['rank']} last {r['times_last']}x, typical {r['typical_late_ms']:.2f} ms, mean {r['mean_late_ms']:.2f} ms")
world = [r for _, r in found if r["times_last"] >= 7]
assert world and all(r["rank"] == 1 for _, r in found), found
assert all(15.0 <= r["typical_late_ms"] <= 25.0 for r in world), world
assert summary["stragglers"] and all(t in summary["stragglers"] for t in (r["text"] for _, r in found)), summary["stragglers"]
print("summary first look:", summary["first_look"])
PY

expect "straggler, 20 all-reduces only: the summary names rank 1, typical lateness within 10 % of the truth (its period less the op)" \
  python3 - "$dir/straggler20.hang.json" "$dir/straggler20.summary.json" "$dir/straggler20.truth.json" <<'PY'
import json, sys
hang, summary, truth = (json.load(open(p)) for p in sys.argv[1:4])
found = [r for c in hang["comms"] for r in c["stragglers"]["ranks"] if r["finding"]]
for r in found:
    print(f"rank {r['rank']} last {r['times_last']}x, typical {r['typical_late_ms']:.2f} ms, mean {r['mean_late_ms']:.2f} ms")
print(f"truth: rank 1 enqueues every {truth['period_ms']:.2f} ms, an all-reduce takes {truth['op_ms']:.2f} ms: "
      f"late by {truth['late_ms']:.2f} ms")
print("summary stragglers:", summary["stragglers"])
assert [r["rank"] for r in found] == [1] and abs(found[0]["typical_late_ms"] / truth["late_ms"] - 1) <= 0.10, found
assert any("rank 1 started last" in t for t in summary["stragglers"]), summary
PY

expect "clean: no straggler, no finding" python3 - "$dir/clean.hang.json" "$dir/clean.summary.json" <<'PY'
import json, sys
hang, summary = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
found = [r for c in hang["comms"] for r in c["stragglers"]["ranks"] if r["finding"]]
print("verdict:", hang["verdict"], "| first look:", summary["first_look"])
assert not found and summary["stragglers"] == [] and summary["first_look"].startswith("nothing"), (found, summary["first_look"])
PY

expect "skip: the stretch holds seq 7, and any single seq named is 7" python3 - "$dir/skip.hang.json" <<'PY'
import json, sys
hang = json.load(open(sys.argv[1]))
div = [d for c in hang["comms"] if c.get("name", "") != "side" for d in c["divergence"] if d["rank"] == 1]
print("divergence:", div)
print("verdict:", hang["verdict"])
world = [d for d in div if d["from_seq"] <= 7 <= d["to_seq"]]
assert world, div
assert all(d.get("likely_seq", 7) == 7 for d in div), div
PY

expect "busbw within 10 % of the job's own CUDA-event times at 32 and 128 MiB, from the row's median" \
  python3 - "$dir/sizes.latency.json" "$dir/sizes.events.json" <<'PY'
import json, sys
rows = {r["bytes"]: r for r in json.load(open(sys.argv[1]))["rows"] if r["op"] == "ncclAllReduce" and r["timing"] == "gpu"}
events = json.load(open(sys.argv[2]))
ok = True
for size in (32 << 20, 128 << 20):
    r = rows[size]
    n = events["nranks"]
    truth = size / (events["median_ms"][str(size)] * 1e-3) / 1e9 * 2 * (n - 1) / n
    print(f"{size >> 20} MiB: ncclwatch busbw {r['busbw_gbps']:.2f} GB/s (p50 {r['p50_us']:.1f} us, {r['samples']} samples), "
          f"CUDA events {truth:.2f} GB/s (median {events['median_ms'][str(size)]:.3f} ms), ratio {r['busbw_gbps'] / truth:.3f}")
    ok &= abs(r["busbw_gbps"] / truth - 1) <= 0.10
sys.exit(0 if ok else 1)
PY

perf="${NCCL_TESTS:-$ROOT/.nccl-tests/build}/all_reduce_perf"
if [ "$gpus" -lt 2 ]; then
  echo "SKIP: nccl-tests all_reduce_perf -g 2 needs two GPUs"
elif [ -x "$perf" ]; then
  LD_LIBRARY_PATH="$(real_nccl_dir):${LD_LIBRARY_PATH:-}" "$perf" -b 32M -e 128M -f 4 -g 2 -n 20 -w 5 >"$dir/nccl-tests.txt" 2>&1
  grep -E '^ +[0-9]' "$dir/nccl-tests.txt"
  expect "busbw within 10 % of nccl-tests at 32 and 128 MiB, from the row's median; first calls apart" \
    python3 - "$dir/sizes.latency.json" "$dir/nccl-tests.txt" <<'PY'
import json, sys
rows = {r["bytes"]: r for r in json.load(open(sys.argv[1]))["rows"] if r["op"] == "ncclAllReduce" and r["timing"] == "gpu"}
ref = {}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) > 8 and f[0].isdigit():
        ref[int(f[0])] = float(f[7])  # out-of-place busbw
ok = True
for size in (32 << 20, 128 << 20):
    r = rows[size]
    from_median = size / (r["p50_us"] * 1e-6) / 1e9  # algbw; busbw factor 2(n-1)/n = 1 on 2 ranks
    print(f"{size >> 20} MiB: ncclwatch busbw {r['busbw_gbps']:.1f} GB/s (p50 {r['p50_us']:.1f} us, "
          f"{r['samples']} samples), nccl-tests {ref[size]:.1f} GB/s, ratio {r['busbw_gbps'] / ref[size]:.3f}; "
          f"first calls max {r['first_calls']['max_us']} us")
    ok &= abs(r["busbw_gbps"] / ref[size] - 1) <= 0.10 and abs(r["busbw_gbps"] / from_median - 1) < 0.01
first = rows[min(rows)]
print(f"smallest size {min(rows)} B: first call max {first['first_calls']['max_us']} us vs steady p50 {first['p50_us']:.1f} us")
sys.exit(0 if ok else 1)
PY
else
  echo "SKIP: no nccl-tests all_reduce_perf (build it into .nccl-tests/build)"
fi

if [ -n "${KEEP_TRACES:-}" ]; then
  for name in straggler skip; do
    mkdir -p "$KEEP_TRACES/$name"
    for f in "$dir/$name"/*.nwt; do python3 "$ROOT/tests/gpu/trim_trace.py" "$f" "$KEEP_TRACES/$name/$(basename "$f")"; done
  done
fi
finish
