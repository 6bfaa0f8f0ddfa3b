#!/usr/bin/env bash
# GPU memory over a PyTorch job's run (torch_memory_story.py): each group's memory as the shim
# read it (made, then its first all-reduce) within 5 % of the free memory PyTorch saw it take, and
# the run's total within 5 % of nvidia-smi's growth for the process; the side group used once is
# named idle with its line, and the groups made every epoch pile up, named with theirs.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
dir="$RESULTS/memory-story"; rm -rf "$dir"; mkdir -p "$dir"
NCCLWATCH_DIR="$dir/traces" NCCLWATCH_TIMING=gpu LD_PRELOAD="$SHIM" timeout 300 \
  python3 "$ROOT/tests/gpu/torch_memory_story.py" "${STORY_TRAIN_S:-3}" >"$dir/stdout" 2>"$dir/stderr"
echo "exit $?: $(tail -1 "$dir/stdout" | head -c 300)"
report memory --json --idle-after 2 --idle-min-mib 1 "$dir/traces" >"$dir/memory.json"
report memory --idle-after 2 --idle-min-mib 1 "$dir/traces" >"$dir/memory.txt"
report leaks --json "$dir/traces" >"$dir/leaks.json"
report summary "$dir/traces" >"$dir/summary.txt"
cat "$dir/memory.txt"; grep -E "GPU MEMORY|PILING" "$dir/summary.txt"
expect "each group's memory and the run's total are within 5 % of PyTorch's and nvidia-smi's readings" \
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
mib = 1 << 20
truth = json.loads(open(f"{d}/stdout").read().strip().splitlines()[-1])
memory = json.load(open(f"{d}/memory.json"))
splits = [c for c in memory["communicators"] if c["api"] == "ncclCommSplit"]
problems = []
if len(splits) != len(truth["groups"]):
    problems.append(f"{len(splits)} groups in the trace, {len(truth['groups'])} made")
total_shim = 0
for g, c in zip(truth["groups"], splits):  # both in the order made
    took = g["made_drop"] + g["first_use_drop"]
    total_shim += c["held_bytes"]
    ok = took > 0 and abs(c["held_bytes"] - took) <= 0.05 * took
    print(f"{g['name']}: shim {c['held_bytes'] / mib:.1f} MiB ({c['from']}; made {c['made_bytes'] / mib:.1f} + set-up "
          f"{c['set_up_bytes'] / mib:.1f}), PyTorch saw {took / mib:.1f} MiB ({g['made_drop'] / mib:.1f} + {g['first_use_drop'] / mib:.1f}), "
          f"nvidia-smi {g['smi_growth_mib']} MiB {'ok' if ok else 'NOT within 5 %'}")
    if not ok: problems.append(g["name"])
ok = abs(total_shim - truth["total_drop"]) <= 0.05 * truth["total_drop"]
print(f"all groups: shim {total_shim / mib:.1f} MiB, free memory fell {truth['total_drop'] / mib:.1f} MiB, "
      f"nvidia-smi grew {truth['smi_growth_mib']} MiB")
if not ok: problems.append("total against the free memory")
if truth["smi_growth_mib"] is not None and abs(total_shim / mib - truth["smi_growth_mib"]) > 0.05 * truth["smi_growth_mib"]:
    problems.append("total against nvidia-smi")
print("problems", problems)
sys.exit(1 if problems else 0)
PY
expect "the side group used once is named idle, with its line" python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
memory = json.load(open(f"{d}/memory.json"))
idle = [c for c in memory["communicators"] if c["idle"]]
print("idle:", [(c.get("name"), c["held_bytes"], round(c["idle_s"], 1), c["created_at"]) for c in idle])
side = [c for c in idle if c.get("name") == "side_group"]
text = open(f"{d}/memory.txt").read()
sys.exit(0 if side and "torch_memory_story.py" in side[0]["created_at"] and '"side_group"' in text else 1)
PY
expect "the groups made every epoch are named piling up, with the line that makes them" python3 - "$dir" <<'PY'
import json, sys
piles = json.load(open(f"{sys.argv[1]}/leaks.json"))["pile_ups"]
print("pile-ups:", [(p["made"], p["bursts"], p["created_at"], p.get("text")) for p in piles])
sys.exit(0 if any(p["made"] >= 6 and "torch_memory_story.py" in p["created_at"] for p in piles) else 1)
PY
finish
