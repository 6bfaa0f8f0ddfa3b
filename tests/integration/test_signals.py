"""Signals landing anywhere: a process under the shim must die by the signal it was sent, at any
moment (communicator init and destroy, trace growth, fork), and its trace must say so."""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time

from harness import HOSTNCCL_DIR, REPORT, SANITIZED, SHIM, app, check, main

SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


def default_signals():
    """The test may itself run with SIGHUP ignored (nohup, some CI runners): the churn program
    starts with every watched signal at its default, as a job's processes normally do."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def start_churn(trace_dir, preexec=default_signals):
    env = dict(os.environ)
    # Trace growth made slow (tests/integration/apps/slow_fallocate.cc): signals land inside it.
    env.update({"LD_PRELOAD": app("libslow_fallocate.so") + ":" + SHIM, "SLOW_FALLOCATE_MS": "100", "NCCLWATCH_DIR": trace_dir,
                "LD_LIBRARY_PATH": HOSTNCCL_DIR + ":" + env.get("LD_LIBRARY_PATH", "")})
    return subprocess.Popen([app("lifecycle_app"), "churn"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=preexec)


def wait_for_trace(trace_dir, proc, run):
    """The first NCCL call creates the trace: from then on the shim's handlers are installed."""
    deadline = time.time() + 30
    while time.time() < deadline:
        if os.path.isdir(trace_dir) and os.listdir(trace_dir):
            return
        check(proc.poll() is None, f"run {run}: churn exited early with {proc.returncode}")
        time.sleep(0.01)
    raise AssertionError(f"run {run}: no trace after 30 s")


def signals_at_random_moments_always_kill(runs=int(os.environ.get("NCCLWATCH_SIGNAL_RUNS", "40")), seed=None):
    """Each run: the churn program, one signal after a random delay; it must die by that signal
    within 10 s (a deadlock in the shim's handler would keep it alive until SIGKILL)."""
    seed = seed if seed is not None else int(time.time())
    rng = random.Random(seed)
    print(f"seed {seed} (NCCLWATCH_SIGNAL_RUNS={runs})", flush=True)
    tmp = tempfile.mkdtemp(prefix="ncclwatch-signals-")
    stuck, wrong_death, without_final = [], [], []
    # On a loaded machine (the fuzzer's jobs beside it) runs slow down: stop starting new ones at
    # the deadline rather than being cut off by the test's timeout without a word.
    deadline = time.time() + float(os.environ.get("NCCLWATCH_SIGNAL_SECONDS", "80"))
    done = 0
    batch = 1  # one at a time: the stand-in's unique ids are not unique across concurrent processes
    for first in range(0, runs, batch):
        if time.time() > deadline:
            print(f"deadline reached after {done} of {runs} runs", flush=True)
            break
        done += batch
        procs = []
        for run in range(first, min(first + batch, runs)):
            trace_dir = os.path.join(tmp, f"run{run}")
            proc = start_churn(trace_dir)
            wait_for_trace(trace_dir, proc, run)
            procs.append((run, proc, rng.choice(SIGNALS), rng.uniform(0, 0.4), trace_dir))
        for run, proc, sig, delay, _ in procs:
            time.sleep(delay)
            proc.send_signal(sig)
        for run, proc, sig, delay, trace_dir in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                stuck.append(f"run {run}: {sig.name} after {delay:.3f}s")
                continue
            print(f"run {run}: {sig.name} after {delay:.3f} s: exit {proc.returncode}", flush=True)
            if proc.returncode != -sig:
                wrong_death.append(f"run {run}: {sig.name} gave exit {proc.returncode}: {proc.stderr.read()[-500:]}")
                continue
            if unended := trace_left_unended(trace_dir):
                without_final.append(f"run {run}: {sig.name}: {unended}")
    check(done >= min(runs, 10), f"only {done} runs before the deadline: the machine is too loaded to tell")
    check(not stuck, f"{len(stuck)} of {done} processes did not die by their signal:\n" + "\n".join(stuck))
    check(not wrong_death, "\n".join(wrong_death))
    check(not without_final, "traces without the final record:\n" + "\n".join(without_final))


def ignored_hangup_stays_ignored():
    """Under nohup SIGHUP is ignored: the shim must leave it so (a handler of ours would not be
    inherited across exec as SIG_IGN is), so a hangup neither ends the process nor its trace."""
    def ignore_hangup():
        default_signals()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    tmp = tempfile.mkdtemp(prefix="ncclwatch-nohup-")
    trace_dir = os.path.join(tmp, "traces")
    proc = start_churn(trace_dir, ignore_hangup)
    wait_for_trace(trace_dir, proc, 0)
    time.sleep(0.2)  # the first NCCL call has installed the shim's handlers
    ignored = open(f"/proc/{proc.pid}/status").read()
    sigign = int(re.search(r"^SigIgn:\s*([0-9a-f]+)", ignored, re.M).group(1), 16)
    check(sigign & (1 << (signal.SIGHUP - 1)), f"SIGHUP no longer ignored under the shim: SigIgn {sigign:x}")
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    check(proc.poll() is None, f"a hangup ended a process that ignores it: exit {proc.returncode}")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    check(proc.returncode == -signal.SIGTERM, f"SIGTERM still ends it: exit {proc.returncode}")


def blocked_signals(task_status):
    return int(re.search(r"^SigBlk:\s*([0-9a-f]+)", task_status, re.M).group(1), 16)


def signalfd_program_keeps_its_sigterm():
    """A program that blocks SIGTERM in its threads and reads it from a signalfd must get it, not die by
    it: the shim's threads (GPU timing, live metrics) block every signal, and are named as ours."""
    tmp = tempfile.mkdtemp(prefix="ncclwatch-signalfd-")
    env = dict(os.environ)
    env.update({"LD_PRELOAD": SHIM, "NCCLWATCH_DIR": os.path.join(tmp, "traces"), "NCCLWATCH_SAMPLE": "1",
                "NCCLWATCH_METRICS_FILE": os.path.join(tmp, "live.prom"), "NCCLWATCH_METRICS_SEC": "0.1",
                "LD_LIBRARY_PATH": HOSTNCCL_DIR + ":" + env.get("LD_LIBRARY_PATH", "")})
    proc = subprocess.Popen([app("lifecycle_app"), "signalfd"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    if proc.stdout.readline().strip() != "ready":
        check(False, f"no ready line: exit {proc.wait()}: {proc.stderr.read()[-500:]}")
    deadline = time.time() + 10
    ours = {}
    while time.time() < deadline and len(ours) < 2:
        ours = {}
        for task in os.listdir(f"/proc/{proc.pid}/task"):
            name = open(f"/proc/{proc.pid}/task/{task}/comm").read().strip()
            if name.startswith("ncclwatch"):
                ours[name] = blocked_signals(open(f"/proc/{proc.pid}/task/{task}/status").read())
        time.sleep(0.05)
    if set(ours) != {"ncclwatch-gpu", "ncclwatch-live"}:
        proc.kill()
        check(False, f"the shim's threads by name: {sorted(ours)}")
    # Every standard signal but the two no thread can block (SIGKILL, SIGSTOP) and the faults, left
    # deliverable on purpose: a blocked fault is fatal at once (shim/process/background_thread.h).
    faults = (signal.SIGBUS, signal.SIGSEGV, signal.SIGFPE, signal.SIGILL)
    wanted = sum(1 << (s - 1) for s in range(1, 32) if s not in (signal.SIGKILL, signal.SIGSTOP, *faults))
    for name, mask in ours.items():
        if mask & wanted != wanted:
            proc.kill()
            check(False, f"{name} takes signals: blocked {mask:x}, missing {wanted & ~mask:x}")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    check(proc.returncode == 0 and "took signal 15" in out,
          f"SIGTERM did not reach the program's signalfd: exit {proc.returncode}, out {out!r}, err {err[-500:]}")


def trace_left_unended(trace_dir):
    """"" when the trace ends with the process's end (or never got a header to end), else what
    the summary said of it."""
    files = [os.path.join(trace_dir, f) for f in os.listdir(trace_dir)] if os.path.isdir(trace_dir) else []
    if all(os.path.getsize(f) < 4096 for f in files):
        return ""  # killed while creating the file, before its header: nothing to end
    code = subprocess.run([REPORT, "summary", "--json", trace_dir], capture_output=True, text=True, timeout=60)
    summary = json.loads(code.stdout) if code.stdout.strip().startswith("{") else {}
    if summary.get("processes_without_final_record", 1) == 0:
        return ""
    return f"{code.stdout[:300]} {code.stderr[:300]}".strip() or "no summary"


def signal_inside_any_allocation_kills():
    """A SIGTERM sent from inside each allocation of a short job in turn (apps/signal_at_allocation.cc),
    the shim's set-up at the first NCCL call included: wherever it lands (a function-local static
    half-built, a lock the interrupted code holds), the process dies by it, its trace ended."""
    tmp = tempfile.mkdtemp(prefix="ncclwatch-signal-at-allocation-")
    env = dict(os.environ)
    env.update({"LD_PRELOAD": app("libsignal_at_allocation.so") + ":" + SHIM,
                "LD_LIBRARY_PATH": HOSTNCCL_DIR + ":" + env.get("LD_LIBRARY_PATH", "")})
    env.pop("SIGNAL_AT_ALLOCATION", None)

    def run(at):
        run_env = dict(env, NCCLWATCH_DIR=os.path.join(tmp, f"at{at}"))
        if at:
            run_env["SIGNAL_AT_ALLOCATION"] = str(at)
        try:
            return subprocess.run([app("lifecycle_app"), "one-comm"], env=run_env, capture_output=True, text=True,
                                  timeout=10, preexec_fn=default_signals)
        except subprocess.TimeoutExpired:
            return None

    counted = run(0)
    found = re.search(r"^allocations (\d+)$", counted.stderr if counted else "", re.M)
    check(counted is not None and counted.returncode == 0 and found, f"the counting run: {counted}")
    total = int(found.group(1))
    check(total > 100, f"only {total} allocations: the shim's set-up is not among them")
    # Every allocation up to 400, then a spread: each run is a few tens of milliseconds (a second
    # under ThreadSanitizer: there one in seven, the plain build covering every one).
    step = 7 if SANITIZED else 1
    sweep = list(range(1, min(total, 400) + 1, step)) + list(range(401, total + 1, max(1, (total - 400) // 200)))
    stuck, wrong_death, without_final = [], [], []
    deadline = time.time() + 90  # within the case's limit on a loaded machine, said below
    ran = 0
    for at in sweep:
        if time.time() > deadline:
            break
        ran += 1
        done = run(at)
        trace_dir = os.path.join(tmp, f"at{at}")
        try:
            if done is None:
                stuck.append(at)
            elif done.returncode == 0 and "signal sent" not in done.stderr:
                pass  # this run made fewer allocations than that
            elif done.returncode != -signal.SIGTERM:
                wrong_death.append(f"allocation {at}: exit {done.returncode}: {done.stderr[-300:]}")
            elif trace_left_unended(trace_dir):
                without_final.append(at)
        finally:
            shutil.rmtree(trace_dir, ignore_errors=True)  # each holds a 4 MiB chunk: hundreds of runs
    print(f"{ran} of {len(sweep)} runs over {total} allocations", flush=True)
    check(ran >= min(len(sweep), 50), f"only {ran} runs before the deadline: the machine is too loaded to tell")
    problems = ([f"stuck with the signal inside allocations {stuck[:20]} (of {len(stuck)})"] if stuck else []) + \
        wrong_death[:10] + ([f"no final record after allocations {without_final[:20]}"] if without_final else [])
    check(not problems, "\n".join(problems))


if __name__ == "__main__":
    main({"signals_at_random_moments_always_kill": signals_at_random_moments_always_kill,
          "ignored_hangup_stays_ignored": ignored_hangup_stays_ignored,
          "signalfd_program_keeps_its_sigterm": signalfd_program_keeps_its_sigterm,
          "signal_inside_any_allocation_kills": signal_inside_any_allocation_kills})
