"""ncclwatch-report rules: Prometheus rules that promtool accepts, run by `promtool test rules` over
the series `ncclwatch-report metrics` writes for real and synthetic jobs: each hang, teardown hang
and leak the job was made to have fires its alert on the rank or process it was given, and the
fine jobs fire nothing."""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from report_harness import REAL, check, job, report, report_json, run_case, tempdir  # noqa: E402

SAMPLE = re.compile(r'^(ncclwatch_[a-z0-9_]*)(\{.*\})? (\S+)$')
LABEL = re.compile(r'([a-z_][a-z0-9_]*)="((?:[^"\\]|\\.)*)"')
ALERTS = ("NcclHangSuspected", "NcclCommunicatorStalled", "NcclCommunicatorsLeaked", "NcclTeardownHung", "NcclStraggler",
          "NcclIdleCommunicatorMemory")
# The counters the straggler rule takes rates of: fed as the job's run, from 0 to their totals over the
# first 10 minutes (the rules' --straggler-after), and judged then; the other alerts at 20 minutes.
RAMPED = ("ncclwatch_collective_gpu_seconds_total", "ncclwatch_collectives_timed_total")
EVAL_TIME = {alert: "10m" if alert == "NcclStraggler" else "20m" for alert in ALERTS}


def promtool():
    tool = shutil.which("promtool")
    if not tool:
        print("promtool is not installed (scripts/bootstrap installs it): skipped")
        sys.exit(77)
    return tool


def rules_file(*settings):
    p = report("rules", *settings)
    check(p.returncode == 0, (settings, p.stdout, p.stderr))
    path = os.path.join(tempdir(), "ncclwatch.rules.yml")
    with open(path, "w") as f:
        f.write(p.stdout)
    return path


def quoted(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fired(folder, rules):
    """{alert: [labels]} that fire 20 minutes into a scrape of the job's metrics repeated every
    minute (a finished job's series stay as they ended; RAMPED ones grow to their totals)."""
    metrics = report("metrics", folder).stdout
    series = [(m.group(1) + (m.group(2) or ""), m.group(3)) for m in map(SAMPLE.match, metrics.splitlines()) if m]
    check(series, f"{folder}: no series")
    lines = [f"rule_files: [{quoted(rules)}]", "evaluation_interval: 1m", "tests:", "  - interval: 1m",
             "    input_series:"]
    for name, value in series:
        values = f"0+{float(value) / 10!r}x10 {value}x20" if name.startswith(RAMPED) else f"{value}x30"
        lines += [f"      - series: {quoted(name)}", f"        values: {quoted(values)}"]
    # promtool test rules says which alerts fired when the expectation (none) is not met.
    lines.append("    alert_rule_test:")
    for alert in ALERTS:
        lines += [f"      - eval_time: {EVAL_TIME[alert]}", f"        alertname: {alert}", "        exp_alerts: []"]
    path = os.path.join(tempdir(), "test.yml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    p = subprocess.run([promtool(), "test", "rules", path], capture_output=True, text=True, timeout=120)
    out = {}
    for alert in ALERTS:
        m = re.search(rf"alertname: {alert}, time: {EVAL_TIME[alert]},\s*exp:\[\],\s*got:(.*?)(?=alertname:|\Z)", p.stdout + p.stderr, re.S)
        if m:
            out[alert] = [dict(LABEL.findall(labels)) for labels in re.findall(r"Labels:\{([^}]*)\}", m.group(1))]
    check(p.returncode == 0 or out, f"{folder}: promtool test rules failed otherwise:\n{p.stdout}\n{p.stderr}")
    return out


def test_rules_pass_promtool_check():
    for settings in ((), ("--hang-after", "60", "--teardown-after", "30", "--straggler-after", "120", "--scrape-interval", "15",
                          "--idle-after", "90", "--idle-min-mib", "512")):
        path = rules_file(*settings)
        p = subprocess.run([promtool(), "check", "rules", path], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "SUCCESS: 11 rules found" in p.stdout, (settings, p.stdout, p.stderr))
        text = open(path).read()
        for alert in ALERTS:
            check(f"alert: {alert}" in text, (alert, text))
        if settings:
            check("for: 60s" in text and "for: 30s" in text and "[120s]" in text and "[60s]" in text and
                  "--hang-after 60 --teardown-after 30 --straggler-after 120 --scrape-interval 15 --idle-after 90 "
                  "--idle-min-mib 512" in text and "[90s]" in text and f">= {512 << 20}" in text, text)
    for bad in (("--hang-after", "0.5"), ("--hang-after", "-3"), ("--teardown-after", "x"), ("--straggler-after", "0"),
                ("--scrape-interval", "1.5"), ("--scrape-interval", "700000"), ("--idle-after", "0"),
                ("--idle-min-mib", "-1")):
        p = report("rules", *bad)
        check(p.returncode == 2 and not p.stdout and p.stderr, (bad, p.returncode, p.stdout, p.stderr))


def test_rules_fire_on_what_each_job_was_made_to_have():
    rules = rules_file()
    # Real jobs (tests/analyzers/real, recorded on an H200) and synthetic ones, with what each was
    # made to have: the rank that skipped a collective, a destroy that never returned.
    jobs = {name: os.path.join(REAL, name) for name in sorted(os.listdir(REAL))}
    for scenario in ("clean", "straggler", "skip_interleaved_2", "count_mismatch_then_stop"):
        jobs["gen_" + scenario] = job(scenario)
    # skip: rank 1 skips a collective; graph_replays: it replays its CUDA graph once less than rank 0;
    # raises: it raises at step 5, leaving rank 0 inside seq 5.
    # straggler: rank 1 sleeps 20 ms before each all-reduce (on the H200); gen_straggler: rank 2, 5 ms.
    made_to_straggle = {"straggler": ("1278860c3a764e15", "1"), "gen_straggler": ("a11ce00000000001", "2")}
    stragglers = 0
    made_to_hang = {"skip": "1", "skip_timed": "1", "graph_replays": "1", "raises": "1", "gen_skip_interleaved_2": "1"}
    compared = 0
    for name, folder in jobs.items():
        got = fired(folder, rules)
        code, leaks, _ = report_json("leaks", folder)
        code, hang_report, _ = report_json("hang", folder)
        # The ranks `hang` names as never issuing a seq their peers issued, and the rank made to.
        hang = {(a["comm"], a["rank"]) for a in got.get("NcclHangSuspected", [])}
        missing = {(c["comm"], str(m["rank"])) for c in hang_report["comms"] for m in c["missing"]}
        check(hang == missing, f"{name}: hang alerts {hang}, missing ranks {missing}")
        check(name not in made_to_hang or made_to_hang[name] in {rank for _, rank in hang}, f"{name}: {hang}")
        check(name in made_to_hang or name.startswith("gen_count_mismatch") or not hang, f"{name}: {hang}")
        # Stalled communicators: among those with stall records, none in a job without a missing rank.
        stalled = {a["comm"] for a in got.get("NcclCommunicatorStalled", [])}
        check(stalled <= {c["comm"] for c in hang_report["comms"] if c["stall_records"]} and (missing or not stalled),
              f"{name}: stalled alerts {stalled}")
        # Leaks: the processes `leaks` names with a communicator never destroyed (a teardown that never
        # returned has an alert of its own).
        leaked = {(l["host"], str(l["pid"])) for l in leaks["leaks"]
                  if l["kind"] == "communicator" and not l["state"].endswith("_hung")}
        alerted = {(a["host"], a["pid"]) for a in got.get("NcclCommunicatorsLeaked", [])}
        check(alerted == leaked, f"{name}: leak alerts {alerted}, leaks {leaked}")
        # Teardowns that never returned, as `leaks` names them (a process killed inside one: not hung).
        teardown = {(a["pid"], a["state"]) for a in got.get("NcclTeardownHung", [])}
        want = {(str(l["pid"]), l["state"]) for l in leaks["leaks"] if l["kind"] == "communicator" and l["state"].endswith("_hung")}
        check(teardown == want, f"{name}: teardown alerts {teardown}, leaks {want}")
        # Stragglers: the ranks `hang` finds making their peers wait (on the GPU, far above chance).
        straggling = {(a["comm"], a["rank"]) for a in got.get("NcclStraggler", [])}
        found = {(c["comm"], str(r["rank"])) for c in hang_report["comms"] for r in c["stragglers"]["ranks"] if r["finding"]}
        check(straggling == found, f"{name}: straggler alerts {straggling}, hang's stragglers {found}")
        check(name not in made_to_straggle or straggling == {made_to_straggle[name]}, f"{name}: {straggling}")
        stragglers += bool(straggling)
        # Idle memory: a finished job's processes hold none (its metrics carry no memory gauge).
        idle = got.get("NcclIdleCommunicatorMemory", [])
        check(not idle, f"{name}: idle alerts of a finished job {idle}")
        check(name != "teardown_hang" or want, f"{name}: its destroy never returned: {leaks['leaks']}")
        check(name != "teardown_killed" or not want, f"{name}: killed inside its teardown, not hung: {want}")
        compared += 1
    check(compared == len(jobs) >= 19 and stragglers == len(made_to_straggle), (compared, stragglers))


if __name__ == "__main__":
    run_case(globals())
