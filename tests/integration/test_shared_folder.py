"""The watcher (ncclwatch-report watch) and the shim in a trace folder others can write, as a shared
0777 folder is: every file one leaves for the other is made without following links, under an
exclusive temporary name, in the mode the group setting asks for; every file read there is opened
without following links and without blocking, taken only when it is a small regular file of the
job's user, and believed only when a trace of that user, still running, stands beside it. Each case
builds the hostile folder itself. The tests run as root: another user is uid 65534 (chown)."""
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

from harness import HOSTNCCL_DIR, REPORT, SANITIZED, check, main
from test_watch import PRELOAD, WatchedJob

OTHER_UID = 65534


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def outside_files(tmp, names):
    """Root's own 0600 files outside the folder, which planted links point at: name -> (path, text)."""
    secrets = os.path.join(tmp, "secrets")
    os.makedirs(secrets, exist_ok=True)
    out = {}
    for name in names:
        path = os.path.join(secrets, name)
        with open(path, "w") as f:
            f.write(f"root's {name}\n")
        os.chmod(path, 0o600)
        out[name] = path
    return out


def watcher_follows_no_planted_link():
    # Links at watching, dump-now and verdict.json, planted before the watcher starts, and one at
    # the temporary name it used to publish (verdict.json.tmp.<pid>, its pid being in `watching`).
    tmp = tempfile.mkdtemp(prefix="ncclwatch-links-")
    targets = outside_files(tmp, ["watching", "dump-now", "verdict.json", "verdict.tmp"])

    def plant(folder):
        for name in ("watching", "dump-now", "verdict.json"):
            os.symlink(targets[name], os.path.join(folder, name))

    job = WatchedJob(pause_s=60, stall_s=0.5, plant=plant)
    os.symlink(targets["verdict.tmp"], os.path.join(job.traces, f"verdict.json.tmp.{job.watcher.pid}"))
    marker = job.wait_for(".stalled", 30)
    time.sleep(3)  # the watcher's suspicion, its request for stacks and its verdict
    outs, said = job.finish(kill=True)
    check(marker is not None, "rank 0's watchdog marks its trace stalled")
    for name, path in targets.items():
        text = open(path).read()
        check(text == f"root's {name}\n" and mode(path) == 0o600, f"{path} behind a planted link was written: {text!r}")
    for name in ("watching", "dump-now", "verdict.json"):
        check(os.path.islink(os.path.join(job.traces, name)), f"the planted {name} was replaced, not refused")
    check("HANG SUSPECTED" in said, f"the verdict is still said on stderr: {said}")
    check("verdict.json" in said and "symbolic link" in said, f"the watcher says why verdict.json is not written: {said}")
    check("dump-now" in said, f"the watcher says it could not ask for stacks: {said}")
    check(not [f for f in os.listdir(job.traces) if ".tmp." in f and not os.path.islink(os.path.join(job.traces, f))],
          f"no temporary file is left: {os.listdir(job.traces)}")


def watcher_writes_its_files_under_exclusive_names_and_removes_them():
    # No planted entries: the watcher's own files are regular files, its temporary names are not
    # the predictable ones, and it takes away `watching` and its `dump-now` when it stops.
    job = WatchedJob(pause_s=60, stall_s=0.5)
    watching = os.path.join(job.traces, "watching")
    deadline = time.time() + 10
    while not os.path.exists(watching) and time.time() < deadline:
        time.sleep(0.05)
    check(os.path.isfile(watching) and not os.path.islink(watching), "the watcher marks the folder")
    verdict = job.wait_for("verdict.json", 20)
    check(verdict is not None and not os.path.islink(verdict), "the watcher writes verdict.json")
    dump_now = os.path.join(job.traces, "dump-now")
    check(os.path.isfile(dump_now), "the watcher asked for stacks")
    outs, said = job.finish(kill=True)
    check(json.load(open(verdict))["live"] is True, "verdict.json is whole")
    left = sorted(os.listdir(job.traces))
    check("watching" not in left and "dump-now" not in left and not [f for f in left if ".tmp." in f],
          f"the watcher's own files went with it: {left}")


def watcher_reads_no_fifo_nor_huge_file():
    # FIFOs named like markers and progress files blocked the watcher forever; a 100 GB sparse
    # marker, or a link to /dev/zero, made it read without limit. Beside them a real stall must
    # still get its verdict.
    def plant(folder):
        os.mkfifo(os.path.join(folder, "fifo.nwt.stalled"))
        os.mkfifo(os.path.join(folder, "fifo.nwt.progress"))
        with open(os.path.join(folder, "huge.nwt.stalled"), "wb") as f:
            f.truncate(100 << 30)
        with open(os.path.join(folder, "huge.nwt.progress"), "wb") as f:
            f.truncate(100 << 30)
        os.symlink("/dev/zero", os.path.join(folder, "zero.nwt.stalled"))
        os.symlink("/dev/zero", os.path.join(folder, "zero.nwt.progress"))
        other = os.path.join(folder, "other.nwt.stalled")
        open(other, "w").write("someone else's stall\n")
        os.chown(other, OTHER_UID, OTHER_UID)

    job = WatchedJob(pause_s=60, stall_s=0.5, lag_s=1, plant=plant)
    verdict = job.wait_for("verdict.json", 20)
    pid = job.watcher.pid
    rss_kib = int(next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("VmHWM:")))
    outs, said = job.finish(kill=True)
    check(verdict is not None, f"the stall beside the hostile files gets its verdict: {said}")
    check(rss_kib < 200 * 1024, f"the watcher's peak memory: {rss_kib} KiB")
    for name, why in (("fifo.nwt.stalled", "FIFO"), ("fifo.nwt.progress", "FIFO"), ("huge.nwt.stalled", "bytes"),
                      ("huge.nwt.progress", "bytes"), ("zero.nwt.stalled", "symbolic link"),
                      ("zero.nwt.progress", "symbolic link"), ("other.nwt.stalled", f"uid {OTHER_UID}")):
        lines = [line for line in said.splitlines() if name in line and "ignored" in line]
        check(len(lines) == 1 and why in lines[0], f"{name} is ignored, said once ({why}): {lines}\n{said}")
    check("someone else's stall" not in said, f"another user's marker is not believed: {said}")


def finished_job(pause_s=0.2):
    job = WatchedJob(pause_s=pause_s, stall_s=5)
    outs, _ = job.finish()
    check(all("done" in out for out, _ in outs), f"the job ran to its end: {outs}")
    return job


def run_watcher(folder, seconds, *args):
    watcher = subprocess.Popen([REPORT, "watch", folder, "--interval", "0.2", *args], stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    watcher.send_signal(signal.SIGTERM)
    try:
        _, said = watcher.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        watcher.kill()
        raise AssertionError("the watcher did not stop within 30 s of SIGTERM")
    return said


def planted_progress_raises_no_alarm_on_a_finished_job():
    job = finished_job()
    traces = sorted(f for f in os.listdir(job.traces) if f.endswith(".nwt"))
    check(len(traces) == 2, f"two traces: {traces}")
    comm = json.loads(subprocess.run([REPORT, "hang", "--json", job.traces], capture_output=True, text=True).stdout)
    comm_id = comm["comms"][0]["comm"]
    # Progress files beside the finished ranks' traces (left by someone of the job's user), and a
    # pair of another user's naming ranks of no trace, each claiming rank 1 lags rank 0.
    for stem, rank, issued in ((traces[0], 0, 9), (traces[1], 1, 2)):
        open(os.path.join(job.traces, stem + ".progress"), "w").write(f"ncclwatch-progress 1\ncomm {comm_id} {rank} 2 {issued}\n")
    for stem, rank, issued in (("evil-1-1.nwt", 0, 9), ("evil-2-2.nwt", 1, 2)):
        path = os.path.join(job.traces, stem + ".progress")
        open(path, "w").write(f"ncclwatch-progress 1\ncomm {comm_id} {rank} 2 {issued}\n")
        os.chown(path, OTHER_UID, OTHER_UID)
    said = run_watcher(job.traces, 4, "--lag", "0.5")
    check("HANG SUSPECTED" not in said, f"no alarm on a finished job from its progress files: {said}")
    open(os.path.join(job.traces, traces[1] + ".stalled"), "w").write("a stall that ended with the job\n")
    said = run_watcher(job.traces, 3, "--lag", "0.5")
    check("HANG SUSPECTED" not in said, f"no alarm on a finished job from a marker: {said}")
    check(not os.path.exists(os.path.join(job.traces, "verdict.json")), "no verdict is written")


def marker_text_reaches_stderr_escaped():
    # A marker's line is printed in the watcher's alarm: its control characters (a terminal title,
    # a colour, a bell) are shown as escapes, never sent to the terminal.
    job = WatchedJob(pause_s=60, stall_s=60)
    trace = job.wait_for(".nwt", 30)
    time.sleep(0.5)
    open(trace + ".stalled", "w").write("stalled \x1b]0;owned\x07\x1b[31mred\x1b[0m \x08\x7f here\n")
    verdict = job.wait_for("verdict.json", 15)
    outs, said = job.finish(kill=True)
    check(verdict is not None and "HANG SUSPECTED" in said, f"the marker is believed: {said}")
    check(not any(c in said for c in "\x1b\x07\x08\x7f"), f"no control character reaches stderr: {said!r}")
    check("\\x1b]0;owned\\x07\\x1b[31mred" in said, f"they are shown escaped: {said!r}")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_bytes(pid):
    return int(next(line.split()[1] for line in open(f"/proc/{pid}/io") if line.startswith("rchar:")))


def toggled_marker_costs_the_watcher_little():
    # A marker beside a large trace (a killed process's: it has no end), made and removed every
    # 0.7 s: each appearance was a new suspicion, and a re-read of every trace.
    job = WatchedJob(pause_s=60, stall_s=60)
    check(job.wait_for(".nwt", 30) is not None, "the job started")
    time.sleep(1.0)
    for p in job.ranks:
        p.kill()
    job.finish()
    big = sorted(os.path.join(job.traces, f) for f in os.listdir(job.traces) if f.endswith(".nwt"))[0]
    with open(big, "ab") as f:  # 200 MB the reader steps over, as a damaged trace's
        chunk = b"\xa5" * (1 << 20)
        for _ in range(200):
            f.write(chunk)
    marker = big + ".stalled"
    watcher = subprocess.Popen([REPORT, "watch", job.traces, "--interval", "0.2"], stderr=subprocess.PIPE, text=True)
    started = time.time()
    while time.time() - started < 20:
        open(marker, "w").write("stalled: toggled\n")
        time.sleep(0.35)
        os.unlink(marker)
        time.sleep(0.35)
    cpu, bytes_read = cpu_seconds(watcher.pid), read_bytes(watcher.pid)
    watcher.send_signal(signal.SIGTERM)
    _, said = watcher.communicate(timeout=30)
    print(f"watcher over 20 s of toggling: {cpu:.2f} s of CPU, {bytes_read / 1e6:.0f} MB read, "
          f"{said.count('HANG SUSPECTED')} alarm(s)")
    check("HANG SUSPECTED" in said, f"the stall is said: {said}")
    # Unlimited, it read the traces 10 times (4 GB: a load reads a file twice) for 3.2 s of CPU.
    traces_bytes = sum(os.path.getsize(os.path.join(job.traces, f)) for f in os.listdir(job.traces) if f.endswith(".nwt"))
    check(SANITIZED or cpu < 2.0, f"the watcher took {cpu:.2f} s of CPU in 20 s")
    check(bytes_read < 6 * 2 * traces_bytes, f"the watcher read {bytes_read / 1e6:.0f} MB in 20 s (the traces: "
          f"{traces_bytes / 1e6:.0f} MB): more than one load in 5 s")
    check(said.count("HANG SUSPECTED") <= 5, f"alarms are rate limited: {said.count('HANG SUSPECTED')}")


# One rank in gpu mode (the GPU-timing thread answers `dump-now`): a communicator, an all-reduce,
# `threads` threads asleep deep in calls with long names, a wait, then a second communicator that
# it never destroys, like the first.
ONE_RANK_JOB = r'''
import ctypes, os, sys, threading, time
threads, seconds, ready = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
nccl = ctypes.CDLL("libnccl.so.2")
cuda = ctypes.CDLL("libcuda.so.1")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def new_comm():
    uid = UniqueId()
    assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
    comm = ctypes.c_void_p()
    assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
    return comm


def a_function_with_a_name_long_enough_to_fill_stack_records(depth):
    if depth:
        return a_function_with_a_name_long_enough_to_fill_stack_records(depth - 1)
    time.sleep(seconds + 30)


first = new_comm()
data = (ctypes.c_float * 64)()
assert nccl.ncclAllReduce(data, data, 64, 7, 0, first, None) == 0
cuda.cuStreamSynchronize(None)
for _ in range(threads):
    threading.Thread(target=a_function_with_a_name_long_enough_to_fill_stack_records, args=(40,), daemon=True).start()
open(ready, "w").close()
time.sleep(seconds)
later = new_comm()
print("done", flush=True)
'''


def ask_for_stacks(folder):
    """What the watcher does: a new dump-now, renamed into place."""
    temporary = os.path.join(folder, ".dump-now.test")
    open(temporary, "w").write(f"{int(time.time())}\n")
    os.rename(temporary, os.path.join(folder, "dump-now"))


def one_rank_job(threads, seconds, env=None, plant=None, during=None):
    """Runs ONE_RANK_JOB; `during(folder)` is called every 0.45 s while it waits. Returns
    (its stderr, its trace's Stacks records, the folder)."""
    tmp = tempfile.mkdtemp(prefix="ncclwatch-stacks-")
    folder = os.path.join(tmp, "traces")
    os.makedirs(folder)
    if plant:
        plant(folder)
    script, ready = os.path.join(tmp, "job.py"), os.path.join(tmp, "ready")
    open(script, "w").write(ONE_RANK_JOB)
    env = dict(os.environ, LD_PRELOAD=PRELOAD, NCCLWATCH_DIR=folder,
               LD_LIBRARY_PATH=HOSTNCCL_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", ""), **(env or {}))
    proc = subprocess.Popen([sys.executable, script, str(threads), str(seconds), ready], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not os.path.exists(ready) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    started = time.time()
    time.sleep(1.5)  # the GPU-timing thread's first look at the folder
    while during and time.time() - started < seconds - 1:
        during(folder)
        time.sleep(0.45)
    out, err = proc.communicate(timeout=60)
    check(proc.returncode == 0 and "done" in out, f"the job ran to its end: {proc.returncode} {err}")
    traces = [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".nwt")]
    check(len(traces) == 1, f"one trace: {traces}")
    dump = subprocess.run([REPORT, "dump", traces[0]], capture_output=True, text=True).stdout
    stacks = [r for r in map(json.loads, dump.splitlines()) if r.get("type") == "stacks"]
    return err, stacks, folder


def future_dump_now_blinds_no_later_request():
    # A dump-now dated a day ahead, planted before the job started: later requests (older than it)
    # went unanswered.
    def plant(folder):
        path = os.path.join(folder, "dump-now")
        open(path, "w").write("0\n")
        ahead = time.time() + 86400
        os.utime(path, (ahead, ahead))

    asked = []

    def ask_once(folder):
        if not asked:
            ask_for_stacks(folder)
            asked.append(time.time())

    err, stacks, _ = one_rank_job(0, 5, plant=plant, during=ask_once)
    check(asked and [s for s in stacks if s.get("reason") == "requested"],
          f"the request made while the job ran is answered: {stacks} {err}")


def dump_now_answers_are_rate_limited():
    # A dump-now renewed every 0.45 s: answered at most once in 5 s.
    err, stacks, _ = one_rank_job(0, 12, during=ask_for_stacks)
    answered = [s for s in stacks if s.get("reason") == "requested"]
    check(1 <= len(answered) <= 3, f"{len(answered)} answers in about 10 s of requests every 0.45 s")


def stacks_never_crowd_out_lifecycle_records():
    # At NCCLWATCH_MAX_MB=2, large stacks asked for every 0.45 s filled the history: a
    # communicator made later was missing from `leaks`.
    err, stacks, folder = one_rank_job(16, 14, env={"NCCLWATCH_MAX_MB": "2"}, during=ask_for_stacks)
    leaks = json.loads(subprocess.run([REPORT, "leaks", "--json", folder], capture_output=True, text=True).stdout)["leaks"]
    check(len([l for l in leaks if l["kind"] == "communicator"]) == 2, f"both communicators leaked: {leaks}")
    check("reached NCCLWATCH_MAX_MB" not in err, f"no lifecycle record is lost: {err}")
    said = [line for line in err.splitlines() if "stacks" in line and "share" in line]
    check(len(said) == 1, f"the stacks' budget spent is said once: {err}")
    written = sum(len(json.dumps(s)) for s in stacks)
    print(f"{len(stacks)} Stacks record(s), {written >> 10} KiB")
    check(stacks and written < 200 << 10, f"some stacks are written, within their share: {len(stacks)}, {written} B")


def progress_and_stall_files_follow_the_group_setting():
    # `.progress` and `.stalled` were 0644 whatever NCCLWATCH_GROUP_READABLE said.
    for group_readable, want in (("0", 0o600), ("1", 0o640)):
        job = WatchedJob(pause_s=60, stall_s=0.5, lag_s=60, env={"NCCLWATCH_GROUP_READABLE": group_readable})
        marker = job.wait_for(".stalled", 30)
        progress = job.wait_for(".progress", 30)
        modes = {p: oct(mode(p)) for p in (marker, progress) if p}
        traces = {os.path.join(job.traces, f): oct(mode(os.path.join(job.traces, f)))
                  for f in os.listdir(job.traces) if f.endswith(".nwt")}
        job.finish(kill=True)
        check(marker and progress and all(m == oct(want) for m in modes.values()),
              f"GROUP_READABLE={group_readable}: {modes} (the traces: {traces})")


def host_name_with_a_slash_stays_in_the_folder():
    # A host name is whatever sethostname() was given: "../../x" put the trace two folders up.
    tmp = tempfile.mkdtemp(prefix="ncclwatch-host-")
    folder = os.path.join(tmp, "a", "b", "traces")
    os.makedirs(folder)
    script, ready = os.path.join(tmp, "job.py"), os.path.join(tmp, "ready")
    open(script, "w").write(ONE_RANK_JOB)
    host = "../../escaped\x1b[31m"
    named = ("import ctypes, os, sys; name = sys.argv[1].encode(); "
             "assert ctypes.CDLL(None, use_errno=True).sethostname(name, len(name)) == 0, 'sethostname'; "
             "os.execv(sys.executable, [sys.executable] + sys.argv[2:])")
    env = dict(os.environ, LD_PRELOAD=PRELOAD, NCCLWATCH_DIR=folder,
               LD_LIBRARY_PATH=HOSTNCCL_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    user = [] if os.geteuid() == 0 else ["-r"]
    proc = subprocess.run(["unshare", *user, "-u", sys.executable, "-c", named, host, script, "0", "0", ready],
                          env=env, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and ("sethostname" in proc.stderr or "unshare:" in proc.stderr):
        print(f"note: no UTS namespace here: {proc.stderr}")
        return
    check(proc.returncode == 0, f"the job ran: {proc.stderr}")
    escaped = [os.path.join(dirpath, f) for dirpath, _, files in os.walk(tmp) for f in files if f.endswith(".nwt")]
    check(len(escaped) == 1 and os.path.dirname(escaped[0]) == folder, f"the trace is in the folder: {escaped}")
    name = os.path.basename(escaped[0])
    check(all(c.isalnum() or c in "._-" for c in name), f"its name is made of safe characters: {name!r}")
    header_host = open(escaped[0], "rb").read(4096)[48:112].split(b"\0")[0].decode()
    check(header_host == host, f"the trace keeps the real host name: {header_host!r}")


if __name__ == "__main__":
    main({f.__name__: f for f in [watcher_follows_no_planted_link,
                                  watcher_writes_its_files_under_exclusive_names_and_removes_them,
                                  watcher_reads_no_fifo_nor_huge_file,
                                  planted_progress_raises_no_alarm_on_a_finished_job,
                                  marker_text_reaches_stderr_escaped,
                                  toggled_marker_costs_the_watcher_little,
                                  future_dump_now_blinds_no_later_request,
                                  dump_now_answers_are_rate_limited,
                                  stacks_never_crowd_out_lifecycle_records,
                                  progress_and_stall_files_follow_the_group_setting,
                                  host_name_with_a_slash_stays_in_the_folder]})
