#!/usr/bin/env bash
# The Python line that made each communicator, on real PyTorch and NCCL (torch_python_site.py):
# torchrun on every GPU here (up to 2), the world group made eagerly and lazily, the model-parallel
# groups remade each cycle named as piling up at their new_group() line, with and without
# destroy_process_group().
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
nproc=$(( $(gpu_count) < 2 ? $(gpu_count) : 2 ))
script="$ROOT/tests/gpu/torch_python_site.py"
port=29571
for mode in eager lazy; do
  for destroy in destroy no-destroy; do
    dir="$RESULTS/python-site-$mode-$destroy"; rm -rf "$dir"; mkdir -p "$dir"
    extra=""; [ "$destroy" = no-destroy ] && extra="--no-destroy"
    port=$((port + 1))
    NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" timeout 300 \
      torchrun --nproc-per-node "$nproc" --master-port "$port" --log-dir "$dir/logs" --redirects 3 --tee 3 \
      "$script" --mode "$mode" $extra >"$dir/stdout" 2>"$dir/stderr"
    echo "torchrun $mode $destroy: exit $? $(grep -h 'done on' "$dir/stdout" | head -1)"
    cat "$dir"/logs/*/attempt_0/*/stderr.log > "$dir/rank_stderr" 2>/dev/null || cp "$dir/stderr" "$dir/rank_stderr"
    report leaks --json "$dir/traces" >"$dir/leaks.json"
    report leaks "$dir/traces" >"$dir/leaks.txt"
    report summary "$dir/traces" >"$dir/summary.txt"
  done
done
echo "---- lazy, no destroy: the alert of rank 0 and the leaks report"
grep -m1 -A8 'communicator(s) never destroyed' "$RESULTS/python-site-lazy-no-destroy/rank_stderr"
head -12 "$RESULTS/python-site-lazy-no-destroy/leaks.txt"
echo "---- eager, no destroy: the alert of rank 0 and the leaks report"
grep -m1 -A4 "communicator(s) never destroyed" "$RESULTS/python-site-eager-no-destroy/rank_stderr"
head -8 "$RESULTS/python-site-eager-no-destroy/leaks.txt"
grep -h 'PILING' "$RESULTS"/python-site-*/leaks.txt "$RESULTS"/python-site-*/summary.txt

check() {  # check MODE DESTROY: every communicator has its Python line, the groups pile up there
  python3 - "$RESULTS/python-site-$1-$2" "$script" "$1" "$2" "$nproc" <<'PY'
import json, re, sys
d, script, mode, destroy, nproc = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
lines = {m.group(1): n for n, l in enumerate(open(script), 1) if (m := re.search(r"# SITE (\w+)", l))}
report = json.load(open(f"{d}/leaks.json"))
comms = report["communicators"]
first = [c["python_site"][0] if c["python_site"] else None for c in comms]
world_line = lines["world_eager" if mode == "eager" else "world_lazy"]
groups_line = lines["new_group" if mode == "eager" else "first_use"]
at = lambda line: [f for f in first if f and f["line"] == line and f["file"].endswith("torch_python_site.py")]
problems = []
if len(at(world_line)) != nproc: problems.append(f"world at line {world_line}: {len(at(world_line))} of {nproc}")
if len(at(groups_line)) != 12 * nproc: problems.append(f"groups at line {groups_line}: {len(at(groups_line))} of {12 * nproc}")
if any(f is None for f in first): problems.append(f"{first.count(None)} communicator(s) without a Python line")
if any("/torch/" in f["file"] for c in comms for f in c["python_site"]): problems.append("a torch frame was kept")
piles = report["pile_ups"]
if not (len(piles) == 1 and piles[0]["made"] == 12 and piles[0]["created_at"].startswith(f"torch_python_site.py:{groups_line} (")):
    problems.append(f"pile-ups {[(p['made'], p['created_at']) for p in piles]}")
# PyTorch's process groups: named where the communicator is made eagerly inside the group's
# creation (the world "default_pg", group 0; the new_group()s "model_parallel"), not lazily.
described = sorted({(c["process_group"] or {}).get("desc", "none") for c in comms})
want = ["default_pg", "model_parallel"] if mode == "eager" else ["none"]
if described != want: problems.append(f"process groups {described}, expected {want}")
if mode == "eager" and not all((c["process_group"] or {}).get("name") == "0" for c in comms if at(world_line) and
                               c["python_site"] and c["python_site"][0]["line"] == world_line):
    problems.append("the world is not process group 0")
if destroy == "no-destroy":
    alert = open(f"{d}/rank_stderr").read()
    if mode == "eager" and 'process group 0 "default_pg"' not in alert: problems.append("the alert lacks the world's group")
    if f"created at torch_python_site.py:{groups_line} (" not in alert: problems.append("the alert lacks the Python line")
print(mode, destroy, "python lines", sorted({(f["line"], f["function"]) for f in first if f}), "pile-ups",
      [p["created_at"] for p in piles], "process groups", sorted({json.dumps(c["process_group"]) for c in comms}),
      "problems", problems)
sys.exit(1 if problems else 0)
PY
}
expect "eager world, destroyed: every communicator's Python line; the groups pile up at new_group()" check eager destroy
expect "eager world, not destroyed: the same, and the alert leads with the Python line" check eager no-destroy
expect "lazy world, destroyed: communicators made at their first collective's line" check lazy destroy
expect "lazy world, not destroyed: the same, and the alert leads with the Python line" check lazy no-destroy
finish
