"""scripts/ncclwatch (`ncclwatch run`) on real runs: the folders it makes for a job's traces."""
import os
import shutil
import stat
import subprocess
import sys

import test_watch

from harness import BUILD, HOSTNCCL_DIR, REPORT, SANITIZER_RUNTIME, SHIM, Job, app, check, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHER = os.path.join(ROOT, "scripts", "ncclwatch")


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def launcher_folders_are_owner_only_under_any_umask():
    # Under umask 000 the launcher made its folders 0777 while the shim makes 0700 and 0600 (0750
    # and 0640 with NCCLWATCH_GROUP_READABLE=1): a trace holds the job's command line.
    job = Job([], nranks=1, preload=False)
    env = dict(job.env, NCCLWATCH_SHIM=os.path.join(BUILD, "shim", "libncclwatch.so"), SLURM_JOB_ID="42")
    env.pop("NCCLWATCH_DIR")
    for group_readable, folder_mode, file_mode in (("0", 0o700, 0o600), ("1", 0o750, 0o640)):
        env["NCCLWATCH_GROUP_READABLE"] = group_readable
        cwd = os.path.join(job.tmp, "readable-" + group_readable)
        os.mkdir(cwd)
        given = os.path.join(cwd, "given", "deeper", "job")
        # --dir with folders to make, then the default ./ncclwatch/job-$SLURM_JOB_ID.
        for args, made in ((["--dir", given], [os.path.join(cwd, "given"), os.path.join(cwd, "given", "deeper"), given]),
                           ([], [os.path.join(cwd, "ncclwatch"), os.path.join(cwd, "ncclwatch", "job-42")])):
            proc = subprocess.run([LAUNCHER, "run", *args, "--", app("lifecycle_app"), "leaky"], env=env, cwd=cwd,
                                  capture_output=True, text=True, timeout=60, preexec_fn=lambda: os.umask(0))
            check(proc.returncode == 0, f"{args}: exit {proc.returncode}: {proc.stderr}")
            for folder in made:
                check(mode(folder) == folder_mode, f"GROUP_READABLE={group_readable}: {folder} is {oct(mode(folder))}")
            traces = [os.path.join(made[-1], f) for f in os.listdir(made[-1]) if f.endswith(".nwt")]
            check(len(traces) == 1 and mode(traces[0]) == file_mode,
                  f"GROUP_READABLE={group_readable}: {[(t, oct(mode(t))) for t in traces]}")
    # A folder the user already has is the user's: its mode is left as it is.
    mine = os.path.join(job.tmp, "mine")
    os.mkdir(mine)
    os.chmod(mine, 0o755)
    env["NCCLWATCH_GROUP_READABLE"] = "0"
    proc = subprocess.run([LAUNCHER, "run", "--dir", mine, "--", "true"], env=env, capture_output=True, text=True,
                          timeout=60, preexec_fn=lambda: os.umask(0))
    check(proc.returncode == 0 and mode(mine) == 0o755, (proc.returncode, oct(mode(mine)), proc.stderr))


def launcher_says_when_the_verdict_is_off_and_leaves_no_request_behind():
    # A launcher that could not find ncclwatch-report started no watcher, without a word; and a
    # job that stalled left the watcher's dump-now in its folder.
    job = Job([], nranks=1, preload=False)
    env = dict(job.env, NCCLWATCH_SHIM=os.path.join(BUILD, "shim", "libncclwatch.so"))
    env.pop("NCCLWATCH_DIR")
    if SANITIZER_RUNTIME:  # a sanitized shim needs its runtime first; the launcher keeps it there, and the shim once
        env["LD_PRELOAD"] = f"{SANITIZER_RUNTIME}:{SHIM}"
    alone = os.path.join(job.tmp, "bin")
    os.mkdir(alone)
    shutil.copy(LAUNCHER, alone)  # nothing beside it, and no ncclwatch-report on PATH
    proc = subprocess.run([os.path.join(alone, "ncclwatch"), "run", "--dir", os.path.join(job.tmp, "off"), "--", "true"],
                          env=dict(env, PATH="/usr/bin:/bin"), capture_output=True, text=True, timeout=60)
    check(proc.returncode == 0 and "no live hang verdict" in proc.stderr, f"the launcher says so: {proc.stderr}")
    # Two ranks, rank 1 late by 3 s: rank 0's watchdog (0.5 s) fires, the watcher asks for stacks.
    script = os.path.join(job.tmp, "job.py")
    open(script, "w").write(test_watch.JOB)
    folder = os.path.join(job.tmp, "stalled")
    both = f'{sys.executable} {script} 0 {job.tmp} 3 & {sys.executable} {script} 1 {job.tmp} 3; wait'
    proc = subprocess.run([LAUNCHER, "run", "--dir", folder, "--", "sh", "-c", both],
                          env=dict(env, NCCLWATCH_STALL_SEC="0.5"), capture_output=True, text=True, timeout=120)
    check(proc.returncode == 0 and "HANG SUSPECTED" in proc.stderr, f"the stall was seen: {proc.stderr}")
    left = sorted(os.listdir(folder))
    check("dump-now" not in left and "watching" not in left, f"the launcher's own files are gone: {left}")


def nccl_preloaded_ahead_of_the_shim_is_named_and_the_launcher_puts_the_shim_first():
    # LD_PRELOAD=libnccl.so.2:libncclwatch.so (how one tries another NCCL under a framework): every
    # NCCL call went straight to the library, and there was no trace, no alert, not a word.
    nccl = os.path.join(HOSTNCCL_DIR, "libnccl.so.2")
    runtime = [SANITIZER_RUNTIME] if SANITIZER_RUNTIME else []
    job = Job([app("lifecycle_app"), "leaky"], nranks=1, env={"LD_PRELOAD": ":".join(runtime + [nccl, SHIM])})
    r = job.run()[0]
    check(r.returncode == 0, f"the job runs: {r.returncode} {r.stderr}")
    said = [line for line in r.stderr.splitlines() if "Put the shim first" in line]
    check(len(said) == 1 and nccl in said[0] and f"LD_PRELOAD={SHIM}:{nccl}" in said[0],
          f"said once, with the fix: {r.stderr}")
    code, leaks, _ = job.report("leaks", "--json")
    check([u["path"] for u in leaks["not_traced"]] == [nccl] and "before libncclwatch.so" in leaks["not_traced"][0]["reason"],
          f"the trace names the library its calls went to: {leaks['not_traced']}")
    code, summary, _ = job.report("summary")
    check(nccl in summary and "not traced" in summary, f"the summary says it: {summary}")
    # A program that never calls NCCL (a shell under the same preload) hears nothing of it.
    proc = subprocess.run(["sh", "-c", "true"], env=job.env, capture_output=True, text=True, timeout=60)
    check(proc.returncode == 0 and "ncclwatch" not in proc.stderr, f"a shell is left alone: {proc.stderr}")

    # The launcher puts the shim first: the same job is traced, its leak alerted.
    env = dict(job.env, NCCLWATCH_SHIM=SHIM, LD_PRELOAD=":".join(runtime + [nccl]))
    env.pop("NCCLWATCH_DIR")
    folder = os.path.join(job.tmp, "launched")
    proc = subprocess.run([LAUNCHER, "run", "--dir", folder, "--", app("lifecycle_app"), "leaky"], env=env,
                          capture_output=True, text=True, timeout=60)
    check(proc.returncode == 0 and "never destroyed" in proc.stderr and "Put the shim first" not in proc.stderr,
          f"traced under the launcher: {proc.stderr}")
    job.trace_dir = folder
    code, leaks, _ = job.report("leaks", "--json")
    check(leaks["not_traced"] == [] and code == 1, f"the launcher's run is traced: {code} {leaks}")


def an_installed_layout_is_found_through_the_report_tool():
    # A prefix install (bin/ncclwatch, bin/ncclwatch-report, lib/<multiarch>/libncclwatch.so): the
    # launcher asks the report tool where the shim is (`where shim`), preloads that one and the job
    # is traced; with no shim there, both say where they looked and the launcher runs nothing.
    job = Job([], nranks=1, preload=False)
    prefix = os.path.join(job.tmp, "prefix")
    bin_dir, lib_dir = os.path.join(prefix, "bin"), os.path.join(prefix, "lib", "x86_64-linux-gnu")
    os.makedirs(bin_dir)
    os.makedirs(lib_dir)
    for program in (LAUNCHER, REPORT):
        shutil.copy(program, bin_dir)
    installed_shim = os.path.join(lib_dir, "libncclwatch.so")
    shutil.copy(SHIM, installed_shim)
    env = dict(job.env)
    env.pop("NCCLWATCH_SHIM", None)
    where = lambda what, tool=os.path.join(bin_dir, "ncclwatch-report"), e=env: subprocess.run(  # noqa: E731
        [tool, "where", what], env=e, capture_output=True, text=True, timeout=30)
    found = where("shim")
    check(found.returncode == 0 and found.stdout == installed_shim + "\n", (found.returncode, found.stdout, found.stderr))
    check(where("shim", e=dict(env, NCCLWATCH_SHIM="/elsewhere/libncclwatch.so")).stdout == "/elsewhere/libncclwatch.so\n",
          "NCCLWATCH_SHIM comes first")
    # The build's own layout: the shim beside it, the package in the source tree's python/.
    check(where("shim", tool=REPORT).stdout == os.path.realpath(os.path.join(BUILD, "shim", "libncclwatch.so")) + "\n" and
          where("package", tool=REPORT).stdout == os.path.realpath(os.path.join(ROOT, "python")) + "\n",
          (where("shim", tool=REPORT).stdout, where("package", tool=REPORT).stdout))
    no_package = where("package")
    check(no_package.returncode == 1 and "not installed beside " + bin_dir in no_package.stderr, no_package.stderr)
    launcher = os.path.join(bin_dir, "ncclwatch")
    seen = subprocess.run([launcher, "run", "--dir", os.path.join(job.tmp, "seen"), "--", "sh", "-c", "echo $LD_PRELOAD"],
                          env=env, capture_output=True, text=True, timeout=60)
    check(seen.returncode == 0 and installed_shim in seen.stdout.strip().split(":"), (seen.stdout, seen.stderr))
    folder = os.path.join(job.tmp, "traced")
    traced = subprocess.run([launcher, "run", "--dir", folder, "--", app("lifecycle_app"), "leaky"], env=env,
                            capture_output=True, text=True, timeout=60)
    check(traced.returncode == 0 and "never destroyed" in traced.stderr and
          len([f for f in os.listdir(folder) if f.endswith(".nwt")]) == 1, traced.stderr)
    os.unlink(installed_shim)
    missing = where("shim")
    check(missing.returncode == 1 and "libncclwatch.so is not installed beside " + bin_dir in missing.stderr, missing.stderr)
    refused = subprocess.run([launcher, "run", "--dir", os.path.join(job.tmp, "none"), "--", "sh", "-c", "echo ran"],
                             env=env, capture_output=True, text=True, timeout=60)
    check(refused.returncode == 2 and "libncclwatch.so not found" in refused.stderr and "ran" not in refused.stdout,
          (refused.returncode, refused.stdout, refused.stderr))


if __name__ == "__main__":
    main({f.__name__: f for f in (launcher_folders_are_owner_only_under_any_umask,
                                  launcher_says_when_the_verdict_is_off_and_leaves_no_request_behind,
                                  nccl_preloaded_ahead_of_the_shim_is_named_and_the_launcher_puts_the_shim_first,
                                  an_installed_layout_is_found_through_the_report_tool)})
