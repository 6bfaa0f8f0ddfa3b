#!/usr/bin/env bash
# Jobs built from framework code (torch_frameworks.py), each against a truth of its own:
#   - FSDP2: latency rows of all-gather and reduce-scatter within 10 % of CUPTI's kernel medians
#     (torch.profiler in the same run), though the backward drives one communicator from two streams;
#   - a 2x2 DeviceMesh on 4 ranks: the summary counts 4 ranks and names the groups as PyTorch does;
#   - torch.compile reduce-overhead with a functional all-reduce, and ranks in different roles: no finding;
#   - an exception on rank 1: its exit status and exception named, rank 0 not called hung.
# With KEEP_TRACES=DIR, the traces and truths are copied there (test corpus).
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/frameworks"; rm -rf "$dir"; mkdir -p "$dir"

run_job() {  # run_job NAME RANKS: traces in $dir/NAME, truths $dir/NAME/truth.rank<N>.json
  local name="$1" ranks="$2"
  mkdir -p "$dir/$name"
  NCCLWATCH_DIR="$dir/$name" LD_PRELOAD="$SHIM" timeout "${JOB_TIMEOUT:-300}" torchrun --nproc-per-node "$ranks" \
    "$ROOT/tests/gpu/torch_frameworks.py" "$name" "$dir/$name/truth" >"$dir/$name.log" 2>&1
  echo "$name: torchrun exit $?"
  for what in summary hang leaks latency; do report "$what" --json "$dir/$name" >"$dir/$name.$what.json" 2>"$dir/$name.$what.err"; done
  report summary "$dir/$name" >"$dir/$name.summary.txt" 2>&1
}
run_job fsdp2 2
run_job mesh 4
run_job compiled 2
run_job roles 2
run_job raises 2
report latency "$dir/fsdp2"
cat "$dir/mesh.summary.txt" "$dir/raises.summary.txt"

expect "fsdp2: all-gather and reduce-scatter p50 within 10 % of CUPTI's kernel medians" \
  python3 - "$dir/fsdp2.latency.json" "$dir/fsdp2/truth.rank0.json" <<'PY'
import json, sys
rows, truth = json.load(open(sys.argv[1]))["rows"], json.load(open(sys.argv[2]))["kernel_us"]
print("CUPTI:", truth)
ok = True
for op in ("AllGather", "ReduceScatter"):
    mine = [r for r in rows if r["op"] == "nccl" + op and r["p50_us"] is not None and r["timing"].startswith("gpu")]
    for r in mine:
        print(f"{op} {r['bytes']} B: p50 {r['p50_us']:.0f} us ({r['timing']}, {r['samples']} samples) against CUPTI {truth[op]['median']:.0f} us")
    big = max(mine, key=lambda r: r["samples"]) if mine else None
    ok &= bool(big) and abs(big["p50_us"] / truth[op]["median"] - 1) <= 0.10
sys.exit(0 if ok else 1)
PY

no_findings() {  # no_findings NAME
  python3 - "$dir/$1.summary.json" "$dir/$1.hang.json" <<'PY'
import json, sys
s, h = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print("first look:", s["first_look"], "| verdict:", s["verdict"])
found = [r for c in h["comms"] for r in c["stragglers"]["ranks"] if r["finding"]]
bad = found or s["stragglers"] or s["mismatched_seqs"] or s["missing"] or s["divergences"] or s["leaked_communicators"]
sys.exit(1 if bad else 0)
PY
}
expect "roles: ranks in different roles get no finding" no_findings roles
expect "compiled: functional all-reduces in CUDA graphs get no finding" no_findings compiled
expect "fsdp2: no finding" no_findings fsdp2

expect "mesh: the summary counts the job's 4 ranks and names its groups as PyTorch does" \
  python3 - "$dir/mesh.summary.json" "$dir/mesh.latency.json" "$dir/mesh/truth.rank0.json" <<'PY'
import json, sys
s, lat, truth = (json.load(open(p)) for p in sys.argv[1:4])
names = {c.get("name", "") for c in lat["communicators"]}
print("ranks:", s["ranks"], "| names:", names, "| truth:", truth["groups"])
want = {g["desc"] for g in truth["groups"].values() if g["desc"]}
sys.exit(0 if s["ranks"] == truth["world_size"] and all(any(w in n for n in names) for w in want) else 1)
PY

expect "raises: rank 1's exit status and exception named; nothing called hung" \
  python3 - "$dir/raises.summary.json" "$dir/raises.hang.json" "$dir/raises.leaks.json" "$dir/raises/truth.rank1.json" <<'PY'
import json, sys
s, h, l, truth = (json.load(open(p)) for p in sys.argv[1:5])
text = json.dumps([s, h, l])
print("verdict:", s["verdict"], "| first look:", s["first_look"])
sys.exit(0 if truth["exception"] in text and truth["message"] in text and "_hung" not in json.dumps(l.get("states", {})) else 1)
PY

if [ -n "${KEEP_TRACES:-}" ]; then
  for name in fsdp2 mesh compiled roles raises; do
    mkdir -p "$KEEP_TRACES/$name"
    cp "$dir/$name"/*.nwt "$dir/$name"/truth.*.json "$KEEP_TRACES/$name/" 2>/dev/null
    cp "$dir/$name".*.json "$dir/$name".log "$KEEP_TRACES/" 2>/dev/null
  done
fi
finish
