#!/usr/bin/env bash
# NCCL Inspector, NVIDIA's own profiler plugin, built from the source of the NCCL that runs, beside
# the shim and as the truth for its plans:
#     profiler_inspector.sh INSPECTOR_SOURCE_ARCHIVE
# The archive holds Inspector's folder somewhere inside (a `git archive` of NVIDIA/nccl at the tag of
# the loaded NCCL, whole or of ext-profiler/inspector or plugins/profiler/inspector alone).
#  1. torch_plans.py's two ranks with the application's NCCL_PROFILER_PLUGIN=Inspector and the
#     shim preloaded at NCCLWATCH_PROFILER=kernels: Inspector keeps working (its JSON has the job's
#     collectives), the shim says it stands aside, and its trace still has every call.
#  2. Where Inspector writes Prometheus files (NCCL >= 2.29: NCCL_INSPECTOR_PROM_DUMP): the
#     algorithm and protocol of each collective by message size, against the shim's own plans for
#     the same job (NCCLWATCH_PROFILER=1), and Inspector's kernel-timed means against the shim's.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
archive="${1:?usage: profiler_inspector.sh INSPECTOR_SOURCE_ARCHIVE}"
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
mkdir -p "$dir/beside" "$dir/prom" "$dir/plans"
expect "the job runs with Inspector as its plugin and the shim preloaded" \
  run_job beside NCCLWATCH_PROFILER=kernels "${inspector_env[@]}"
report dump --json "$dir/beside/traces" >"$dir/beside/dump.jsonl"
expect "Inspector kept working: its JSON has the job's collectives, and the shim's trace every call" \
  python3 - "$dir/beside" <<'PY'
import glob, json, sys
d = sys.argv[1]
seen = {}
for path in glob.glob(f"{d}/inspector-0/**/*", recursive=True):
    try: text = open(path).read()
    except (IsADirectoryError, UnicodeDecodeError): continue
    for line in text.splitlines():
        try: j = json.loads(line)
        except ValueError: continue
        perf = j.get("coll_perf") if isinstance(j, dict) else None
        if perf: seen[perf["coll_sn"]] = (perf["coll"], perf["coll_msg_size_bytes"], perf.get("coll_exec_time_us"))
calls = [json.loads(l) for l in open(f"{d}/dump.jsonl")]
ours = [r for r in calls if r.get("type") == "op" and r.get("rank") == 0]
kinds = sorted({v[0] for v in seen.values()})
print(f"Inspector on rank 0: {len(seen)} collectives ({', '.join(kinds)}); the shim's trace: {len(ours)} calls")
sys.exit(0 if seen and len(ours) >= 40 else 1)
PY
expect "the shim said it stood aside for the application's plugin" grep -q "stands aside" "$dir/beside/rank0.err"

[ "$has_prom" -eq 1 ] || { echo "(this Inspector writes no Prometheus files: no plan comparison)"; finish; exit; }
expect "the job runs with Inspector writing Prometheus files" \
  run_job prom "${inspector_env[@]}" NCCL_INSPECTOR_PROM_DUMP=1 NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=-1
expect "the job runs with the shim as its plugin" run_job plans NCCLWATCH_PROFILER=kernels
report dump --json "$dir/plans/traces" >"$dir/plans/dump.jsonl"
expect "each collective's algorithm and protocol by message size is Inspector's, and its kernel means near Inspector's" \
  python3 - "$dir" <<'PY'
import glob, json, math, re, statistics, sys
d = sys.argv[1]
def size_label(n):  # Inspector's message-size bucket (inspector_prom.cc)
    units, i, v = ["B", "KB", "MB", "GB", "TB"], 0, float(n)
    while v >= 1024 and i < 4: v /= 1024; i += 1
    lower = max(1, math.floor(max(v, 1.0)))
    return f"{lower}-{lower + 1}{units[i]}"
theirs, their_us = set(), {}
for path in glob.glob(f"{d}/prom/inspector-0/**/*.prom", recursive=True):
    for line in open(path):
        m = re.match(r'nccl_collective_exec_time_microseconds\{(.*)\} (\S+)', line)
        if not m: continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        key = (labels["collective"], labels["message_size"], labels["algo_proto"])
        theirs.add(key); their_us[key] = float(m.group(2))
sizes = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}
ours, kernel = set(), {}
records = [json.loads(l) for l in open(f"{d}/plans/dump.jsonl")]
for r in records:
    if r.get("type") == "op_plan" and r["rank"] == 0 and r["algo"]:
        coll = r["op"].removeprefix("nccl").replace("Bcast", "Broadcast")
        ours.add((coll, size_label(r["count"] * sizes.get(r["datatype"], 0)), f'{r["algo"]}_{r["proto"]}'))
spans = {}
for r in records:
    if r.get("type") == "op_kernel" and r["rank"] == 0 and r["op"] not in ("ncclSend", "ncclRecv"):
        key = (r["launch_id"], r["op"].removeprefix("nccl").replace("Bcast", "Broadcast"), r["count"] * sizes.get(r["datatype"], 0))
        a, b = spans.get(key, (float("inf"), 0))
        spans[key] = (min(a, r["gpu_start_ns"]), max(b, r["gpu_stop_ns"]))
for (_, coll, nbytes), (a, b) in spans.items():
    kernel.setdefault((coll, size_label(nbytes)), []).append((b - a) / 1e3)
print(f"Inspector: {len(theirs)} (collective, size, algo_proto) rows; the shim: {len(ours)}")
for key in sorted(theirs | ours):
    mine = kernel.get(key[:2])
    print(f"  {'both ' if key in theirs and key in ours else 'ONLY INSPECTOR' if key in theirs else 'ONLY SHIM'} {key}"
          f"  Inspector {their_us.get(key, float('nan')):9.1f} us, shim kernel {statistics.mean(mine) if mine else float('nan'):9.1f} us")
sys.exit(0 if theirs and theirs == ours else 1)
PY
finish
