"""What every analyzer test file shares: the report tool and the job generator from the
environment meson sets, temporary folders removed after the case, and one case per invocation."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPORT = os.environ["NCCLWATCH_REPORT"]
GEN = os.environ["NCCLWATCH_GEN_JOB"]
REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real")
CREATED = []


def tempdir():
    d = tempfile.mkdtemp(prefix="ncclwatch-analyzers-")
    CREATED.append(d)
    return d


def job(scenario):
    """A synthetic job of gen_job's `scenario` in a fresh folder."""
    d = tempdir()
    subprocess.run([GEN, scenario, d], check=True, stdout=subprocess.DEVNULL)
    return d


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def report(*args, timeout=120):
    p = subprocess.run([REPORT, *args], capture_output=True, text=True, timeout=timeout)
    check(p.returncode in (0, 1, 2), f"crashed: {p.returncode}\n{p.stderr}")
    return p


def report_json(*args):
    p = report(*args, "--json")
    return p.returncode, json.loads(p.stdout), p.stderr


def run_case(namespace):
    """Runs test_<argv[1]> of `namespace` (a module's globals()), then removes its folders."""
    name = sys.argv[1]
    try:
        namespace["test_" + name]()
    finally:
        for d in CREATED:
            shutil.rmtree(d, ignore_errors=True)
    print("ok", name)
