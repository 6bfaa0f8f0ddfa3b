"""What the world does to a running job that the shim must survive, and tell truly: its trace
truncated by someone else, a history too long for its trace, communicators living inside exit
handlers or in threads still running through exit, Ctrl-C on a Python program, and two copies of
the shim preloaded at once."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from harness import SANITIZED, SANITIZER_RUNTIME, SHIM, Job, alert_blocks, app, check, main

TRUNCATED_NOTICE = "was truncated by another process; tracing stopped"


def wait_for_trace(job, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        traces = job.traces()
        if traces and os.path.getsize(traces[0]) > 0:
            return traces[0]
        if proc.poll() is not None:  # (read stderr only then: reading it waits for the end)
            raise AssertionError(f"exited early with {proc.returncode}: {proc.stderr.read()}")
        time.sleep(0.02)
    raise AssertionError("no trace file appeared")


def truncated_trace_costs_only_the_trace():
    """The trace truncated while the program writes it, to nothing and to a size mid-file: the program
    runs on to its normal end (no SIGBUS), the shim says once that tracing stopped."""
    for size in (0, 64 << 10):
        job = Job([app("lifecycle_app"), "spin", "2.5"], nranks=1)
        proc = job.start()[0]
        trace = wait_for_trace(job, proc)
        time.sleep(0.8)
        os.truncate(trace, size)
        out, err = proc.communicate(timeout=60)
        check(proc.returncode == 0, f"truncated to {size}: the program must end normally, exit {proc.returncode}: {err!r}")
        check("spun" in out, f"truncated to {size}: the program ran to its end: {out!r}")
        check(err.count(TRUNCATED_NOTICE) == 1, f"truncated to {size}: one notice expected: {err!r}")
        check(not alert_blocks(err), f"truncated to {size}: nothing leaked, no alert: {err!r}")


def full_history_names_the_live_communicator():
    """4,000 communicators made and destroyed, one left alive, in a 1 MB trace: the destroy records
    of most are lost. The report must name the live one (from the shim's exit list), no destroyed
    one as leaked, and say that records were lost."""
    job = Job([app("lifecycle_app"), "many-comms", "4000"], nranks=1, env={"NCCLWATCH_MAX_MB": "1"}, timeout=120)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    blocks = alert_blocks(r.stderr)
    check(len(blocks) == 1 and blocks[0][0].startswith("ncclwatch: 1 communicator(s) never destroyed"), f"alert {r.stderr!r}")
    alerted = re.search(r"comm ([0-9a-f]{16}) rank 0/1 \"alive\"", "\n".join(blocks[0]))
    check(alerted, f"the alert names the live one: {blocks[0]}")
    code, report, err = job.report("leaks", "--json")
    check(code == 1, f"leaks exit {code}: {err}")
    leaked = [l for l in report["leaks"] if l["kind"] == "communicator"]
    check(len(leaked) == 1, f"exactly the live one is leaked, got {len(leaked)}: {[l['name'] for l in leaked][:10]}")
    check(leaked[0]["comm"].replace("0x", "").lstrip("0") == alerted.group(1).lstrip("0"),
          f"leaks names {leaked[0]['comm']}, the alert {alerted.group(1)}")
    check(leaked[0]["name"] != "x", f"a destroyed one is called leaked: {leaked[0]}")
    lost = report["lost_records"]
    check(len(lost) == 1 and lost[0]["records"] > 0 and lost[0]["ends_from_exit_list"], f"lost records said: {lost}")
    code, text, _ = job.report("leaks")
    check("lost" in text and "list of those alive at exit" in text, f"the text says records were lost:\n{text}")


def exit_handler_communicator_is_no_leak():
    """A communicator made, used, finalized and destroyed inside an exit handler lived and ended
    there: no alert, no leak."""
    job = Job([app("lifecycle_app"), "exit-handler"], nranks=1)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    check(not alert_blocks(r.stderr), f"no alert expected: {r.stderr!r}")
    code, report, err = job.report("leaks", "--json")
    states = sorted(c["state"] for c in report["communicators"])
    check(code == 0 and states == ["destroyed", "destroyed"], f"leaks exit {code}, states {states}: {err}")


def threads_running_through_exit_are_not_thousands_of_leaks():
    """Four threads make and destroy communicators while main calls exit(). Each thread can leave two:
    the one it held when exit began, destroyed during exit (released_at_exit, by contract a leak), and
    the one it holds when the process ends. Whatever was made and destroyed during exit adds none."""
    if SANITIZED:
        # The stand-in's own statics are torn down under the running threads: a sanitizer rightly
        # reports the stand-in, which is not what this test is about.
        print("SKIP: threads running through exit() use the stand-in after its teardown")
        sys.exit(77)
    threads = 4
    job = Job([app("lifecycle_app"), "exit-threads", str(threads)], nranks=1)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    code, report, err = job.report("leaks", "--json")
    leaked = [l for l in report["leaks"] if l["kind"] == "communicator"]
    destroyed = sum(c["state"] == "destroyed" for c in report["communicators"])
    check(len(leaked) <= 2 * threads, f"{len(leaked)} reported leaked, at most {2 * threads} can be")
    check(destroyed > 0, f"the threads' destroyed communicators are destroyed: {len(report['communicators'])}")
    for block in alert_blocks(r.stderr):
        count = int(re.match(r"ncclwatch: (\d+) communicator", block[0]).group(1))
        check(count <= 2 * threads, f"the alert counts {count}, at most {2 * threads} can be: {block[0]}")


CTRL_C_PROGRAM = r"""
import ctypes, os, signal, sys, time
nccl = ctypes.CDLL("libnccl.so.2")
class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]
uid = UniqueId()
assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
comm = ctypes.c_void_p()
assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
print("ready", flush=True)
os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: Python raises KeyboardInterrupt, nobody catches it
time.sleep(30)
"""


def python_ctrl_c_writes_the_end():
    """Ctrl-C on a Python NCCL program: Python ends itself by SIGINT after finalizing, without
    exit(). The alert is printed and the trace ends with how the process ended."""
    preload = f"{SANITIZER_RUNTIME} {SHIM}" if SANITIZER_RUNTIME else SHIM
    job = Job([sys.executable, "-c", CTRL_C_PROGRAM], nranks=1, env={"LD_PRELOAD": preload})
    r = job.run()[0]
    check(r.returncode == -signal.SIGINT, f"Python ends by SIGINT after an unhandled Ctrl-C: {r.returncode} {r.stderr!r}")
    blocks = alert_blocks(r.stderr)
    check(len(blocks) == 1 and blocks[0][0].startswith("ncclwatch: 1 communicator(s) never destroyed"),
          f"the alert is printed: {r.stderr!r}")
    code, summary, err = job.report("summary", "--json")
    check(summary["processes_without_final_record"] == 0, f"the trace has its end: {summary} {err}")
    check(summary.get("ended_by_signal") == {"SIGINT": 1}, f"the summary says how it ended: {summary.get('ended_by_signal')}")


def two_shim_copies_trace_once():
    """Two copies of the shim preloaded, in either order: one traces (one trace, one alert, each
    leak counted once), the other only forwards, and that is said once."""
    folder = tempfile.mkdtemp(prefix="ncclwatch-second-shim-")
    second = os.path.join(folder, "libncclwatch-second.so")
    shutil.copy(SHIM, second)
    for order in ([SHIM, second], [second, SHIM]):
        preload = ":".join(order)
        if SANITIZER_RUNTIME:
            preload = SANITIZER_RUNTIME + ":" + preload
        job = Job([app("lifecycle_app"), "leaky"], nranks=2, env={"LD_PRELOAD": preload})
        results = job.run()
        check(len(job.traces()) == 2, f"{preload}: one trace per rank, got {job.traces()}")
        for rank, r in enumerate(results):
            check(r.returncode == 0, f"rank {rank} exit {r.returncode}: {r.stderr}")
            check(len(alert_blocks(r.stderr)) == 1, f"rank {rank}: one alert: {r.stderr!r}")
            check(r.stderr.count("another copy of the shim is loaded") == 1, f"rank {rank}: said once: {r.stderr!r}")
        code, report, _ = job.report("leaks", "--json")
        leaked = [l for l in report["leaks"] if l["kind"] == "communicator"]
        check(len(leaked) == 2 and len(report["communicators"]) == 6,
              f"{preload}: the world leaked on 2 ranks, 6 instances: {len(leaked)} leaked, {len(report['communicators'])}")


if __name__ == "__main__":
    main({f.__name__: f for f in [truncated_trace_costs_only_the_trace, full_history_names_the_live_communicator,
                                   exit_handler_communicator_is_no_leak,
                                   threads_running_through_exit_are_not_thousands_of_leaks,
                                   python_ctrl_c_writes_the_end, two_shim_copies_trace_once]})
