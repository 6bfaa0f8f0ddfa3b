#!/usr/bin/env bash
# A slowed peer named by `peers`, on real NCCL: torch_peers.py's four ranks share the GPU, each with
# its own NCCL_HOSTID, so NCCL moves their data over its network transport (sockets), with
# NCCLWATCH_PROFILER=peers and NCCL_ALGO=Ring. Run once fair, where no peer may be named, and once
# with rank 2's proxy threads starved (NCCL_PROXY_CPUSET puts them on one core, which busy loops
# share), where rank 2 must be named and no other. The bytes each rank's proxy sent per call must be
# a ring all-reduce's, 2 (n-1)/n of the buffer (within 1 %), and each rank's send rate to its peer
# what its own CUDA events give (those bytes over the time per call, within 25 %); `hang` names the
# same slow peer. Set PEERS_OUT to keep the traces.
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
  report hang --json "$dir/$1/traces" >"$dir/$1/hang.json"
  report hang "$dir/$1/traces" | grep -E "slow peer|verdict" | head -3
  python3 - "$dir/$1" "$2" "$nranks" <<'PY'
import glob, json, sys
d, expected, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
peers = json.load(open(f"{d}/peers.json"))
named = [s["rank"] for s in peers["slow_peers"]]
in_hang = [c["slow_peer"]["rank"] for c in json.load(open(f"{d}/hang.json"))["comms"] if "slow_peer" in c]
ok = named == ([] if expected < 0 else [expected]) and in_hang == named
print(f"named {named} (hang: {in_hang}), expected {[] if expected < 0 else [expected]}: {'ok' if ok else 'WRONG'}")
ev = {int(f.rsplit('.', 2)[1]): json.load(open(f)) for f in glob.glob(f"{d}/events.*.json")}
world = [l for l in peers["links"] if l["nranks"] == n]
for rank, e in sorted(ev.items()):
    sends = [l for l in world if l["rank"] == rank and l["direction"] == "send"]
    sent = sum(l["bytes"] for l in sends)
    truth = 2 * (n - 1) / n * e["bytes"] * e["calls"]
    good = abs(sent - truth) <= 0.01 * truth
    # The rate by the job's own events: a call's bytes to the peer over its time per call.
    rate_truth = 2 * (n - 1) / n * e["bytes"] / (e["us_per_call"] * 1e3)
    rate = sends[0]["send_gbps"] if len(sends) == 1 else None
    rate_good = rate is not None and abs(rate - rate_truth) <= 0.25 * rate_truth
    ok &= good and rate_good
    print(f"  rank {rank}: proxy sent {sent} B over {e['calls']} calls, a ring all-reduce sends {truth:.0f}: "
          f"{'ok' if good else 'OFF'}; {e['us_per_call']:.0f} us per call by its CUDA events; send rate "
          f"{rate if rate is None else f'{rate:.3f}'} GB/s, by the events {rate_truth:.3f}: {'ok' if rate_good else 'OFF'}")
sys.exit(0 if ok else 1)
PY
}
expect "the fair job runs" run_job fair 0
expect "no peer is named in the fair job, and the bytes are a ring's" check_job fair -1
expect "the job with rank $slow's proxy starved runs" run_job starved 1
expect "rank $slow is named in the starved job, and the bytes are a ring's" check_job starved "$slow"
finish
