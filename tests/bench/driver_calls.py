"""CUDA driver calls the shim's launch path adds to one collective in steady state (gpu timing):
back-to-back all-reduces on the application's own stream, counted by the CPU stand-in's driver on
the calling thread (tests/hostnccl). Counted natively rather than under callgrind: the launch path
reads the host clock to tell bursts from lone launches, and callgrind slows time ~50-fold.
Prints the figure; exits 1 above the budget given as the first argument."""
import os
import re
import subprocess
import sys
import tempfile

budget = float(sys.argv[1]) if len(sys.argv) > 1 else 0.25
build = os.environ["NCCLWATCH_BUILD_DIR"]
app = os.path.join(build, "tests", "integration", "collectives_app")
shim = os.path.join(build, "shim", "libncclwatch.so")


def driver_calls(preload, calls=20000):
    tmp = tempfile.mkdtemp(prefix="ncclwatch-bench-")
    env = dict(os.environ, LD_LIBRARY_PATH=os.environ["HOSTNCCL_DIR"], NCCLWATCH_DIR=os.path.join(tmp, "traces"),
               NCCLWATCH_TIMING="gpu", NCCLWATCH_TEST_RENDEZVOUS=tmp)
    if preload:
        env["LD_PRELOAD"] = shim
    proc = subprocess.run([app, "bench-driver-calls", str(calls)], env=env, capture_output=True, text=True, timeout=300)
    found = re.search(r"driver calls per collective: ([0-9.]+)", proc.stdout)
    if proc.returncode != 0 or not found:
        sys.exit(f"bench run failed (exit {proc.returncode}): {proc.stdout[-1000:]} {proc.stderr[-2000:]}")
    return float(found.group(1))


without = driver_calls(False)
with_shim = driver_calls(True)
added = with_shim - without
print(f"ncclAllReduce in a loop: {without:.3f} CUDA driver calls a call without the shim, {with_shim:.3f} with it "
      f"(NCCLWATCH_TIMING=gpu): the shim adds {added:.3f} per call (budget {budget})")
sys.exit(0 if added <= budget else 1)
