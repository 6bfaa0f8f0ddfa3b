"""ncclwatch-report on real multi-process runs (CPU stand-in for NCCL, preloaded shim): the hang,
mismatch, divergence, straggler, latency and timeline reports, and the launcher."""
import json
import os
import subprocess

from harness import BUILD, REPORT, SANITIZED, Job, app, check, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def world(report, nranks):
    comms = [c for c in report["comms"] if c["nranks"] == nranks]
    return max(comms, key=lambda c: c.get("last_seq_issued", 0))


def count_mismatch_and_missing_rank():
    job = Job([app("collectives_app"), "count-mismatch"], nranks=3)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, err = job.report("hang", "--json")
    check(code == 1, f"hang exit {code}: {err}")
    comm = world(report, 3)
    mismatches = comm["mismatches"]
    check(any(m["seq"] == 3 and m["field"] == "count" and m["ranks"] == [1] and m["value"] == 512 for m in mismatches),
          f"mismatches {mismatches}")
    check(all(m["seq"] == 3 for m in mismatches), f"only seq 3 differs: {mismatches}")
    check(comm["missing"] == [{"rank": 1, "first_missing_seq": 6}] or
          any(m["rank"] == 1 and m["first_missing_seq"] == 6 for m in comm["missing"]), f"missing {comm['missing']}")
    code, text, _ = job.report("hang")
    check("rank 1" in text and "seq 3" in text, f"verdict text:\n{text}")
    code, summary, _ = job.report("summary")
    check(code == 1 and "MISMATCH" in summary.upper(), f"summary:\n{summary}")


def skip_names_the_divergence_stretch():
    job = Job([app("collectives_app"), "skip-interleaved"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("hang", "--json")
    check(code == 1, f"hang exit {code}")
    divergence = [d for c in report["comms"] for d in c.get("divergence", [])]
    check(any(d["rank"] == 1 and d["from_seq"] <= 7 <= d["to_seq"] and d["to_seq"] - d["from_seq"] <= 5
              for d in divergence), f"divergence {divergence}")
    comm = world(report, 2)
    check(any(m["rank"] == 1 and m["first_missing_seq"] == 20 for m in comm["missing"]), f"missing {comm['missing']}")


def straggler_is_named():
    job = Job([app("collectives_app"), "straggler"], nranks=3, env={"NCCLWATCH_SAMPLE": "1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("hang", "--json")
    comm = world(report, 3)
    stragglers = comm["stragglers"]
    text = json.dumps(stragglers)
    check('"rank": 2' in text, f"stragglers {stragglers}")
    code, text, _ = job.report("hang")
    check("rank 2" in text and "last" in text, f"hang text:\n{text}")


def async_straggler_lateness_is_the_injected_sleep():
    # Rank 2 sleeps 20 ms before each of 30 all-reduces; the others' hosts run ahead of their
    # streams (no synchronize), so host enqueue gaps grow by 20 ms an op. Lateness is read from
    # when each rank's launch started on its stream: it must be the 20 ms injected.
    job = Job([app("collectives_app"), "straggler-async"], nranks=3, env={"NCCLWATCH_SAMPLE": "1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("hang", "--json")
    stragglers = world(report, 3)["stragglers"]
    found = [r for r in stragglers["ranks"] if r["finding"]]
    check(stragglers["measured_on"] == "gpu_start" and [r["rank"] for r in found] == [2], f"stragglers {stragglers}")
    check(SANITIZED or 15.0 <= found[0]["typical_late_ms"] <= 25.0, f"typical lateness vs the 20 ms slept: {found[0]}")
    code, summary, _ = job.report("summary", "--json")
    check(summary["stragglers"] == [found[0]["text"]] and "rank 2 started last" in summary["first_look"],
          f"summary says the same: {summary['stragglers']} {summary['first_look']}")


def lateness_ms(job, comm, rank, clock):
    """The median, over the collectives of `comm` (its id as the reports write it), of how much later
    `rank` started than the last of the others, from the raw records (one host, one clock): by
    `clock` "host" when it called, by "gpu" when its launch began on its stream (the GPU timing
    record of the op's launch). What a straggler finding must rest on, computed apart from it."""
    starts = {}
    for trace in job.traces():
        out = subprocess.run([REPORT, "dump", trace], capture_output=True, text=True, check=True).stdout
        recs = [json.loads(line) for line in out.splitlines()]
        gpu_begin = {r["launch_id"]: r["gpu_begin_ns"] for r in recs
                     if r.get("type") == "gpu_timing" and r["flags"] & 1}  # 1: the begin was measured
        for rec in recs:
            if rec.get("type") == "op" and rec.get("comm_id") == comm and rec.get("seq"):
                t = rec["host_begin_ns"] if clock == "host" else gpu_begin.get(rec["launch_id"])
                if t is not None:
                    starts.setdefault(rec["seq"], {})[rec["rank"]] = t
    late = sorted((s[rank] - max(t for r, t in s.items() if r != rank)) / 1e6 for s in starts.values()
                  if rank in s and len(s) > 1)
    return late[len(late) // 2] if late else 0.0


def short_job_straggler_is_named_with_default_sampling():
    # The last rank sleeps 20 ms before each of only 20 all-reduces, with the shim's default
    # timestamp schedule (no NCCLWATCH_SAMPLE): the summary must name it, lateness near 20 ms.
    job = Job([app("collectives_app"), "straggler-short"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("hang", "--json")
    found = [r for r in world(report, 2)["stragglers"]["ranks"] if r["finding"]]
    check([r["rank"] for r in found] == [1], f"stragglers {world(report, 2)['stragglers']}")
    check(SANITIZED or 15.0 <= found[0]["typical_late_ms"] <= 25.0, f"typical lateness vs the 20 ms slept: {found[0]}")
    code, summary, _ = job.report("summary")
    check("rank 1 started last" in summary, f"the summary names it:\n{summary}")


def clean_job_has_no_false_straggler():
    # On the CPU stand-in, three processes share two cores: one rank's stream may genuinely start
    # late every time (its worker descheduled, or busier as a root), and then naming it is right.
    # What must never happen is a finding the raw GPU timing records do not bear out.
    job = Job([app("collectives_app"), "mixed"], nranks=3, env={"NCCLWATCH_SAMPLE": "1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("hang", "--json")
    check(code == 0, f"hang exit {code}")
    found = [(c["comm"], r) for c in report["comms"] for r in c["stragglers"]["ranks"] if r["finding"]]
    for comm, r in found:
        started_late = lateness_ms(job, comm, r["rank"], "gpu")
        if started_late < 0.5 * r["typical_late_ms"]:
            called_late = lateness_ms(job, comm, r["rank"], "host")
            check(False, f"a straggler the records do not show: rank {r['rank']} {r['typical_late_ms']:.3f} ms late "
                         f"on the GPU by the report, {started_late:.3f} ms by the GPU timing records (its calls "
                         f"{called_late:.3f} ms after the others')")
    code, summary, _ = job.report("summary", "--json")
    if not found:
        check(summary["stragglers"] == [] and summary["first_look"].startswith("nothing"), f"{summary['first_look']}")


# Each rank on a "host" of its own: a UTS namespace (its own hostname) and a time namespace whose
# CLOCK_MONOTONIC is shifted by thousands of seconds, as unrelated as two nodes' clocks are.
ON_OWN_HOST = ('shift=$((NCCLWATCH_TEST_RANK * 7000 + 1000)); '
               'exec unshare --uts --time --monotonic "$shift" --fork '
               'sh -c \'hostname "node$NCCLWATCH_TEST_RANK" && exec "$@"\' sh "$@"')


def on_own_hosts(argv, nranks, env=None):
    probe = subprocess.run(["unshare", "--uts", "--time", "--monotonic", "1000", "--fork", "true"], capture_output=True)
    if probe.returncode != 0:
        print("skipped: no UTS and time namespaces here (needs root)")
        raise SystemExit(77)
    return Job(["sh", "-c", ON_OWN_HOST, "sh", *argv], nranks=nranks, env=env)


def several_hosts_give_the_same_answers():
    # The async straggler and the skipped all-reduce again, each rank on a host of its own.
    job = on_own_hosts([app("collectives_app"), "straggler-async"], 3, env={"NCCLWATCH_SAMPLE": "1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, summary, _ = job.report("summary", "--json")
    check(summary["hosts"] == ["node0", "node1", "node2"] and summary["ranks"] == 3, f"three hosts seen: {summary}")
    code, report, _ = job.report("hang", "--json")
    hosts = report["clock"]["hosts"]
    check(len(hosts) == 3 and all(h["aligned"] for h in hosts), f"hosts aligned: {report['clock']}")
    stragglers = world(report, 3)["stragglers"]
    found = [r for r in stragglers["ranks"] if r["finding"]]
    check([r["rank"] for r in found] == [2] and (SANITIZED or 15.0 <= found[0]["typical_late_ms"] <= 25.0),
          f"stragglers {stragglers}")

    job = on_own_hosts([app("collectives_app"), "skip-interleaved"], 2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("hang", "--json")
    divergence = [d for c in report["comms"] for d in c.get("divergence", [])]
    check(code == 1 and any(d["rank"] == 1 and d["from_seq"] <= 7 <= d["to_seq"] for d in divergence), f"{divergence}")
    check(all(d.get("likely_seq", 7) == 7 for d in divergence), f"no wrong seq named: {divergence}")


def one_process_driving_two_ranks_is_not_a_hang():
    job = Job([app("collectives_app"), "one-process-two-ranks"], nranks=1, env={"NCCLWATCH_SAMPLE": "1"})
    r = job.run()[0]
    check(r.returncode == 0, f"{r.returncode} {r.stderr}")
    code, report, err = job.report("hang", "--json")
    comm = world(report, 2)
    check(code == 0 and comm["mismatched_seqs"] == 0 and comm["missing"] == [] and comm["divergence"] == [],
          f"two ranks of one process read as a hang: {code} {comm} {err}")
    code, summary, _ = job.report("summary", "--json")
    check(code == 0 and summary["ranks"] == 2, f"summary {summary}")
    code, latency, _ = job.report("latency", "--json")
    # Grouped launches are timed as their ncclGroupEnd: 3 groups, each seen by both ranks.
    rows = [row for row in latency["rows"] if row["op"] == "ncclGroupEnd"]
    check(len(rows) == 1 and rows[0]["calls"] == 3 and rows[0]["ranks_timed"] == 2, f"latency rows {latency['rows']}")


def latency_table_from_gpu_events():
    job = Job([app("collectives_app"), "straggler"], nranks=2, env={"NCCLWATCH_SAMPLE": "1"})
    job.run()
    code, report, _ = job.report("latency", "--json")
    rows = [r for r in report["rows"] if r["op"] == "ncclAllReduce"]
    check(len(rows) == 1 and rows[0]["bytes"] == 1024 and rows[0]["calls"] == 10 and rows[0]["timing"] == "gpu",
          f"rows {rows}")
    # The straggler (rank 1) makes rank 0 wait ~20 ms inside each all-reduce on the (stand-in) GPU,
    # while rank 1's own all-reduces finish at once: half the samples are slow.
    check(rows[0]["max_us"] > 15_000 and rows[0]["p90_us"] > 15_000, f"row {rows[0]}")
    # 10 calls on 2 ranks: each rank's first apart, 18 steady samples; bandwidth from the median.
    check(rows[0]["samples"] == 18 and rows[0]["first_calls"]["samples"] == 2, f"row {rows[0]}")
    check(abs(rows[0]["algbw_gbps"] - 1024 / (rows[0]["p50_us"] * 1e-6) / 1e9) < 0.01 * rows[0]["algbw_gbps"], f"row {rows[0]}")
    code, csv, _ = job.report("latency", "--csv")
    check(csv.splitlines()[0].startswith("comm,") and len(csv.splitlines()) >= 2, csv)


def timeline_has_one_slice_per_op():
    job = Job([app("collectives_app"), "mixed"], nranks=2, env={"NCCLWATCH_SAMPLE": "1"})
    job.run()
    out = os.path.join(job.tmp, "timeline.json")
    code, _, err = job.report("timeline", "-o", out)
    check(code == 0, f"timeline exit {code}: {err}")
    events = json.load(open(out))["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith(("nccl", "group of"))
           and e["name"] not in ("ncclGroupEnd", "ncclCommInitRank", "ncclCommSplit", "ncclCommDestroy")
           and "seq" in e.get("args", {})]
    dumped = 0
    for trace in job.traces():
        lines = subprocess.run([REPORT, "dump", trace], capture_output=True, text=True).stdout.splitlines()
        dumped += sum(1 for l in lines if '"type":"op"' in l and '"ncclGroupEnd"' not in l)
    # A grouped launch is one slice on its stream, counting its ops.
    drawn = sum(e["args"].get("ops", 1) for e in ops)
    check(drawn == dumped, f"{drawn} ops drawn in {len(ops)} slices for {dumped} ops")


def launcher_runs_a_job_and_keeps_its_status():
    job = Job([], nranks=1, preload=False)
    out_dir = os.path.join(job.tmp, "job")
    cmd = [os.path.join(ROOT, "scripts", "ncclwatch"), "run", "--dir", out_dir, "--",
           "python3", os.path.join(ROOT, "tests", "launcher", "mprun.py"), "-n", "2", "--",
           app("lifecycle_app"), "leaky"]
    env = dict(job.env, NCCLWATCH_SHIM=os.path.join(BUILD, "shim", "libncclwatch.so"))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    check(proc.returncode == 0, f"the job's status is kept: {proc.returncode} {proc.stderr[-2000:]}")
    check("ncclwatch summary" in proc.stderr and out_dir in proc.stderr, f"summary after the job:\n{proc.stderr}")
    # Each rank's alert names the world communicator; the job's block names it once, with both ranks.
    block = proc.stderr.split("the job's leaks, each communicator once:")[-1]
    check("the job's leaks" in proc.stderr and block.count("comm ") >= 1 and
          block.count('"world" (ncclCommInitRankConfig, 2 ranks): leaked (alive at exit) on rank(s) 0,1') == 1,
          f"one block for the job:\n{block}")
    check(len([f for f in os.listdir(out_dir) if f.endswith(".nwt")]) == 2, "one trace per rank in --dir")
    failing = subprocess.run(cmd[:4] + ["--on-leak", "fail"] + cmd[4:], env=env, capture_output=True, text=True,
                             timeout=120)
    check(failing.returncode != 0, "--on-leak fail makes the leaky job fail")
    # A job none of whose processes called NCCL leaves no folder behind (it would read as the newest job).
    empty_dir = os.path.join(job.tmp, "no-nccl")
    nothing = subprocess.run(cmd[:2] + ["--dir", empty_dir, "--", "true"], env=env, capture_output=True, text=True, timeout=60)
    check(nothing.returncode == 0 and "no process of this job called NCCL" in nothing.stderr and not os.path.exists(empty_dir),
          f"no empty job folder: {nothing.returncode} {nothing.stderr} {os.path.exists(empty_dir)}")



def ops_issued_just_before_exit_keep_their_timings():
    # 40 all-reduces of 1 MiB, then exit without waiting for them: a normal exit gives the launches
    # still running a bounded while to finish, so each keeps its GPU timing and none is reported
    # as never completed.
    job = Job([app("collectives_app"), "exit-in-flight"], nranks=2, env={"NCCLWATCH_SAMPLE": "1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    if SANITIZED:
        # Under ThreadSanitizer an all-reduce of the stand-in can take longer than the 250 ms
        # without progress after which the exit stops waiting (by design): the plain build checks.
        return
    for trace in job.traces():
        out = subprocess.run([REPORT, "dump", trace], capture_output=True, text=True, check=True).stdout
        recs = [json.loads(line) for line in out.splitlines()]
        timed = {r["launch_id"] for r in recs if r.get("type") == "op" and r["op"] == "ncclAllReduce"}
        timings = {r["launch_id"] for r in recs if r.get("type") == "gpu_timing"}
        check(len(timed) == 40 and timed <= timings, f"{trace}: {len(timed - timings)} of {len(timed)} launches lost their timing")
    code, hang, _ = job.report("hang", "--json")
    check(all(not c["incomplete"] for c in hang["comms"]), f"no op never completed: {hang['verdict']}")


def demo_job_leaks_and_fills_the_latency_table():
    # The README's main job (scripts/demo): examples/leaky_nccl on 2 ranks through the launcher,
    # every launch GPU-timed. It must leak the world communicator and nothing else, and give one
    # GPU-timed row per size of its all-reduce sweep, with a bandwidth.
    job = Job([], nranks=1, preload=False)
    out_dir = os.path.join(job.tmp, "demo")
    cmd = [os.path.join(ROOT, "scripts", "ncclwatch"), "run", "--dir", out_dir, "--",
           "python3", os.path.join(ROOT, "tests", "launcher", "mprun.py"), "-n", "2", "--",
           os.path.join(BUILD, "examples", "leaky_nccl")]
    env = dict(job.env, NCCLWATCH_SHIM=os.path.join(BUILD, "shim", "libncclwatch.so"), NCCLWATCH_SAMPLE="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    check(proc.returncode == 0 and proc.stdout.count("done (the world communicator is never destroyed)") == 2,
          f"{proc.returncode} {proc.stdout} {proc.stderr[-2000:]}")
    code, leaks, _ = job.report("leaks", "--json", paths=[out_dir])
    check(code == 1 and {(c["name"], c["state"]) for c in leaks["leaks"]} == {("world", "leaked")} and
          len(leaks["leaks"]) == 2, f"only world leaks, on both ranks: {leaks['leaks']}")
    code, latency, _ = job.report("latency", "--json", paths=[out_dir])
    world = {r["bytes"]: r for r in latency["rows"] if r.get("name") == "world" and r["op"] == "ncclAllReduce"}
    check(sorted(world) == [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20], sorted(world))
    for size in (4 << 10, 64 << 10, 1 << 20, 16 << 20):
        r = world[size]
        check(r["timing"] == "gpu" and r["calls"] == 20 and r["busbw_gbps"] is not None and r["busbw_gbps"] > 0, r)
    check(world[4 << 20]["calls"] == 1, world[4 << 20])  # the first all-reduce, before the sweep


def launcher_refuses_bad_arguments():
    launcher = os.path.join(ROOT, "scripts", "ncclwatch")
    def run(*args):
        return subprocess.run([launcher, *args], capture_output=True, text=True, timeout=30)
    for args, words in [(["run", "--dir"], "--dir needs a value"), (["run", "--dir", "--on-leak", "fail", "--", "true"], "--dir needs a value"),
                        (["run", "--on-leak", "maybe", "--", "true"], "--on-leak must be"), (["lol"], "unknown command 'lol'"),
                        (["run", "--bogus", "--", "true"], "unknown option '--bogus'"), (["run"], "no command to run")]:
        p = run(*args)
        check(p.returncode == 2 and words in p.stderr and "unbound" not in p.stderr, (args, p.returncode, p.stderr))
    p = run("--help")
    check(p.returncode == 0 and "Examples" in p.stdout, (p.returncode, p.stdout))
    version = run("--version").stdout.split()[-1]
    report_version = subprocess.run([REPORT, "--version"], capture_output=True, text=True).stdout.split()[1]
    check(version == report_version, f"launcher {version} and report {report_version} are one version")

if __name__ == "__main__":
    main({f.__name__: f for f in [
        async_straggler_lateness_is_the_injected_sleep, short_job_straggler_is_named_with_default_sampling,
        clean_job_has_no_false_straggler, several_hosts_give_the_same_answers,
        launcher_refuses_bad_arguments, demo_job_leaks_and_fills_the_latency_table,
        ops_issued_just_before_exit_keep_their_timings,
        count_mismatch_and_missing_rank, skip_names_the_divergence_stretch, straggler_is_named, one_process_driving_two_ranks_is_not_a_hang,
        latency_table_from_gpu_events, timeline_has_one_slice_per_op, launcher_runs_a_job_and_keeps_its_status]})
