#!/usr/bin/env bash
# A slowed peer named by `peers`, on real NCCL: torch_peers.py's four ranks share the GPU, each with
# its own NCCL_HOSTID, so NCCL moves their data over its network transport (sockets), with
# NCCLWATCH_PROFILER=peers and NCCL_ALGO=Ring. Run once fair, where no peer may be named, and once
# with rank 2's proxy threads starved (NCCL_PROXY_CPUSET puts them on one core, which busy loops
# share), where rank 2 must be named and no other. The bytes each rank's proxy sent per call must be
# a ring all-reduce's, 2 (n-1)/n of the buffer (within 1 %). Set PEERS_OUT to keep the traces.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="${PEERS_OUT:-$RESULTS/profiler-peers}"; rm -rf "$dir"; mkdir -p "$dir"
nranks=4 slow=2
core=$(( $(nproc) - 1 ))
run_job() {  # run_job NAME STARVE(0|1)
  local name="$1" starve="$2" port=$((29600 + RANDOM % 300)) pids="" status=0 hogs=""
  mkdir -p "$dir/$name"
  if [ "$starve" = 1 ]; then
    for _ in 1 2 3 4; do taskset -c "$core" sh -c 'while :; do :; done' & hogs="$hogs $!"; done
  fi
  for r in $(seq 0 $((nranks - 1))); do
    local cpuset=""
    [ "$starve" = 1 ] && [ "$r" = "$slow" ] && cpuset="NCCL_PROXY_CPUSET=$core"
    env NCCL_HOSTID="peers-$r" NCCL_ALGO=Ring NCCLWATCH_PROFILER=peers NCCLWATCH_DIR="$dir/$name/traces" \
      LD_PRELOAD="$SHIM" $cpuset timeout 300 python3 "$ROOT/tests/gpu/torch_peers.py" "$r" "$nranks" "$port" \
      "$dir/$name/events" >"$dir/$name/rank$r.out" 2>"$dir/$name/rank$r.err" &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || status=1; done
  [ -n "$hogs" ] && kill $hogs 2>/dev/null
  [ "$status" -eq 0 ] || tail -5 "$dir/$name"/rank*.err
  return "$status"
}
check_job() {  # check_job NAME EXPECTED_SLOW(-1: none)
  report peers "$dir/$1/traces" | tee "$dir/$1/peers.txt"
  report peers --json "$dir/$1/traces" >"$dir/$1/peers.json"
  python3 - "$dir/$1" "$2" "$nranks" <<'PY'
import glob, json, sys
d, expected, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
peers = json.load(open(f"{d}/peers.json"))
named = [s["rank"] for s in peers["slow_peers"]]
ok = named == ([] if expected < 0 else [expected])
print(f"named {named}, expected {[] if expected < 0 else [expected]}: {'ok' if ok else 'WRONG'}")
ev = {int(f.rsplit('.', 2)[1]): json.load(open(f)) for f in glob.glob(f"{d}/events.*.json")}
world = [l for l in peers["links"] if l["nranks"] == n]
for rank, e in sorted(ev.items()):
    sent = sum(l["bytes"] for l in world if l["rank"] == rank and l["direction"] == "send")
    truth = 2 * (n - 1) / n * e["bytes"] * e["calls"]
    good = abs(sent - truth) <= 0.01 * truth
    ok &= good
    print(f"  rank {rank}: proxy sent {sent} B over {e['calls']} calls, a ring all-reduce sends {truth:.0f}: "
          f"{'ok' if good else 'OFF'}; {e['us_per_call']:.0f} us per call by its CUDA events")
sys.exit(0 if ok else 1)
PY
}
expect "the fair job runs" run_job fair 0
expect "no peer is named in the fair job, and the bytes are a ring's" check_job fair -1
expect "the job with rank $slow's proxy starved runs" run_job starved 1
expect "rank $slow is named in the starved job, and the bytes are a ring's" check_job starved "$slow"
finish
