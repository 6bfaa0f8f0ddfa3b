"""Reports in proportion to a job's communicators, not their square: jobs that make and destroy
communicators by the ten thousand (some leaked), written by gen_job. Time is measured as the
report's CPU time, which a loaded machine disturbs less than the clock.
  many_comms.py LEAKS_BUDGET_S
- `leaks` on one trace of 100,000 communicators within LEAKS_BUDGET_S seconds (not asserted under
  a sanitizer, whose runtime multiplies it);
- leaks, summary and hang --json on two ranks of 32,000 communicators within 8 times their CPU time
  and memory on 8,000 (4 times as many: 4 when linear, 16 when quadratic; a run over it is run once
  more, as another process's burst on the machine can double a time)."""
import os
import shutil
import subprocess
import sys
import tempfile

REPORT, GEN = os.environ["NCCLWATCH_REPORT"], os.environ["NCCLWATCH_GEN_JOB"]
leaks_budget_s = float(sys.argv[1])
SANITIZER = os.environ.get("NCCLWATCH_TEST_SANITIZER")
SMALL, LARGE, MAX_RATIO = 8000, 32000, 8.0


def measured(args):
    """Runs the report as the only child of a fresh process: (exit status, CPU s, wall s, max RSS MB)."""
    code = ("import resource, subprocess, sys, time\n"
            "t = time.monotonic()\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
            "wall = time.monotonic() - t\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(p.returncode, u.ru_utime + u.ru_stime, wall, u.ru_maxrss / 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, REPORT, *args], capture_output=True, text=True, timeout=600)
    rc, cpu, wall, rss = out.stdout.split()
    return int(rc), float(cpu), float(wall), float(rss)


work = tempfile.mkdtemp(prefix="ncclwatch-many-comms-")
failures = []
try:
    one = os.path.join(work, "one-trace-100k")
    subprocess.run([GEN, "many_comms", one, "100000", "1"], check=True)
    rc, cpu, wall, rss = measured(["leaks", one])
    print(f"leaks, one trace of 100000 communicators: {wall:.2f} s ({cpu:.2f} s CPU), {rss:.0f} MB; "
          f"budget {leaks_budget_s} s")
    if rc != 1:
        failures.append(f"leaks exited {rc}, not 1 (every 100th communicator is leaked)")
    if wall > leaks_budget_s and not SANITIZER:
        failures.append(f"leaks took {wall:.2f} s, over the budget of {leaks_budget_s} s")

    jobs = {n: os.path.join(work, f"two-ranks-{n}") for n in (SMALL, LARGE)}
    for n, d in jobs.items():
        subprocess.run([GEN, "many_comms", d, str(n), "2"], check=True)
    for sub in (["leaks"], ["summary"], ["hang", "--json"]):
        small, large = measured([*sub, jobs[SMALL]]), measured([*sub, jobs[LARGE]])
        cpu_ratio, rss_ratio = large[1] / max(small[1], 0.01), large[3] / max(small[3], 1)
        if cpu_ratio > MAX_RATIO:
            large = min(large, measured([*sub, jobs[LARGE]]), key=lambda m: m[1])
            cpu_ratio = large[1] / max(small[1], 0.01)
        print(f"{' '.join(sub)}: {SMALL} -> {LARGE} communicators x 2 ranks: {small[2]:.2f} -> {large[2]:.2f} s "
              f"({small[1]:.2f} -> {large[1]:.2f} s CPU, x{cpu_ratio:.1f}), {small[3]:.0f} -> {large[3]:.0f} MB "
              f"(x{rss_ratio:.1f})")
        if small[0] != 1 or large[0] != 1:
            failures.append(f"{' '.join(sub)} exited {small[0]} and {large[0]}, not 1 (leaks and missing ops)")
        if cpu_ratio > MAX_RATIO or rss_ratio > MAX_RATIO:
            failures.append(f"{' '.join(sub)} grew x{cpu_ratio:.1f} in CPU time and x{rss_ratio:.1f} in memory for "
                            f"x{LARGE // SMALL} communicators (at most x{MAX_RATIO})")
finally:
    shutil.rmtree(work, ignore_errors=True)
if failures:
    sys.exit("\n".join(failures))
