"""Collectives under the shim (CPU stand-in): sequence numbers that agree across ranks, GPU
timings from CUDA events, the stall watchdog, and CUDA-graph capture."""
import collections
import json
import subprocess

from harness import REPORT, Job, app, check, main


def records(trace):
    out = subprocess.run([REPORT, "dump", trace], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def ops_by_rank(job):
    """rank -> list of op records (type 'op') in file order, plus gpu timings by launch id."""
    ranks = {}
    for trace in job.traces():
        recs = records(trace)
        ops = [r for r in recs if r["type"] == "op"]
        timings = {r["launch_id"]: r for r in recs if r["type"] == "gpu_timing"}
        stalls = [r for r in recs if r["type"] == "stall"]
        rank = next(o["rank"] for o in ops if o["op"] != "ncclGroupEnd")
        ranks[rank] = {"ops": ops, "timings": timings, "stalls": stalls}
    return ranks


def signature(op):
    return (op["op"], op["count"], op["datatype"], op["redop"], op["peer"])


EVERY_LAUNCH = {"NCCLWATCH_SAMPLE": "1"}  # GPU timestamps on every launch (the default is one in 8)


def sequence_numbers_agree(nranks):
    job = Job([app("collectives_app"), "mixed"], nranks=nranks, env=EVERY_LAUNCH)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    ranks = ops_by_rank(job)
    check(sorted(ranks) == list(range(nranks)), f"ranks {sorted(ranks)}")
    per_comm = {}
    for rank, data in ranks.items():
        by_comm = collections.defaultdict(list)
        for op in data["ops"]:
            if op["op"] in ("ncclSend", "ncclRecv", "ncclGroupEnd"):
                continue
            by_comm[op["comm_id"]].append((op["seq"], signature(op)))
        for comm, seqs in by_comm.items():
            check([s for s, _ in seqs] == list(range(1, len(seqs) + 1)), f"rank {rank} comm {comm} seqs {seqs}")
            if op_list := per_comm.get(comm):
                check(op_list == seqs, f"comm {comm}: rank {rank} differs:\n{seqs}\nvs\n{op_list}")
            else:
                per_comm[comm] = seqs
    world = max(per_comm.values(), key=len)
    check(len(world) == 10, f"world comm collectives: {len(world)}")
    # Point-to-point: numbered per peer and direction from 1.
    for rank, data in ranks.items():
        p2p = [(o["op"], o["peer"], o["seq"]) for o in data["ops"] if o["op"] in ("ncclSend", "ncclRecv")]
        check(p2p == [("ncclSend", (rank + 1) % nranks, 1), ("ncclRecv", (rank + nranks - 1) % nranks, 1)],
              f"rank {rank} p2p {p2p}")
        # Grouped ops share their group's launch id; the group end says how many ops it launched.
        ends = [o for o in data["ops"] if o["op"] == "ncclGroupEnd"]
        check([e["count"] for e in ends] == [2, 2, 2], f"group sizes {[e['count'] for e in ends]}")
        for end in ends:
            members = [o for o in data["ops"] if o["launch_id"] == end["launch_id"] and o is not end]
            check(len(members) == end["count"] and all(m["group_depth"] >= 1 for m in members), f"group {end}")
        # Every launch got a GPU timing from the stand-in's events.
        launches = {o["launch_id"] for o in data["ops"] if o["group_depth"] == 0}
        check(launches <= set(data["timings"]), f"rank {rank}: untimed launches {launches - set(data['timings'])}")
        for t in data["timings"].values():
            check(t["gpu_begin_ns"] <= t["gpu_end_ns"], f"timing {t}")


def sequence_numbers_agree_on_2_ranks():
    sequence_numbers_agree(2)


def sequence_numbers_agree_on_3_ranks():
    sequence_numbers_agree(3)


def sequence_numbers_agree_on_4_ranks():
    sequence_numbers_agree(4)


def config_variants_are_their_collectives():
    job = Job([app("collectives_app"), "config-variants"], nranks=2, env=EVERY_LAUNCH)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    ranks = ops_by_rank(job)
    expected = ["ncclAllReduce", "ncclAllGather", "ncclBroadcast"] * 2
    for rank, data in ranks.items():
        ops = [o for o in data["ops"] if o["op"] != "ncclGroupEnd"]
        check([o["op"] for o in ops] == expected and [o["seq"] for o in ops] == list(range(1, 7)), f"rank {rank}: {ops}")
        flagged = [bool(o["flags"] & 8) for o in ops]  # kOpCollConfig
        check(flagged == [rank == 0] * 6, f"rank {rank}: config flags {flagged}")
    code, report, err = job.report("hang", "--json")
    world = [c for c in report["comms"] if c["nranks"] == 2][0]
    check(code == 0 and world["mismatched_seqs"] == 0 and world["missing"] == [], f"hang report {world} {err}")


def gpu_time_comes_from_events():
    job = Job([app("collectives_app"), "late-peer"], nranks=2, env=EVERY_LAUNCH)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    rank0 = ops_by_rank(job)[0]
    op = [o for o in rank0["ops"] if o["op"] == "ncclAllReduce"][0]
    timing = rank0["timings"][op["launch_id"]]
    gpu_ms = (timing["gpu_end_ns"] - timing["gpu_begin_ns"]) / 1e6
    host_ms = (op["host_end_ns"] - op["host_begin_ns"]) / 1e6
    check(gpu_ms >= 250, f"rank 0 waited ~300 ms for its peer on the stream, GPU span {gpu_ms:.1f} ms")
    check(host_ms < 50, f"the host call returned at once: {host_ms:.1f} ms")
    check(timing["gpu_begin_ns"] >= op["host_begin_ns"] - 5_000_000, "mapped onto the host clock")
    host_only = Job([app("collectives_app"), "late-peer"], nranks=2, env={"NCCLWATCH_TIMING": "host"})
    host_only.run()
    rank0 = ops_by_rank(host_only)[0]
    check(not rank0["timings"] and all(not (o["flags"] & 2) for o in rank0["ops"]), "host mode records no events")


def sampling_times_one_launch_in_n():
    job = Job([app("collectives_app"), "mixed"], nranks=2, env={"NCCLWATCH_SAMPLE": "4"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    for rank, data in ops_by_rank(job).items():
        ungrouped = [o for o in data["ops"] if o["group_depth"] == 0 and o["op"] != "ncclGroupEnd"]
        timed = [o for o in ungrouped if o["flags"] & 2]
        # Launches are counted per thread across ungrouped calls and group ends (12 here): 1st, 5th, 9th.
        check(len(data["timings"]) == 3, f"rank {rank}: {len(data['timings'])} timings for 12 launches")
        check(all(o["launch_id"] in data["timings"] for o in timed), "timed ops have their timing")
        check(len(ungrouped) == 9 and 1 <= len(timed) <= 3, f"rank {rank}: {len(timed)} of {len(ungrouped)} timed")


def full_trace_costs_records_not_the_job():
    # NCCLWATCH_MAX_MB=1 stands in for a full disk: the file cannot grow past its first chunk.
    job = Job([app("collectives_app"), "bench", "30000"], nranks=1, env={"NCCLWATCH_MAX_MB": "1"}, timeout=120)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    check(r.stderr.count("reached NCCLWATCH_MAX_MB") == 1, f"said once: {r.stderr!r}")
    code, summary, _ = job.report("summary", "--json")
    check(summary["lost_records"] > 20000, f"lost records counted: {summary.get('lost_records')}")
    ops = [x for x in records(job.traces()[0]) if x["type"] == "op"]
    check([o["seq"] for o in ops] == list(range(1, len(ops) + 1)) and len(ops) > 5000, "what fit is intact")
    # The destroy's record was lost with the rest, but the exit record (from its reserve) says
    # nothing was alive: no false leak from a full trace.
    check(summary["processes_without_final_record"] == 0, f"the full trace still ends: {summary}")
    code, leaks, err = job.report("leaks", "--json", "--no-symbols")
    check(code == 0 and leaks["leaks"] == [], f"a full trace must not make leaks: exit {code} {leaks} {err}")
    check([c["state"] for c in leaks["communicators"]] == ["release_unrecorded"], f"{leaks['communicators']}")


def watchdog_names_the_pending_seq():
    job = Job([app("collectives_app"), "skip", "3500"], nranks=2, env={"NCCLWATCH_STALL_SEC": "1"})
    results = job.run()
    check(all(r.returncode == 0 for r in results), f"exits {[r.returncode for r in results]}")
    check("ncclAllReduce seq 5" in results[0].stderr and "has not completed" in results[0].stderr,
          f"rank 0 stderr: {results[0].stderr!r}")
    ranks = ops_by_rank(job)
    stalls = ranks[0]["stalls"]
    check(len(stalls) == 1 and stalls[0]["state"] == "stalled" and stalls[0]["seq"] == 5, f"stalls {stalls}")
    waited = (stalls[0]["time_ns"] - stalls[0]["enqueued_ns"]) / 1e9
    check(1.0 <= waited <= 3.0, f"written {waited:.2f} s after enqueue (threshold 1 s)")
    snapshot = stalls[0]["comms"]
    check(len(snapshot) == 1 and snapshot[0]["last_issued_seq"] == 5 and snapshot[0]["last_completed_seq"] == 4,
          f"snapshot {snapshot}")
    check(ranks[1]["stalls"] == [], "rank 1 completed all it issued")


def captured_stream_gets_no_event():
    job = Job([app("collectives_app"), "capture"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stdout} {r.stderr}")
        check("events recorded while capturing: 0" in r.stdout, r.stdout)
    for rank, data in ops_by_rank(job).items():
        ops = [o for o in data["ops"] if o["op"] == "ncclAllReduce"]
        check(len(ops) == 2, f"rank {rank}: {ops}")
        check(not ops[0]["flags"] & 1 and ops[0]["flags"] & 2, f"the first is timed, not captured: {ops[0]}")
        check(ops[1]["flags"] & 1 and not ops[1]["flags"] & 2, f"the captured one is marked, untimed: {ops[1]}")
        check(ops[1]["launch_id"] not in data["timings"], "no timing for the captured op")


if __name__ == "__main__":
    main({f.__name__: f for f in [
        sequence_numbers_agree_on_2_ranks, sequence_numbers_agree_on_3_ranks, sequence_numbers_agree_on_4_ranks,
        config_variants_are_their_collectives, gpu_time_comes_from_events, sampling_times_one_launch_in_n, watchdog_names_the_pending_seq,
        full_trace_costs_records_not_the_job,
        captured_stream_gets_no_event]})
