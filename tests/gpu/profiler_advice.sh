#!/usr/bin/env bash
# A forced NCCL_PROTO and a forced NCCL_ALGO named by `advice` with what they cost, on real NCCL:
# torch_forced.py's two ranks run once with NCCL's own choice and once under each forced setting,
# all with NCCLWATCH_PROFILER=kernels. `advice --json OWN FORCED` must name the setting, with the plans
# that ran on each side, and its added us per call at each size must be what the job's own CUDA
# events measured between the two runs: within 25 %, 5 us, or twice what two runs of NCCL's own
# choice differ by at that size (separate runs, so that much is noise). A size where the forced
# setting ran the plan NCCL chose itself (same_plan) is not judged: its difference is the runs'.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/profiler-advice"; rm -rf "$dir"; mkdir -p "$dir"
run_job() {  # run_job NAME ENV...
  local name="$1"; shift
  local port=$((29600 + RANDOM % 300)) pids="" status=0
  mkdir -p "$dir/$name"
  for r in 0 1; do
    env NCCL_HOSTID="forced-$r" NCCLWATCH_PROFILER=kernels NCCLWATCH_DIR="$dir/$name/traces" LD_PRELOAD="$SHIM" "$@" \
      timeout 180 python3 "$ROOT/tests/gpu/torch_forced.py" "$r" "$port" "$dir/$name/events.json" \
      >"$dir/$name/rank$r.out" 2>"$dir/$name/rank$r.err" &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || status=1; done
  [ "$status" -eq 0 ] || tail -5 "$dir/$name"/rank*.err
  return "$status"
}
expect "the job runs with NCCL's own choice" run_job own
expect "the job runs with NCCL's own choice again (the runs' noise)" run_job own_again
for forced in NCCL_PROTO=Simple NCCL_ALGO=Tree; do
  name="${forced%%=*}"
  expect "the job runs with $forced" run_job "$name" "$forced"
  report advice "$dir/own/traces" "$dir/$name/traces" | tee "$dir/$name/advice.txt"
  report advice --json "$dir/own/traces" "$dir/$name/traces" >"$dir/$name/advice.json"
  expect "advice costs $forced as the job's own events measured it" python3 - "$dir" "$name" "${forced#*=}" <<'PY'
import json, sys
d, setting, value = sys.argv[1:]
own, forced = json.load(open(f"{d}/own/events.json")), json.load(open(f"{d}/{setting}/events.json"))
again = json.load(open(f"{d}/own_again/events.json"))
advice = [a for a in json.load(open(f"{d}/{setting}/advice.json"))["advice"] if a["setting"] == setting]
if not advice or advice[0]["value"] != value:
    print(f"advice does not name {setting}={value}"); sys.exit(1)
costs = {c["bytes"]: c for c in advice[0].get("costs", []) if c["op"] == "ncclAllReduce"}
ok = bool(costs)
for size, us in sorted(own.items(), key=lambda kv: int(kv[0])):
    truth = forced[size] - us
    c = costs.get(int(size))
    if not c:
        print(f"  {size:>8} B: no cost row"); ok = False; continue
    noise = abs(again[size] - us)
    if c["same_plan"]:
        # NCCL ran its own plan under the setting: the difference is the runs', not judged here.
        good, verdict = True, "same plan: not judged"
    else:
        good = abs(c["added_us_per_call"] - truth) <= max(0.25 * abs(truth), 5.0, 2 * noise)
        verdict = "ok" if good else "OFF"
    ok &= good
    print(f"  {size:>8} B: advice {c['added_us_per_call']:+9.1f} us/call ({c['forced_plan']} vs {c['own_plan']}, {c['clock']}),"
          f" the job's events {truth:+9.1f} ({forced[size]:.1f} vs {us:.1f}; two own runs differ by {noise:.1f}) {verdict}")
sys.exit(0 if ok else 1)
PY
done
finish
