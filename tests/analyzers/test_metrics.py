"""ncclwatch-report metrics: Prometheus text that promtool accepts, whose values are the other
reports' values, written in one step."""
import json
import os
import re
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import craft_trace  # noqa: E402

from report_harness import REAL, check, job, report, run_case, tempdir  # noqa: E402


def promtool_accepts(text, what):
    promtool = shutil.which("promtool")
    if not promtool:
        print("promtool not installed (scripts/bootstrap installs it): format checked by this test's parser only")
        return
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, (what, p.stdout, p.stderr))


SAMPLE = re.compile(r'^([a-z_:][a-z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_][a-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels)): value}; every sample line must parse and follow its family's TYPE."""
    samples, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        check(m, f"unparsable sample line: {line!r}")
        name, _, labels, value = m.groups()
        family = re.sub(r"_(sum|count)$", "", name)
        check(name in typed or family in typed, f"{name} before its TYPE line")
        pairs = frozenset((k, v.encode().decode("unicode_escape")) for k, v in LABEL.findall(labels or ""))
        samples[(name, pairs)] = float(value)
    return samples


def metrics_of(path):
    p = report("metrics", path)
    check(p.returncode == 0, (p.returncode, p.stderr))
    promtool_accepts(p.stdout, path)
    return p.stdout, parse(p.stdout)


def value(samples, metric, **labels):
    key = (metric, frozenset(labels.items()))
    check(key in samples, f"no sample {metric}{labels}; have {sorted(k for k in samples if k[0] == metric)}")
    return samples[key]


def test_metrics_agree_with_latency_and_hang():
    for path in (job("straggler"), os.path.join(REAL, "straggler")):
        _, samples = metrics_of(path)
        latency = json.loads(report("latency", "--json", path).stdout)
        gpu_rows = [r for r in latency["rows"] if r["busbw_gbps"] is not None]
        check(gpu_rows, latency["rows"])
        for r in latency["rows"]:
            if r["p50_us"] is None:
                continue
            labels = dict(comm=r["comm"], op=r["op"], bytes=str(r["bytes"]), timing=r["timing"])
            check(abs(value(samples, "ncclwatch_op_latency_seconds", quantile="0.5", **labels) - r["p50_us"] / 1e6) < 1e-9,
                  r)
            check(value(samples, "ncclwatch_op_latency_seconds_count", **labels) == r["samples"], r)
        for r in gpu_rows:
            bw = value(samples, "ncclwatch_op_bus_bandwidth_bytes_per_second", comm=r["comm"], op=r["op"],
                       bytes=str(r["bytes"]))
            check(abs(bw - r["busbw_gbps"] * 1e9) <= 1e-6 * bw, (bw, r))
        # Ops issued per rank: what dump's op records count.
        issued = {k: v for k, v in samples.items() if k[0] == "ncclwatch_ops_issued_total"}
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".nwt"))
        ops = {}
        for f in files:
            for line in report("dump", f).stdout.splitlines():
                rec = json.loads(line)
                if rec["type"] == "op" and rec["seq"] > 0 and rec["op"] not in ("ncclSend", "ncclRecv"):  # collectives
                    key = (rec["comm_id"], str(rec["rank"]))
                    ops[key] = ops.get(key, 0) + 1
        check(len(issued) == len(ops), (issued, ops))
        for (comm_id, rank), n in ops.items():
            check(value(samples, "ncclwatch_ops_issued_total", comm=comm_id, rank=rank) == n, (comm_id, rank, n))
        check(value(samples, "ncclwatch_trace_processes") == len(files), files)


def test_metrics_count_leaks_like_leaks():
    d = tempdir()
    hostile = b'we"ird\\name\nx'
    # Beside the leaked communicator, an init that never returned: not created, as the shim counts.
    hung_init = craft_trace.api_event(craft_trace.CALL_BEGIN, 9, craft_trace.COMM_INIT_RANK, 5_200_000_000,
                                      comm_id=0xB0B0000000000002, nranks=2)
    trace = craft_trace.leaked_comm_named(hostile)
    end = trace.index(craft_trace.exit_records())
    with open(os.path.join(d, "a.nwt"), "wb") as f:
        f.write(trace[:end] + hung_init + trace[end:])
    text, samples = metrics_of(d)
    leaks = json.loads(report("leaks", "--json", d).stdout)
    states = {}
    for c in leaks["communicators"]:
        states[c["state"]] = states.get(c["state"], 0) + 1
    check(states.get("leaked") == 1 and states.get("init_hung") == 1, leaks)
    for state, n in states.items():
        check(value(samples, "ncclwatch_communicators", host="node0", pid="4242", state=state) == n, (state, n))
    check(value(samples, "ncclwatch_communicators_created_total", host="node0", pid="4242") == 1, text)
    check(value(samples, "ncclwatch_communicator_info", comm="a11ce00000000001", name=hostile.decode(), nranks="2") == 1,
          text)
    check('name="we\\"ird\\\\name\\nx"' in text, text)


def test_metrics_file_replaced_in_one_step():
    d = job("clean")
    out = tempdir()
    target = os.path.join(out, "ncclwatch.prom")
    with open(target, "w") as f:
        f.write("old\n")
    p = report("metrics", d, "-o", target)
    check(p.returncode == 0 and p.stdout == "", (p.returncode, p.stdout, p.stderr))
    check(os.listdir(out) == ["ncclwatch.prom"], os.listdir(out))  # no temporary file left beside it
    text = open(target).read()
    check(text.startswith("# HELP ncclwatch_trace_processes") and "old" not in text, text[:200])
    promtool_accepts(text, target)
    # A folder it may not write to: named, exit 2, nothing left behind.
    if os.geteuid() != 0:
        os.chmod(out, stat.S_IRUSR | stat.S_IXUSR)
        p = report("metrics", d, "-o", target)
        os.chmod(out, stat.S_IRWXU)
        check(p.returncode == 2 and target in p.stderr, (p.returncode, p.stderr))
    # A device or link is written to, never renamed over (as root a rename would replace /dev/stdout).
    if os.path.islink("/dev/stdout"):
        p = report("metrics", d, "-o", "/dev/stdout")
        check(p.returncode == 0 and p.stdout.startswith("# HELP") and os.path.islink("/dev/stdout"), p.stderr)
    missing = os.path.join(out, "no-such-folder", "x.prom")
    p = report("metrics", d, "-o", missing)
    check(p.returncode == 2 and missing in p.stderr, (p.returncode, p.stderr))
    check(report("metrics", os.path.join(out, "nothing-here")).returncode == 2, "no traces: exit 2")


if __name__ == "__main__":
    run_case(globals())
