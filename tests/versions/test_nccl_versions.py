"""The shim against one real NCCL build from PyPI, without a GPU: it loads, resolves exactly the
functions that NCCL has, leaves NCCL's answers unchanged, reads an old-layout ncclConfig_t
safely, and answers calls to functions that NCCL lacks without calling anything.

usage: test_nccl_versions.py cu12|cu13 VERSION"""
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

SHIM = os.environ["NCCLWATCH_SHIM"]
REPORT = os.environ["NCCLWATCH_REPORT"]
PROBE = os.environ["NCCL_ABI_PROBE"]
PROBE_LINKED = os.environ["NCCL_ABI_PROBE_LINKED"]
API_TABLE = os.environ["NCCL_API_TABLE"]
WHEELS = os.environ["NCCL_WHEEL_CACHE"]
# Wheels name their platforms differently from one release to the next.
PLATFORMS = ["manylinux1_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_18_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_28_x86_64"]


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def fetch_library(flavor, version, into):
    """libnccl.so.2 of nvidia-nccl-<flavor>==<version>, extracted from its wheel."""
    wheel_dir = os.path.join(WHEELS, f"{flavor}-{version}")
    os.makedirs(wheel_dir, exist_ok=True)
    wheels = [f for f in os.listdir(wheel_dir) if f.endswith(".whl")]
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "-d", wheel_dir, f"nvidia-nccl-{flavor}=={version}"]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        wheels = [f for f in os.listdir(wheel_dir) if f.endswith(".whl")]
        check(proc.returncode == 0 and wheels,
              f"could not download nvidia-nccl-{flavor}=={version} from PyPI: {proc.stderr.strip()[-400:]}")
    with zipfile.ZipFile(os.path.join(wheel_dir, wheels[0])) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith("/libnccl.so.2"))
        path = os.path.join(into, "libnccl.so.2")
        with wheel.open(member) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    # The wheel is kept only when asked: fifteen of them are over 3 GB.
    if not os.environ.get("NCCL_WHEEL_KEEP"):
        shutil.rmtree(wheel_dir)
    return path


def run(argv, env_extra, preload, trace_dir):
    env = dict(os.environ)
    env.update(env_extra)
    env["NCCLWATCH_DIR"] = trace_dir
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = SHIM
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    check(proc.returncode == 0, f"{argv} (preload={preload}) exited {proc.returncode}: {proc.stderr[-2000:]}")
    line = next((l for l in proc.stdout.splitlines() if l.startswith("{")), None)
    check(line is not None, f"{argv}: no answer on stdout: {proc.stdout!r} {proc.stderr[-2000:]!r}")
    return json.loads(line), proc.stderr


def library_records(trace_dir):
    traces = [os.path.join(trace_dir, f) for f in os.listdir(trace_dir)] if os.path.isdir(trace_dir) else []
    check(len(traces) == 1, f"expected one trace in {trace_dir}, found {traces}")
    out = subprocess.run([REPORT, "dump", traces[0]], capture_output=True, text=True, check=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    return [r for r in rows if r.get("type") == "library"], [r for r in rows if r.get("type") == "call_end"]


def main():
    flavor, version = sys.argv[1], sys.argv[2]
    major, minor, patch = (int(x) for x in version.split(".")[:3])
    code = major * 10000 + minor * 100 + patch
    work = tempfile.mkdtemp(prefix=f"ncclwatch-nccl-{version}-")
    try:
        library = fetch_library(flavor, version, work)
        exported = set(subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True,
                                      check=True).stdout.split())
        table = re.findall(r"^NCCLWATCH_(?:TRACED|TRACED_AS|UNTRACED)\((\w+), (\w+), (\d+)[,)]", open(API_TABLE).read(), re.M)
        # The table's "since" must match what this NCCL exports.
        for group, name, since in table:
            check((int(since) <= code) == (name in exported),
                  f"API table says {name} since {since}, but NCCL {version} {'has' if name in exported else 'lacks'} it")
        present = [name for _, name, _ in table if name in exported]
        lacking = sorted(name for _, name, _ in table if name not in exported)

        # 1. Through dlopen + dlsym: the bound wrappers.
        # Only the real NCCL's folder on the path: the build's CUDA stand-in must not be found by it.
        env = {"LD_LIBRARY_PATH": work}
        plain, _ = run([PROBE, library], env, False, os.path.join(work, "none"))
        traced, stderr = run([PROBE, library], env, True, os.path.join(work, "dlsym"))
        check(plain["version"] == code, f"NCCL reports {plain['version']}, wheel is {code}")
        check(plain == traced, f"NCCL's answers changed under the shim:\n  without {plain}\n  with    {traced}")
        check(traced["found"] == present, f"dlsym found {traced['found']}, NCCL exports {present}")
        libraries, calls = library_records(os.path.join(work, "dlsym"))
        attached = [l for l in libraries if l["status"] == "attached"]
        check(len(attached) == 1, f"library records {libraries}")
        lib = attached[0]
        missing = sorted(lib["missing"].split(",")) if lib.get("missing") else []  # dump joins repeated keys
        check(lib["version"] == str(code) and lib["reached"] == "dlsym from nccl_abi_probe",
              f"library record {lib}")
        check(missing == lacking, f"the trace says NCCL lacks {missing}, it lacks {lacking}")
        check(lib["profiling_aliases"] == ("1" if "pncclCommInitRank" in exported else "0"), f"aliases {lib}")
        inits = [c for c in calls if c["op"] in ("ncclCommInitRank", "ncclCommInitRankConfig")]
        check(sorted(c["result"] for c in inits) == sorted([traced["init_rank"], traced["init_rank_config"]]),
              f"recorded results {inits} vs answers {traced}")

        # 2. Linked in, through the global scope: the exported wrappers.
        plain, _ = run([PROBE_LINKED], env, False, os.path.join(work, "none-linked"))
        traced, stderr = run([PROBE_LINKED, "--call-window-register"], env, True, os.path.join(work, "linked"))
        traced_without_extra = dict(traced, window_register=-1)
        check(plain == traced_without_extra, f"NCCL's answers changed under the shim:\n  without {plain}\n  with    {traced}")
        if "ncclCommWindowRegister" not in exported:
            check(traced["window_register"] == 5 and "has no ncclCommWindowRegister" in stderr,
                  f"a function NCCL lacks must get ncclInvalidUsage and a notice: {traced} {stderr[-500:]!r}")
        libraries, _ = library_records(os.path.join(work, "linked"))
        check([l["reached"] for l in libraries if l["status"] == "attached"] == ["global scope"], f"{libraries}")
        # NCCL API functions outside the table must be ones we decided not to wrap.
        unwrapped = sorted(n for n in exported if re.match(r"^nccl[A-Z]", n) and n not in {t[1] for t in table})
        decided = " ".join(re.findall(r"^// UNWRAPPED:(.*)$", open(API_TABLE).read(), re.M)).split()
        undecided = [n for n in unwrapped if not any(fnmatch.fnmatchcase(n, p) for p in decided)]
        check(not undecided, f"NCCL {version} exports functions neither wrapped nor listed as deliberately "
              f"unwrapped in the API table: {undecided}")
        print(f"NCCL {version} ({flavor}): {len(present)} of {len(table)} table functions, lacks {lacking or 'none'}; "
              f"answers unchanged (init {plain['init_rank']}, init with 2.14 config {plain['init_rank_config']}); "
              f"exported but not in the table: {unwrapped or 'none'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
