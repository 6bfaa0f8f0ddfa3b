"""The trace file format (common/ncclwatch/trace_format.h) as numpy structured dtypes, and the
names the reports use for its numbers. tests/python/test_loader.py checks every offset, size and
name here against the C++ header (through tests/python/layout_probe.cc), so the two cannot drift."""
import os
import re

import numpy as np

MAGIC = b"NCCLWTCH"
FORMAT_VERSION = 7          # kVersion
OLDEST_READABLE_FORMAT = 2  # kOldestReadableFormat
COMMIT_MARK = 0xC0DE
MAX_RECORD_BYTES = 1 << 20
MAX_CHUNK_RECORD_BYTES = 1 << 30  # ring_chunk and op_totals records may be this large
HEADER_BYTES = 4096

RECORD_TYPES = {1: "padding", 2: "process", 3: "library", 4: "module", 5: "call_begin", 6: "call_end",
                7: "exit_begin", 8: "process_end", 9: "lost", 10: "notice", 11: "op", 12: "gpu_timing", 13: "stall",
                14: "ring_chunk", 15: "op_totals", 16: "comm_ref", 17: "stream_ref", 18: "thread_ref",
                19: "live_at_exit", 20: "graph", 21: "stacks", 22: "ending",
                23: "signal"}
RECORD_TYPE = {name: value for value, name in RECORD_TYPES.items()}


def _struct(fields, itemsize):
    """A dtype with explicit offsets: (name, format, offset) per field."""
    return np.dtype({"names": [f[0] for f in fields], "formats": [f[1] for f in fields],
                     "offsets": [f[2] for f in fields], "itemsize": itemsize})


FILE_HEADER = _struct([("magic", "S8", 0), ("version", "<u4", 8), ("min_reader_version", "<u4", 12),
                       ("header_bytes", "<u4", 16), ("pid", "<u4", 20), ("ppid", "<u4", 24),
                       ("start_wall_ns", "<i8", 32), ("start_mono_ns", "<i8", 40), ("host", "S64", 48)], 4096)

OP_RECORD = _struct([("comm_id", "<u8", 8), ("comm", "<u8", 16), ("seq", "<u8", 24), ("count", "<u8", 32),
                     ("stream", "<u8", 40), ("host_begin_ns", "<i8", 48), ("host_end_ns", "<i8", 56),
                     ("launch_id", "<u8", 64), ("tid", "<u4", 72), ("api", "<u2", 76), ("result", "<i2", 78),
                     ("peer", "<i4", 80), ("rank", "<i4", 84), ("nranks", "<i4", 88), ("datatype", "u1", 92),
                     ("group_depth", "u1", 93), ("flags", "<u2", 94), ("redop", "<i4", 96), ("graph", "<u4", 100)], 104)

GPU_TIMING_RECORD = _struct([("launch_id", "<u8", 8), ("stream", "<u8", 16), ("gpu_begin_ns", "<i8", 24),
                             ("gpu_end_ns", "<i8", 32), ("clock_error_ns", "<i8", 40), ("ops", "<u4", 48),
                             ("flags", "<u4", 52)], 56)

API_EVENT = _struct([("call_id", "<u8", 8), ("time_ns", "<i8", 16), ("tid", "<u4", 24), ("api", "<u2", 28),
                     ("result", "<i2", 30), ("comm", "<u8", 32), ("comm_id", "<u8", 40), ("parent_id", "<u8", 48),
                     ("resource", "<u8", 56), ("bytes", "<u8", 64), ("rank", "<i4", 72), ("nranks", "<i4", 76),
                     ("device", "<i4", 80), ("arg0", "<i4", 84), ("arg1", "<i4", 88), ("flags", "<u4", 92),
                     ("nframes", "<u2", 96), ("name_len", "<u2", 98), ("split_index", "<u4", 100),
                     ("site_len", "<u2", 104), ("library", "<u2", 106), ("python_site_len", "<u2", 108)], 112)

STALL_RECORD = _struct([("time_ns", "<i8", 8), ("launch_id", "<u8", 16), ("comm_id", "<u8", 24), ("seq", "<u8", 32),
                        ("enqueued_ns", "<i8", 40), ("api", "<u2", 48), ("state", "<u4", 52), ("ncomms", "<u4", 56)], 64)

EXIT_RECORD = _struct([("time_ns", "<i8", 8), ("reason", "<u4", 16), ("signal", "<i4", 20), ("live_comms", "<u4", 24),
                       ("live_resources", "<u4", 28), ("lost_records", "<u8", 32)], 40)

STRINGS_RECORD = _struct([("time_ns", "<i8", 8), ("bytes", "<u4", 16)], 24)

LOST_RECORD = _struct([("time_ns", "<i8", 8), ("count", "<u8", 16)], 24)

# Retention (format 4): ops and GPU timings in a ring of 64-byte slots spread over ring_chunk
# records, counts of the whole run in an op_totals table, and the Ref records the slots point to.
RING_SLOT_BYTES = 64
RING_CHUNK_HEADER_BYTES = 64  # slots start this far into a ring_chunk record
MAX_RING_CHUNKS = 4096
OP_TOTALS_HEADER_BYTES = 64   # entries start this far into an op_totals record
TOTALS_BUCKETS = 46
LAUNCH_PREFIX_SHIFT = 40      # launch_id >> this: the prefix a ThreadRef names
RING_WRITING, RING_OP, RING_GPU_TIMING = 0, 1, 2  # a slot stamp's low byte: (index + 1) << 8 | kind
COMPACT_DURATION_MICROS = 1 << 15  # CompactOp.flags: host_duration counts microseconds

RING_CHUNK_RECORD = _struct([("ring_slots", "<u8", 8), ("ordinal", "<u4", 16), ("slots", "<u4", 20)], 56)

COMPACT_OP = _struct([("seq", "<u8", 0), ("count", "<u8", 8), ("host_begin_ns", "<i8", 16), ("launch_id", "<u8", 24),
                      ("host_duration", "<u4", 32), ("comm_index", "<u4", 36), ("peer", "<i4", 40), ("redop", "<i2", 44),
                      ("stream_index", "<u2", 46), ("api", "u1", 48), ("result", "i1", 49), ("datatype", "u1", 50),
                      ("group_depth", "u1", 51), ("flags", "<u2", 52), ("graph", "<u2", 54)], 56)

COMPACT_TIMING = _struct([("launch_id", "<u8", 0), ("stream", "<u8", 8), ("gpu_begin_ns", "<i8", 16),
                          ("gpu_end_ns", "<i8", 24), ("clock_error_ns", "<i8", 32), ("ops", "<u4", 40),
                          ("flags", "<u4", 44)], 56)

# The slot's body is a union: `op` and `timing` overlay the same bytes, the stamp's kind says which.
RING_SLOT = _struct([("stamp", "<u8", 0), ("op", COMPACT_OP, 8), ("timing", COMPACT_TIMING, 8)], 64)

OP_TOTALS_RECORD = _struct([("entries", "<u4", 8)], 56)

OP_TOTALS_ENTRY = _struct([("key", "<u8", 0), ("count", "<u8", 8), ("comm_index", "<u4", 16), ("api", "<u2", 20),
                           ("datatype", "u1", 22), ("ready", "u1", 23), ("calls", "<u8", 24), ("host_ns", "<u8", 32),
                           ("gpu_timed", "<u8", 40), ("gpu_ns", "<u8", 48), ("first_ns", "<i8", 56),
                           ("last_ns", "<i8", 64), ("gpu_histogram", ("<u4", (TOTALS_BUCKETS,)), 72)], 256)


def totals_bucket_floor_ns(bucket):
    """The shortest GPU time op totals' histogram bucket `bucket` counts (half-octaves from 1 us;
    bucket 0 also counts shorter ones, the last one longer ones)."""
    return 1024.0 * 2 ** (bucket // 2) * (1.5 if bucket % 2 else 1)


COMM_REF_RECORD = _struct([("time_ns", "<i8", 8), ("comm_id", "<u8", 16), ("comm", "<u8", 24), ("index", "<u4", 32),
                           ("rank", "<i4", 36), ("nranks", "<i4", 40)], 48)

STREAM_REF_RECORD = _struct([("time_ns", "<i8", 8), ("stream", "<u8", 16), ("index", "<u4", 24)], 32)

THREAD_REF_RECORD = _struct([("time_ns", "<i8", 8), ("launch_prefix", "<u8", 16), ("tid", "<u4", 24)], 32)

# OpRecord.flags, GpuTimingRecord.flags
OP_CAPTURED, OP_TIMED, OP_IN_PLACE, OP_COLL_CONFIG, OP_REPLAYED = 1, 2, 4, 8, 16
TIMING_HAS_BEGIN = 1
EXIT_REASONS = {1: "normal", 2: "signal", 3: "python_finalizing", 4: "quick_exit", 5: "exec", 6: "exited"}
STALL_STATES = {1: "stalled", 2: "resolved"}

DATATYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
             "float8e4m3", "float8e5m2"]
DATATYPE_BYTES = [1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1]
REDOPS = {-1: "none", 0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}  # others: "custom" (premulsum, user ops)


def _api_table():
    """Api value -> (name, kind), read from the API table the shim and the analyzers are built from."""
    here = os.path.dirname(os.path.abspath(__file__))
    table = {}
    with open(os.path.join(here, "nccl_api.def")) as f:
        for kind, name, value in re.findall(r"^NCCLWATCH_TRACED\((\w+),\s*(\w+),\s*\d+,\s*\w+,\s*(\d+)\)", f.read(), re.M):
            table[int(value)] = (name, kind.lower())
    return table


APIS = _api_table()
# nccl-tests' "size" is the larger buffer: these ops' count is per rank (bytes = count x nranks x element).
COUNT_PER_RANK = {"ncclAllGather", "ncclReduceScatter", "ncclAlltoAll", "ncclGather", "ncclScatter"}


def api_name(value):
    return APIS.get(int(value), ("unknown", ""))[0]


def datatype_name(value):
    return DATATYPES[value] if 0 <= value < len(DATATYPES) else "unknown"


def redop_name(value):
    return REDOPS.get(int(value), "custom")
