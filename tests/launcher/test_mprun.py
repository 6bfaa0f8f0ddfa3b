#!/usr/bin/env python3
"""Tests of mprun.py (command line and module API) and rendezvous.h.

Usage: test_mprun.py RENDEZVOUS_CHECK_PROGRAM
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mprun  # noqa: E402

MPRUN = os.path.join(HERE, "mprun.py")
PY = sys.executable
RENDEZVOUS_CHECK = None  # set from argv


def cli(*args, timeout=30):
    return subprocess.run([PY, MPRUN, *args], capture_output=True, text=True, timeout=timeout)


def rank_program(code):
    """argv running `code` with rank = int(NCCLWATCH_TEST_RANK) predefined."""
    return [PY, "-c", "import os, sys, time, signal\nrank = int(os.environ['NCCLWATCH_TEST_RANK'])\n" + code]


class CommandLine(unittest.TestCase):
    def test_all_ranks_succeed_and_output_is_prefixed(self):
        r = cli("-n", "3", "--", *rank_program("print('hello from', rank)"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for i in range(3):
            self.assertIn(f"[rank {i}] hello from {i}\n", r.stdout)
            self.assertIn(f"rank {i}: exit 0\n", r.stdout)

    def test_failing_rank_fails_the_job(self):
        r = cli("-n", "2", "--", *rank_program("sys.exit(3 if rank == 1 else 0)"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank 0: exit 0", r.stdout)
        self.assertIn("rank 1: exit 3", r.stdout)

    def test_signal_is_reported_by_name(self):
        r = cli("-n", "2", "--", *rank_program("if rank == 1: os.kill(os.getpid(), signal.SIGTERM)"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank 1: signal SIGTERM", r.stdout)

    def test_timeout_kills_every_rank_still_running(self):
        t0 = time.monotonic()
        r = cli("--timeout", "1", "-n", "2", "--", *rank_program("time.sleep(0 if rank == 0 else 60)"))
        self.assertLess(time.monotonic() - t0, 20)
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank 0: exit 0", r.stdout)
        self.assertIn("rank 1: timeout", r.stdout)

    def test_logdir_gets_per_rank_files(self):
        with tempfile.TemporaryDirectory() as d:
            r = cli("-n", "2", "--logdir", d, "--",
                    *rank_program("print('out', rank); print('err', rank, file=sys.stderr)"))
            self.assertEqual(r.returncode, 0)
            self.assertNotIn("[rank", r.stdout)
            for i in range(2):
                with open(os.path.join(d, f"rank{i}.out")) as f:
                    self.assertEqual(f.read(), f"out {i}\n")
                with open(os.path.join(d, f"rank{i}.err")) as f:
                    self.assertEqual(f.read(), f"err {i}\n")

    def test_environment_of_the_ranks(self):
        code = ("print('env', os.environ['NCCLWATCH_TEST_NRANKS'], os.environ['EXTRA'], "
                "os.path.isdir(os.environ['NCCLWATCH_TEST_RENDEZVOUS']), os.environ['NCCLWATCH_TEST_RENDEZVOUS'])")
        r = cli("-n", "2", "--env", "EXTRA=a=b", "--", *rank_program(code))
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l.split() for l in r.stdout.splitlines() if " env " in l]
        self.assertEqual(len(lines), 2)
        self.assertEqual({tuple(l[3:6]) for l in lines}, {("2", "a=b", "True")})
        self.assertEqual(len({l[6] for l in lines}), 1, "ranks share one rendezvous folder")
        self.assertFalse(os.path.exists(lines[0][6]), "rendezvous folder is removed afterwards")

    def test_missing_program_is_a_usage_error(self):
        r = cli("-n", "2")
        self.assertNotEqual(r.returncode, 0)


class ModuleApi(unittest.TestCase):
    def test_run_ranks_returns_per_rank_results(self):
        results = mprun.run_ranks(rank_program("print(rank); sys.exit(rank)"), 3, env={"X": "1"}, timeout=30)
        self.assertEqual([r.returncode for r in results], [0, 1, 2])
        self.assertEqual([r.stdout for r in results], ["0\n", "1\n", "2\n"])
        self.assertFalse(any(r.timed_out for r in results))

    def test_run_ranks_timeout(self):
        results = mprun.run_ranks(rank_program("time.sleep(60)"), 2, timeout=0.5)
        self.assertTrue(all(r.timed_out for r in results))
        self.assertTrue(all(r.returncode == -signal.SIGKILL for r in results))

    def test_ranks_killed_by_the_test(self):
        job = mprun.start_ranks(rank_program("print('up', flush=True); time.sleep(60)"), 3)
        time.sleep(0.3)
        os.kill(job.procs[1].pid, signal.SIGKILL)
        job.procs[2].send_signal(signal.SIGTERM)
        mprun.kill_ranks(job, signal.SIGKILL)  # the rest
        results = mprun.wait_ranks(job, timeout=10)
        self.assertEqual([r.returncode for r in results], [-signal.SIGKILL, -signal.SIGKILL, -signal.SIGTERM])
        self.assertFalse(any(r.timed_out for r in results))
        self.assertEqual(results[1].describe(), "rank 1: signal SIGKILL")


class Rendezvous(unittest.TestCase):
    def test_ids_agree_per_tag_and_barriers_repeat(self):
        results = mprun.run_ranks([RENDEZVOUS_CHECK], 3, timeout=30)
        self.assertEqual([r.returncode for r in results], [0, 0, 0], [r.stderr for r in results])
        ids = [{l.split()[1]: l.split()[2] for l in r.stdout.splitlines() if l.startswith("id ")} for r in results]
        self.assertEqual(ids[0], ids[1])
        self.assertEqual(ids[0], ids[2])
        self.assertNotEqual(ids[0]["world"], ids[0]["other"])
        for r in results:
            self.assertIn("passed barrier 1", r.stdout)

    def test_single_process_needs_no_launcher(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("NCCLWATCH_TEST_")}
        r = subprocess.run([RENDEZVOUS_CHECK], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rank 0 of 1", r.stdout)


if __name__ == "__main__":
    RENDEZVOUS_CHECK = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
