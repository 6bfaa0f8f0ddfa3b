"""The hang verdict while the job still runs (ncclwatch-report watch), with where each rank's Python
is, on the CPU stand-in: a Python job of two ranks (ctypes, as PyTorch's C++ would call NCCL) in
which rank 1 stops in a sleep before the second all-reduce. The ranks may run as two hosts (each
in a UTS namespace of its own, named node-a and node-b) writing into one shared folder."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from harness import HOSTNCCL_DIR, REPORT, SANITIZED, SANITIZER_RUNTIME, SHIM, check, main

PRELOAD = f"{SANITIZER_RUNTIME} {SHIM}" if SANITIZER_RUNTIME else SHIM

JOB = r'''
import ctypes, os, sys, time
rank, folder, pause = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
nccl = ctypes.CDLL("libnccl.so.2")
cuda = ctypes.CDLL("libcuda.so.1")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


uid = UniqueId()
path = os.path.join(folder, "uid")
if rank == 0:
    assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
    open(path + ".tmp", "wb").write(bytes(uid))
    os.rename(path + ".tmp", path)
else:
    while not os.path.exists(path):
        time.sleep(0.01)
    ctypes.memmove(ctypes.byref(uid), open(path, "rb").read(), 128)
comm = ctypes.c_void_p()
assert nccl.ncclCommInitRank(ctypes.byref(comm), 2, uid, rank) == 0
data = (ctypes.c_float * 64)()


def all_reduce():
    assert nccl.ncclAllReduce(data, data, 64, 7, 0, comm, None) == 0  # float, sum


def load_batch():
    time.sleep(pause)  # LOAD_LINE


all_reduce()
if rank == 1:
    load_batch()
all_reduce()
cuda.cuStreamSynchronize(None)  # WAIT_LINE
print("done", flush=True)
'''


def line_of(marker):
    return next(i for i, text in enumerate(JOB.split("\n"), start=1) if marker in text)


class WatchedJob:
    """The two ranks and a watcher over their trace folder."""

    def __init__(self, pause_s, stall_s, lag_s=None, hosts=None, plant=None, env=None):
        self.tmp = tempfile.mkdtemp(prefix="ncclwatch-watch-")
        self.traces = os.path.join(self.tmp, "traces")
        os.makedirs(self.traces)
        if plant:  # what others left in the folder before the watcher and the job start
            plant(self.traces)
        self.script = os.path.join(self.tmp, "job.py")
        open(self.script, "w").write(JOB)
        env = dict(os.environ, LD_PRELOAD=PRELOAD, NCCLWATCH_DIR=self.traces, NCCLWATCH_STALL_SEC=str(stall_s),
                   LD_LIBRARY_PATH=HOSTNCCL_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", ""), **(env or {}))
        self.metrics = os.path.join(self.tmp, "hang.prom")
        lag = ["--lag", str(lag_s)] if lag_s is not None else []
        self.watcher = subprocess.Popen([REPORT, "watch", self.traces, "--interval", "0.2", "--metrics-file", self.metrics,
                                         *lag], stderr=subprocess.PIPE, text=True)
        self.started = time.time()

        def command(rank):
            argv = [sys.executable, self.script, str(rank), self.tmp, str(pause_s)]
            if not hosts:
                return argv
            # A host of its own: a UTS namespace (in a user namespace when not root) named hosts[rank].
            user = [] if os.geteuid() == 0 else ["-r"]
            return ["unshare", *user, "-u", "sh", "-c", f'hostname {hosts[rank]} && exec "$@"', "sh", *argv]
        self.ranks = [subprocess.Popen(command(r), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                      for r in (0, 1)]

    def wait_for(self, name, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = [f for f in os.listdir(self.traces) if f.endswith(name)]
            if found:
                return os.path.join(self.traces, found[0])
            time.sleep(0.05)
        return None

    def finish(self, kill=False, linger_s=0.0):
        for p in self.ranks:
            if kill and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        outs = [p.communicate(timeout=60) for p in self.ranks]
        time.sleep(linger_s)  # the watcher's last looks at the folder
        self.watcher.send_signal(signal.SIGTERM)
        try:
            _, said = self.watcher.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.watcher.kill()
            _, said = self.watcher.communicate()
            raise AssertionError(f"the watcher did not stop within 30 s of SIGTERM; it said: {said}")
        return outs, said


def stalled_job_gets_its_verdict_live():
    job = WatchedJob(pause_s=60, stall_s=0.5)
    marker = job.wait_for(".stalled", 30)
    check(marker is not None, "rank 0's watchdog marks its trace stalled")
    stalled_at = os.stat(marker).st_mtime
    verdict_file = job.wait_for("verdict.json", 15)
    check(verdict_file is not None, "the watcher writes verdict.json")
    delay = os.stat(verdict_file).st_mtime - stalled_at
    live = json.load(open(verdict_file))
    series = open(job.metrics).read()
    outs, said = job.finish(kill=True)
    check('ncclwatch_hang_suspected{comm="' + live["comms"][0]["comm"] + '",rank="1",seq="2"} 1' in series,
          f"the verdict as a series: {series}")
    check(SANITIZED or delay <= 2.0, f"the verdict {delay:.2f} s after the stall")
    world = live["comms"][0]
    check([m["rank"] for m in world["missing"]] == [1] and world["missing"][0]["first_missing_seq"] == 2,
          f"rank 1 never issued seq 2: {world['missing']}")
    load, wait = f"job.py:{line_of('LOAD_LINE')} (load_batch)", f"job.py:{line_of('WAIT_LINE')} (<module>)"
    check(world["missing"][0].get("where") == load, f"rank 1's Python line: {world['missing'][0]}")
    where = {r["rank"]: r.get("where") for r in world["per_rank"]}
    check(where == {0: wait, 1: load}, f"each rank's Python line: {where}")
    check(f"rank 1's Python is at {load}" in live["verdict"] and f"rank(s) 0 wait at {wait}" in live["verdict"],
          f"the verdict says where: {live['verdict']}")
    check("HANG SUSPECTED" in said and live["verdict"] in said, f"the watcher said it on stderr: {said}")
    after = json.loads(subprocess.run([REPORT, "hang", "--json", job.traces], capture_output=True, text=True).stdout)
    check(after["comms"][0]["missing"][0]["first_missing_seq"] == 2 and after["comms"][0]["missing"][0]["rank"] == 1,
          f"hang afterwards agrees: {after['comms'][0]['missing']}")


def slow_job_gets_no_verdict_and_a_resolved_stall_is_said_once():
    # Rank 1 is late by 1.5 s once: the watchdog (0.5 s) sees a stall that resolves.
    job = WatchedJob(pause_s=1.5, stall_s=0.5)
    outs, said = job.finish(linger_s=2.0)
    check(all("done" in out for out, _ in outs), f"the job ran to its end: {outs}")
    check(said.count("HANG SUSPECTED") == 1 and said.count("every stall resolved") == 1,
          f"a stall, and its resolution, are said once: {said}")
    check(not any(f.endswith(".stalled") for f in os.listdir(job.traces)), "no marker is left")
    check("ncclwatch_hang_suspected 0" in open(job.metrics).read(), "the series says 0 once resolved")
    quiet = WatchedJob(pause_s=0.2, stall_s=5)
    outs, said = quiet.finish(linger_s=1.0)
    check(said == "" and not os.path.exists(os.path.join(quiet.traces, "verdict.json")),
          f"a slow but well job gets nothing: {said!r}")


def can_name_hosts():
    probe = subprocess.run(["unshare", *([] if os.geteuid() == 0 else ["-r"]), "-u", "sh", "-c", "hostname node-a"],
                           capture_output=True)
    return probe.returncode == 0


def host_stuck_rank_on_another_host_named_before_the_watchdog():
    # Two hosts, one shared folder, one watcher; the watchdog is far off (60 s): the job-level rule
    # (rank 1 behind rank 0 in collectives issued for 1 s) gives the verdict.
    hosts = ("node-a", "node-b") if can_name_hosts() else None
    if not hosts:
        print("note: no UTS namespace here (unshare -u); the two ranks run as one host")
    job = WatchedJob(pause_s=60, stall_s=60, lag_s=1, hosts=hosts)
    verdict_file = job.wait_for("verdict.json", 20)
    seconds = time.time() - job.started
    check(verdict_file is not None, "the watcher writes verdict.json")
    stalled = [f for f in os.listdir(job.traces) if f.endswith(".stalled")]
    live = json.load(open(verdict_file))
    outs, said = job.finish(kill=True)
    check(not stalled, f"no watchdog had fired: {stalled}")
    check(SANITIZED or seconds <= 8, f"the verdict {seconds:.1f} s after the job started (lag 1 s)")
    world = live["comms"][0]
    missing = world["missing"]
    check([m["rank"] for m in missing] == [1] and missing[0]["first_missing_seq"] == 2, f"rank 1 never issued seq 2: {missing}")
    load = f"job.py:{line_of('LOAD_LINE')} (load_batch)"
    check(missing[0].get("where") == load, f"rank 1's Python line: {missing[0]}")
    check("HANG SUSPECTED (rank 1 of comm" in said and "has not issued collective 2" in said,
          f"the watcher says why it suspects a hang: {said}")
    if hosts:
        by_rank = {r["rank"]: r["host"] for r in world["per_rank"]}
        check(by_rank == {0: "node-a", 1: "node-b"}, f"each rank on its host: {by_rank}")
    check(not any(f.endswith(".progress") for f in os.listdir(job.traces)), "the progress files went with the processes")
    check(not os.path.exists(os.path.join(job.traces, "watching")), "the watcher's mark went with it")


if __name__ == "__main__":
    main({f.__name__: f for f in [stalled_job_gets_its_verdict_live,
                                  slow_job_gets_no_verdict_and_a_resolved_stall_is_said_once,
                                  host_stuck_rank_on_another_host_named_before_the_watchdog]})
