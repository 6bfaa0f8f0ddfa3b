"""Collectives under the shim (CPU stand-in): sequence numbers that agree across ranks, GPU
timings from CUDA events, the stall watchdog, and CUDA-graph capture."""
import collections
import json
import os
import signal
import subprocess
import time

from harness import REPORT, SANITIZED, Job, app, check, main


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


EVERY_LAUNCH = {"NCCLWATCH_SAMPLE": "1"}  # GPU timestamps on every launch (the default: the first 4 of a shape, then one in 32)


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


def sampling_times_the_first_launches_of_each_shape():
    # NCCLWATCH_SAMPLE=8: the first 16 launches of each op shape on a comm get timestamps, then one
    # in 8 (the 17th, 25th, ...): all-reduce x1024 20 launches -> 17, x7 3 -> 3, broadcast 10 -> 10,
    # the group of two 6 -> 6. At least: a launch a millisecond or more after the stream's last
    # timed one is timed too (a loaded machine may space them so).
    job = Job([app("collectives_app"), "shapes"], nranks=2, env={"NCCLWATCH_SAMPLE": "8"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    for rank, data in ops_by_rank(job).items():
        ops = [o for o in data["ops"] if o["group_depth"] == 0]
        def timed(op, count):
            return sum(1 for o in ops if o["op"] == op and o["count"] == count and o["flags"] & 2)
        got = (timed("ncclAllReduce", 1024), timed("ncclAllReduce", 7), timed("ncclBroadcast", 1024),
               sum(1 for o in ops if o["op"] == "ncclGroupEnd" and o["flags"] & 2))
        first_sixteen = [o for o in ops if o["op"] == "ncclAllReduce" and o["count"] == 1024][:17]
        check(all(o["flags"] & 2 for o in first_sixteen) and got[0] <= 20 and got[1:] == (3, 10, 6),
              f"rank {rank}: timed launches per shape {got}, expected (17 or more, 3, 10, 6)")
        timed_ids = {o["launch_id"] for o in ops if o["flags"] & 2}
        check(timed_ids == set(data["timings"]), f"rank {rank}: {len(timed_ids)} timed launches, "
              f"{len(data['timings'])} GPU timings")


def small_budget_keeps_the_newest_ops():
    # NCCLWATCH_MAX_MB=1: a ring of 12,288 records for ops and GPU timings. 30,000 all-reduces wrap
    # it: the newest are kept in full, every call is counted, no lifecycle record is lost.
    job = Job([app("collectives_app"), "bench", "30000"], nranks=1, env={"NCCLWATCH_MAX_MB": "1"}, timeout=120)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    check("NCCLWATCH_MAX_MB" not in r.stderr, f"a wrapped ring loses nothing: {r.stderr!r}")
    trace = job.traces()[0]
    check(os.path.getsize(trace) <= 1 << 20, f"the trace keeps to its budget: {os.path.getsize(trace)} bytes")
    code, summary, _ = job.report("summary", "--json")
    check(summary["lost_records"] == 0, f"nothing lost: {summary.get('lost_records')}")
    window = summary["window"]
    check(not window["complete"] and window["ops_counted"] == 30000 and window["processes_wrapped"] == 1,
          f"the window is named: {window}")
    ops = [x for x in records(trace) if x["type"] == "op"]
    seqs = [o["seq"] for o in ops]
    check(seqs == list(range(30001 - len(seqs), 30001)) and len(seqs) > 10000,
          f"the newest ops, in order, none missing: {len(seqs)} from seq {seqs[:1]}")
    check(window["ops_kept"] == len(ops), f"ops kept {window['ops_kept']} == {len(ops)} read")
    code, latency, _ = job.report("latency", "--json")
    rows = [row for row in latency["rows"] if row["op"] == "ncclAllReduce"]
    check(len(rows) == 1 and rows[0]["calls"] == 30000 and rows[0]["calls_in_window"] == len(ops),
          f"latency counts every call: {rows}")
    code, hang, _ = job.report("hang", "--json")
    check(code == 0 and hang["comms"][0]["last_seq_issued"] == 30000, f"hang judges the window: {hang['verdict']}")
    code, leaks, err = job.report("leaks", "--json", "--no-symbols")
    check(code == 0 and leaks["leaks"] == [], f"no false leak: exit {code} {leaks} {err}")
    check([c["state"] for c in leaks["communicators"]] == ["destroyed"], f"the destroy was kept: {leaks['communicators']}")


def soak_keeps_the_hang_in_a_small_trace():
    # Two ranks, 10 million all-reduces each (400,000 under a sanitizer) under a 2 MiB budget, a
    # side communicator made and destroyed every 100,000; then rank 1 stops, rank 0's next
    # all-reduce waits for it, and both are killed. The traces keep the hang, every lifecycle
    # record and a count of every call.
    n = 400_000 if SANITIZED else 10_000_000
    job = Job([app("collectives_app"), "soak", str(n)], nranks=2,
              env={"NCCLWATCH_MAX_MB": "2", "NCCLWATCH_STALL_SEC": "0.5", "HOSTNCCL_LOCAL_OPS": str(n)})
    started = time.monotonic()
    job.start()
    job.wait_for_files(["soak.0", "soak.1"], timeout=300)
    issued_s = time.monotonic() - started
    time.sleep(1.5)  # the watchdog's stall record, 0.5 s after the last launch
    job.signal_all(signal.SIGKILL)
    traces = job.traces()
    sizes = [os.path.getsize(t) for t in traces]
    check(len(traces) == 2 and max(sizes) <= 2 << 20, f"two traces within the budget: {sizes}")

    started = time.monotonic()
    code, hang, err = job.report("hang", "--json")
    read_s = time.monotonic() - started
    check(code == 1, f"hang: exit {code} {err}")
    world = hang["comms"][0]
    check(world["last_seq_issued"] == n + 1 and [m["rank"] for m in world["missing"]] == [1]
          and world["missing"][0]["first_missing_seq"] == n + 1, f"the stall named from the kept window: {world['verdict']}")
    check(world["mismatches"] == [], f"ranks' windows start at different seqs, which is no mismatch: {world['mismatches'][:3]}")
    check(not hang["window"]["complete"] and hang["window"]["ops_counted"] == 2 * n + 1, f"{hang['window']}")

    code, latency, _ = job.report("latency", "--json")
    calls = {row["bytes"]: row["calls"] for row in latency["rows"] if row["op"] == "ncclAllReduce"}
    check(calls == {4: n // 2, 1024: n // 2, 28: 1}, f"every call counted: {calls}")
    code, leaks, _ = job.report("leaks", "--json", "--no-symbols")
    states = collections.Counter(c["state"] for c in leaks["communicators"])
    check(states == {"destroyed": 2 * (n // 100_000), "leaked": 2},
          f"every lifecycle record kept: {states}")
    kept = [[x for x in records(t) if x["type"] == "op"] for t in traces]
    last_seqs = sorted(ops[-1]["seq"] for ops in kept)
    check(last_seqs == [n, n + 1], f"each rank's newest op kept: {last_seqs}")
    for ops in kept:
        seqs = [o["seq"] for o in ops]
        check(seqs == list(range(seqs[0], seqs[0] + len(seqs))), "the window has no gap")
    records_read = hang["window"]["ring_records_kept"]
    print(f"{2 * n:,} all-reduces on 2 ranks in {issued_s:.1f} s; traces {sizes[0] / 2**20:.1f} and "
          f"{sizes[1] / 2**20:.1f} MiB (64 bytes per op in the ring, {records_read:,} kept); "
          f"hang read them in {read_s:.2f} s ({records_read / read_s / 1e6:.1f} M ring records/s)")


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


def watchdog_in_a_burst_names_the_first_unconfirmed_launch():
    # Back-to-back launches get completion events one in a few: rank 0's 21st all-reduce never
    # completes, and the stall names the first launch after the last one seen complete, at most
    # 31 earlier. Rank 1 issued 20 and went idle: not a stall.
    job = Job([app("collectives_app"), "skip-burst", "3500"], nranks=2, env={"NCCLWATCH_STALL_SEC": "1"})
    results = job.run()
    check(all(r.returncode == 0 for r in results), f"exits {[r.returncode for r in results]}")
    ranks = ops_by_rank(job)
    stalls = ranks[0]["stalls"]
    check(len(stalls) == 1 and stalls[0]["state"] == "stalled", f"rank 0 stalls {stalls}")
    seq = stalls[0]["seq"]
    check(21 - 31 <= seq <= 21, f"named seq {seq}: not the first launch that can be the stuck one (21 or before)")
    snapshot = stalls[0]["comms"]
    check(snapshot[0]["last_issued_seq"] == 60 and snapshot[0]["last_completed_seq"] == seq - 1, f"snapshot {snapshot}")
    line = [l for l in results[0].stderr.splitlines() if "has not completed after" in l]
    check(len(line) == 1 and f"seq {seq} " in line[0], f"rank 0 stderr: {results[0].stderr!r}")
    if seq < 21:
        check("since the last one seen complete" in line[0], f"the line says it is a window: {line[0]!r}")
    check(ranks[1]["stalls"] == [] and "has not completed" not in results[1].stderr,
          f"rank 1 is idle, not stuck: {ranks[1]['stalls']} {results[1].stderr!r}")


def newer_api_is_recorded():
    # NCCL 2.29's suspend/resume are calls on the comm, its one-sided signals ops without a seq;
    # a refused grow is recorded with NCCL's answer and leaves no communicator (nor leak) behind.
    job = Job([app("collectives_app"), "newer-api"], nranks=2)
    results = job.run()
    check(all(r.returncode == 0 for r in results), f"exits {[(r.returncode, r.stderr[-300:]) for r in results]}")
    for rank, trace in enumerate(job.traces()):
        recs = records(trace)
        ends = {r["op"]: r for r in recs if r["type"] == "call_end"}
        check(ends.get("ncclCommSuspend", {}).get("result") == 0 and ends.get("ncclCommResume", {}).get("result") == 0,
              f"rank {rank}: suspend/resume ends {ends.keys()}")
        check(ends.get("ncclCommGrow", {}).get("result", 0) != 0, f"rank {rank}: the refused grow {ends.get('ncclCommGrow')}")
        ops = {r["op"]: r for r in recs if r["type"] == "op"}
        peer = (rank + 1) % 2
        check(ops["ncclPutSignal"]["seq"] == 0 and ops["ncclPutSignal"]["peer"] == peer and ops["ncclPutSignal"]["count"] == 64,
              f"rank {rank}: {ops.get('ncclPutSignal')}")
        check(ops["ncclSignal"]["peer"] == peer and ops["ncclWaitSignal"]["count"] == 1, f"rank {rank}: {ops}")
        check(ops["ncclAllReduce"]["seq"] == 1, f"rank {rank}: one-sided ops take no seq: {ops['ncclAllReduce']}")
    code, leaks, err = job.report("leaks", "--json", "--no-symbols")
    check(code == 0 and leaks["leaks"] == [], f"no leak: {code} {leaks} {err}")


def capture_survives_the_collector_polling():
    # Measured on an H200: the collector's event queries during an application's global-mode
    # capture invalidated it (the next captured NCCL call failed) and crashed the driver in 31 of
    # 40 runs. The stand-in's driver applies CUDA's rule, so this fails without relaxed mode.
    job = Job([app("collectives_app"), "capture-while-polled"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0 and "end of capture: 0" in r.stdout, f"rank {rank}: exit {r.returncode} {r.stdout!r} {r.stderr[-400:]!r}")


def captured_stream_gets_no_event():
    job = Job([app("collectives_app"), "capture"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stdout} {r.stderr}")
        check("events recorded while capturing: 0" in r.stdout, r.stdout)
    for rank, data in ops_by_rank(job).items():
        ops = [o for o in data["ops"] if o["op"] == "ncclAllReduce" and not o["flags"] & 16]  # not the replays
        check(len(ops) == 2, f"rank {rank}: {ops}")
        check(not ops[0]["flags"] & 1 and ops[0]["flags"] & 2, f"the first is timed, not captured: {ops[0]}")
        check(ops[1]["flags"] & 1 and not ops[1]["flags"] & 2, f"the captured one is marked, untimed: {ops[1]}")
        check(ops[1]["launch_id"] not in data["timings"], "no timing for the captured op")


def graph_job(*args, env=None, returncodes=(0, 0)):
    job = Job([app("collectives_app"), "graph-replays", *args], nranks=2, env=env)
    for rank, r in enumerate(job.run()):
        check(r.returncode == returncodes[rank], f"rank {rank}: {r.returncode} {r.stdout} {r.stderr[-600:]}")
        check("events recorded while capturing: 0" in r.stdout, r.stdout)
    return job


def graph_records(trace):
    return [r for r in records(trace) if r["type"] == "graph"]


def report(job, *args):
    return subprocess.run([REPORT, *args, *job.traces()], capture_output=True, text=True)


def check_replays(job, replays, via):
    for rank, data in ops_by_rank(job).items():
        ops = [o for o in data["ops"] if o["op"] == "ncclAllReduce"]
        captured = [o for o in ops if o["flags"] & 1]
        replayed = [o for o in ops if o["flags"] & 16]
        check(len(captured) == 1 and captured[0]["seq"] == 0 and captured[0]["graph"] == 1,
              f"{via}, rank {rank}: the capture is one op without a seq, of graph 1: {captured}")
        check([o["seq"] for o in replayed] == list(range(4, 4 + replays)),
              f"{via}, rank {rank}: each replay takes the next seq: {[o['seq'] for o in replayed]}")
        check(all(o["graph"] == 1 and o["count"] == 256 for o in replayed), f"{via}, rank {rank}: {replayed[:2]}")
        check(len({o["launch_id"] for o in replayed}) == replays, f"{via}, rank {rank}: one launch per replay")
        timed = [o for o in replayed if o["flags"] & 2]
        check(len(timed) == replays and all(o["launch_id"] in data["timings"] for o in timed),
              f"{via}, rank {rank}: {len(timed)} of {replays} replays have GPU times (2 ms apart: each is timed)")
        eager = [o["seq"] for o in ops if not o["flags"] & 17]
        check(eager == [1, 2, 3, 4 + replays], f"{via}, rank {rank}: eager seqs {eager}")
    for trace in job.traces():
        events = [g["event"] for g in graph_records(trace)]
        check(events == ["captured", "instantiated"], f"{via}: graph records {events}")


def graph_replays_are_ops_with_seqs_and_gpu_times():
    # A program linked against libcuda, and one reaching the driver as the CUDA runtime does.
    for via in ("linked", "runtime"):
        job = graph_job("10", "10", *(["runtime"] if via == "runtime" else []))
        check_replays(job, 10, via)
        hang = json.loads(report(job, "hang", "--json").stdout)
        comm = hang["comms"][0]
        check(not comm["missing"] and not comm["mismatches"], f"{via}: consistent: {comm}")
        summary = report(job, "summary")
        check("never completed" not in summary.stdout, f"{via}: no false verdict:\n{summary.stdout}")


def rank_replaying_once_less_is_named():
    job = graph_job("10", "9", returncodes=(-signal.SIGTERM, 0), env={"NCCLWATCH_STALL_SEC": "0.1"})
    watchdog = job.results[0].stderr
    check("a replay of CUDA graph 1 (1 NCCL op(s)), up to ncclAllReduce seq 13 on comm" in watchdog,
          f"rank 0's watchdog names the stalled replay:\n{watchdog}")
    hang = report(job, "hang", "--json")
    comm = json.loads(hang.stdout)["comms"][0]
    stalls = [s for s in comm["stalls"] if s["rank"] == 0 and s["state"] == "stalled"]
    check(stalls and stalls[0]["seq"] == 13 and stalls[0].get("graph") == 1 and stalls[0].get("replay") == 10,
          f"the stall record is the 10th replay's: {comm['stalls']}")
    check(comm["missing"] == [{"rank": 1, "first_missing_seq": 13} | {k: v for k, v in comm["missing"][0].items()
                                                                      if k not in ("rank", "first_missing_seq")}],
          f"rank 1 is missing seq 13 (the 10th replay): {comm['missing']}")
    text = report(job, "hang").stdout
    check("replay 10 of CUDA graph 1" in text, f"the missing seq is named as the graph's replay:\n{text}")
    # The watchdog read the native stack of the thread that issued the stalled replay (rank 0's
    # main thread, asleep before its SIGTERM), without stopping it: symbolized by the report.
    rank0 = next(r for r in json.loads(hang.stdout)["comms"][0]["per_rank"] if r["rank"] == 0)
    stack = rank0.get("native_stack", [])
    check(rank0.get("native_tid", 0) > 0 and any("nanosleep" in f for f in stack[:3])
          and any("collectives_app.cc" in f for f in stack), f"rank 0's native stack at the stall: {rank0}")
    check("native: rank 0 thread" in text, f"hang prints it:\n{text}")


def graphs_the_shim_cannot_follow_are_said_and_harmless():
    job = Job([app("collectives_app"), "graph-hostile"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stdout} {r.stderr[-600:]}")
        check("invalidated capture: query 906, end 901, graph none" in r.stdout, r.stdout)
    for rank, data in ops_by_rank(job).items():
        ran = [(o["seq"], bool(o["flags"] & 16), o["graph"]) for o in data["ops"] if o["op"] == "ncclAllReduce" and o["seq"]]
        # The relaxed capture holds the very same all-reduce: it is graph 1 again (one kept graph per
        # distinct list of NCCL ops, so a loop that re-captures each step keeps no more state).
        check(ran == [(1, True, 1), (2, True, 1), (3, True, 1), (4, False, 0)],
              f"rank {rank}: replays of the destroyed graph's exec on both streams, none after the update, the "
              f"relaxed capture's, then the eager op: {ran}")
    for trace in job.traces():
        events = [(g["event"], g["index"]) for g in graph_records(trace)]
        check(events == [("captured", "1"), ("instantiated", "1"), ("not_followed", "1"), ("captured", "1"),
                         ("instantiated", "1"), ("capture_failed", "3")], f"graph records {events}")
    hang = json.loads(report(job, "hang", "--json").stdout)
    check(not hang["comms"][0]["missing"] and not hang["comms"][0]["incomplete"], f"consistent: {hang['comms'][0]}")


if __name__ == "__main__":
    main({f.__name__: f for f in [
        sequence_numbers_agree_on_2_ranks, sequence_numbers_agree_on_3_ranks, sequence_numbers_agree_on_4_ranks,
        config_variants_are_their_collectives, gpu_time_comes_from_events, sampling_times_the_first_launches_of_each_shape, watchdog_names_the_pending_seq,
        watchdog_in_a_burst_names_the_first_unconfirmed_launch, newer_api_is_recorded, capture_survives_the_collector_polling,
        small_budget_keeps_the_newest_ops,
        soak_keeps_the_hang_in_a_small_trace,
        captured_stream_gets_no_event, graph_replays_are_ops_with_seqs_and_gpu_times,
        rank_replaying_once_less_is_named, graphs_the_shim_cannot_follow_are_said_and_harmless]})
