"""Coverage: NCCL reached through dlopen + dlsym (C and Python ctypes), two NCCL copies in one
process, and NCCL carried inside other objects, which the shim cannot trace and must name."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from harness import BUILD, HOSTNCCL_DIR, REPORT, SANITIZER_RUNTIME, Job, alert_blocks, app, check, main

STANDIN = os.path.join(HOSTNCCL_DIR, "libnccl.so.2")


def copy_of_standin(tag):
    """The stand-in at a path of its own: dlopen loads a second copy for a different file."""
    folder = tempfile.mkdtemp(prefix=f"ncclwatch-copy-{tag}-")
    path = os.path.join(folder, "libnccl.so.2")
    shutil.copy(STANDIN, path)
    return path


def records(trace, kind):
    out = subprocess.run([REPORT, "dump", trace], capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [r for r in rows if r.get("type") == kind]


def run_one(argv, env=None):
    job = Job(argv, nranks=1, env=env)
    result = job.run()[0]
    check(len(job.traces()) == 1, f"expected one trace, got {job.traces()}; stderr {result.stderr!r}")
    return job, result


def check_leak_traced(job, result, library_path, creator="ncclCommInitRank"):
    check(result.returncode == 0, f"exit {result.returncode}: {result.stderr}")
    blocks = alert_blocks(result.stderr)
    check(len(blocks) == 1 and blocks[0][0].startswith("ncclwatch: 1 communicator(s) never destroyed"),
          f"alert: {result.stderr!r}")
    code, report, err = job.report("leaks", "--json")
    leaks = [l for l in report["leaks"] if l["kind"] == "communicator"]
    check(code == 1 and len(leaks) == 1, f"leaks report: {report} {err}")
    check(leaks[0]["api"] == creator and leaks[0]["state"] == "leaked", f"leak {leaks[0]}")
    check(os.path.realpath(leaks[0]["library"]) == os.path.realpath(library_path),
          f"leak names library {leaks[0]['library']!r}, expected {library_path}")
    return leaks[0]


def dlopen_dlsym_program_is_traced():
    library = copy_of_standin("one")
    job, result = run_one([app("dlsym_app"), library])
    leak = check_leak_traced(job, result, library)
    libs = records(job.traces()[0], "library")
    check(len(libs) == 1 and libs[0]["status"] == "attached" and libs[0]["reached"] == "dlsym from dlsym_app",
          f"library records {libs}")
    # The all-reduce went through the bound wrapper too: one op with seq 1 on the leaked comm.
    ops = [r for r in records(job.traces()[0], "op") if r["op"] == "ncclAllReduce"]
    check(len(ops) == 1 and ops[0]["seq"] == 1 and ops[0]["count"] == 4 and ops[0]["comm_id"] == leak["comm"],
          f"ops {ops}, leaked comm {leak['comm']}")
    calls = records(job.traces()[0], "call_end")
    check(calls and all(c["library"] == 1 for c in calls), f"calls name library 1: {calls}")


CTYPES_PROGRAM = r"""
import ctypes, sys
nccl = ctypes.CDLL(sys.argv[1])
class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]
uid = UniqueId()
assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
comms = []
for _ in range(2):
    comm = ctypes.c_void_p()
    assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
    comms.append(comm)
    uid = UniqueId()
    assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
assert nccl.ncclCommDestroy(comms[0]) == 0
print("ctypes: done")  # comms[1] is leaked
"""


def ctypes_program_is_traced():
    library = copy_of_standin("ctypes")
    job, result = run_one([sys.executable, "-c", CTYPES_PROGRAM, library])
    check_leak_traced(job, result, library)
    code, report, _ = job.report("leaks", "--json")
    states = sorted(c["state"] for c in report["communicators"])
    check(states == ["destroyed", "leaked"], f"states {states}")
    libs = records(job.traces()[0], "library")
    check(any(l["status"] == "attached" and l["reached"].startswith("dlsym from") for l in libs), f"libraries {libs}")


def two_copies_are_told_apart():
    first, second = copy_of_standin("a"), copy_of_standin("b")
    job, result = run_one([app("dlsym_app"), first, second])
    check_leak_traced(job, result, second)
    check(f"by NCCL {second}" in alert_blocks(result.stderr)[0][1], f"the alert names the copy: {result.stderr!r}")
    libs = [l for l in records(job.traces()[0], "library") if l["status"] == "attached"]
    check(sorted(os.path.realpath(l["path"]) for l in libs) == sorted([os.path.realpath(first), os.path.realpath(second)]),
          f"two attached libraries expected: {libs}")
    check(sorted(l["id"] for l in libs) == ["1", "2"], f"ids {libs}")
    code, report, _ = job.report("leaks", "--json")
    by_library = {os.path.realpath(c["library"]): c["state"] for c in report["communicators"]}
    check(by_library == {os.path.realpath(first): "destroyed", os.path.realpath(second): "leaked"},
          f"communicators by library {by_library}")
    code, text, _ = job.report("leaks")
    check(f"by NCCL {second}" in text, f"the text report names the leaking copy:\n{text}")
    code, summary, _ = job.report("summary", "--json")
    attached = {os.path.realpath(l["path"]) for l in summary["nccl_libraries"] if l["status"] == "attached"}
    check(attached == {os.path.realpath(first), os.path.realpath(second)}, f"summary libraries {summary['nccl_libraries']}")


def more_copies_than_slots_still_work():
    # Eight copies get a slot each; the ninth passes through untraced, said once, and still works.
    copies = [copy_of_standin(f"many{i}") for i in range(9)]
    job, result = run_one([app("dlsym_app"), *copies])
    check(result.returncode == 0 and "dlsym_app: done" in result.stdout, f"the program must run: {result.stderr}")
    check(result.stderr.count("more NCCL libraries than ncclwatch can tell apart") == 1, f"stderr {result.stderr!r}")
    attached = [l for l in records(job.traces()[0], "library") if l["status"] == "attached"]
    check(sorted(os.path.realpath(l["path"]) for l in attached) == sorted(os.path.realpath(c) for c in copies[:8]),
          f"attached {[l['path'] for l in attached]}")
    # The ninth copy's communicator (the leaked one) is not traced: no alert, no leak in the report.
    check(alert_blocks(result.stderr) == [], f"alert for an untraced copy: {result.stderr!r}")
    code, report, _ = job.report("leaks", "--json")
    check(sorted(c["state"] for c in report["communicators"]) == ["destroyed"] * 8, f"{report['communicators']}")


def loaded_but_unused_copy_is_listed():
    used, idle = copy_of_standin("used"), copy_of_standin("idle")
    program = CTYPES_PROGRAM.replace("nccl = ctypes.CDLL(sys.argv[1])",
                                     "nccl = ctypes.CDLL(sys.argv[1]); idle = ctypes.CDLL(sys.argv[2])")
    job, result = run_one([sys.executable, "-c", program, used, idle])
    check_leak_traced(job, result, used)
    check("not traced" not in result.stderr, f"an idle libnccl is no untraced copy: {result.stderr!r}")
    libs = {os.path.realpath(l["path"]): l for l in records(job.traces()[0], "library")}
    check(libs[os.path.realpath(used)]["status"] == "attached", f"{libs}")
    check(libs[os.path.realpath(idle)]["status"] == "unused" and libs[os.path.realpath(idle)]["version"] == "22809",
          f"the idle copy, with its version from its banner: {libs}")
    code, summary, _ = job.report("summary", "--json")
    statuses = sorted(l["status"] for l in summary["nccl_libraries"])
    check(statuses == ["attached", "unused"], f"summary libraries {summary['nccl_libraries']}")


def racing_lookups_agree():
    copies = [copy_of_standin(f"race{i}") for i in range(3)]
    result = Job([app("dlsym_app"), "--race", *copies], nranks=1).run()[0]
    check(result.returncode == 0 and "16 threads agree" in result.stdout, f"{result.returncode} {result.stderr}")
    plain = Job([app("dlsym_app"), "--race", *copies], nranks=1, preload=False).run()[0]
    check(plain.returncode == 0, f"without the shim: {plain.stderr}")


def check_not_traced(argv, program_path, reason_words):
    job, result = run_one(argv)
    check(result.returncode == 0 and "done" in result.stdout, f"the program must still run: {result.stderr}")
    lines = [l for l in result.stderr.splitlines() if l.startswith("ncclwatch: not traced:")]
    check(len(lines) == 1 and program_path in lines[0] and reason_words in lines[0], f"stderr {result.stderr!r}")
    libs = records(job.traces()[0], "library")
    untraced = [l for l in libs if l["status"] == "not traced"]
    check(len(untraced) == 1 and untraced[0]["path"] == program_path, f"library records {libs}")
    code, summary, _ = job.report("summary", "--json")
    check(code == 1 and summary["first_look"].startswith("not traced: " + program_path), f"summary {summary}")
    code, text, _ = job.report("summary")
    check(f"NOT TRACED: {program_path} in 1 process(es)" in text, f"summary text:\n{text}")
    code, leaks, _ = job.report("leaks", "--json")
    check(leaks["not_traced"] == [{"path": program_path, "reason": untraced[0]["reason"], "processes": 1}],
          f"leaks not_traced {leaks['not_traced']}")


def statically_linked_nccl_is_named_not_traced():
    check_not_traced([app("static_app")], app("static_app"), "hidden symbols")


def symbolic_library_is_named_not_traced():
    library = os.path.join(BUILD, "tests", "integration", "libembedded_nccl.so")
    check_not_traced([app("embedded_app")], library, "-Bsymbolic")


ADDRESSES_PROGRAM = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
address = lambda name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
# The stand-in's ncclX is an alias of its pnccl* definition: same address unless dlsym wraps it.
print(address("ncclGetVersion") == address("pncclGetVersion"), address("ncclCommInitRank") == address("pncclCommInitRank"))
"""


def embedded_copy_called_through_plt_is_traced():
    library = os.path.join(BUILD, "tests", "integration", "libembedded_nccl_plt.so")
    job, result = run_one([app("embedded_plt_app")])
    check("not traced" not in result.stderr, f"a copy called through the PLT is traceable: {result.stderr!r}")
    check_leak_traced(job, result, library)


def calls_go_to_the_copy_the_caller_would_reach():
    # An RTLD_LOCAL library calling its own embedded NCCL through its PLT, beside another local
    # libnccl: the shim must forward to the caller's own copy, as the dynamic linker would.
    other = copy_of_standin("other")
    embedding = os.path.join(BUILD, "tests", "integration", "libembedded_nccl_plt.so")
    job, result = run_one([app("dlsym_app"), "--embedded", other, embedding])
    check_leak_traced(job, result, embedding)
    libs = {os.path.realpath(l["path"]): l["status"] for l in records(job.traces()[0], "library")}
    check(libs == {os.path.realpath(embedding): "attached", os.path.realpath(other): "unused"}, f"libraries {libs}")


def dlsym_wraps_only_wrapped_names():
    library = copy_of_standin("query")
    answers = {}
    for preload in (True, False):
        runtime = {} if preload or not SANITIZER_RUNTIME else {"LD_PRELOAD": SANITIZER_RUNTIME}
        job = Job([sys.executable, "-c", ADDRESSES_PROGRAM, library], nranks=1, preload=preload, env=runtime)
        result = job.run()[0]
        check(result.returncode == 0, f"preload={preload}: {result.stderr}")
        answers[preload] = result.stdout.split()
        check(job.traces() == [], f"lookups alone attach nothing: {job.traces()}")
    # A query function comes back untouched; ncclCommInitRank comes back wrapped, only under the shim.
    check(answers == {True: ["True", "False"], False: ["True", "True"]}, f"answers {answers}")
    # And dlsym(RTLD_NEXT) still resolves relative to its caller (dlsym_app exits 4 otherwise).
    result = Job([app("dlsym_app"), library], nranks=1).run()[0]
    check(result.returncode == 0, f"dlsym_app: {result.returncode} {result.stderr}")


def forwarding_stubs_are_not_a_copy():
    # Stubs that call NCCL: their calls are traced through dlsym, nothing is "not traced".
    job, result = run_one([app("stub_app")])
    check_leak_traced(job, result, STANDIN)
    check("not traced" not in result.stderr, f"stubs taken for a copy of NCCL: {result.stderr!r}")
    libs = records(job.traces()[0], "library")
    check([l["status"] for l in libs] == ["attached"] and libs[0]["reached"] == "dlsym from stub_app", f"{libs}")
    # Stubs never called: no NCCL copy, so no trace and not a word.
    job = Job([app("stub_app"), "--idle"], nranks=1)
    result = job.run()[0]
    check(result.returncode == 0 and result.stderr == "" and job.traces() == [],
          f"an idle program with stubs: {result.stderr!r} {job.traces()}")


if __name__ == "__main__":
    main({f.__name__: f for f in [
        dlopen_dlsym_program_is_traced, ctypes_program_is_traced, two_copies_are_told_apart,
        statically_linked_nccl_is_named_not_traced, symbolic_library_is_named_not_traced,
        dlsym_wraps_only_wrapped_names, forwarding_stubs_are_not_a_copy,
        embedded_copy_called_through_plt_is_traced, more_copies_than_slots_still_work,
        racing_lookups_agree, loaded_but_unused_copy_is_listed, calls_go_to_the_copy_the_caller_would_reach]})
