"""Shared helpers for the integration tests: run NCCL programs under the preloaded shim on the
CPU stand-in for NCCL, then ask ncclwatch-report about the traces they left."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.environ["NCCLWATCH_BUILD_DIR"]
SHIM = os.environ["NCCLWATCH_SHIM"]
REPORT = os.environ["NCCLWATCH_REPORT"]
HOSTNCCL_DIR = os.environ["HOSTNCCL_DIR"]
# Set by ThreadSanitizer builds' test setup: an uninstrumented program (python) that does not
# preload the instrumented shim must preload this runtime to load instrumented libraries.
SANITIZER_RUNTIME = os.environ.get("NCCLWATCH_TEST_SANITIZER_RUNTIME", "")
# Under a sanitizer the stand-in's stream workers run several times slower: figures measured in
# milliseconds on the CPU stand-in are checked in the plain build only.
SANITIZED = bool(os.environ.get("NCCLWATCH_TEST_SANITIZER"))
sys.path.insert(0, os.environ["MPRUN_DIR"])
import mprun  # noqa: E402  (the multi-process launcher of tests/launcher)


def app(name):
    return os.path.join(BUILD, "tests", "integration", name)


class Job:
    """One run of a program on N ranks, with its own trace directory."""

    def __init__(self, argv, nranks=2, env=None, preload=True, timeout=60):
        self.tmp = tempfile.mkdtemp(prefix="ncclwatch-test-")
        self.trace_dir = os.path.join(self.tmp, "traces")
        self.env = dict(os.environ)
        self.env.update({
            "NCCLWATCH_DIR": self.trace_dir,
            "LD_LIBRARY_PATH": HOSTNCCL_DIR + ":" + self.env.get("LD_LIBRARY_PATH", ""),
        })
        if preload:
            self.env["LD_PRELOAD"] = SHIM
        self.env.update(env or {})
        self.argv = argv
        self.nranks = nranks
        self.timeout = timeout
        self.results = None

    def run(self):
        self.results = mprun.run_ranks(self.argv, self.nranks, env=self.env, timeout=self.timeout, cwd=self.tmp)
        return self.results

    def start(self):
        """Starts the ranks without waiting (for tests that signal them)."""
        self.rendezvous = os.path.join(self.tmp, "rendezvous")
        os.makedirs(self.rendezvous, exist_ok=True)
        self.procs = []
        for rank in range(self.nranks):
            env = dict(self.env)
            env.update({"NCCLWATCH_TEST_RANK": str(rank), "NCCLWATCH_TEST_NRANKS": str(self.nranks),
                        "NCCLWATCH_TEST_RENDEZVOUS": self.rendezvous})
            self.procs.append(subprocess.Popen(self.argv, env=env, cwd=self.tmp, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True))
        return self.procs

    def wait_for_files(self, names, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(os.path.exists(os.path.join(self.rendezvous, n)) for n in names):
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise AssertionError(f"rank exited early with {p.returncode}: {p.stderr.read()}")
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {names}")

    def signal_all(self, sig):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(sig)
        outs = []
        for p in self.procs:
            out, err = p.communicate(timeout=30)
            outs.append((p.returncode, out, err))
        return outs

    def traces(self):
        if not os.path.isdir(self.trace_dir):
            return []
        return sorted(os.path.join(self.trace_dir, f) for f in os.listdir(self.trace_dir) if f.endswith(".nwt"))

    def report(self, *args, paths=None):
        """Runs ncclwatch-report; returns (exit code, parsed JSON or text, stderr)."""
        paths = paths if paths is not None else [self.trace_dir]
        proc = subprocess.run([REPORT, *args, *paths], capture_output=True, text=True, timeout=60)
        out = proc.stdout
        if "--json" in args:
            out = json.loads(out)
        return proc.returncode, out, proc.stderr


def alert_blocks(stderr):
    """The exit alert blocks in a rank's stderr: lists of lines, first line starting 'ncclwatch:'."""
    blocks, current = [], None
    for line in stderr.splitlines():
        if line.startswith("ncclwatch:") and "communicator(s) never destroyed" in line:
            current = [line]
            blocks.append(current)
        elif current is not None and line.startswith("  "):
            current.append(line)
        else:
            current = None
    return blocks


def skip(reason):
    """Ends the case as skipped (meson's exit status 77), saying why."""
    print(f"skipped: {reason}")
    raise SystemExit(77)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main(cases):
    """Runs the case named on the command line (meson registers one test per case).

    Its temporary folders go in one scratch folder, removed unless the case fails (kept then, for
    its traces): a suite run three times over (plain and two sanitizers) left gigabytes behind."""
    name = sys.argv[1]
    tempfile.tempdir = tempfile.mkdtemp(prefix="nw-")
    try:
        cases[name]()
    except SystemExit as end:
        if end.code == 77:
            shutil.rmtree(tempfile.tempdir, ignore_errors=True)
        raise
    except BaseException:
        print(f"{name}: its files are kept in {tempfile.tempdir}", file=sys.stderr)
        raise
    shutil.rmtree(tempfile.tempdir, ignore_errors=True)
    print(f"{name}: ok")
