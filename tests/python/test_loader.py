"""ncclwatch.load (python/ncclwatch), which reads through `ncclwatch-report columns`: its tables
against `ncclwatch-report dump` on real stand-in jobs and on hand-made records, the process itself
opening no trace, and a stream it cannot read named rather than half-read."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "analyzers"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import craft_trace as craft  # noqa: E402  (hand-made records, byte for byte)
from harness import REPORT, Job, app, check, main  # noqa: E402

try:
    import numpy as np  # noqa: F401
    import pandas  # noqa: F401
except ImportError:
    print("skipped: numpy and pandas are not installed for this python3 (scripts/bootstrap installs them)")
    raise SystemExit(77)

import ncclwatch  # noqa: E402
from ncclwatch import loader  # noqa: E402

# NCCL's ncclDataType_t and ncclRedOp_t (nccl.h), by the names the reports give them.
DATATYPE_NAMES = {7: "float32", 9: "bfloat16"}
REDOP_NAMES = {0: "sum", 2: "max"}


def dump(trace):
    out = subprocess.run([REPORT, "dump", trace], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def tables_match_dump():
    # A mixed job (every kind of collective, send/recv, groups) on 3 ranks, every launch timed,
    # and a process driving two ranks (grouped launches on two streams).
    jobs = [Job([app("collectives_app"), "mixed"], nranks=3, env={"NCCLWATCH_SAMPLE": "1"}),
            Job([app("collectives_app"), "one-process-two-ranks"], nranks=1, env={"NCCLWATCH_SAMPLE": "1"})]
    for job in jobs:
        for rank, r in enumerate(job.run()):
            check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
        loaded = ncclwatch.load(job.trace_dir)
        check(loaded.problems.empty, loaded.problems)
        check(sorted(loaded.processes["file"]) == job.traces(), (loaded.processes, job.traces()))
        for trace in job.traces():
            records = dump(trace)
            ops = [r for r in records if r.get("type") == "op" and r["op"] != "ncclGroupEnd"]
            mine = loaded.ops[loaded.ops["file"] == trace]
            check(len(mine) == len(ops) > 0, f"{trace}: {len(mine)} op rows, dump has {len(ops)}")
            for row, rec in zip(mine.itertuples(), ops):
                got = (row.op, row.seq, row.count, row.comm_id, row.rank, row.launch_id, row.host_begin_ns, row.peer)
                want = (rec["op"], rec["seq"], rec["count"], rec["comm_id"], rec["rank"], rec["launch_id"],
                        rec["host_begin_ns"], rec["peer"])
                check(got == want, f"{trace}: {got} != {want}")
            timing = {(r["launch_id"], r["stream"]): r for r in records if r.get("type") == "gpu_timing"}
            joined = mine[mine["gpu_end_ns"].notna()]
            expected = [r for r in ops if (r["launch_id"], r["stream"]) in timing]
            check(len(joined) == len(expected) > 0, f"{trace}: {len(joined)} ops with GPU timing, dump says {len(expected)}")
            for row in joined.itertuples():
                t = timing[(row.launch_id, f"0x{row.stream:x}")]
                check(row.gpu_end_ns == t["gpu_end_ns"], (row, t))
            calls = [r for r in records if r.get("type") in ("call_begin", "call_end")]
            check(len(loaded.calls[loaded.calls["file"] == trace]) == len(calls), f"{trace}: calls")
            proc = loaded.processes[loaded.processes["file"] == trace].iloc[0]
            check(proc["ended"] == "exited" and proc["pid"] == next(r for r in records if r["type"] == "file_header")["pid"],
                  proc)
        # Communicators and their end states: the report tool's, one row per rank instance.
        creations = sum(1 for t in job.traces() for r in dump(t) if r.get("type") == "call_end" and
                        r["op"].startswith(("ncclCommInit", "ncclCommSplit")) and r["result"] == 0)
        check(len(loaded.comms) == creations > 0 and set(loaded.comms["file"]) <= set(job.traces()),
              f"{len(loaded.comms)} comms, {creations} creations")
        # Sizes as nccl-tests counts them, the same as `latency` rows.
        code, latency, _ = job.report("latency", "--json")
        sizes = {(r["op"], r["bytes"]) for r in latency["rows"]}
        mine = {(op, int(b)) for op, b in zip(loaded.ops["op"], loaded.ops["bytes"]) if op.startswith("ncclAll")}
        check({s for s in sizes if s[0].startswith("ncclAll")} <= mine, (sizes, mine))


def ring_window_of_a_real_job():
    # NCCLWATCH_MAX_MB=1: a ring of 12288 slots, which 30000 all-reduces (and their sampled GPU
    # timings) wrap more than twice. The loader keeps what `dump` delivers: the newest ops, in order.
    job = Job([app("collectives_app"), "bench", "30000"], nranks=1, env={"NCCLWATCH_MAX_MB": "1"}, timeout=120)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    loaded = ncclwatch.load(job.trace_dir)
    check(loaded.problems.empty, loaded.problems)
    (trace,) = job.traces()
    records = dump(trace)
    ops = [r for r in records if r.get("type") == "op"]
    proc = loaded.processes.iloc[0]
    check(proc["ring_slots"] == 12288 and proc["ring_written"] > 2 * 12288 and
          proc["ring_kept"] == sum(1 for r in records if r.get("type") in ("op", "gpu_timing")) > 12000, proc)
    mine = loaded.ops
    check(len(mine) == len(ops) > 10000, f"{len(mine)} op rows, dump has {len(ops)}")
    columns = ["op", "seq", "count", "comm_id", "rank", "nranks", "launch_id", "host_begin_ns", "host_end_ns", "peer",
               "tid", "group_depth", "result"]
    got = list(mine[columns].itertuples(index=False, name=None))
    want = [tuple(r[c] for c in columns) for r in ops]
    check(got == want, f"first difference: {next(((g, w) for g, w in zip(got, want) if g != w), None)}")
    check([f"0x{s:x}" for s in mine["stream"]] == [r["stream"] for r in ops], "streams")
    check(list(mine["timed"]) == [bool(r["flags"] & craft.OP_TIMED) for r in ops], "timed flags")
    check(list(mine["seq"]) == list(range(30000 - len(mine) + 1, 30001)), "the newest seqs, none missing")
    timing = {(r["launch_id"], r["stream"]): r["gpu_end_ns"] for r in records if r.get("type") == "gpu_timing"}
    joined = mine[mine["gpu_end_ns"].notna()]
    check(len(joined) > 0 and len(joined) == sum(1 for r in ops if (r["launch_id"], r["stream"]) in timing) and
          all(row.gpu_end_ns == timing[(row.launch_id, f"0x{row.stream:x}")] for row in joined.itertuples()),
          f"{len(joined)} ops joined with their GPU timing")
    # The totals count every call of the run, not only the window's.
    totals = loaded.totals
    check(len(totals) == sum(1 for r in records if r.get("type") == "op_totals"), totals)
    reduces = totals[totals["op"] == "ncclAllReduce"]
    check(len(reduces) == 1 and reduces["calls"].iloc[0] == 30000 and not reduces["overflow"].iloc[0], totals.T)
    row = reduces.iloc[0]
    check((row["comm_id"], row["rank"], row["nranks"], row["count"], row["datatype"], row["bytes"]) ==
          (mine["comm_id"].iloc[0], 0, 1, 1, "float32", 4), row)
    check(row["gpu_timed"] > 0 and sum(row["gpu_histogram"]) == row["gpu_timed"] and row["host_ns"] > 0 and
          row["first_ns"] < mine["host_begin_ns"].min() and row["last_ns"] == mine["host_begin_ns"].max(), row)


# Hand-made format-4 records (trace_format.h, "Retention"), for shapes a real job does not leave.
RING_CHUNK, OP_TOTALS, COMM_REF, STREAM_REF, THREAD_REF = 14, 15, 16, 17, 18
PREFIX = 1 << 40  # launch ids of the thread of launch prefix 1


def v4_header(pid=4242):
    h = bytearray(craft.file_header(pid=pid))
    struct.pack_into("<II", h, 8, 4, 4)  # version, min_reader_version
    return bytes(h)


def ring_chunk(ring_slots, ordinal, slots, declared=None):
    """A RingChunk record: its 64-byte header, then `slots` (64 bytes each)."""
    count = len(slots) // 64 if declared is None else declared
    return craft.record(RING_CHUNK, struct.pack("<QII", ring_slots, ordinal, count).ljust(56, b"\0") + slots)


def op_slot(index, seq, begin_ns, duration=1000, launch_id=None, comm_index=1, stream_index=1, api=craft.ALL_REDUCE,
            flags=0, kind=1, peer=-1, redop=0, datatype=7, group_depth=0, count=1024):
    return struct.pack("<QQQqQIIihHBbBBHH", (index + 1) << 8 | kind, seq, count, begin_ns,
                       PREFIX + seq if launch_id is None else launch_id, duration, comm_index, peer, redop, stream_index,
                       api, 0, datatype, group_depth, flags, 0)


def timing_slot(index, launch_id, stream, begin_ns, end_ns):
    return struct.pack("<QQQqqqIIQ", (index + 1) << 8 | 2, launch_id, stream, begin_ns, end_ns, 0, 1, 1, 0)


def comm_ref(index, comm_id, rank, nranks, time_ns=5_200_000_000):
    return craft.record(COMM_REF, struct.pack("<qQQIiiI", time_ns, comm_id, 0x1000 + index, index, rank, nranks, 0))


def stream_ref(index, stream, time_ns=5_200_000_000):
    return craft.record(STREAM_REF, struct.pack("<qQII", time_ns, stream, index, 0))


def thread_ref(prefix, tid, time_ns=5_200_000_000):
    return craft.record(THREAD_REF, struct.pack("<qQII", time_ns, prefix, tid, 0))


def totals_entry(calls, comm_index=1, api=craft.ALL_REDUCE, count=1024, ready=1, histogram=(0, 2, 1)):
    histogram = list(histogram) + [0] * (46 - len(histogram))
    return struct.pack("<QQIHBBQQQQqq46I", 0x5EED + comm_index, count, comm_index, api, 7, ready, calls, 777 * calls,
                       sum(histogram), 5000 * sum(histogram), 6_000_000_000, 7_000_000_000, *histogram)


def op_totals(entries, declared=None):
    return craft.record(OP_TOTALS, struct.pack("<I", declared or len(entries)).ljust(56, b"\0") + b"".join(entries))


def crafted_ring_reads_as_the_cpp_reader_does():
    # A ring of 12 slots in 3 chunks (their records out of order, and one that disagrees about the
    # ring's size), indices 0 to 20 written: the window is 9..20, with every kind of slot the reader
    # must skip. Ordinary op and timing records come between, as a synthetic trace has them.
    comm_id = 0xA11CE00000000001
    t = [6_000_000_000 + 10_000 * i for i in range(21)]
    slots = {
        9: bytes(64),                                                     # never written
        10: op_slot(10, 1, t[10], flags=craft.OP_TIMED),
        11: timing_slot(11, PREFIX + 1, 0x5000, t[10] + 100, t[15] + 500),  # later than what follows it
        12: op_slot(12, 2, t[12], duration=7, flags=craft.COMPACT_DURATION_MICROS | craft.OP_CAPTURED),
        13: op_slot(1, 99, t[1]),                                         # a lap older: out of the window
        14: op_slot(3, 98, t[3]),                                         # its index is not its position
        15: op_slot(15, 97, t[15], kind=0),                               # being written
        16: op_slot(16, 3, t[16], comm_index=2, stream_index=5, launch_id=(2 << 40) + 3, peer=1, redop=2, datatype=9),
        17: op_slot(17, 4, t[17], comm_index=0, stream_index=0, group_depth=1),
        18: op_slot(18, 0, t[18], api=craft.GROUP_END, count=1, launch_id=PREFIX + 4),
        19: op_slot(19, 5, t[19], flags=craft.OP_TIMED),
        20: timing_slot(20, PREFIX + 5, 0x5000, t[19] + 100, t[19] + 900),
    }
    ring = [slots[i] for i in sorted(slots, key=lambda i: i % 12)]
    chunks = [ring_chunk(12, ordinal, b"".join(ring[4 * ordinal:4 * ordinal + 4])) for ordinal in range(3)]
    disagreeing = ring_chunk(16, 1, b"".join(ring[4:8]))
    parts = [v4_header(), craft.process(), craft.comm_created(1, 0x1001, comm_id, rank=1, nranks=4),
             comm_ref(1, comm_id, 1, 4), stream_ref(1, 0x5000), thread_ref(1, 4243), chunks[2],
             craft.op(comm_id, 7, rank=1, nranks=4, time_ns=t[14], launch_id=PREFIX + 50, flags=craft.OP_TIMED), chunks[0], disagreeing,
             craft.gpu_timing(PREFIX + 50, t[14] + 100, t[14] + 800), chunks[1],
             op_totals([totals_entry(3), totals_entry(30000), totals_entry(5, ready=0), totals_entry(8, comm_index=2)],
                       declared=5),
             craft.op(comm_id, 8, rank=1, nranks=4, time_ns=t[20], launch_id=PREFIX + 51), craft.exit_records()]
    path = os.path.join(tempfile.mkdtemp(prefix="ncclwatch-test-"), "crafted.nwt")
    with open(path, "wb") as f:
        f.write(b"".join(parts))
    loaded = ncclwatch.load(path, symbolize=False)
    out = subprocess.run([REPORT, "dump", path], capture_output=True, text=True)
    records = [json.loads(line) for line in out.stdout.splitlines()]
    at = len(b"".join(parts[:parts.index(disagreeing)]))
    check(list(loaded.problems["problem"]) == [f"ring chunk at offset {at} disagrees with the ring's size; its ops are "
                                                "left out"] and loaded.problems["problem"][0] in out.stderr,
          (loaded.problems, out.stderr))
    proc = loaded.processes.iloc[0]
    check((proc["ring_slots"], proc["ring_written"], proc["ring_kept"]) == (12, 21, 8), proc)
    ops = [r for r in records if r.get("type") == "op" and r["op"] != "ncclGroupEnd"]
    columns = ["op", "seq", "count", "comm_id", "rank", "nranks", "launch_id", "host_begin_ns", "host_end_ns", "peer",
               "tid", "group_depth", "result"]
    got = list(loaded.ops[columns].itertuples(index=False, name=None))
    want = [tuple(r[c] for c in columns) for r in ops]
    check(got == want, "\n".join(f"{g} {w}" for g, w in zip(got, want)))
    check(list(loaded.ops["seq"]) == [1, 7, 2, 3, 4, 5, 8], f"the ring's ops among the others: {list(loaded.ops['seq'])}")
    check([f"0x{s:x}" for s in loaded.ops["stream"]] == [r["stream"] for r in ops], "streams")
    check(list(loaded.ops["datatype"]) == [DATATYPE_NAMES[r["datatype"]] for r in ops] and
          list(loaded.ops["redop"]) == [REDOP_NAMES[r["redop"]] for r in ops], "datatypes and reductions")
    check(list(loaded.ops["captured"]) == [bool(r["flags"] & craft.OP_CAPTURED) for r in ops] and
          list(loaded.ops["timed"]) == [bool(r["flags"] & craft.OP_TIMED) for r in ops], "flags")
    check(loaded.ops["host_end_ns"].iloc[2] - loaded.ops["host_begin_ns"].iloc[2] == 7000, "a duration in us")
    check(list(loaded.ops["gpu_end_ns"].fillna(0)) == [t[15] + 500, t[14] + 800, 0, 0, 0, t[19] + 900, 0],
          list(loaded.ops["gpu_end_ns"]))
    # How each was timed, as the reports take it: the grouped op's group end promised no timing,
    # and the last op's was never promised.
    check(list(loaded.ops["timing"]) == ["gpu", "gpu", "none", "none", "none", "gpu", "none"], list(loaded.ops["timing"]))
    # Totals: the overflow entry, then the ready ones of the 4 that fit (of 5 declared).
    totals = loaded.totals
    check(len(totals) == 3 == sum(1 for r in records if r.get("type") == "op_totals"), totals)
    got = [(r.comm_id, r.rank, r.nranks, r.op, r.count, r.datatype, r.bytes, r.calls, r.overflow) for r in totals.itertuples()]
    check(got == [("0" * 16, -1, -1, "ncclAllReduce", 1024, "float32", 4096, 3, True),
                  (f"{comm_id:016x}", 1, 4, "ncclAllReduce", 1024, "float32", 4096, 30000, False),
                  ("0" * 16, -1, -1, "ncclAllReduce", 1024, "float32", 4096, 8, False)], got)
    row = totals.iloc[1]
    check((row["host_ns"], row["gpu_timed"], row["gpu_ns"], row["first_ns"], row["last_ns"]) ==
          (777 * 30000, 3, 15000, 6_000_000_000, 7_000_000_000) and
          list(row["gpu_histogram"]) == [0, 2, 1] + [0] * 43, row)


def older_formats_still_read():
    # Formats 2 and 3 keep ops and timings as records; a ring chunk in such a file is not theirs.
    comm_id = 0xA11CE00000000001
    for version in (2, 3):
        header = bytearray(craft.file_header())
        struct.pack_into("<I", header, 8, version)
        path = os.path.join(tempfile.mkdtemp(prefix="ncclwatch-test-"), f"v{version}.nwt")
        with open(path, "wb") as f:
            f.write(bytes(header) + craft.process() + craft.comm_created(1, 0x1001, comm_id) +
                    b"".join(craft.op(comm_id, seq, time_ns=6_000_000_000 + seq * 10_000, flags=craft.OP_TIMED if seq == 3 else 0)
                             for seq in range(1, 6)) +
                    ring_chunk(4, 0, op_slot(0, 99, 6_000_000_000)) + ring_chunk(4, 1, op_slot(4, 98, 6_000_000_000)) +
                    craft.gpu_timing(3, 6_000_030_100, 6_000_030_900) + craft.exit_records())
        loaded = ncclwatch.load(path, symbolize=False)
        ops = [r for r in dump(path) if r.get("type") == "op"]
        check(loaded.problems.empty and list(loaded.ops["seq"]) == [r["seq"] for r in ops] == [1, 2, 3, 4, 5],
              f"format {version}: {loaded.problems} {list(loaded.ops['seq'])}")
        check(list(loaded.ops["gpu_end_ns"].fillna(0)) == [0, 0, 6_000_030_900, 0, 0] and loaded.totals.empty and
              loaded.processes["ring_slots"].iloc[0] == 0, f"format {version}: {loaded.ops}")


def large_ring_chunks_are_read():
    # Chunks past 1 MiB (records of other types that large are corrupt): 2 x 20000 slots, 50000
    # ops written; the newest 40000 are read, in order, and as many as `dump` has.
    chunk, written = 20000, 50000
    index = range(written - 2 * chunk, written)
    ring = [b""] * (2 * chunk)
    for i in index:
        ring[i % (2 * chunk)] = op_slot(i, i + 1, 6_000_000_000 + i * 1000)
    path = os.path.join(tempfile.mkdtemp(prefix="ncclwatch-test-"), "large.nwt")
    with open(path, "wb") as f:
        f.write(v4_header() + craft.process() + comm_ref(1, 0xA11CE, 0, 2) +
                b"".join(ring_chunk(2 * chunk, k, b"".join(ring[k * chunk:(k + 1) * chunk])) for k in (1, 0)) +
                craft.exit_records())
    loaded = ncclwatch.load(path, symbolize=False)
    check(loaded.problems.empty, loaded.problems)
    check(list(loaded.ops["seq"]) == [i + 1 for i in index], f"{len(loaded.ops)} ops")
    check(len(loaded.ops) == sum(1 for r in dump(path) if r.get("type") == "op"), "as many as dump")
    check(set(loaded.ops["comm_id"]) == {f"{0xA11CE:016x}"} and set(loaded.ops["nranks"]) == {2}, "comm resolved")


def bad_files_are_named_and_the_rest_read():
    job = Job([app("collectives_app"), "mixed"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    bogus = os.path.join(job.trace_dir, "bogus.nwt")
    with open(bogus, "wb") as f:
        f.write(b"not a trace at all")
    loaded = ncclwatch.load(job.trace_dir)
    check(list(loaded.problems["file"]) == [bogus] and "bad magic" in loaded.problems["problem"][0], loaded.problems)
    check(len(loaded.processes) == 2 and len(loaded.ops) > 0, loaded)


def hostile_files_bounded_like_the_report_tool():
    # A folder others can write: a FIFO named *.nwt (opening it to read waited for a writer forever),
    # a link to /dev/zero, a trace followed by a 40 GiB hole (truncate -s 40G: reading it whole was
    # a MemoryError that lost every file of the load), and one whose last records lie past a 40 GiB
    # hole (a copy that makes a trace sparse keeps records after holes). The good files load, each
    # bad one is named, and memory stays bounded by the data on disk.
    d = tempfile.mkdtemp(prefix="ncclwatch-hostile-")
    with open(os.path.join(d, "probe"), "wb") as f:
        f.truncate(1 << 30)
    if os.stat(os.path.join(d, "probe")).st_blocks * 512 >= 1 << 20:
        print("skipped: this file system fills holes in", d)
        return
    os.unlink(os.path.join(d, "probe"))
    comm_id = 0xA11CE00000000001
    with open(os.path.join(d, "good.nwt"), "wb") as f:
        f.write(craft.leaked_comm_named(b"world"))
    with open(os.path.join(d, "sparse.nwt"), "wb") as f:
        f.write(craft.leaked_comm_named(b"world"))
        f.truncate(40 << 30)
    with open(os.path.join(d, "after_hole.nwt"), "wb") as f:
        f.write(craft.file_header(pid=4343) + craft.process() + craft.comm_created(1, 0xC0FFEE, comm_id))
        f.seek(40 << 30, os.SEEK_CUR)
        f.write(craft.comm_destroyed(2, 0xC0FFEE, comm_id) + craft.exit_records())
    os.mkfifo(os.path.join(d, "stuck.nwt"))
    os.symlink("/dev/zero", os.path.join(d, "zero.nwt"))
    child = f"""
import json, resource, sys, warnings
sys.path.insert(0, {os.path.join(HERE, "..", "..", "python")!r})
import ncclwatch
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    job = ncclwatch.load({d!r}, symbolize=False)
print(json.dumps({{"problems": job.problems.values.tolist(), "files": sorted(job.processes["file"]),
                  "states": sorted(zip(job.comms["file"], job.comms["state"])), "warnings": [str(w.message) for w in said],
                  "ops": len(job.ops), "rss_mb": max(resource.getrusage(who).ru_maxrss for who in
                                                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024}}))
"""
    try:
        p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("ncclwatch.load still running after 60 s: it opened a FIFO to read, or read a hole")
    check(p.returncode == 0, (p.returncode, p.stderr[-3000:]))
    out = json.loads(p.stdout)
    at = lambda name: os.path.join(d, name)  # noqa: E731
    check(out["files"] == [at("after_hole.nwt"), at("good.nwt"), at("sparse.nwt")], out)
    check(sorted(out["problems"]) == [[at("stuck.nwt"), "not a regular file (a FIFO)", True],
                                      [at("zero.nwt"), "not a regular file (a character device)", True]], out["problems"])
    check(any("stuck.nwt" in w and "FIFO" in w for w in out["warnings"]), out["warnings"])
    check(out["states"] == [[at("after_hole.nwt"), "destroyed"], [at("good.nwt"), "leaked"], [at("sparse.nwt"), "leaked"]],
          out["states"])
    check(out["ops"] == 2 and out["rss_mb"] < 400, out)


def ops_dtypes_are_the_same_with_and_without_gpu_timing():
    # One job GPU-timed (events on every launch), one host-timed (no GPU column has a value), one
    # folder with no readable trace (an empty frame): the ops table has OPS_DTYPES in each.
    jobs = {}
    for timing in ("gpu", "host"):
        leaky = os.path.join(os.environ["NCCLWATCH_BUILD_DIR"], "examples", "leaky_nccl")
        job = Job([leaky], nranks=2, env={"NCCLWATCH_TIMING": timing, "NCCLWATCH_SAMPLE": "1"})
        for rank, r in enumerate(job.run()):
            check(r.returncode == 0, f"{timing}, rank {rank}: {r.returncode} {r.stderr}")
        jobs[timing] = ncclwatch.load(job.trace_dir)
    empty = tempfile.mkdtemp(prefix="ncclwatch-empty-")
    with open(os.path.join(empty, "bogus.nwt"), "wb") as f:
        f.write(b"not a trace at all")
    jobs["none"] = ncclwatch.load(empty)
    expected = {name: str(pandas.Series(dtype=dtype).dtype) for name, dtype in ncclwatch.loader.OPS_DTYPES.items()}
    for name, loaded in jobs.items():
        got = {column: str(dtype) for column, dtype in loaded.ops.dtypes.items()}
        check(got == expected, f"{name}: {[(c, got.get(c), d) for c, d in expected.items() if got.get(c) != d]}")
    gpu, host = jobs["gpu"].ops, jobs["host"].ops
    check(len(gpu) > 0 and gpu["gpu_end_ns"].notna().any() and len(host) > 0 and host["gpu_end_ns"].isna().all(),
          (gpu["gpu_end_ns"].notna().sum(), host["gpu_end_ns"].notna().sum()))
    # Each op carries its process's world rank and its communicator's name ("world" in the example),
    # and a wall-clock time within the run.
    for ops in (gpu, host):
        check(sorted(ops["world_rank"].unique().tolist()) == [0, 1], ops["world_rank"].unique())
        check("world" in set(ops["comm_name"]), set(ops["comm_name"]))
        starts = jobs["gpu"].processes["start_wall_ns"].min() if ops is gpu else jobs["host"].processes["start_wall_ns"].min()
        check(((ops["wall_begin_ns"] >= starts) & (ops["wall_begin_ns"] < starts + 600 * 10**9)).all(), ops["wall_begin_ns"])


def load_opens_no_trace_itself():
    # Every record comes through the report tool: the Python process opens no trace file, nor maps
    # one (audit events of open and mmap; and, where strace is installed, its system calls).
    job = Job([app("collectives_app"), "mixed"], nranks=2, env={"NCCLWATCH_SAMPLE": "1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    child = f"""
import json, sys
sys.path.insert(0, {os.path.join(HERE, "..", "..", "python")!r})
import ncclwatch
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event in ("open", "os.open", "mmap.__new__") else None)
job = ncclwatch.load({job.trace_dir!r})
print(json.dumps({{"traces": [p for p in opened if p.endswith(".nwt")], "ops": len(job.ops), "files": len(job.processes)}}))
"""
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, p.stderr[-3000:])
    out = json.loads(p.stdout)
    check(out["traces"] == [] and out["files"] == 2 and out["ops"] > 0, out)
    strace = shutil.which("strace")
    if not strace:
        print("strace not installed: the system calls were not checked")
        return
    log = os.path.join(job.trace_dir, "..", "strace.log")
    p = subprocess.run([strace, "-qq", "-e", "trace=open,openat,openat2", "-o", log, sys.executable, "-c", child],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0 and "ptrace" in p.stderr:
        print(f"strace cannot trace here ({p.stderr.strip()[-200:]}): the system calls were not checked")
        return
    check(p.returncode == 0, p.stderr[-3000:])
    with open(log) as f:
        opens = [line for line in f if ".nwt" in line]
    check(opens == [], opens)


def an_unreadable_stream_is_named():
    # A stream from the report tool cut short anywhere, or not its format at all: ColumnsError,
    # saying where, never a frame built from half of it nor another exception.
    job = Job([app("collectives_app"), "mixed"], nranks=2, env={"NCCLWATCH_SAMPLE": "1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    stream = subprocess.run([REPORT, "columns", "--no-symbols", "--", *job.traces()], capture_output=True,
                            check=True).stdout
    header, blocks = loader.read_columns(stream)
    tables = [b for b in blocks if "table" in b]
    check(header["format"] == "ncclwatch-columns" and len(header["totals_bucket_floor_ns"]) == 46 and
          {"ops", "totals", "calls"} <= {b["table"] for b in tables} <= {"ops", "totals", "calls", "stalls"} and
          "problems" in blocks[-1], blocks[-1])
    line_ends = [i for i, c in enumerate(stream) if c == ord("\n")]
    cuts = sorted({1, line_ends[0], line_ends[0] + 1, line_ends[1] + 3, line_ends[-2] + 1, len(stream) - 2} |
                  {line_ends[k] + 9 for k in range(1, len(line_ends) - 1, max(1, len(line_ends) // 20))})
    for cut in cuts:
        try:
            loader.read_columns(stream[:cut])
        except loader.ColumnsError:
            continue
        raise AssertionError(f"a stream cut at byte {cut} of {len(stream)} was read")
    for bad in (b"", b"\n", b"{}\n", b"not json\n", b'{"format":"ncclwatch-columns","version":99}\n',
                stream.replace(b'"dtype":"<i8"', b'"dtype":"<q8"', 1)):
        try:
            loader.read_columns(bad)
        except loader.ColumnsError as e:
            check(str(e), bad)
            continue
        raise AssertionError(f"read: {bad[:80]}")
    # The tool itself failing: its exit status and what it said are in the error.
    os.environ["NCCLWATCH_REPORT"], report = "/bin/false", os.environ.get("NCCLWATCH_REPORT", "")
    try:
        ncclwatch.load(job.trace_dir)
        raise AssertionError("a tool that wrote nothing gave a job")
    except loader.ColumnsError as e:
        check("/bin/false columns exited 1" in str(e), str(e))
    finally:
        os.environ["NCCLWATCH_REPORT"] = report


if __name__ == "__main__":
    main({f.__name__: f for f in [tables_match_dump, bad_files_are_named_and_the_rest_read,
                                  ring_window_of_a_real_job, crafted_ring_reads_as_the_cpp_reader_does,
                                  older_formats_still_read, large_ring_chunks_are_read,
                                  ops_dtypes_are_the_same_with_and_without_gpu_timing,
                                  hostile_files_bounded_like_the_report_tool,
                                  load_opens_no_trace_itself, an_unreadable_stream_is_named]})
