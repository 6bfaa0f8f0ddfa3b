"""Settings from users' scripts and what a trace keeps: a bad value never breaks the job, is named
once, and the default is used; trace files are owner-only and hold no secret-looking arguments."""
import json
import os
import stat
import subprocess

from harness import REPORT, Job, app, check, main


def dump(trace):
    out = subprocess.run([REPORT, "dump", trace], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def bad_settings_are_named_not_fatal():
    # SAMPLE=2^32 became 0 and killed the job with SIGFPE; STALL_SEC=inf reported every op as stalled;
    # DISABLE=false disabled the shim.
    bad = {"NCCLWATCH_SAMPLE": "4294967296", "NCCLWATCH_STALL_SEC": "inf", "NCCLWATCH_DISABLE": "false",
           "NCCLWATCH_FRAMES": "abc", "NCCLWATCH_ON_LEAK": "abc", "NCCLWATCH_METRICS_SEC": "0"}
    job = Job([app("collectives_app"), "mixed"], nranks=2, env=bad)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: exit {r.returncode}: {r.stderr}")
        for name, value in bad.items():
            lines = [l for l in r.stderr.splitlines() if l.startswith(f"ncclwatch: {name}={value} is not")]
            check(len(lines) == 1 and "using" in lines[0], f"rank {rank}: {name} not named once: {r.stderr!r}")
    traces = job.traces()
    check(len(traces) == 2, f"the shim must still record (DISABLE=false): {traces}")
    for trace in traces:
        recs = dump(trace)
        check(not [r for r in recs if r["type"] == "stall"], f"{trace}: stalls with STALL_SEC=inf")
        check(any(r["type"] == "op" for r in recs), f"{trace}: no op records")
        notices = [r for r in recs if r["type"] == "notice"]
        check(sum("NCCLWATCH_SAMPLE=4294967296" in json.dumps(n) for n in notices) == 1,
              f"{trace}: the refused setting is not in the trace: {notices}")


def trace_is_owner_only_and_masks_secrets():
    job = Job([app("lifecycle_app"), "leaky", "--api-key=hunter2", "--hf-token", "tok123", "--lr", "0.1"], nranks=1)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    trace = job.traces()[0]
    mode = stat.S_IMODE(os.stat(trace).st_mode)
    check(mode == 0o600, f"trace mode {oct(mode)}, expected 0600")
    raw = open(trace, "rb").read()
    check(b"hunter2" not in raw and b"tok123" not in raw, "a secret argument is in the trace")
    check(b"--api-key=***" in raw and b"--lr 0.1" in raw, "the command line is not kept, masked")
    readable = Job([app("lifecycle_app"), "leaky"], nranks=1, env={"NCCLWATCH_GROUP_READABLE": "1"})
    readable.run()
    mode = stat.S_IMODE(os.stat(readable.traces()[0]).st_mode)
    check(mode == 0o640, f"NCCLWATCH_GROUP_READABLE=1 gave {oct(mode)}")


def trace_masks_every_secret_form():
    # Only `--password`-like option names were masked: every other way of passing a secret was
    # stored verbatim, and a 120 KB NCCL_* value was stored whole.
    secrets = ["dbsecret1", "toksecret2", "urlsecret3", "authsecret4", "psecret5", "credsecret6", "envsecret7",
               "apisecret8", "bearersecret9"]
    argv = [app("lifecycle_app"), "leaky", "--db-pass=dbsecret1", "token=toksecret2",
            "https://alice:urlsecret3@example.com/data", "--auth", "authsecret4", "-p", "psecret5",
            "--credentials", "credsecret6", "--apiKey", "apisecret8", "--lr", "0.1", "--tokenizer", "gpt2",
            "--max-tokens", "512"]
    env = {"NCCL_TEST_CLIENT_SECRET": "envsecret7", "NCCL_IB_PKEY": "0x8001",
           "NCCL_PROXY_URL": "https://bearersecret9@proxy.example.com", "NCCL_HUGE": "x" * 120_000}
    job = Job(argv, nranks=1, env=env)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    raw = open(job.traces()[0], "rb").read()
    for secret in secrets:
        check(secret.encode() not in raw, f"{secret} is in the trace")
    for kept in [b"--db-pass=***", b"token=***", b"https://alice:***@example.com/data", b"--auth ***", b"-p ***",
                 b"--credentials ***", b"--apiKey ***", b"--lr 0.1", b"--tokenizer gpt2", b"--max-tokens 512",
                 b"NCCL_TEST_CLIENT_SECRET=***", b"NCCL_IB_PKEY=0x8001", b"NCCL_PROXY_URL=https://***@proxy.example.com"]:
        check(kept in raw, f"{kept!r} is not in the trace")
    check(b"x" * 4096 not in raw and b"120000 bytes" in raw, "the 120 KB value is not cut, or the cut is not said")
    # NCCLWATCH_FULL_CMDLINE=1 keeps the command line (not the environment) verbatim.
    full = Job(argv, nranks=1, env=dict(env, NCCLWATCH_FULL_CMDLINE="1"))
    full.run()
    raw = open(full.traces()[0], "rb").read()
    check(b"--db-pass=dbsecret1" in raw and b"envsecret7" not in raw, "FULL_CMDLINE=1 is not the command line verbatim")


def refused_setting_is_shown_escaped_and_cut():
    # A refused value was echoed with its raw bytes: escape sequences reached the terminal.
    hostile = "1\x1b]0;owned\x07\x1b[2J" + "9" * 5000
    job = Job([app("lifecycle_app"), "leaky"], nranks=1, env={"NCCLWATCH_SAMPLE": hostile})
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr!r}")
    lines = [l for l in r.stderr.splitlines() if l.startswith("ncclwatch: NCCLWATCH_SAMPLE=")]
    check(len(lines) == 1, f"not named once: {r.stderr!r}")
    line = lines[0]
    check("\x1b" not in line and "\x07" not in line, f"raw control bytes on stderr: {line!r}")
    check(line.startswith("ncclwatch: NCCLWATCH_SAMPLE=1\\x1b]0;owned\\x07\\x1b[2J999"), line)
    check(len(line) < 300 and f"{len(hostile)} bytes" in line and "using 32" in line, line)


if __name__ == "__main__":
    main({"bad_settings_are_named_not_fatal": bad_settings_are_named_not_fatal,
          "trace_is_owner_only_and_masks_secrets": trace_is_owner_only_and_masks_secrets,
          "trace_masks_every_secret_form": trace_masks_every_secret_form,
          "refused_setting_is_shown_escaped_and_cut": refused_setting_is_shown_escaped_and_cut})
