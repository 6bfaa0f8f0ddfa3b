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
        family = re.sub(r"_(sum|count|bucket)$", "", name)
        check(name in typed or family in typed, f"{name} before its TYPE line")
        pairs = frozenset((k, v.encode().decode("unicode_escape")) for k, v in LABEL.findall(labels or ""))
        samples[(name, pairs)] = float(value)
    return samples


def metrics_of(path, env=None):
    p = subprocess.run([os.environ["NCCLWATCH_REPORT"], "metrics", path], capture_output=True, text=True, env=env) if env \
        else report("metrics", path)
    check(p.returncode == 0, (p.returncode, p.stderr))
    promtool_accepts(p.stdout, path)
    return p.stdout, parse(p.stdout)


def value(samples, metric, **labels):
    key = (metric, frozenset(labels.items()))
    check(key in samples, f"no sample {metric}{labels}; have {sorted(k for k in samples if k[0] == metric)}")
    return samples[key]


def test_metrics_agree_with_latency_and_hang():
    # The real traces' processes ran under torchrun, whose run id (TORCHELASTIC_RUN_ID) is "none"
    # unless given; the synthetic ones recorded no environment: the tool's own NCCLWATCH_JOB names it.
    for path, job_id in ((job("straggler"), "job-42"), (os.path.join(REAL, "straggler"), "none")):
        text, samples = metrics_of(path, env=dict(os.environ, NCCLWATCH_JOB="job-42"))
        # Every sample carries the job's id, values are rounded, and the build is named.
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        check(all(f'job_id="{job_id}"' in line for line in lines), [l for l in lines if job_id not in l][:3])
        check(all(len(re.sub(r"[^0-9]", "", line.rsplit(" ", 1)[1].split("e")[0]).lstrip("0")) <= 9 for line in lines),
              [l for l in lines if len(l.rsplit(" ", 1)[1]) > 12][:3])
        info = [k for k in samples if k[0] == "ncclwatch_build_info"]
        reads = re.search(r"trace format (\d+),", report("--version").stdout)[1]
        check(len(info) == 1 and dict(info[0][1])["trace_format"] == reads and dict(info[0][1])["version"], info)
        latency = json.loads(report("latency", "--json", path).stdout)
        gpu_rows = [r for r in latency["rows"] if r["busbw_gbps"] is not None]
        check(gpu_rows, latency["rows"])
        for r in latency["rows"]:
            if r["p50_us"] is None:
                continue
            labels = dict(comm=r["comm"], op=r["op"], bytes=str(r["bytes"]), timing=r["timing"], job_id=job_id)
            check(value(samples, "ncclwatch_op_latency_seconds_count", **labels) == r["samples"], r)
            check(value(samples, "ncclwatch_op_latency_seconds_bucket", le="+Inf", **labels) == r["samples"], r)
            # The half-octave bucket where the cumulative count first reaches half holds latency's p50
            # (to the finer histogram's 1.6 %), as histogram_quantile() would find it.
            buckets = sorted((float(dict(k[1])["le"]), v) for k, v in samples.items()
                             if k[0] == "ncclwatch_op_latency_seconds_bucket" and dict(k[1])["le"] != "+Inf"
                             and all(dict(k[1]).get(n) == labels[n] for n in labels))
            check(all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), f"cumulative: {buckets}")
            edge = next(i for i, (le, n) in enumerate(buckets) if n >= r["samples"] / 2)
            p50 = r["p50_us"] / 1e6
            low = buckets[edge - 1][0] if edge else 0.0
            check(low * 0.98 <= p50 <= buckets[edge][0] * 1.02, (p50, low, buckets[edge], r))
        for r in gpu_rows:
            bw = value(samples, "ncclwatch_op_bus_bandwidth_bytes_per_second", comm=r["comm"], op=r["op"],
                       bytes=str(r["bytes"]), job_id=job_id)
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
            check(value(samples, "ncclwatch_ops_issued_total", comm=comm_id, rank=rank, job_id=job_id) == n, (comm_id, rank, n))
        check(value(samples, "ncclwatch_trace_processes", job_id=job_id) == len(files), files)


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
    check(text.startswith("# HELP ncclwatch_build_info") and "old" not in text, text[:200])
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
