"""Instructions the shim adds to one ncclAllReduce call, counted by callgrind (deterministic,
unlike timings): the calling thread's instructions inside one call, with the shim preloaded
(NCCLWATCH_TIMING=host, so no CUDA calls) minus without it, on the CPU stand-in for NCCL, whose
own collective is left out of both counts.
  hot_path_instructions.py BUDGET [premul|graph]
With `premul`, the same for one ncclRedOpCreatePreMulSum + ncclRedOpDestroy pair made 64 frames
down (PyTorch makes one around each collective that uses it): its call site must not cost more
for a deep caller. With `graph`, one cuGraphLaunch of a graph holding one all-reduce: a replay,
whose op record and seq the shim writes (the stand-in's own launch left out of both counts).
With `metrics`, the ncclAllReduce once more with the live metrics file rewritten every 0.1 s
(NCCLWATCH_METRICS_FILE, the writer on its own thread): the call must cost what it costs without
it, within METRICS_SLACK instructions.
Prints the figure; exits 1 above the budget given as the first argument."""
import os
import re
import subprocess
import sys
import tempfile

budget = int(sys.argv[1]) if len(sys.argv) > 1 else 400
variant = sys.argv[2] if len(sys.argv) > 2 else ""
scenario, counted, label = {
    "premul": ("bench-premul", "*bench_one_premul*", "ncclRedOpCreatePreMulSum + ncclRedOpDestroy"),
    "graph": ("bench-graph", "*bench_one_graph_launch*", "cuGraphLaunch of a graph holding an ncclAllReduce"),
    "metrics": ("bench", "*bench_one_allreduce*", "ncclAllReduce"),
}.get(variant, ("bench", "*bench_one_allreduce*", "ncclAllReduce"))
build = os.environ["NCCLWATCH_BUILD_DIR"]
app = os.path.join(build, "tests", "integration", "collectives_app")
shim = os.path.join(build, "shim", "libncclwatch.so")
calls = 2000
METRICS_SLACK = 2


def instructions(preload, timing="host", metrics=False):
    tmp = tempfile.mkdtemp(prefix="ncclwatch-bench-")
    env = dict(os.environ, LD_LIBRARY_PATH=os.environ["HOSTNCCL_DIR"], NCCLWATCH_DIR=os.path.join(tmp, "traces"),
               NCCLWATCH_TIMING=timing, NCCLWATCH_TEST_RENDEZVOUS=tmp)
    out = os.path.join(tmp, "callgrind.out")
    # Collection runs inside the benchmark's call and stops inside the stand-in's collective: its
    # mutexes and allocations vary with the stand-in's worker threads from run to run, which would
    # swamp a difference of a few instructions. It also stops inside the clock's periodic
    # recalibration, a cost per unit of time (callgrind's 50-fold slowdown would charge it to
    # whichever calls happen to cross a period).
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", f"--toggle-collect={counted}",
           "--toggle-collect=(anonymous namespace)::collective*", "--toggle-collect=*resample_tsc_clock*",
           "--separate-threads=no"]
    if variant == "graph":
        cmd.append("--toggle-collect=hostcuda::launch*")  # the stand-in's replay of the graph (toggles are flips: not nested in a collective's)
    if preload:
        env["LD_PRELOAD"] = shim
    if metrics:
        env.update(NCCLWATCH_METRICS_FILE=os.path.join(tmp, "live-%p.prom"), NCCLWATCH_METRICS_SEC="0.1")
    proc = subprocess.run(cmd + [app, scenario, str(calls)], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"callgrind run failed: {proc.stderr[-2000:]}")
    if metrics:  # the file was written: the writer ran beside the calls counted
        written = [f for f in os.listdir(tmp) if f.endswith(".prom")]
        if not written or "ncclwatch_ops_issued_total" not in open(os.path.join(tmp, written[0])).read():
            sys.exit(f"no live metrics file was written in {tmp}")
    totals = re.search(r"^summary:\s+(\d+)", open(out).read(), re.M) or re.search(r"^totals:\s+(\d+)", open(out).read(), re.M)
    return int(totals.group(1))


without = instructions(False)
with_shim = instructions(True)
per_call = (with_shim - without) / calls
print(f"{label}: {without / calls:.0f} instructions a call without the shim, {with_shim / calls:.0f} with it "
      f"(NCCLWATCH_TIMING=host): the shim adds {per_call:.0f} per call (budget {budget})")
if variant == "metrics":
    with_metrics = (instructions(True, metrics=True) - without) / calls
    print(f"with NCCLWATCH_METRICS_FILE rewritten every 0.1 s: the shim adds {with_metrics:.1f} per call, "
          f"against {per_call:.1f} without it (at most {METRICS_SLACK} more allowed)")
    sys.exit(0 if per_call <= budget and with_metrics - per_call <= METRICS_SLACK else 1)
sys.exit(0 if per_call <= budget else 1)
