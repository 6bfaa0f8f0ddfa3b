#!/usr/bin/env bash
# The GPU memory NCCL takes after init, on real NCCL: nccl_memory_phases.py (two ranks, one process
# each, on one GPU each or sharing one, through ctypes) runs six first uses after init, each twice,
# reading NCCL's own count (ncclCommMemStats, NCCL >= 2.29.7) and the free memory after each.
# Under the shim each rank must have one memory reading per first use (none for the second turns),
# NCCL's count in it the same as the program read; what it holds, at the first uses, the suspend and
# resume and at the end (leaks), must be within 5 % of the process's GPU memory as nvidia-smi lists
# it, and both ranks' growth within 5 % of the device's free memory's fall. Run it on another NCCL
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
report leaks --json "$dir/traces" >"$dir/leaks.json"
report memory --json "$dir/traces" >"$dir/memory.json"
report memory "$dir/traces" >"$dir/memory.txt"
expect "each rank's memory over its communicator's life: one reading per first use, NCCL's count in it as the program read it, what it holds as nvidia-smi lists the process" \
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
mib = 1 << 20
comms = {c["rank"]: c for c in json.load(open(f"{d}/memory.json"))["communicators"]}
leaks = {c["rank"]: c for c in json.load(open(f"{d}/leaks.json"))["communicators"]}
problems = []
def within(name, ours, truth, slack=2 * mib):
    ok = abs(ours - truth) <= max(0.05 * abs(truth), slack)
    print(f"  {name}: shim {ours / mib:.1f} MiB, truth {truth / mib:.1f} MiB ({'within' if ok else 'NOT within'} 5 %)")
    if not ok:
        problems.append(name)
steps_of = {}
for rank in (0, 1):
    steps = steps_of[rank] = {row["step"]: row for row in map(json.loads, open(f"{d}/rank{rank}.jsonl"))}
    names = list(steps)
    smi = lambda step: steps[step]["smi_used_mib"] * mib if steps[step]["smi_used_mib"] is not None else None
    c = comms.get(rank)
    if not c:
        problems.append(f"rank {rank}: no communicator in the memory report"); continue
    points = c["readings"]
    set_ups = [p for p in points if p["point"] == "set_up"]
    firsts = [n for n in names if n.endswith("#1")]
    print(f"rank {rank}: made {c['made_bytes'] / mib:.1f} MiB ({points[0]['from']}); NCCL's count at init {steps['init']['nccl_total']}; "
          f"nvidia-smi {steps['start']['smi_used_mib']} -> {steps['init']['smi_used_mib']} MiB")
    if len(set_ups) != len(firsts):
        problems.append(f"rank {rank}: {len(set_ups)} set-up readings for {len(firsts)} first uses")
    for name, p in zip(firsts, set_ups):
        row, before = steps[name], steps[names[names.index(name) - 1]]
        print(f"  {name}: shim held {p['held_bytes'] / mib:.1f} MiB, took {(p['taken_bytes'] or 0) / mib:.1f} MiB ({p.get('taken_by')}); "
              f"NCCL's count {row['nccl_total'] and row['nccl_total'] / mib}; nvidia-smi {before['smi_used_mib']} -> {row['smi_used_mib']} MiB")
        if row["nccl_total"] is not None and p["nccl_count_bytes"] != row["nccl_total"]:
            problems.append(f"rank {rank} {name}: the reading's NCCL count {p['nccl_count_bytes']} vs the program's {row['nccl_total']}")
    last_use = [n for n in names if "#" in n][-1]
    if smi("start") is not None:
        # What NCCL holds for the communicator: this process's memory's rise since before its init.
        held_at_last_use = set_ups[-1]["held_bytes"] if set_ups else c["made_bytes"]
        within(f"rank {rank} held after the first uses", held_at_last_use, smi(last_use) - smi("start"))
    if "suspend" in steps:
        lifecycle = {p["point"]: p for p in points if p["point"] in ("suspend", "resume")}
        s = steps["suspend"]
        print(f"  suspend: NCCL total {s['nccl_total'] / mib:.1f} MiB, releasable {s['nccl_suspendable'] / mib:.1f} MiB, suspended {s['nccl_suspended']}")
        if set(lifecycle) != {"suspend", "resume"}:
            problems.append(f"rank {rank}: suspend/resume readings {lifecycle}")
        elif smi("start") is not None:
            within(f"rank {rank} suspend gave back", -lifecycle["suspend"]["taken_bytes"], smi(last_use) - smi("suspend"))
            within(f"rank {rank} resume took back", lifecycle["resume"]["taken_bytes"], smi("resume") - smi("suspend"))
            within(f"rank {rank} suspend, NCCL's releasable", -lifecycle["suspend"]["taken_bytes"], s["nccl_suspendable"])
    if rank in leaks and smi("start") is not None:
        within(f"rank {rank} leaks' held at the end", leaks[rank]["gpu_memory_held"]["bytes"], smi(names[-2]) - smi("start"))
# The device's free memory (both ranks share it when on one GPU): what all ranks' figures moved by
# over the first uses, within 5 % of it.
one_gpu = steps_of[0]["start"]["device"] == steps_of[1]["start"]["device"]
if one_gpu and all(r in comms for r in (0, 1)):
    last_use = [n for n in steps_of[0] if "#" in n][-1]
    grew = sum([p for p in comms[r]["readings"] if p["point"] == "set_up"][-1]["held_bytes"] - comms[r]["made_bytes"] for r in (0, 1))
    print("both ranks, the device's free memory:")
    within("first uses after init", grew, steps_of[0]["init"]["free"] - steps_of[0][last_use]["free"])
print("problems", problems)
sys.exit(1 if problems else 0)
PY
finish
