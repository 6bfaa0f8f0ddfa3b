"""ncclwatch.load(): the trace files of a job as pandas DataFrames, read straight from the binary
format (trace_format.py), by the rules of the C++ reader (analyzers/model/trace_reader.cc): a
record counts once its commit mark is there; a reserved, never committed record is stepped over;
anything else is skipped 8 bytes at a time up to the next committed header.

Times are each process's CLOCK_MONOTONIC in ns, as recorded: on one host they compare directly;
across hosts, `ncclwatch-report` aligns them (processes.start_* give each file's wall-clock anchor).
"""
import json
import os
import struct
import subprocess
import warnings

import numpy as np
import pandas as pd

from . import trace_format as tf

_HEADER = struct.Struct("<II")


class Job:
    """The tables of a job: ops, calls, stalls, processes, env, problems (see load())."""

    def __init__(self, **tables):
        self.__dict__.update(tables)

    def __repr__(self):
        sizes = ", ".join(f"{name} {len(table)}" for name, table in self.__dict__.items() if isinstance(table, pd.DataFrame))
        return f"<ncclwatch.Job: {sizes}>"


def trace_files(paths):
    """Trace files named, and those of job folders named (their own *.nwt, not subfolders; a launcher
    folder holding job-* folders: the newest job), as `ncclwatch-report` reads them."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for path in map(os.fspath, paths):
        if not os.path.isdir(path):
            files.append(path)
            continue
        own = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".nwt"))
        if not own:
            jobs = [os.path.join(path, f) for f in os.listdir(path) if f.startswith("job-")]
            jobs = [j for j in jobs if os.path.isdir(j)]
            if jobs:
                newest = max(jobs, key=os.path.getmtime)
                own = sorted(os.path.join(newest, f) for f in os.listdir(newest) if f.endswith(".nwt"))
        files.extend(own)
    return files


def _records(data, path, problems):
    """Offsets of committed records by type, and the file header; None when the file is unusable."""
    if len(data) < 8 or data[:8] != tf.MAGIC:
        problems.append((path, "not an ncclwatch trace (bad magic)" if len(data) >= 8 and any(data[:8]) else
                         "no trace header"))
        return None, None
    if len(data) < tf.HEADER_BYTES:
        problems.append((path, "truncated inside the file header"))
        return None, None
    header = np.frombuffer(data, tf.FILE_HEADER, count=1)[0]
    if header["min_reader_version"] > tf.FORMAT_VERSION or header["version"] < tf.OLDEST_READABLE_FORMAT:
        problems.append((path, f"trace format {header['version']}, this loader reads {tf.OLDEST_READABLE_FORMAT} to "
                               f"{tf.FORMAT_VERSION}"))
        return None, None
    size = len(data)
    offset = int(header["header_bytes"])
    if offset < tf.HEADER_BYTES or offset > size or offset % 8:
        problems.append((path, f"invalid header size {offset}"))
        return None, None
    unpack = _HEADER.unpack_from
    commit = tf.COMMIT_MARK << 16
    # Ring chunks and op totals may be larger than other records.
    chunk_words = {commit | tf.RECORD_TYPE["ring_chunk"], commit | tf.RECORD_TYPE["op_totals"]}

    def plausible(at):
        if at + 8 > size:
            return False
        n, word = unpack(data, at)
        return (word & 0xFFFF0000 == commit and 8 <= n and n % 8 == 0 and at + n <= size and
                n <= (tf.MAX_CHUNK_RECORD_BYTES if word in chunk_words else tf.MAX_RECORD_BYTES))

    skipped = torn = 0
    # The loop runs once per record: in files before format 4, op and timing records (nearly all of
    # them) take the first branch.
    lists = {kind: [] for kind in tf.RECORD_TYPES if kind != 1}
    op_word, timing_word = commit | tf.RECORD_TYPE["op"], commit | tf.RECORD_TYPE["gpu_timing"]
    ops_append, timings_append = lists[tf.RECORD_TYPE["op"]].append, lists[tf.RECORD_TYPE["gpu_timing"]].append
    limit = tf.MAX_RECORD_BYTES
    while offset + 8 <= size:
        n, word = unpack(data, offset)
        if 8 <= n and not n & 7 and offset + n <= size and (n <= limit or word in chunk_words and
                                                            n <= tf.MAX_CHUNK_RECORD_BYTES):
            if word == op_word:
                ops_append(offset)
                offset += n
                continue
            if word == timing_word:
                timings_append(offset)
                offset += n
                continue
            if word & 0xFFFF0000 == commit:
                if word & 0xFFFF in lists:
                    lists[word & 0xFFFF].append(offset)
                offset += n
                continue
        if word == 0 and 8 <= n <= tf.MAX_CHUNK_RECORD_BYTES and n % 8 == 0 and offset + n <= size:
            torn += 1  # reserved, never committed: its writer died mid-record
            offset += n
            continue
        start = offset
        offset += 8
        while offset + 8 <= size and not plausible(offset):
            offset += 8
        if any(data[start:offset]):
            skipped += offset - start
    if skipped:
        problems.append((path, f"corrupt spans skipped ({skipped} bytes)"))
    if torn:
        problems.append((path, f"{torn} record(s) left half-written by the dying process"))
    by_type = {kind: offsets for kind, offsets in lists.items() if offsets}
    if not by_type:
        problems.append((path, "holds no records"))
        return None, None
    return by_type, header


def _gather(words, offsets, dtype):
    """The `dtype` items at byte `offsets` (multiples of 8) as one structured array: gathered as
    rows of 8-byte words, then seen as the dtype."""
    offsets = np.asarray(offsets, dtype=np.int64)
    rows = words[(offsets // 8)[:, None] + np.arange(dtype.itemsize // 8)]
    return np.ascontiguousarray(rows).view(dtype).reshape(len(offsets))


def _table(data, offsets, dtype):
    """The records at `offsets` as one structured array (each cut to the dtype's size). A record
    shorter than the dtype is left out, as the C++ reader leaves it out."""
    if not len(offsets):
        return np.zeros(0, dtype)
    words = np.frombuffer(data, "<u8", count=len(data) // 8)
    offsets = np.asarray(offsets, dtype=np.int64)
    offsets = offsets[(words[offsets // 8] & 0xFFFFFFFF) >= dtype.itemsize]
    return _gather(words, offsets, dtype)


def _strings(data, offset):
    """A StringsRecord's "key=value" entries."""
    size, _ = _HEADER.unpack_from(data, offset)
    (length,) = struct.unpack_from("<I", data, offset + 16)
    blob = bytes(data[offset + 24:offset + min(size, 24 + length)])
    return dict(entry.split("=", 1) for entry in blob.decode("utf-8", "replace").split("\0") if "=" in entry)


def _frame(array, drop=()):
    return pd.DataFrame({name: array[name] for name in array.dtype.names if name not in drop})


def load(paths, symbolize=True):
    """Reads trace files (or job folders) into a Job with these DataFrames:

    ops        one row per collective, point-to-point or one-sided call (group ends left out):
               file, host, pid, comm_id (16 hex digits, as the reports print it), rank, nranks, seq,
               op, count, datatype, redop, bytes (nccl-tests' size), peer, stream, launch_id,
               host_begin_ns, host_end_ns, group_depth, captured, timed, result, tid, and from the
               launch's GPU timing on that stream: gpu_begin_ns, gpu_end_ns, gpu_us (NaN where none)
    calls      one row per lifecycle/resource call record (begin and end): file, event, call_id,
               api, time_ns, comm, comm_id, parent_id, rank, nranks, device, result, bytes, resource
    stalls     one row per stall record: file, time_ns, state, op, comm_id, seq, launch_id, pending_ms
    processes  one row per file: file, host, pid, ppid, start_wall_ns, start_mono_ns, ended (normal,
               signal, python_finalizing or "" when the process left no final record), signal,
               lost_records
    env        one row per setting the process recorded (file, key, value): NCCL_*, versions
    comms      one row per communicator instance (a rank of a communicator in a process): comm_id,
               name, rank, nranks, api, state (destroyed, leaked, released_at_exit, init_hung, ...),
               parent, created_at (the call site), init_ms, host, pid, file. End states follow rules
               kept in one place, the report tool's: these rows are `ncclwatch-report leaks --json`'s
               (symbolize=False skips symbolizing the call sites; None when the tool is not found)
    leaks      the communicators and resources never released, as `leaks` lists them
    problems   what could not be read: file, problem
    """
    problems = []
    ops, timings, calls, stalls, processes, env = [], [], [], [], [], []
    for path in trace_files(paths):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            problems.append((path, f"cannot read: {e.strerror}"))
            continue
        by_type, header = _records(data, path, problems)
        if by_type is None:
            continue
        host = header["host"].split(b"\0", 1)[0].decode("utf-8", "replace")
        pid = int(header["pid"])

        def records(kind, dtype, **first_columns):
            """The file's records of one kind as a DataFrame, led by `first_columns`."""
            frame = _frame(_table(data, by_type.get(tf.RECORD_TYPE[kind], []), dtype))
            for position, (name, value) in enumerate({"file": path, **first_columns}.items()):
                frame.insert(position, name, value)
            return frame

        ops.append(records("op", tf.OP_RECORD, host=host, pid=pid))
        timings.append(records("gpu_timing", tf.GPU_TIMING_RECORD))
        calls.extend(records(kind, tf.API_EVENT, event=kind) for kind in ("call_begin", "call_end"))
        stalls.append(records("stall", tf.STALL_RECORD))
        end = _table(data, by_type.get(tf.RECORD_TYPE["process_end"], [])[-1:], tf.EXIT_RECORD)
        processes.append({"file": path, "host": host, "pid": pid, "ppid": int(header["ppid"]),
                          "start_wall_ns": int(header["start_wall_ns"]), "start_mono_ns": int(header["start_mono_ns"]),
                          "ended": tf.EXIT_REASONS.get(int(end["reason"][0]), "") if len(end) else "",
                          "signal": int(end["signal"][0]) if len(end) else 0,
                          "lost_records": int(end["lost_records"][0]) if len(end) else 0})
        for offset in by_type.get(tf.RECORD_TYPE["process"], []):
            env.extend({"file": path, "key": k, "value": v} for k, v in _strings(data, offset).items())
    comms, leaks = _lifecycles([p["file"] for p in processes], symbolize)
    return Job(ops=_ops_table(ops, timings), calls=_calls_table(calls), stalls=_stalls_table(stalls), comms=comms, leaks=leaks,
               processes=pd.DataFrame(processes, columns=["file", "host", "pid", "ppid", "start_wall_ns", "start_mono_ns",
                                                         "ended", "signal", "lost_records"]),
               env=pd.DataFrame(env, columns=["file", "key", "value"]),
               problems=pd.DataFrame(problems, columns=["file", "problem"]))


def _lifecycles(files, symbolize):
    """The report tool's communicators and leaks of these files (its end-state rules are the ones
    the exit alert uses too: not written again here)."""
    if not files:
        return pd.DataFrame(), pd.DataFrame()
    from . import report_path
    try:
        tool = report_path()
    except FileNotFoundError as e:
        warnings.warn(f"ncclwatch.load: no comms or leaks tables: {e}")
        return None, None
    args = [tool, "leaks", "--json"] + ([] if symbolize else ["--no-symbols"]) + files
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode not in (0, 1) or not out.stdout.startswith("{"):
        warnings.warn(f"ncclwatch.load: no comms or leaks tables: {tool} exited {out.returncode}: {out.stderr.strip()[:300]}")
        return None, None
    report = json.loads(out.stdout)
    rename = {"comm": "comm_id", "trace": "file"}
    return (pd.DataFrame(report["communicators"]).rename(columns=rename),
            pd.DataFrame(report["leaks"]).rename(columns=rename))


def _hex(values):
    """16 hex digits per id, as the reports print them (formatted once per distinct id)."""
    values = np.asarray(values, dtype=np.uint64)
    if not len(values):
        return np.array([], dtype=object)
    unique, inverse = np.unique(values, return_inverse=True)
    return np.array([f"{v:016x}" for v in unique.tolist()], dtype=object)[inverse]


def _lookup(table, values, default):
    """table[value] for small non-negative integers, `default` elsewhere."""
    names = np.array(list(table) + [default], dtype=object)
    values = np.asarray(values, dtype=np.int64)
    return names[np.where((values >= 0) & (values < len(table)), values, len(table))]


def _ops_table(ops, timings):
    o = pd.concat(ops, ignore_index=True) if ops else _frame(np.zeros(0, tf.OP_RECORD))
    if "file" not in o:
        o.insert(0, "file", pd.Series(dtype=str))
    api_names = ["unknown"] * (max(tf.APIS) + 1)
    for value, (name, _) in tf.APIS.items():
        api_names[value] = name
    o = o[o["api"].to_numpy() != api_names.index("ncclGroupEnd")].reset_index(drop=True)
    raw_datatype = o["datatype"].to_numpy().astype(np.int64)
    o["op"] = _lookup(api_names, o["api"].to_numpy(), "unknown")
    o["comm_id"] = _hex(o["comm_id"].to_numpy())
    o["datatype"] = _lookup(tf.DATATYPES, raw_datatype, "unknown")
    element = np.array(tf.DATATYPE_BYTES + [0], dtype=np.uint64)[np.where(raw_datatype < len(tf.DATATYPE_BYTES), raw_datatype,
                                                                           len(tf.DATATYPE_BYTES))]
    per_rank = np.isin(o["op"].to_numpy(), list(tf.COUNT_PER_RANK))
    nranks = np.maximum(o["nranks"].to_numpy(), 1).astype(np.uint64)
    o["bytes"] = o["count"].to_numpy().astype(np.uint64) * element * np.where(per_rank, nranks, np.uint64(1))
    redop = o["redop"].to_numpy().astype(np.int64)
    o["redop"] = np.where(redop > 4, "custom", _lookup(["none", "sum", "prod", "max", "min", "avg"], redop + 1, "custom"))
    o["captured"] = (o["flags"] & tf.OP_CAPTURED) != 0
    o["timed"] = (o["flags"] & tf.OP_TIMED) != 0
    columns = ["file", "launch_id", "stream", "gpu_begin_ns", "gpu_end_ns"]
    t = pd.concat(timings, ignore_index=True) if timings else pd.DataFrame(columns=columns + ["flags"])
    if len(t):
        t = t.drop_duplicates(["file", "launch_id", "stream"])
        t = t.assign(gpu_begin_ns=t["gpu_begin_ns"].where((t["flags"] & tf.TIMING_HAS_BEGIN) != 0))
    o = o.merge(t[columns], on=["file", "launch_id", "stream"], how="left")
    o["gpu_us"] = (o["gpu_end_ns"] - o["gpu_begin_ns"]) / 1e3
    columns = ["file", "host", "pid", "comm_id", "rank", "nranks", "seq", "op", "count", "datatype", "redop", "bytes",
               "peer", "stream", "launch_id", "host_begin_ns", "host_end_ns", "group_depth", "captured", "timed",
               "result", "tid", "gpu_begin_ns", "gpu_end_ns", "gpu_us"]
    return o[columns]


def _calls_table(calls):
    c = pd.concat(calls, ignore_index=True)
    c["api"] = [tf.api_name(v) for v in c["api"].tolist()]
    c["comm_id"] = _hex(c["comm_id"].to_numpy())
    c["parent_id"] = _hex(c["parent_id"].to_numpy())
    return c[["file", "event", "call_id", "api", "time_ns", "comm", "comm_id", "parent_id", "rank", "nranks", "device",
              "result", "bytes", "resource", "tid"]]


def _stalls_table(stalls):
    s = pd.concat(stalls, ignore_index=True)
    s["state"] = [tf.STALL_STATES.get(v, "unknown") for v in s["state"].tolist()]
    s["op"] = [tf.api_name(v) for v in s["api"].tolist()]
    s["comm_id"] = _hex(s["comm_id"].to_numpy())
    s["pending_ms"] = (s["time_ns"] - s["enqueued_ns"]) / 1e6
    return s[["file", "time_ns", "state", "op", "comm_id", "seq", "launch_id", "pending_ms"]]
