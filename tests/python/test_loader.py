"""ncclwatch.load (python/ncclwatch) against the C++ side: its dtypes and names against the
header (layout_probe), its tables against `ncclwatch-report dump` on real stand-in jobs."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from harness import REPORT, Job, app, check, main  # noqa: E402

try:
    import numpy as np  # noqa: F401
    import pandas  # noqa: F401
except ImportError:
    print("skipped: numpy and pandas are not installed for this python3 (scripts/bootstrap installs them)")
    raise SystemExit(77)

import ncclwatch  # noqa: E402
from ncclwatch import trace_format as tf  # noqa: E402


def layout_matches_the_cpp_header():
    probe = json.loads(subprocess.run([os.environ["NCCLWATCH_LAYOUT_PROBE"]], capture_output=True, text=True,
                                      check=True).stdout)
    dtypes = {"FileHeader": tf.FILE_HEADER, "OpRecord": tf.OP_RECORD, "GpuTimingRecord": tf.GPU_TIMING_RECORD,
              "ApiEvent": tf.API_EVENT, "StallRecord": tf.STALL_RECORD, "ExitRecord": tf.EXIT_RECORD,
              "StringsRecord": tf.STRINGS_RECORD, "LostRecord": tf.LOST_RECORD, "RingChunkRecord": tf.RING_CHUNK_RECORD,
              "RingSlot": tf.RING_SLOT, "CompactOp": tf.COMPACT_OP, "CompactTiming": tf.COMPACT_TIMING,
              "OpTotalsRecord": tf.OP_TOTALS_RECORD, "OpTotalsEntry": tf.OP_TOTALS_ENTRY,
              "CommRefRecord": tf.COMM_REF_RECORD, "StreamRefRecord": tf.STREAM_REF_RECORD,
              "ThreadRefRecord": tf.THREAD_REF_RECORD}
    for struct, dtype in dtypes.items():
        want = probe[struct]
        check(dtype.itemsize == want["size"], f"{struct}: size {dtype.itemsize}, the header says {want['size']}")
        for name, offset in want["fields"].items():
            check(name in dtype.fields and dtype.fields[name][1] == offset,
                  f"{struct}.{name}: offset {dtype.fields.get(name, (None, None))[1]}, the header says {offset}")
        check(set(dtype.names) <= set(want["fields"]), f"{struct}: fields the header lacks: {set(dtype.names) - set(want['fields'])}")
    c = probe["constants"]
    check((tf.FORMAT_VERSION, tf.OLDEST_READABLE_FORMAT, tf.HEADER_BYTES, tf.COMMIT_MARK, tf.MAX_RECORD_BYTES) ==
          (c["version"], c["oldest_readable"], c["header_bytes"], c["commit_mark"], c["max_record_bytes"]), c)
    check((tf.OP_TIMED, tf.OP_CAPTURED, tf.TIMING_HAS_BEGIN) == (c["op_timed"], c["op_captured"], c["timing_has_begin"]), c)
    check((tf.MAX_CHUNK_RECORD_BYTES, tf.RING_SLOT_BYTES, tf.RING_CHUNK_HEADER_BYTES, tf.OP_TOTALS_HEADER_BYTES,
           tf.MAX_RING_CHUNKS, tf.TOTALS_BUCKETS, tf.LAUNCH_PREFIX_SHIFT, tf.COMPACT_DURATION_MICROS,
           [tf.RING_WRITING, tf.RING_OP, tf.RING_GPU_TIMING]) ==
          (c["max_chunk_record_bytes"], c["ring_slot_bytes"], c["ring_chunk_header_bytes"], c["op_totals_header_bytes"],
           c["max_ring_chunks"], c["totals_buckets"], c["launch_prefix_shift"], c["compact_duration_micros"],
           c["ring_kinds"]), c)
    check(tf.OP_TOTALS_ENTRY["gpu_histogram"].shape == (tf.TOTALS_BUCKETS,), "the histogram has every bucket")
    check([tf.totals_bucket_floor_ns(b) for b in range(tf.TOTALS_BUCKETS)] == probe["totals_bucket_floor_ns"],
          probe["totals_bucket_floor_ns"])
    check({str(k): v for k, v in tf.RECORD_TYPES.items()} == probe["record_types"], probe["record_types"])
    check({str(k): v[0] for k, v in tf.APIS.items()} == probe["apis"], "API table")
    check(tf.COUNT_PER_RANK == set(probe["count_per_rank"]), probe["count_per_rank"])
    check([[n, b] for n, b in zip(tf.DATATYPES, tf.DATATYPE_BYTES)] == probe["datatypes"], probe["datatypes"])
    check({str(r): tf.redop_name(r) for r in range(-1, 8)} == probe["redops"], probe["redops"])


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
            check(proc["ended"] == "normal" and proc["pid"] == next(r for r in records if r["type"] == "file_header")["pid"],
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


if __name__ == "__main__":
    main({f.__name__: f for f in [layout_matches_the_cpp_header, tables_match_dump, bad_files_are_named_and_the_rest_read]})
