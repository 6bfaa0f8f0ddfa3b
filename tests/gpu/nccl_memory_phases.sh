#!/usr/bin/env bash
# The GPU memory NCCL takes after init, on real NCCL: nccl_memory_phases.py (two ranks, one process
# each, on one GPU each or sharing one, through ctypes) runs six first uses after init, each twice,
# reading NCCL's own count (ncclCommMemStats, NCCL >= 2.29.7) and the free memory after each.
# Under the shim each rank's trace must hold one memory record per first use (none for the second
# turns), NCCL's count in it the same as the program read; `leaks` must give the communicator what
# it held last. Without ncclCommMemStats (2.28) the shim's free-memory figures are printed beside
# the program's (ranks sharing a GPU see each other's allocations in both). Run it on another NCCL
# with with_nccl.sh.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/memory-phases"; rm -rf "$dir"; mkdir -p "$dir/rendezvous"
pids=""
for r in 0 1; do
  NCCL_HOSTID="memory-phases-$r" NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" \
    timeout 180 python3 "$ROOT/tests/gpu/nccl_memory_phases.py" "$r" "$dir/rendezvous" >"$dir/rank$r.jsonl" 2>"$dir/rank$r.err" &
  pids="$pids $!"
done
status=0
for p in $pids; do wait "$p" || status=1; done
[ "$status" -eq 0 ] || tail -5 "$dir"/rank*.err
for f in "$dir"/traces/*.nwt; do report dump "$f"; done >"$dir/dump.jsonl"
report leaks --json "$dir/traces" >"$dir/leaks.json"
expect "each rank's first uses have a memory record each, NCCL's count in it as the program read it" \
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
mib = 1 << 20
LIFECYCLE = ("ncclCommSuspend", "ncclCommResume")
records = [json.loads(l) for l in open(f"{d}/dump.jsonl")]
leaks = json.load(open(f"{d}/leaks.json"))["communicators"]
problems = []
steps_of = {}
for rank in (0, 1):
    steps = steps_of[rank] = {row["step"]: row for row in map(json.loads, open(f"{d}/rank{rank}.jsonl"))}
    readings = [r for r in records if r["type"] == "memory" and r["rank"] == rank and r["op"] not in LIFECYCLE]
    firsts = [name for name in steps if name.endswith("#1")]
    print(f"rank {rank}: NCCL count at init {steps['init']['nccl_total']}, free {steps['init']['free'] / mib:.1f} MiB")
    for name, r in zip(firsts, readings):
        row, before = steps[name], steps[list(steps)[list(steps).index(name) - 1]]
        print(f"  {name}: shim held {r.get('held_bytes', 0) / mib:.1f} MiB, took {r.get('taken_bytes', 0) / mib:.1f} MiB; "
              f"program: NCCL count {row['nccl_total'] and row['nccl_total'] / mib}, free fell {(before['free'] - row['free']) / mib:.1f} MiB, "
              f"nvidia-smi: this process {before['smi_used_mib']} -> {row['smi_used_mib']} MiB")
        if row["nccl_total"] is not None and r.get("held_bytes") != row["nccl_total"]:
            problems.append(f"rank {rank} {name}: shim {r.get('held_bytes')} vs NCCL {row['nccl_total']}")
    if len(readings) != len(firsts):
        problems.append(f"rank {rank}: {len(readings)} memory records for {len(firsts)} first uses")
    comm = [c for c in leaks if c["rank"] == rank]
    last = steps[firsts[-1]]["nccl_total"]
    if len(comm) != 1 or (last is not None and (comm[0]["gpu_memory_held"] or {}).get("bytes") != last):
        problems.append(f"rank {rank}: leaks holds {comm and comm[0]['gpu_memory_held']} against NCCL's last count {last}")
    if comm:
        print(f"  leaks: made {comm[0]['gpu_memory']}, held {comm[0]['gpu_memory_held']}, freed {comm[0]['gpu_memory_freed']}")
    # Suspend and resume (2.29.7+): the shim's reading after each is NCCL's count less what is released.
    if "suspend" in steps:
        lifecycle = [r for r in records if r["type"] == "memory" and r["rank"] == rank and r["op"] in LIFECYCLE]
        s, res = steps["suspend"], steps["resume"]
        held_suspended = s["nccl_total"] - s["nccl_suspendable"] if s["nccl_suspended"] == 1 else s["nccl_total"]
        print(f"  suspend: NCCL total {s['nccl_total'] / mib:.1f} MiB, releasable {s['nccl_suspendable'] / mib:.1f} MiB, "
              f"suspended {s['nccl_suspended']}; shim: {[(r['op'], r.get('held_bytes', 0) / mib, r.get('taken_bytes', 0) / mib) for r in lifecycle]}")
        if [r["op"] for r in lifecycle] != list(LIFECYCLE) or lifecycle[0].get("held_bytes") != held_suspended or \
                lifecycle[1].get("held_bytes") != res["nccl_total"]:
            problems.append(f"rank {rank}: suspend/resume readings {lifecycle} against NCCL {held_suspended}, {res['nccl_total']}")
# The device's free memory (both ranks share it when on one GPU): what all ranks' NCCL counts
# moved by over the first uses, and at the suspend and the resume, within 5 % of it.
def within(name, ours, truth):
    ok = truth > 0 and abs(ours - truth) <= 0.05 * truth
    print(f"{name}: NCCL's counts (as the shim read them) {ours / mib:.1f} MiB, the device's free memory {truth / mib:.1f} MiB "
          f"({'within' if ok else 'NOT within'} 5 %)")
    if not ok:
        problems.append(name)
one_gpu = steps_of[0]["start"]["device"] == steps_of[1]["start"]["device"]
counted = all(steps_of[r]["init"]["nccl_total"] is not None for r in (0, 1))
if counted and one_gpu:
    firsts = [n for n in steps_of[0] if n.endswith("#1") or n.endswith("#2")]
    last_use = firsts[-1]
    grew = sum(steps_of[r][last_use]["nccl_total"] - steps_of[r]["init"]["nccl_total"] for r in (0, 1))
    within("first uses after init", grew, steps_of[0]["init"]["free"] - steps_of[0][last_use]["free"])
    if "suspend" in steps_of[0]:
        freed = sum(steps_of[r]["suspend"]["nccl_suspendable"] for r in (0, 1))
        within("suspend gave back", freed, steps_of[0]["suspend"]["free"] - steps_of[0][last_use]["free"])
        within("resume took back", freed, steps_of[0]["suspend"]["free"] - steps_of[0]["resume"]["free"])
print("problems", problems)
sys.exit(1 if problems else 0)
PY
finish
