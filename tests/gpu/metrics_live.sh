#!/usr/bin/env bash
# The live metrics file of a real PyTorch job (one rank per GPU, up to 2): sampled while the job
# runs, then its last word at exit compared with `ncclwatch-report metrics` on the job's traces;
# the html report and a gzip timeline of the same job are kept in the results.
source "$(dirname "$0")/common.sh"
gpus="$(gpu_count)"
if [ "$gpus" -lt 1 ]; then echo "SKIP: no GPU"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }
nproc=$(( gpus >= 2 ? 2 : 1 ))
dir="$RESULTS/metrics-live"; rm -rf "$dir"; mkdir -p "$dir/textfiles" "$dir/samples"
NCCLWATCH_DIR="$dir/traces" NCCLWATCH_METRICS_FILE="$dir/textfiles/ncclwatch-%p.prom" NCCLWATCH_METRICS_SEC=0.5 \
  RUN_SECONDS=4 LD_PRELOAD="$SHIM" torchrun --nproc-per-node "$nproc" "$ROOT/tests/gpu/torch_metrics.py" \
  >"$dir/stdout" 2>"$dir/stderr" &
job=$!
i=0
while kill -0 "$job" 2>/dev/null; do
  i=$((i + 1)); cat "$dir"/textfiles/*.prom > "$dir/samples/$(printf %04d $i).prom" 2>/dev/null
  # The shim's threads in each rank, by name, with their blocked-signal masks: the last look
  # that found them all (they start with the first communicator and its first timed launch).
  for p in $(pgrep -f torch_metrics.py); do
    for t in /proc/$p/task/*; do
      name="$(cat "$t/comm" 2>/dev/null)"
      case "$name" in ncclwatch*) echo "$p $name $(awk '/^SigBlk/{print $2}' "$t/status" 2>/dev/null)";; esac
    done
  done > "$dir/threads.now"
  [ "$(wc -l < "$dir/threads.now")" -ge $((2 * nproc)) ] && mv "$dir/threads.now" "$dir/threads.txt"
  sleep 0.25
done
wait "$job"; status=$?
echo "job exit $status; $(ls "$dir/samples" | wc -l) samples"; cat "$dir/stdout"
report metrics "$dir/traces" > "$dir/offline.prom"
report html "$dir/traces" -o "$dir/report.html" >/dev/null
report timeline "$dir/traces" -o "$dir/timeline.json.gz"
python3 - "$dir" "$nproc" <<'PY' > "$dir/checks.txt"
import glob, os, re, sys
d, nproc = sys.argv[1], int(sys.argv[2])
line = re.compile(r'^(ncclwatch_\w+)(?:\{(.*)\})? (\S+)$')
def parse(path):
    out = []
    for l in open(path):
        m = line.match(l.strip())
        if m: out.append((m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")), float(m.group(3))))
    return out
def total(samples, name, **labels):
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items()))
samples = [parse(p) for p in sorted(glob.glob(d + "/samples/*.prom"))]
samples = [s for s in samples if s]
issued = [total(s, "ncclwatch_ops_issued_total") for s in samples]
alive = [total(s, "ncclwatch_communicators", state="alive") for s in samples]
final = [x for p in glob.glob(d + "/textfiles/*.prom") for x in parse(p)]
offline = parse(d + "/offline.prom")
print("samples", len(samples), "issued", issued[:3], "...", issued[-3:])
running = [x for x in issued if x > 0]  # before its first communicator a process counts none
print("check rising", int(len(set(running)) >= 3 and running == sorted(running)))
print("check alive", int(max(alive or [0]) >= nproc))
print("check completed<=issued", int(all(total(s, "ncclwatch_ops_completed_total") <= total(s, "ncclwatch_ops_issued_total") for s in samples)))
print("check final leaked", int(total(final, "ncclwatch_communicators", state="leaked") + total(final, "ncclwatch_communicators", state="released_at_exit") >= nproc))
print("check final issued = offline", int(total(final, "ncclwatch_ops_issued_total") == total(offline, "ncclwatch_ops_issued_total") > 0))
print("check final completed = issued", int(total(final, "ncclwatch_ops_completed_total") == total(final, "ncclwatch_ops_issued_total")))
print("final", {n: v for n, l, v in final if n in ("ncclwatch_ops_issued_total", "ncclwatch_ops_completed_total")})
print("offline states", [(l, v) for n, l, v in offline if n == "ncclwatch_communicators"])
PY
cat "$dir/checks.txt"
expect "job ran" test "$status" -eq 0
for c in "rising" "alive" "completed<=issued" "final leaked" "final issued = offline" "final completed = issued"; do
  expect "live metrics: $c" grep -q "^check $c 1" "$dir/checks.txt"
done
touch "$dir/threads.txt"; cat "$dir/threads.txt"
# Every standard signal blocked but SIGKILL and SIGSTOP (which no thread can block) and the faults
# an access raises (SIGILL, SIGBUS, SIGFPE, SIGSEGV: blocked, one kills at once; background_thread.h).
expect "the shim's threads are named and block the application's signals" python3 - "$dir/threads.txt" "$nproc" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
names = {(pid, name) for pid, name, _ in rows}
wanted = sum(1 << (s - 1) for s in range(1, 32) if s not in (4, 7, 8, 9, 11, 19))
faults = sum(1 << (s - 1) for s in (4, 7, 8, 11))
ok = all(int(mask, 16) & wanted == wanted and not int(mask, 16) & faults for _, _, mask in rows)
pids = {pid for pid, _ in names}
sys.exit(0 if ok and len(pids) == int(sys.argv[2]) and all((p, "ncclwatch-gpu") in names and (p, "ncclwatch-live") in names for p in pids) else 1)
PY
expect "html report written" test -s "$dir/report.html"
expect "timeline written" test -s "$dir/timeline.json.gz"
finish
