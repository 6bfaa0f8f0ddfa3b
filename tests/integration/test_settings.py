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


if __name__ == "__main__":
    main({"bad_settings_are_named_not_fatal": bad_settings_are_named_not_fatal,
          "trace_is_owner_only_and_masks_secrets": trace_is_owner_only_and_masks_secrets})
