"""The timeline's size per op at scale, a deterministic figure (its time is measured by
`bench_report --timeline`, never asserted): a synthetic job of RANKS x OPS all-reduces with the
shim's default sampling (GPU timing for 1 in 32), written as gzip, must stay within BUDGET bytes per
op slice, arrows included; and the gzip file must hold exactly the plain file's events."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

BENCH, REPORT = os.environ["NCCLWATCH_BENCH_REPORT"], os.environ["NCCLWATCH_REPORT"]
budget = float(sys.argv[1])
ranks, ops = 8, 20000
work = tempfile.mkdtemp(prefix="ncclwatch-timeline-size-")
try:
    job = os.path.join(work, "job")
    subprocess.run([BENCH, "--ranks", str(ranks), "--ops", str(ops), "--sample", "32", "--dir", job, "--keep"],
                   check=True, stdout=subprocess.DEVNULL)
    packed, plain = os.path.join(work, "t.json.gz"), os.path.join(work, "t.json")
    for out in (packed, plain):
        subprocess.run([REPORT, "timeline", job, "-o", out], check=True, stdout=subprocess.DEVNULL)
    per_slice = os.path.getsize(packed) / (ranks * ops)
    print(f"{ranks} ranks x {ops} ops: {os.path.getsize(packed) / 1e6:.2f} MB gzip ({per_slice:.1f} bytes per op slice), "
          f"{os.path.getsize(plain) / 1e6:.1f} MB plain; budget {budget} bytes per op slice")
    with gzip.open(packed, "rt") as f:
        a = json.load(f)["traceEvents"]
    with open(plain) as f:
        b = json.load(f)["traceEvents"]
    key = lambda e: json.dumps(e, sort_keys=True)  # noqa: E731
    if sorted(map(key, a)) != sorted(map(key, b)):
        sys.exit("the gzip timeline does not hold the plain timeline's events")
    if per_slice > budget:
        sys.exit(f"{per_slice:.1f} bytes per op slice is over the budget of {budget}")
finally:
    shutil.rmtree(work, ignore_errors=True)
