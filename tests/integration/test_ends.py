"""A program's own signal handling and the ways its image ends, with and without the shim: each
scenario of apps/ends_app.cc must end with the same status and say the same under the shim, and
its trace must say how the image ended."""
import json
import os
import resource
import signal
import subprocess
import tempfile
import time

from harness import HOSTNCCL_DIR, REPORT, SANITIZED, SHIM, app, check, main, skip


def run(args, preload=True, env=None, timeout=30, address_space=None):
    """Runs ends_app once; returns (status, stdout, stderr, trace dir)."""
    trace_dir = os.path.join(tempfile.mkdtemp(prefix="ncclwatch-ends-"), "traces")
    full = dict(os.environ)
    full.update({"NCCLWATCH_DIR": trace_dir, "LD_LIBRARY_PATH": HOSTNCCL_DIR + ":" + full.get("LD_LIBRARY_PATH", "")})
    full.pop("LD_PRELOAD", None)
    if preload:
        full["LD_PRELOAD"] = SHIM
    full.update(env or {})

    def default_signals():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGBUS):
            signal.signal(sig, signal.SIG_DFL)
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    proc = subprocess.run([app("ends_app"), *args], env=full, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=default_signals)
    return proc.returncode, proc.stdout, proc.stderr, trace_dir


def same_with_and_without_shim(args, env=None, address_space=None):
    """The scenario's status and output under the shim, checked against a run without it."""
    plain = run(args, preload=False, env=env, address_space=address_space)
    traced = run(args, env=env, address_space=address_space)
    check(plain[0] == traced[0] and plain[1] == traced[1],
          f"{args}: without the shim exit {plain[0]}, out {plain[1]!r}; with it exit {traced[0]}, out {traced[1]!r}, "
          f"err {traced[2][-800:]}")
    return traced


def dump(trace_dir):
    records = []
    for name in sorted(os.listdir(trace_dir)):
        if not name.endswith(".nwt"):
            continue
        out = subprocess.run([REPORT, "dump", os.path.join(trace_dir, name)], capture_output=True, text=True,
                             timeout=60).stdout
        records.append([json.loads(line) for line in out.splitlines() if line.strip()])
    return records


def summary(trace_dir):
    proc = subprocess.run([REPORT, "summary", trace_dir], capture_output=True, text=True, timeout=60)
    js = subprocess.run([REPORT, "summary", "--json", trace_dir], capture_output=True, text=True, timeout=60)
    return proc.stdout, json.loads(js.stdout)


def one_shot_handlers_run_once():
    """A one-shot handler (SA_RESETHAND, or System V signal() as -std=c99 gives) runs once; the
    second signal kills, by that signal, installed before or after the shim's."""
    for scenario in ("one-shot", "system-v", "one-shot-after"):
        for sig in (signal.SIGBUS, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            status, out, err, _ = same_with_and_without_shim([scenario, str(int(sig))])
            check(status == -sig and "handled 1" in out and "survived" not in out,
                  f"{scenario} {sig.name}: exit {status}, out {out!r}, err {err[-500:]}")
            if scenario == "one-shot-after":
                check("query gives the handler: 1" in out and "reset to default: 1" in out,
                      f"{scenario} {sig.name}: sigaction() did not answer as the kernel would: {out!r}")


def handler_installed_later_stays_behind_the_guard():
    """A SIGBUS handler the application installs after the shim's never receives the shim's own
    fault (its trace truncated under it): the job runs on, and the shim says so once."""
    status, out, err, _ = run(["late-bus-handler"])
    check(status == 0 and "ran on" in out, f"exit {status}, out {out!r}, err {err[-800:]}")
    check("SIGBUS handler ran" not in err, f"the application's handler got the shim's fault: {err[-800:]}")
    check(err.count("was truncated by another process") == 1, f"the loss is not said once: {err[-800:]}")


def ignored_bus_error_stays_ignored():
    """SIGBUS set to SIG_IGN before the first NCCL call: `kill -BUS` is still ignored, and sigaction()
    still says SIG_IGN."""
    status, out, err, _ = same_with_and_without_shim(["ignored-bus"])
    check(status == 0 and "survived" in out and "still ignored: 1" in out, f"exit {status}, out {out!r}, err {err[-500:]}")


def alternate_stack_is_kept():
    """The application's SA_ONSTACK handler runs on its alternate stack, reached from a thread whose
    64 KiB stack is nearly used up: it recovers, as without the shim."""
    if SANITIZED:
        skip("a sanitizer's instrumented frames need more than the 1 KiB the test leaves")
    status, out, err, _ = same_with_and_without_shim(["alternate-stack"])
    check(status == 0 and "recovered on the alternate stack: 1" in out, f"exit {status}, out {out!r}, err {err[-500:]}")


def process_end(records):
    ends = [r for r in records if r.get("type") == "process_end"]
    return ends[-1] if ends else None


def check_ended_cleanly(trace_dir, what):
    """Every op completed and timed, nothing 'killed or crashed', no look-first."""
    text, js = summary(trace_dir)
    check(js.get("processes_without_final_record") == 0, f"{what}: a trace without its final record:\n{text}")
    check("never completed" not in text and "killed" not in text, f"{what}: the summary says something false:\n{text}")


def quick_exit_ends_the_trace_as_it_is():
    """_exit(3) with a communicator alive: the same status, the alert, and a trace ending in
    process_end with reason quick_exit and status 3, its ops all timed (gpu timing)."""
    status, out, err, trace_dir = same_with_and_without_shim(["quick-exit", "3"], env={"NCCLWATCH_SAMPLE": "1"})
    check(status == 3, f"exit {status}")
    check("1 communicator(s) never destroyed" in err, f"no alert at _exit: {err[-800:]}")
    (records,) = dump(trace_dir)
    end = process_end(records)
    check(end and end.get("reason") == "quick_exit" and end.get("status") == 3, f"the trace's end: {end}")
    check_ended_cleanly(trace_dir, "_exit")


def forked_worker_ending_by_quick_exit():
    """A forked worker that uses NCCL and ends by _exit(0) (as multiprocessing's do): its trace ends
    as it did; the parent, which never called NCCL, leaves no trace."""
    status, out, err, trace_dir = same_with_and_without_shim(["forked-worker"], env={"NCCLWATCH_SAMPLE": "1"})
    check(status == 0 and "worker status 0" in out, f"exit {status}, out {out!r}, err {err[-500:]}")
    traces = dump(trace_dir)
    check(len(traces) == 1, f"{len(traces)} traces, expected the worker's alone")
    end = process_end(traces[0])
    check(end and end.get("reason") == "quick_exit" and end.get("status") == 0, f"the worker's end: {end}")
    check_ended_cleanly(trace_dir, "forked worker")


def exec_ends_the_image_and_its_trace():
    """An exec replaces the image with its communicator alive: the alert, then the new program runs;
    the trace ends with reason exec."""
    status, out, err, trace_dir = same_with_and_without_shim(["exec", "ok"], env={"NCCLWATCH_SAMPLE": "1"})
    check(status == 0 and "replaced by sh" in out, f"exit {status}, out {out!r}")
    check("1 communicator(s) never destroyed" in err, f"no alert before exec: {err[-800:]}")
    traces = dump(trace_dir)
    check(len(traces) == 1, f"{len(traces)} traces (sh calls no NCCL: only the first image's)")
    end = process_end(traces[0])
    check(end and end.get("reason") == "exec", f"the trace's end: {end}")
    check_ended_cleanly(trace_dir, "exec")


def failed_exec_goes_on():
    """An exec that fails returns: the program goes on, its later calls are traced, and the trace
    ends with the real end (a normal exit, nothing leaked)."""
    status, out, err, trace_dir = same_with_and_without_shim(["exec", "failing"])
    check(status == 0 and "exec failed, going on" in out, f"exit {status}, out {out!r}, err {err[-500:]}")
    (records,) = dump(trace_dir)
    end = process_end(records)
    check(end and end.get("reason") == "exited" and end.get("status") == 0, f"the trace's end: {end}")
    code, _ = subprocess.run([REPORT, "leaks", trace_dir], capture_output=True, text=True).returncode, None
    check(code == 0, f"leaks finds something after a failed exec and a clean end: exit {code}")


def address_space_limit_leaves_the_application_its_room():
    """Under `ulimit -v` (2 GiB here; NCCLWATCH_TEST_ADDRESS_SPACE_GIB on a GPU, where CUDA needs
    more) an allocation of all but 512 MiB of what the program has left after its first NCCL call
    without the shim succeeds under it too: the trace's reserved range counts against the limit, so
    it takes a small share of it, and says so once."""
    if SANITIZED:
        skip("a sanitizer's shadow memory takes terabytes of address space: no program runs under 2 GiB")
    limit = int(os.environ.get("NCCLWATCH_TEST_ADDRESS_SPACE_GIB", "2")) << 30
    _, out, err, _ = run(["large-allocation", "0"], preload=False, address_space=limit)
    check("headroom " in out, f"no headroom measured: {out!r} {err[-500:]}")
    mib = int(out.split("headroom ")[1].split()[0]) - 512
    status, out, err, trace_dir = same_with_and_without_shim(["large-allocation", str(mib)], address_space=limit)
    check(status == 0 and f"allocated {mib} MiB: 1" in out, f"exit {status}, out {out!r}, err {err[-500:]}")
    check(err.count("the address space is limited") == 1, f"the smaller trace is not said once: {err[-500:]}")
    text, js = summary(trace_dir)
    check(js.get("processes_without_final_record") == 0, f"the limited trace lost its end:\n{text}")
    print(f"limit {limit >> 20} MiB: allocated {mib} MiB with and without the shim")


def driver_probes_get_the_drivers_answers():
    """dlsym of a driver function the driver lacks (the stand-in has no cuStreamBeginCaptureToGraph)
    finds nothing under the shim either, by RTLD_DEFAULT, RTLD_NEXT or the program's handle; the
    functions it has are found as before."""
    status, out, err, _ = same_with_and_without_shim(["probe-driver"])
    check(status == 0 and "cuGraphLaunch: default 1" in out and "cuStreamBeginCaptureToGraph: default 0, next 0, program 0" in out,
          f"exit {status}, out {out!r}")


def recapture_every_step_keeps_bounded_state():
    """A loop that re-captures the same all-reduce and updates one exec every step (as XLA does):
    the shim's memory stays flat, repeated captures and updates are summarized in a few records,
    and at NCCLWATCH_MAX_MB=2 no record is lost: the communicator's destroy is in the trace."""
    if SANITIZED:
        skip("a sanitizer's allocator quarantines freed memory: resident growth is its own")
    steps = 20000
    status, out, err, trace_dir = run(["recapture", str(steps)], env={"NCCLWATCH_MAX_MB": "2"}, timeout=120)
    check(status == 0 and "done" in out, f"exit {status}, out {out!r}, err {err[-800:]}")
    growth = int(out.split("resident growth ")[1].split()[0])
    plain = run(["recapture", str(steps)], preload=False, timeout=120)
    plain_growth = int(plain[1].split("resident growth ")[1].split()[0])
    # 168 B a step before: 2.6 MiB over these 18,000 steps.
    check(growth - plain_growth < 512, f"resident memory grew {growth} KiB under the shim, {plain_growth} KiB without")
    (records,) = dump(trace_dir)
    graphs = [r for r in records if r.get("type") == "graph"]
    check(len(graphs) < 100, f"{len(graphs)} graph records for {steps} identical steps")
    check(any("captured again" in r.get("detail", "") for r in graphs), "the repeats are not summarized")
    lost = sum(r.get("count", 0) for r in records if r.get("type") == "lost")
    end = process_end(records)
    check(lost == 0 and end and end.get("lost_records") == 0, f"records lost: {lost}, end {end}")
    code, text, _ = (lambda p: (p.returncode, p.stdout, p.stderr))(
        subprocess.run([REPORT, "leaks", trace_dir], capture_output=True, text=True, timeout=60))
    check(code == 0 and "release_unrecorded" not in text, f"leaks after a clean end: exit {code}\n{text}")


PYTHON_JOB = """
import ctypes
nccl = ctypes.CDLL("libnccl.so.2")
class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]
def make_world():
    uid = UniqueId()
    assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
    comm = ctypes.c_void_p()
    assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0  # the leaked world
    return comm
world = make_world()
print("made", flush=True)
"""


def sandbox_killing_process_vm_readv_costs_nothing():
    """Under a seccomp policy that kills the process at process_vm_readv, a Python job's first
    communicator still gets its Python line, and a watcher's request for stacks still gets a C
    rank's native stack: the shim reads its own memory another way."""
    tmp = tempfile.mkdtemp(prefix="ncclwatch-seccomp-")
    script = os.path.join(tmp, "job.py")
    with open(script, "w") as f:
        f.write(PYTHON_JOB)
    sandbox = [app("seccomp_exec"), "process_vm_readv", "--"]
    trace_dir = os.path.join(tmp, "python")
    env = dict(os.environ)
    env.update({"NCCLWATCH_DIR": trace_dir, "LD_PRELOAD": SHIM,
                "LD_LIBRARY_PATH": HOSTNCCL_DIR + ":" + env.get("LD_LIBRARY_PATH", "")})
    proc = subprocess.run([*sandbox, "python3", script], env=env, capture_output=True, text=True, timeout=60)
    check(proc.returncode == 0 and "made" in proc.stdout, f"the Python job under the policy: exit {proc.returncode}, "
          f"err {proc.stderr[-800:]}")
    check("job.py:10 (make_world)" in proc.stderr, f"the alert lacks the Python line: {proc.stderr[-800:]}")

    trace_dir = os.path.join(tmp, "native")
    env["NCCLWATCH_DIR"] = trace_dir
    busy = subprocess.Popen([*sandbox, app("ends_app"), "busy", "4000"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while time.time() < deadline and not (os.path.isdir(trace_dir) and any(n.endswith(".nwt") for n in os.listdir(trace_dir))):
        time.sleep(0.05)
    time.sleep(1.5)  # the GPU timing thread has had its first look at the folder
    with open(os.path.join(trace_dir, "dump-now"), "w"):
        pass
    out, err = busy.communicate(timeout=30)
    check(busy.returncode == 0 and "done" in out, f"the C rank under the policy: exit {busy.returncode}, err {err[-800:]}")
    (records,) = dump(trace_dir)
    stacks = [r for r in records if r.get("type") == "stacks"]
    check(stacks, "no stacks answered the request")
    native = [s for s in stacks if s.get("native") or s.get("native_unread")]
    check(native and native[0].get("native"), f"the native stack was not read: {native}")


if __name__ == "__main__":
    main({f.__name__: f for f in (one_shot_handlers_run_once, handler_installed_later_stays_behind_the_guard,
                                  ignored_bus_error_stays_ignored, alternate_stack_is_kept,
                                  quick_exit_ends_the_trace_as_it_is, forked_worker_ending_by_quick_exit,
                                  exec_ends_the_image_and_its_trace, failed_exec_goes_on,
                                  address_space_limit_leaves_the_application_its_room,
                                  sandbox_killing_process_vm_readv_costs_nothing, driver_probes_get_the_drivers_answers,
                                  recapture_every_step_keeps_bounded_state)})
