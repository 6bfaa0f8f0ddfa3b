#!/usr/bin/env bash
# NCCL Inspector, NVIDIA's own profiler plugin, built from the source of the NCCL that runs, chained
# behind the shim's plugin entry and the truth for what the shim records through it:
#     profiler_inspector.sh INSPECTOR_SOURCE_ARCHIVE   (or INSPECTOR_ARCHIVE set)
# The archive holds Inspector's folder somewhere inside (a `git archive` of NVIDIA/nccl at the tag of
# the loaded NCCL, whole or of ext-profiler/inspector or plugins/profiler/inspector alone).
#  1. torch_plans.py's two ranks with Inspector alone (no shim), then with the application's
#     NCCL_PROFILER_PLUGIN=Inspector and the shim preloaded at NCCLWATCH_PROFILER=kernels: the
#     shim says it chained; Inspector records as many collectives as alone (where it keeps every
#     op: the older one dumps each communicator's latest); op by op (function and
#     NCCL's sequence number), Inspector's kernel time (its longest channel, in whole us) is the
#     shim's longest channel of the same op's KernelCh events.
#  2. Where Inspector writes Prometheus files (NCCL >= 2.29: NCCL_INSPECTOR_PROM_DUMP), in one run
#     beside the shim: the algorithm and protocol of each collective by message size are the
#     shim's plans.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
archive="${1:-${INSPECTOR_ARCHIVE:-}}"
[ -f "$archive" ] || { echo "SKIP: needs NCCL Inspector's source (profiler_inspector.sh ARCHIVE, or INSPECTOR_ARCHIVE)"; exit 0; }
dir="$RESULTS/profiler-inspector"; rm -rf "$dir"; mkdir -p "$dir/src"
tar xf "$archive" -C "$dir/src" || { fail "Inspector's source unpacks"; finish; exit; }
src="$(dirname "$(find "$dir/src" -name inspector_plugin.cc | head -1)")"
inspector="$src/libnccl-profiler-inspector.so"
cuda="${CUDA_HOME:-/usr/local/cuda}"
# The newer Makefile stands alone; the older one expects a built NCCL beside it, and -march=native.
printf '#include "version.h"\nconst char* get_git_version_info() { return "from-archive"; }\n' >"$src/version.cc"
if grep -q inspector_prom "$src/Makefile"; then
  make -C "$src" -j"$(nproc)" CUDA_HOME="$cuda" >"$dir/build.log" 2>&1
else
  g++ -O2 -fPIC -shared -std=c++17 -I"$src" -I"$src/nccl" -I"$cuda/include" -o "$inspector" \
    "$src"/inspector_plugin.cc "$src"/inspector.cc "$src"/json.cc "$src"/version.cc -lpthread >"$dir/build.log" 2>&1
fi
[ -f "$inspector" ] || { tail -20 "$dir/build.log"; fail "Inspector builds"; finish; exit; }
has_prom=0; grep -q inspector_prom "$src/Makefile" && has_prom=1

# run_job NAME ENV... : torch_plans.py's two ranks with the shim preloaded and ENV set.
run_job() {
  local name="$1"; shift
  local port=$((29600 + RANDOM % 300)) pids="" status=0
  for r in 0 1; do
    env NCCL_HOSTID="insp-$r" NCCLWATCH_DIR="$dir/$name/traces" LD_PRELOAD="$SHIM" \
      NCCL_INSPECTOR_DUMP_DIR="$dir/$name/inspector-$r" "$@" \
      timeout 180 python3 "$ROOT/tests/gpu/torch_plans.py" "$r" "$port" >"$dir/$name/rank$r.out" 2>"$dir/$name/rank$r.err" &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || status=1; done
  [ "$status" -eq 0 ] || tail -5 "$dir/$name"/rank*.err
  return "$status"
}
inspector_env=(NCCL_PROFILER_PLUGIN="$inspector" NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES=0
               NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=1000)
mkdir -p "$dir/alone" "$dir/beside" "$dir/prom"
# Inspector's JSON records of rank 0: {(coll, coll_sn): (bytes, exec_time_us, timing_source)}.
cat >"$dir/inspector_json.py" <<'PY'
import glob, json
def inspector_colls(folder):
    seen = {}
    for path in glob.glob(f"{folder}/**/*", recursive=True):
        try: text = open(path).read()
        except (IsADirectoryError, UnicodeDecodeError): continue
        for line in text.splitlines():
            try: j = json.loads(line)
            except ValueError: continue
            perf = j.get("coll_perf") if isinstance(j, dict) else None
            if perf:
                seen[(perf["coll"], perf["coll_sn"])] = (perf["coll_msg_size_bytes"], perf.get("coll_exec_time_us"),
                                                         perf.get("coll_timing_source", ""))
    return seen
PY
expect "the job runs with Inspector alone" run_job alone LD_PRELOAD= "${inspector_env[@]}"
expect "the job runs with Inspector chained behind the shim" run_job beside NCCLWATCH_PROFILER=kernels "${inspector_env[@]}"
expect "the shim said it chained Inspector" grep -q "every event it asks for" "$dir/beside/rank0.err"
report dump --json "$dir/beside/traces" >"$dir/beside/dump.jsonl"
expect "Inspector records beside the shim what it records alone, and op by op its kernel time is the shim's" \
  python3 - "$dir" "$has_prom" <<'PY'
import json, sys
d, every_op = sys.argv[1], sys.argv[2] == "1"  # the older Inspector dumps each communicator's latest op only
sys.path.insert(0, d)
from inspector_json import inspector_colls
alone, beside = inspector_colls(f"{d}/alone/inspector-0"), inspector_colls(f"{d}/beside/inspector-0")
records = [json.loads(l) for l in open(f"{d}/beside/dump.jsonl")]
name = lambda op: op.removeprefix("nccl").replace("Bcast", "Broadcast")
seq_of = {r["launch_id"]: (name(r["op"]), r["nccl_seq"]) for r in records
          if r.get("type") == "op_plan" and r["rank"] == 0 and r["algo"]}
longest = {}
for r in records:
    if r.get("type") == "op_kernel" and r["rank"] == 0 and r["launch_id"] in seq_of:
        key = seq_of[r["launch_id"]]
        longest[key] = max(longest.get(key, 0), (r["gpu_stop_ns"] - r["gpu_start_ns"]) / 1e3)
print(f"Inspector on rank 0: {len(alone)} collectives alone, {len(beside)} beside the shim; the shim: "
      f"{len(seq_of)} collective plans, {len(longest)} with kernel times")
both = sorted(set(beside) & set(longest))
off = [(k, beside[k][1], longest[k]) for k in both if abs(beside[k][1] - longest[k]) > 1.0]
for k in both[:6] + both[-3:]:
    print(f"  {k}: Inspector {beside[k][1]} us ({beside[k][2]}), the shim's longest channel {longest[k]:.2f} us")
for o in off[:5]: print("  OFF", o)
sys.exit(0 if alone and beside and (len(beside) == len(alone) or not every_op) and len(both) == len(beside) and not off else 1)
PY

[ "$has_prom" -eq 1 ] || { echo "(this Inspector writes no Prometheus files: no plan comparison)"; finish; exit; }
# Inspector writes them every 30 s at the most often and deletes them at exit (they are live
# data for a node exporter): the job stays alive past the first write, and a copy is taken then.
(sleep 38; cp -r "$dir/prom/inspector-0" "$dir/prom/snapshot-0") &
expect "the job runs with Inspector writing Prometheus files, chained behind the shim" \
  run_job prom NCCLWATCH_PROFILER=1 "${inspector_env[@]}" NCCL_INSPECTOR_PROM_DUMP=1 \
  NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=30000000 PLANS_HOLD_S=45
wait
report dump --json "$dir/prom/traces" >"$dir/prom/dump.jsonl"
expect "each collective's algorithm and protocol by message size is Inspector's" python3 - "$dir" <<'PY'
import glob, json, math, re, sys
d = sys.argv[1]
def size_label(n):  # Inspector's message-size bucket (inspector_prom.cc)
    units, i, v = ["B", "KB", "MB", "GB", "TB"], 0, float(n)
    while v >= 1024 and i < 4: v /= 1024; i += 1
    lower = max(1, math.floor(max(v, 1.0)))
    return f"{lower}-{lower + 1}{units[i]}"
theirs = set()
for path in glob.glob(f"{d}/prom/snapshot-0/**/*.prom", recursive=True):
    for line in open(path):
        m = re.match(r'nccl_collective_exec_time_microseconds\{(.*)\} (\S+)', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            theirs.add((labels["collective"], labels["message_size"], labels["algo_proto"]))
sizes = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}
ours = set()
for line in open(f"{d}/prom/dump.jsonl"):
    r = json.loads(line)
    if r.get("type") == "op_plan" and r["rank"] == 0 and r["algo"]:
        coll = r["op"].removeprefix("nccl").replace("Bcast", "Broadcast")
        ours.add((coll, size_label(r["count"] * sizes.get(r["datatype"], 0)), f'{r["algo"]}_{r["proto"]}'))
print(f"Inspector: {len(theirs)} (collective, size, algo_proto) rows; the shim: {len(ours)}")
for key in sorted(theirs | ours):
    print(f"  {'both' if key in theirs and key in ours else 'ONLY INSPECTOR' if key in theirs else 'ONLY SHIM'} {key}")
sys.exit(0 if theirs and theirs == ours else 1)
PY
finish
