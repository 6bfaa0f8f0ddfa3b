"""The Python line that made each communicator and resource, on every CPython installed here.

A stand-in `torch` package (a folder named torch, as the real one's frames are skipped by path)
makes communicators through ctypes the way PyTorch's C++ would: with the GIL released (CDLL) and
held (PyDLL), from the main thread, a Python thread, a generator, an atexit handler and a
finalizer run while the interpreter shuts down; a native thread Python never saw makes one too.
The reports must name the program's own line for each, skip the library's frames, and never
break the job."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from harness import BUILD, SANITIZER_RUNTIME, SHIM, Job, alert_blocks, check, main

# Under ThreadSanitizer the runtime must come before the instrumented shim: loaded as the shim's
# dependency it comes after libc, whose pthread_create then starts the interpreter's threads
# unseen by TSan, and instrumented code called on them crashes in TSan's entry hook.
PRELOAD = f"{SANITIZER_RUNTIME} {SHIM}" if SANITIZER_RUNTIME else SHIM

FAKE_TORCH = r'''
import ctypes

nccl = ctypes.CDLL("libnccl.so.2")          # releases the GIL around each call
nccl_holding_gil = ctypes.PyDLL("libnccl.so.2")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def _init(lib):
    uid = UniqueId()
    assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0
    comm = ctypes.c_void_p()
    assert lib.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
    return comm


def new_group(hold_gil=False):
    return _init(nccl_holding_gil if hold_gil else nccl)


def _new_process_group_helper(group_size, group_rank, group_name, group_desc="undefined"):
    # As torch.distributed's: the group's communicator is made while its name and description are locals.
    return _init(nccl)


def new_described_group(name, desc):
    return _new_process_group_helper(1, 0, name, group_desc=desc)


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None):
    # As torch.distributed's (DeviceMesh makes its groups so): the name is worked out before the split.
    group_name = "4314d7ee2124be46"
    return _init(nccl)


def alloc(nbytes):
    ptr = ctypes.c_void_p()
    assert nccl.ncclMemAlloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes)) == 0
    return ptr
'''

PROGRAM = r'''
import atexit, ctypes, sys, threading, time
import torch.distributed as dist

keep = []


def main_thread_releasing_gil():
    keep.append(dist.new_group())  # SITE cdll


def main_thread_holding_gil():
    keep.append(dist.new_group(hold_gil=True))  # SITE pydll


def python_thread():
    keep.append(dist.new_group())  # SITE thread


def generator():
    yield dist.new_group()  # SITE generator


class MadeWhileShuttingDown:
    def __del__(self, new_group=dist.new_group, out=sys.stdout):
        new_group()  # SITE finalizer
        out.write("finalizer made a communicator\n")


main_thread_releasing_gil()
main_thread_holding_gil()
worker = threading.Thread(target=python_thread)
worker.start()
worker.join()
keep.extend(generator())
assert ctypes.CDLL(sys.argv[1]).init_on_native_thread() == 0
keep.append(dist.alloc(4096))  # SITE alloc
keep.append(dist.new_described_group("7", "tensor_parallel"))  # SITE described
keep.append(dist.split_group(split_ranks=[[0]], group_desc="mesh_dp"))  # SITE split
for burst in range(2):  # Megatron's pattern: groups remade each cycle, never destroyed
    for _ in range(4):
        keep.append(dist.new_group())  # SITE pile_a
    for _ in range(4):
        keep.append(dist.new_group())  # SITE pile_b
    if burst == 0:
        time.sleep(1.2)
atexit.register(lambda: keep.append(dist.new_group()))  # SITE atexit
late = MadeWhileShuttingDown()
print("program done")
'''

# The innermost frame's function for each marked line (None: not checked).
FUNCTIONS = {"cdll": "main_thread_releasing_gil", "pydll": "main_thread_holding_gil", "thread": "python_thread",
             "generator": "generator", "alloc": "<module>", "pile_a": "<module>", "pile_b": "<module>",
             "atexit": "<lambda>", "described": "<module>", "split": "<module>"}
EXPECTED_COMMS = {"cdll": 1, "pydll": 1, "thread": 1, "generator": 1, "pile_a": 8, "pile_b": 8, "atexit": 1,
                  "described": 1, "split": 1}


def marked_lines(source):
    return {m.group(1): number for number, line in enumerate(source.splitlines(), 1)
            if (m := re.search(r"# SITE (\w+)", line))}


def interpreters():
    """Every CPython 3 found here, one per minor version: the running one, pyenv's, python3.N on PATH."""
    candidates = [sys.executable]
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(os.path.join(pyenv, "versions", "3.*", "bin", "python3")))
    candidates += [f"/usr/bin/python3.{minor}" for minor in range(6, 20)]
    found = {}
    for path in candidates:
        if not os.path.exists(path):
            continue
        try:
            out = subprocess.run([path, "-c", "import sys, ctypes; print(*sys.version_info[:2])"], capture_output=True,
                                 text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0:
            found.setdefault(tuple(map(int, out.stdout.split())), path)
    return found


def run_program(python):
    folder = tempfile.mkdtemp(prefix="ncclwatch-pysite-")
    os.makedirs(os.path.join(folder, "torch"))
    open(os.path.join(folder, "torch", "__init__.py"), "w").close()
    with open(os.path.join(folder, "torch", "distributed.py"), "w") as f:
        f.write(FAKE_TORCH)
    script = os.path.join(folder, "train.py")
    with open(script, "w") as f:
        f.write(PROGRAM)
    native = os.path.join(BUILD, "tests", "integration", "libnative_thread_init.so")
    job = Job([python, script, native], nranks=1,
              env={"PYTHONPATH": folder, "PYTHONDONTWRITEBYTECODE": "1", "LD_PRELOAD": PRELOAD})
    result = job.run()[0]
    check(result.returncode == 0 and "program done" in result.stdout, f"{python}: exit {result.returncode}\n{result.stderr}")
    return job, result, script


def check_known_version(version, job, result, script):
    lines = marked_lines(PROGRAM)
    code, report, err = job.report("leaks", "--json")
    by_line = {}
    for c in report["communicators"]:
        site = c["python_site"]
        check(all("/torch/" not in f["file"] for f in site), f"{version}: the library's frames are skipped: {site}")
        by_line.setdefault(site[0]["line"] if site else None, []).append(c)
    finalizer_ran = "finalizer made a communicator" in result.stdout
    for marker, count in EXPECTED_COMMS.items():
        made = by_line.get(lines[marker], [])
        check(len(made) == count, f"{version}: {count} communicator(s) from line {lines[marker]} ({marker}), got "
                                  f"{len(made)}: {sorted(k for k in by_line if k)}")
        for c in made:
            first = c["python_site"][0]
            check(first["file"] == script and first["function"] == FUNCTIONS[marker],
                  f"{version}: {marker}: {c['python_site']}")
            check(c["created_at"].startswith(f"train.py:{lines[marker]} ({FUNCTIONS[marker]})"), f"{version}: {c['created_at']}")
    # PyTorch's process group, read from its helper's locals where the helper made the communicator.
    groups = {(c["python_site"][0]["line"] if c["python_site"] else None, json.dumps(c["process_group"]))
              for c in report["communicators"] if c["process_group"]}
    check(groups == {(lines["described"], json.dumps({"desc": "tensor_parallel", "name": "7"})),
                     (lines["split"], json.dumps({"desc": "mesh_dp", "name": "4314d7ee2124be46"}))},
          f"{version}: only the described and the split group are named: {groups}")
    # The name people know it by where NCCL's config gives none: the group's description.
    named = {c["name"] for c in report["communicators"] if c["python_site"] and c["python_site"][0]["line"] == lines["split"]}
    check(named == {"mesh_dp"}, f"{version}: the split group is called by its description: {named}")
    code, text, _ = job.report("leaks")
    check('process group 7 "tensor_parallel"' in text, f"{version}: leaks text names the group:\n{text}")
    check(any(f'(ncclCommInitRank, process group 7 "tensor_parallel", age' in l for l in alert_blocks(result.stderr)[0]),
          f"{version}: the alert names the group: {result.stderr}")
    # Its caller is the next frame: the module line that called main_thread_releasing_gil().
    cdll = by_line[lines["cdll"]][0]["python_site"]
    check(len(cdll) == 2 and cdll[1]["function"] == "<module>" and cdll[1]["line"] > lines["pile_b"] - 30,
          f"{version}: the caller follows: {cdll}")
    # No Python state on the native thread, none while shutting down: no line, no crash.
    unsited = by_line.get(None, [])
    check(len(unsited) == 1 + finalizer_ran, f"{version}: communicators without a Python line: {unsited}")
    check(any("native_thread_init" in c["created_at"] or any("native_thread_init" in s for s in c["stack"])
              for c in unsited), f"{version}: the native thread's site is native: {unsited}")
    allocs = [l for l in report["leaks"] if l["kind"] == "allocation"]
    check(len(allocs) == 1 and allocs[0]["python_site"][0]["line"] == lines["alloc"], f"{version}: allocation {allocs}")
    piles = sorted(p["created_at"] for p in report["pile_ups"])
    check(len(piles) == 2 and piles[0].startswith(f"train.py:{lines['pile_a']} (<module>)") and
          piles[1].startswith(f"train.py:{lines['pile_b']} (<module>)") and
          all(p["made"] == 8 for p in report["pile_ups"]), f"{version}: pile-ups {report['pile_ups']}")
    blocks = alert_blocks(result.stderr)
    check(blocks and any(f"created at train.py:{lines['cdll']} (main_thread_releasing_gil) via " in l for l in blocks[0]),
          f"{version}: the alert leads with the Python line: {result.stderr}")
    code, text, _ = job.report("summary")
    check(f"PILING UP: 8 communicators made at train.py:{lines['pile_a']} (<module>)" in text, f"{version}: summary\n{text}")
    check("Python creation sites are not recorded" not in result.stderr, f"{version}: {result.stderr}")
    out = os.path.join(job.tmp, "timeline.json")
    code, _, err = job.report("timeline", "-o", out)
    made = [e["args"]["created_at"] for e in json.load(open(out))["traceEvents"]
            if e.get("ph") == "X" and e.get("name", "").startswith("ncclCommInitRank") and "created_at" in e.get("args", {})]
    check(code == 0 and made.count(f"train.py:{lines['pile_a']} (<module>)") == 8,
          f"{version}: the timeline's creation slices carry the Python line: {made} {err}")


def python_line_on_every_installed_cpython():
    found = interpreters()
    known = [v for v in found if (3, 9) <= v <= (3, 13)]
    check(known, f"no CPython 3.9-3.13 found: {found}")
    for version, python in sorted(found.items()):
        job, result, script = run_program(python)
        if version in known:
            check_known_version(version, job, result, script)
            continue
        # A version whose layout this build does not know: said once, no line, the job unharmed.
        check(result.stderr.count("Python creation sites are not recorded") == 1, f"{version}: {result.stderr}")
        code, report, _ = job.report("leaks", "--json")
        check(len(report["communicators"]) >= 22 and all(not c["python_site"] for c in report["communicators"]),
              f"{version}: {report['communicators']}")
    print("checked:", ", ".join(f"{a}.{b}" for a, b in sorted(found)))


def program_without_python_has_no_python_site():
    job = Job([os.path.join(BUILD, "tests", "integration", "lifecycle_app"), "leaky"], nranks=2)
    job.run()
    for trace in job.traces():
        out = subprocess.run([os.environ["NCCLWATCH_REPORT"], "dump", trace], capture_output=True, text=True, check=True)
        begins = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{") and '"call_begin"' in l]
        check(begins and all("python_site" not in b for b in begins), f"{trace}: {begins[:3]}")


def python_loaded_after_the_first_communicator():
    # A native program embeds the running interpreter's libpython after its first communicator.
    import sysconfig
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    names = [sysconfig.get_config_var("INSTSONAME") or "", sysconfig.get_config_var("LDLIBRARY") or ""]
    found = [os.path.join(libdir, n) for n in names if ".so" in n and os.path.exists(os.path.join(libdir, n))]
    check(found, f"this interpreter has no shared libpython in {libdir}: {names}")
    libpython = found[0]
    job = Job([os.path.join(BUILD, "tests", "integration", "late_python_app"), libpython], nranks=1,
              env={"PYTHONHOME": sys.base_prefix, "PYTHONPATH": ""})
    result = job.run()[0]
    check(result.returncode == 0 and "late_python_app: done" in result.stdout, f"exit {result.returncode}: {result.stderr}")
    code, report, _ = job.report("leaks", "--json")
    sites = [(c["python_site"][0]["file"], c["python_site"][0]["line"]) if c["python_site"] else None
             for c in report["communicators"]]
    check(len(sites) == 2 and sites.count(None) == 1 and ("<string>", 7) in sites,
          f"the native one without a line, the embedded one at <string>:7: {report['communicators']}")


if __name__ == "__main__":
    main({f.__name__: f for f in (python_line_on_every_installed_cpython, program_without_python_has_no_python_site,
                                  python_loaded_after_the_first_communicator)})
