#!/usr/bin/env bash
# NCCL users that a preload alone does not see: ctypes (vLLM/SGLang pynccl), JAX (XLA's plugin
# dlopen()s NCCL), and CuPy (links it). Each must be traced, with its reports. Also measures what
# the exit-time census of NCCL copies costs a process that never calls NCCL.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 2 ]; then echo "SKIP: needs 2 GPUs"; exit 0; fi
HERE="$ROOT/tests/gpu"

# json_check FILE PYTHON-EXPRESSION-ON-j : true when the expression holds for the JSON in FILE.
json_check() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }
show_reports() {
  echo "---- ncclwatch-report summary"; report summary "$1"
  echo "---- ncclwatch-report leaks"; report leaks "$1"
  report summary --json "$1" > "$2/summary.json"; report leaks --json "$1" > "$2/leaks.json"
  report latency --json "$1" > "$2/latency.json"
  for t in "$1"/*.nwt; do report dump "$t"; done > "$2/dump.jsonl"
  grep '"type":"library"' "$2/dump.jsonl"
}

if python3 -c 'import torch' 2>/dev/null; then
  dir="$RESULTS/ctypes"; rm -rf "$dir"; mkdir -p "$dir/rendezvous"
  for r in 0 1; do
    NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" python3 "$HERE/ctypes_nccl.py" $r "$dir/rendezvous" \
      >"$dir/out$r" 2>"$dir/err$r" &
  done
  wait
  echo "==== ctypes"; cat "$dir/out0" "$dir/out1"; grep -h -A3 '^ncclwatch' "$dir/err0" "$dir/err1"
  show_reports "$dir/traces" "$dir"
  expect "ctypes: both ranks ran" bash -c "grep -q 'left alive' '$dir/out0' && grep -q 'left alive' '$dir/out1'"
  expect "ctypes: each rank alerts one communicator" bash -c "[ \$(cat '$dir/err0' '$dir/err1' | grep -c 'ncclwatch: 1 communicator(s) never destroyed') -eq 2 ]"
  expect "ctypes: leaks names one communicator on 2 ranks, the other destroyed" json_check "$dir/leaks.json" \
    "len({l['comm'] for l in j['leaks'] if l['kind']=='communicator'})==1 and sorted(c['state'] for c in j['communicators'])==['destroyed','destroyed','leaked','leaked']"
  expect "ctypes: NCCL reached through dlsym from ctypes" grep -q '"reached":"dlsym from _ctypes' "$dir/dump.jsonl"
  expect "ctypes: 4 all-reduces traced (2 ranks x 2 communicators)" bash -c "[ \$(grep '\"type\":\"op\"' '$dir/dump.jsonl' | grep -c ncclAllReduce) -eq 4 ]"
else
  echo "SKIP ctypes: no PyTorch"
fi

if python3 -c 'import jax' 2>/dev/null; then
  dir="$RESULTS/jax"; rm -rf "$dir"; mkdir -p "$dir"
  NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" python3 "$HERE/jax_psum.py" >"$dir/out" 2>"$dir/err"
  echo "==== jax (exit $?)"; cat "$dir/out"; grep -A6 '^ncclwatch' "$dir/err"; grep -i 'error' "$dir/err" | head -5
  show_reports "$dir/traces" "$dir"
  expect "jax: psum ran" grep -q 'psum on 2 GPUs ok' "$dir/out"
  expect "jax: one trace" bash -c "[ \$(ls '$dir/traces' | wc -l) -eq 1 ]"
  expect "jax: communicators of 2 ranks traced" json_check "$dir/leaks.json" \
    "len(j['communicators'])>=2 and all(c['nranks']==2 for c in j['communicators'])"
  # XLA may run the psum with its own kernels; its NCCL collectives (here an all-gather at the
  # start) must be in the trace whichever they are.
  expect "jax: collectives traced" bash -c "[ \$(grep -c '\"type\":\"op\"' '$dir/dump.jsonl') -ge 2 ]"
  expect "jax: XLA's forwarding stubs are not called a copy of NCCL" bash -c "! grep -q 'not traced' '$dir/err'"
  expect "jax: NCCL reached through dlsym from XLA's plugin" grep -q '"reached":"dlsym from xla_cuda_plugin.so' "$dir/dump.jsonl"
  expect "jax: no hang read into one process driving two GPUs" json_check "$dir/summary.json" "j['missing']==0 and j['mismatched_seqs']==0 and j['ranks']==2"
else
  echo "SKIP jax: not installed"
fi

if python3 -c 'from cupy.cuda import nccl' 2>/dev/null; then
  dir="$RESULTS/cupy"; rm -rf "$dir"; mkdir -p "$dir"
  NCCLWATCH_DIR="$dir/traces" LD_PRELOAD="$SHIM" python3 "$HERE/cupy_nccl.py" >"$dir/out" 2>"$dir/err"
  echo "==== cupy (exit $?)"; cat "$dir/out"; grep -A6 '^ncclwatch' "$dir/err"
  show_reports "$dir/traces" "$dir"
  expect "cupy: all-reduce ran" grep -q 'cupy all-reduce on 2 GPUs ok' "$dir/out"
  expect "cupy: two communicators made by ncclCommInitAll, both destroyed" json_check "$dir/leaks.json" \
    "[(c['api'],c['state']) for c in j['communicators']]==[('ncclCommInitAll','destroyed')]*2 and j['leaks']==[]"
  expect "cupy: no hang read into one process driving two GPUs" json_check "$dir/summary.json" "j['missing']==0 and j['mismatched_seqs']==0 and j['ranks']==2"
  expect "cupy: 2 all-reduces traced" bash -c "[ \$(grep '\"type\":\"op\"' '$dir/dump.jsonl' | grep -c ncclAllReduce) -eq 2 ]"
else
  echo "SKIP cupy: no cupy.cuda.nccl"
fi

# What the shim costs a process that never calls NCCL (the census of NCCL copies at exit
# included): python3 importing torch and jax, 6 alternating runs each way.
cat > "$RESULTS/startup.py" <<'PY'
import os, statistics, subprocess, sys, time
def run(preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = sys.argv[1]
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, jax"], env=env, check=True)
    return time.perf_counter() - t
times = {False: [], True: []}
for _ in range(6):
    for preload in (False, True):
        times[preload].append(run(preload))
print("no-NCCL process (import torch, jax): median %.3f s without the shim, %.3f s with it"
      % (statistics.median(times[False]), statistics.median(times[True])))
PY
NCCLWATCH_DIR="$RESULTS/startup-traces" python3 "$RESULTS/startup.py" "$SHIM"
expect "a process that never calls NCCL leaves no trace" bash -c "[ ! -d '$RESULTS/startup-traces' ]"
plugin="$(python3 -c 'import jax_plugins.xla_cuda13 as p, os; print(os.path.dirname(p.__file__))' 2>/dev/null)/xla_cuda_plugin.so"
[ -f "$plugin" ] && echo "NCCL banners in XLA's plugin: $(grep -c -a 'NCCL version [0-9]' "$plugin")"
finish
