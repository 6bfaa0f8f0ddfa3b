#!/usr/bin/env python3
"""Starts N ranks of a test program, like mpirun on one machine.

Command line:
    python3 mprun.py -n N [--timeout SEC] [--logdir DIR] [--env K=V ...] -- PROG ARGS...

Each rank gets NCCLWATCH_TEST_RANK, NCCLWATCH_TEST_NRANKS and
NCCLWATCH_TEST_RENDEZVOUS (a fresh temporary folder shared by the ranks, see
rendezvous.h). Prints one line per rank ("rank I: exit CODE", "rank I: signal
NAME" or "rank I: timeout") and exits 0 iff every rank exited 0.

As a module:
    from mprun import run_ranks, start_ranks, wait_ranks
    results = run_ranks([prog, arg], 2, env={"K": "V"}, timeout=30)
    job = start_ranks([prog], 3)      # job.procs[i] is rank i's Popen
    os.kill(job.procs[1].pid, signal.SIGKILL)
    results = wait_ranks(job, timeout=30)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Callable, Mapping, Sequence


@dataclass
class RankResult:
    rank: int
    returncode: int  # negative: killed by that signal, like subprocess
    stdout: str
    stderr: str
    timed_out: bool

    def describe(self) -> str:
        if self.timed_out:
            return f"rank {self.rank}: timeout"
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = str(-self.returncode)
            return f"rank {self.rank}: signal {name}"
        return f"rank {self.rank}: exit {self.returncode}"


@dataclass
class Job:
    """Ranks started by start_ranks; wait_ranks collects them."""

    procs: list[subprocess.Popen]
    rendezvous: str
    remove_rendezvous: bool
    _readers: list[threading.Thread] = field(default_factory=list)
    _out: list[list[str]] = field(default_factory=list)
    _err: list[list[str]] = field(default_factory=list)
    _files: list[IO] = field(default_factory=list)


def _pump(stream: IO[str], sink: list[str], echo: Callable[[str], None] | None) -> None:
    for line in stream:
        sink.append(line)
        if echo:
            echo(line)
    stream.close()


_print_lock = threading.Lock()


def _prefixed(rank: int, target: IO[str]) -> Callable[[str], None]:
    def echo(line: str) -> None:
        with _print_lock:
            target.write(f"[rank {rank}] {line}" if line.endswith("\n") else f"[rank {rank}] {line}\n")
            target.flush()

    return echo


def start_ranks(
    argv: Sequence[str],
    nranks: int,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    rendezvous: str | None = None,
    logdir: str | None = None,
    passthrough: bool = False,
) -> Job:
    """Starts the ranks and returns at once.

    Output is captured (see RankResult); with logdir it goes to
    DIR/rank<I>.out/.err instead, with passthrough it is also echoed with a
    "[rank I] " prefix. Each rank leads its own process group, so a timeout
    kills what it started too.
    """
    if nranks < 1:
        raise ValueError("nranks must be >= 1")
    remove = rendezvous is None
    if rendezvous is None:
        rendezvous = tempfile.mkdtemp(prefix="mprun-")
    job = Job(procs=[], rendezvous=rendezvous, remove_rendezvous=remove)
    if logdir:
        os.makedirs(logdir, exist_ok=True)
    for rank in range(nranks):
        rank_env = dict(os.environ)
        rank_env.update(env or {})
        rank_env["NCCLWATCH_TEST_RANK"] = str(rank)
        rank_env["NCCLWATCH_TEST_NRANKS"] = str(nranks)
        rank_env["NCCLWATCH_TEST_RENDEZVOUS"] = rendezvous
        out: list[str] = []
        err: list[str] = []
        job._out.append(out)
        job._err.append(err)
        if logdir:
            fo = open(os.path.join(logdir, f"rank{rank}.out"), "w")
            fe = open(os.path.join(logdir, f"rank{rank}.err"), "w")
            job._files += [fo, fe]
            proc = subprocess.Popen(list(argv), env=rank_env, cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=fo, stderr=fe, start_new_session=True)
        else:
            proc = subprocess.Popen(list(argv), env=rank_env, cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    errors="replace", start_new_session=True)
            for stream, sink, target in ((proc.stdout, out, sys.stdout), (proc.stderr, err, sys.stderr)):
                echo = _prefixed(rank, target) if passthrough else None
                t = threading.Thread(target=_pump, args=(stream, sink, echo), daemon=True)
                t.start()
                job._readers.append(t)
        job.procs.append(proc)
    return job


def _kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def kill_ranks(job: Job, sig: int = signal.SIGKILL) -> None:
    """Sends sig to every rank still running (and to what it started)."""
    for p in job.procs:
        if p.poll() is None:
            _kill_group(p, sig)


def wait_ranks(job: Job, timeout: float | None = 60) -> list[RankResult]:
    """Waits for all ranks; after timeout seconds SIGKILLs those still running."""
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = [False] * len(job.procs)
    while any(p.poll() is None for p in job.procs):
        if deadline is not None and time.monotonic() > deadline:
            for i, p in enumerate(job.procs):
                if p.poll() is None:
                    timed_out[i] = True
                    _kill_group(p)
            break
        time.sleep(0.01)
    for p in job.procs:
        p.wait()
    for t in job._readers:
        t.join(timeout=5)
    for f in job._files:
        f.close()
    if job.remove_rendezvous:
        shutil.rmtree(job.rendezvous, ignore_errors=True)
    return [
        RankResult(rank=i, returncode=p.returncode, stdout="".join(job._out[i]), stderr="".join(job._err[i]),
                   timed_out=timed_out[i])
        for i, p in enumerate(job.procs)
    ]


def run_ranks(argv: Sequence[str], nranks: int, env: Mapping[str, str] | None = None, timeout: float = 60,
              cwd: str | None = None) -> list[RankResult]:
    """Runs nranks ranks of argv to completion and returns their results."""
    return wait_ranks(start_ranks(argv, nranks, env=env, cwd=cwd), timeout=timeout)


def main(args: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run N ranks of a test program on this machine.")
    parser.add_argument("-n", "--nranks", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=None, help="seconds before all ranks are killed")
    parser.add_argument("--logdir", help="write rank<I>.out/.err here instead of passing output through")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="extra environment, repeatable")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROG ARGS...")
    opts = parser.parse_args(args)
    command = opts.command[1:] if opts.command[:1] == ["--"] else opts.command
    if not command:
        parser.error("missing program (after --)")
    env = {}
    for kv in opts.env:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            parser.error(f"--env expects K=V, got {kv!r}")
        env[key] = value

    job = start_ranks(command, opts.nranks, env=env, logdir=opts.logdir, passthrough=not opts.logdir)

    def forward(signum: int, _frame: object) -> None:
        kill_ranks(job)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    results = wait_ranks(job, timeout=opts.timeout)
    for r in results:
        print(r.describe(), flush=True)
    return 0 if all(r.returncode == 0 and not r.timed_out for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
