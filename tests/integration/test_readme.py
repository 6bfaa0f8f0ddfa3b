"""Every command the README shows is run: each line of its fenced code blocks that starts with
`ncclwatch-report`, `ncclwatch run`, `scripts/ncclwatch run` or `python -m ncclwatch`, on the CPU
stand-in. Placeholders become real things: a job folder (DIR, or any folder or file named) is a
job the launcher traced (the example leaking its world communicator, all-reducing on 2 ranks);
FILE is one of its traces; an output after -o goes to a scratch folder; the job command after
`--` (torchrun, python train.py, mpirun, ...) becomes that example on 2 ranks; a synopsis's
[optional] parts are left out. A command passes
when it ends with 0 (nothing found) or 1 (findings), never 2 (bad usage); `watch`, which runs
until stopped, must still be running after 2 s and leave nothing on stderr."""
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from harness import BUILD, HOSTNCCL_DIR, REPORT, SHIM, check, main

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LAUNCHER = os.path.join(ROOT, "scripts", "ncclwatch")
MPRUN = os.path.join(ROOT, "tests", "launcher", "mprun.py")
LEAKY = os.path.join(BUILD, "examples", "leaky_nccl")
STARTS = ("ncclwatch-report", "ncclwatch run", "scripts/ncclwatch run", "python -m ncclwatch")
# Options of ncclwatch-report and the launcher that take a value, and how to fill it.
OUTPUT_OPTIONS = {"-o", "--output", "--metrics-file"}
VALUE_OPTIONS = {"--format", "--ranks", "--comm", "--from", "--to", "--interval", "--pid", "--lag", "--on-leak"}


def readme_commands():
    """(line number, command) for each line of a fenced block that starts a command of ours."""
    commands, fenced = [], False
    for number, line in enumerate(open(os.path.join(ROOT, "README.md")), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        text = line.strip()
        if fenced and text.startswith(STARTS):
            commands.append((number, text))
    return commands


def job_command():
    return [sys.executable, MPRUN, "-n", "2", "--", LEAKY]


def concrete(words, job, scratch):
    """The README's words with placeholders made real."""
    out, i = [], 0
    while i < len(words):
        word = words[i]
        if word == "--":  # the job to run: the example on 2 ranks
            return out + ["--"] + job_command()
        if word in OUTPUT_OPTIONS and i + 1 < len(words):
            name = os.path.basename(words[i + 1].replace("%p", "p").replace("%h", "h")) or "out"
            out += [word, os.path.join(scratch, f"{len(os.listdir(scratch))}-{name}")]
            i += 2
            continue
        if word in VALUE_OPTIONS and i + 1 < len(words):
            out += [word, words[i + 1]]
            i += 2
            continue
        if word == "--dir" and i + 1 < len(words):
            out += [word, os.path.join(scratch, f"run-{len(os.listdir(scratch))}")]
            i += 2
            continue
        if word.startswith("-") or i == 0:
            out.append(word)
        elif word == "FILE":
            out.append(sorted(f for f in (os.path.join(job, n) for n in os.listdir(job)) if f.endswith(".nwt"))[0])
        elif re.fullmatch(r"[a-z]+", word) and not os.path.exists(word):
            out.append(word)  # a subcommand: summary, leaks, run, ...
        else:
            out.append(job)  # DIR, FILE|DIR, ncclwatch/job-1234, traces/, ...
        i += 1
    return out


def program(words):
    """The command's first words made into the built tools."""
    text = " ".join(words)
    if text.startswith("ncclwatch-report"):
        return [REPORT] + words[1:]
    if text.startswith(("ncclwatch run", "scripts/ncclwatch run")):
        return [LAUNCHER] + words[1:]
    return [sys.executable, "-m", "ncclwatch"] + words[3:]  # python -m ncclwatch ...


def readme_commands_run():
    commands = readme_commands()
    reports = {shlex.split(c, comments=True)[1] for _, c in commands if c.startswith("ncclwatch-report ")}
    check(len(commands) >= 10 and {"leaks", "latency", "hang", "timeline", "html", "metrics", "dump", "watch"} <= reports,
          f"the README's commands: {commands}")
    tmp = tempfile.mkdtemp(prefix="ncclwatch-readme-")
    env = dict(os.environ, NCCLWATCH_SHIM=SHIM, NCCLWATCH_WATCH="0",
               LD_LIBRARY_PATH=HOSTNCCL_DIR + ":" + os.environ.get("LD_LIBRARY_PATH", ""),
               PATH=os.path.dirname(REPORT) + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NCCLWATCH_DIR", None)
    job = os.path.join(tmp, "job")
    traced = subprocess.run([LAUNCHER, "run", "--dir", job, "--"] + job_command(), env=env, cwd=tmp,
                            capture_output=True, text=True, timeout=120)
    check(traced.returncode == 0 and any(f.endswith(".nwt") for f in os.listdir(job)), traced.stderr[-2000:])
    scratch = os.path.join(tmp, "out")
    os.makedirs(scratch)
    for number, text in commands:
        # A synopsis ("run [--dir DIR] [--on-leak warn|fail|off] -- CMD") runs without its options.
        words = shlex.split(re.sub(r"\s*\[[^\]]*\]", "", text), comments=True)
        argv = program(concrete(words, job, scratch))
        if "watch" in words[:2]:
            p = subprocess.Popen(argv, env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(2)
            alive = p.poll() is None
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=30)
            check(alive and "error" not in err.lower(), f"README line {number}: {text}\n{argv}\n{err}")
            print(f"ok (still watching after 2 s): README:{number}: {text}")
            continue
        p = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True, timeout=180)
        check(p.returncode in (0, 1), f"README line {number}: {text}\n{argv}\nexit {p.returncode}\n{p.stderr[-2000:]}")
        print(f"ok (exit {p.returncode}): README:{number}: {text}")


if __name__ == "__main__":
    main({f.__name__: f for f in [readme_commands_run]})
