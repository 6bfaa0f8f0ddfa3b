"""scripts/wheel on a clean clone (a GCC release build, warnings as errors, repaired by auditwheel
into a manylinux wheel), then pip install of that wheel in a fresh virtual environment: the wheel
holds the loader, the shim, the report tool (with the libraries it links beyond the manylinux
policy) and the launcher; both commands are on PATH; its `ncclwatch run` traces a stand-in job,
and ncclwatch.load reads exactly what its `ncclwatch-report dump` reads. Skipped (77) where PyPI
cannot be reached."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ["NCCLWATCH_BUILD_DIR"]


# The installed package must find its own shim and report tool: settings that name others (a
# developer's shell, a test harness) are left out of everything run here.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("NCCLWATCH_SHIM", "NCCLWATCH_REPORT")}


def run(cmd, **kw):
    kw.setdefault("env", CLEAN_ENV)
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def main():
    tmp = tempfile.mkdtemp(prefix="ncclwatch-wheel-")
    try:
        source = os.path.join(tmp, "clone")
        run(["git", "clone", "-q", ROOT, source])
        venv = os.path.join(tmp, "venv")
        run([sys.executable, "-m", "venv", venv])
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
        if subprocess.run(pip + ["install", "numpy", "pandas"], capture_output=True, timeout=600).returncode != 0:
            print("skipped: numpy and pandas could not be installed from PyPI here")
            raise SystemExit(77)
        # Warnings are errors here: this release build is what users install (scripts/test builds
        # no other GCC release build).
        built = run([os.path.join(source, "scripts", "wheel"), "--config-settings=setup-args=-Dwerror=true"], cwd=source,
                    timeout=1200)
        wheel = os.path.join(source, built.stdout.strip().splitlines()[-1])
        assert "-py3-none-manylinux_" in os.path.basename(wheel) and os.path.exists(wheel), built.stdout[-2000:]
        started = time.monotonic()
        run(pip + ["install", wheel], timeout=600)
        install_s = time.monotonic() - started
        bin_dir = os.path.join(venv, "bin")
        python = os.path.join(bin_dir, "python")
        where = json.loads(run([python, "-c", "import json, ncclwatch; print(json.dumps([ncclwatch.shim_path(), "
                                              "ncclwatch.report_path()]))"], cwd=tmp).stdout)
        site = os.path.join(venv, "lib")
        assert all(p.startswith(site) and os.path.exists(p) for p in where), f"installed inside the venv: {where}"
        shim, report = where
        # The report tool finds elfutils inside the package (auditwheel's RPATH), not on the system.
        linked = run(["ldd", report]).stdout
        dw = [line for line in linked.splitlines() if "libdw" in line]
        assert dw and site in dw[0] and "ncclwatch.libs" in dw[0], linked
        needed = run(["readelf", "-d", shim]).stdout
        assert "libdw" not in needed and "libfmt" not in needed, f"the shim needs only glibc and the C++ runtime: {needed}"
        version = run([os.path.join(bin_dir, "ncclwatch"), "--version"]).stdout
        assert "ncclwatch" in version, version
        assert run([python, "-m", "ncclwatch", "--version"]).stdout == version
        # Both commands on PATH, and one version everywhere.
        report_version = run([os.path.join(bin_dir, "ncclwatch-report"), "--version"]).stdout
        package_version = run([python, "-c", "import ncclwatch; print(ncclwatch.__version__)"], cwd=tmp).stdout.strip()
        assert version.split()[-1] == package_version and report_version.split()[1] == package_version, \
            (version, report_version, package_version)

        # The Prometheus rules (as `ncclwatch-report rules` prints them) and the Grafana dashboard.
        share = os.path.join(os.path.dirname(os.path.dirname(report)), "share")
        with open(os.path.join(share, "prometheus", "ncclwatch.rules.yml")) as f:
            assert f.read() == run([report, "rules"]).stdout
        with open(os.path.join(share, "grafana", "ncclwatch-dashboard.json")) as f:
            assert json.load(f)["uid"] == "ncclwatch"
        assert os.path.exists(os.path.join(share, "grafana", "provisioning.yaml"))

        # The installed launcher on a stand-in job (the main build's example and stand-in NCCL).
        traces = os.path.join(tmp, "traces")
        env = dict(CLEAN_ENV, LD_LIBRARY_PATH=os.path.join(BUILD, "tests", "hostnccl"), NCCLWATCH_SAMPLE="1",
                   PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        job = run(["ncclwatch", "run", "--dir", traces, "--", sys.executable, os.path.join(ROOT, "tests", "launcher", "mprun.py"),
                   "-n", "2", "--", os.path.join(BUILD, "examples", "leaky_nccl")], env=env, cwd=tmp, timeout=180)
        assert "1 communicator(s) never destroyed" in job.stderr and "ncclwatch summary" in job.stderr, job.stderr[-2000:]
        files = sorted(os.path.join(traces, f) for f in os.listdir(traces) if f.endswith(".nwt"))
        assert len(files) == 2, files
        leaks = subprocess.run(["ncclwatch-report", "leaks", traces], env=env, cwd=tmp, capture_output=True, text=True)
        assert leaks.returncode == 1 and "leaked" in leaks.stdout, (leaks.returncode, leaks.stdout, leaks.stderr)
        # The export (its zstd vendored with the report tool) and the named questions installed.
        exported = run(["ncclwatch-report", "export", traces, "-o", os.path.join(tmp, "export")], env=env, cwd=tmp).stdout
        assert "2 trace(s)" in exported, exported
        listed = run(["ncclwatch", "sql", "--list"], env=env, cwd=tmp).stdout
        questions = [f for f in os.listdir(os.path.join(ROOT, "python", "ncclwatch", "queries")) if f.endswith(".sql")]
        assert "late_hosts" in listed and len(listed.splitlines()) == len(questions), listed
        assert run(["ncclwatch-report", "sql", "--list"], env=env, cwd=tmp).stdout == listed
        again = run(["ncclwatch", "export", traces, "-o", os.path.join(tmp, "export")], env=env, cwd=tmp).stdout
        assert "2 trace(s)" in again, again
        dumped = 0
        for f in files:
            records = [json.loads(line) for line in run([report, "dump", f]).stdout.splitlines()]
            dumped += sum(1 for r in records if r.get("type") == "op" and r["op"] != "ncclGroupEnd")
        loaded = json.loads(run([python, "-c", "import json, sys, ncclwatch; j = ncclwatch.load(sys.argv[1]); "
                                               "print(json.dumps([len(j.ops), int(j.ops.gpu_us.notna().sum()), len(j.problems)]))",
                                 traces], cwd=tmp).stdout)
        assert loaded[0] == dumped > 0 and loaded[1] == dumped and loaded[2] == 0, (loaded, dumped)
        print(f"wheel: {os.path.basename(wheel)} installed in {install_s:.1f} s, {len(files)} traces, {dumped} ops loaded, "
              "each GPU-timed")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
