"""How each rank ended, on the CPU stand-in: the exit status, and the exception a Python program
died of (type, message, the line that raised it), in the alert, the summary and the hang verdict."""
import os
import re
import signal
import subprocess
import sys
import time

from harness import SANITIZER_RUNTIME, SHIM, Job, check, main
import test_watch

PRELOAD = f"{SANITIZER_RUNTIME} {SHIM}" if SANITIZER_RUNTIME else SHIM

# test_watch's two-rank job, rank 1 raising after its first all-reduce while rank 0 issues a second.
JOB = test_watch.JOB.replace('''all_reduce()
if rank == 1:
    load_batch()
all_reduce()
cuda.cuStreamSynchronize(None)  # WAIT_LINE''', '''def step():
    if rank == 1:
        raise RuntimeError("injected failure at step 2")  # RAISE_LINE


all_reduce()
step()
all_reduce()''')


def run_ranks(job, script):
    procs = [subprocess.Popen([sys.executable, script, str(rank), job.tmp, "0"], env=job.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results


def python_exception_and_exit_status_are_named():
    assert "RAISE_LINE" in JOB
    job = Job([], nranks=2, env={"LD_PRELOAD": PRELOAD})
    script = os.path.join(job.tmp, "job.py")
    open(script, "w").write(JOB)
    line = next(n for n, text in enumerate(JOB.splitlines(), 1) if "RAISE_LINE" in text)
    results = run_ranks(job, script)
    failed = results[1]
    check(failed.returncode == 1 and "RuntimeError: injected failure at step 2" in failed.stderr, failed.stderr)
    said = f"the program is ending on an uncaught RuntimeError: injected failure at step 2 (job.py:{line})"
    check(said in failed.stderr, f"the alert names the exception: {failed.stderr}")
    ending = f"exited with status 1 after RuntimeError: injected failure at step 2 (raised at job.py:{line} in step)"
    code, summary, _ = job.report("summary")
    check(re.search(r"ENDED: rank 1 \(pid \d+\) " + re.escape(ending), summary), summary)
    code, summary_json, _ = job.report("summary", "--json")
    check([e["rank"] for e in summary_json["bad_endings"]] == [1] and summary_json["bad_endings"][0]["ended"] == ending,
          summary_json["bad_endings"])
    code, hang, _ = job.report("hang", "--json")
    check("its process " + ending in hang["verdict"], hang["verdict"])


def exit_status_alone_where_nothing_was_raised():
    job = Job([], nranks=2, env={"LD_PRELOAD": PRELOAD})
    script = os.path.join(job.tmp, "job.py")
    open(script, "w").write(JOB.replace('raise RuntimeError("injected failure at step 2")', "sys.exit(3)"))
    results = run_ranks(job, script)
    check(results[1].returncode == 3 and "uncaught" not in results[1].stderr, results[1].stderr)
    code, summary_json, _ = job.report("summary", "--json")
    endings = summary_json["bad_endings"]
    check(len(endings) == 1 and endings[0]["rank"] == 1 and endings[0]["ended"] == "exited with status 3", endings)


def signal_senders_are_named():
    # Rank 0 waits for rank 1, which sleeps. Rank 0 gets SIGTERM from a shell that is not its parent;
    # rank 1 gets SIGINT from this test, its parent, which Python turns into KeyboardInterrupt.
    job = Job([], nranks=2, env={"LD_PRELOAD": PRELOAD})
    script = os.path.join(job.tmp, "job.py")
    open(script, "w").write(test_watch.JOB)
    procs = [subprocess.Popen([sys.executable, script, str(rank), job.tmp, "60"], env=job.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in range(2)]
    deadline = time.monotonic() + 30
    while len(job.traces()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # both past their first all-reduce
    shell = subprocess.Popen(["sh", "-c", f"kill -TERM {procs[0].pid}; sleep 3"])
    time.sleep(0.5)
    procs[1].send_signal(signal.SIGINT)
    ends = [p.communicate(timeout=60) for p in procs]
    shell.wait()
    check(procs[0].returncode == -signal.SIGTERM and procs[1].returncode == -signal.SIGINT,
          f"exits {[p.returncode for p in procs]}")
    me, uid = open("/proc/self/comm").read().strip(), os.getuid()
    said = [f"ended by SIGTERM, sent by pid {shell.pid} (sh, uid {uid})",
            f"received SIGINT, sent by pid {os.getpid()} ({me}, its parent, uid {uid})"]
    for rank in range(2):
        check(said[rank] in ends[rank][1], f"rank {rank}'s alert names the sender: {ends[rank][1]}")
    code, summary, _ = job.report("summary", "--json")
    endings = {e["rank"]: e for e in summary["bad_endings"]}
    check(endings[0]["ended"] == f"was killed by SIGTERM, sent by pid {shell.pid} (sh, uid {uid})", endings)
    check(endings[1]["ended"].startswith(f"was killed by SIGINT, sent by pid {os.getpid()} ({me}, its parent, uid {uid})"),
          endings)
    check(endings[0]["signal"] == {"signal": "SIGTERM", "handled": False, "sender_pid": shell.pid, "sender_name": "sh",
                                   "sender_is_parent": False, "sender_uid": uid}, endings[0])
    check(endings[1]["signal"]["handled"] and endings[1]["signal"]["sender_is_parent"], endings[1])
    code, hang, _ = job.report("hang", "--json")
    check(f"sent by pid {os.getpid()}" in hang["verdict"] or f"sent by pid {shell.pid}" in hang["verdict"], hang["verdict"])


if __name__ == "__main__":
    main({f.__name__: f for f in (python_exception_and_exit_status_are_named, exit_status_alone_where_nothing_was_raised,
                                  signal_senders_are_named)})
