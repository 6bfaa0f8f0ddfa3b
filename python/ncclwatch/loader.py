"""ncclwatch.load(): the trace files of a job as pandas DataFrames. The records come from the report
tool (`ncclwatch-report columns`): one reader of the trace format, the C++ one, with its rules for
torn, corrupt and hostile files; here its binary columns become frames with numpy.frombuffer.

Times are each process's CLOCK_MONOTONIC in ns, as recorded: on one host they compare directly;
across hosts, `ncclwatch-report` aligns them (processes.start_* give each file's wall-clock anchor).
"""
import json
import os
import subprocess
import warnings

import numpy as np
import pandas as pd

FORMAT = "ncclwatch-columns"
VERSION = 1


class Job:
    """The tables of a job: ops, totals, calls, stalls, processes, env, comms, leaks, problems (see
    load()), and totals_bucket_floor_ns (the GPU time from which each totals histogram bucket counts)."""

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


class ColumnsError(RuntimeError):
    """The report tool's stream could not be read: its message says what was wrong."""


def read_columns(stream):
    """Parses `ncclwatch-report columns` output: (header, blocks), each block a dict; a table block
    also has "data", {column: numpy array}, its label columns decoded to object arrays."""
    view = memoryview(stream)
    at, blocks, header = 0, [], None
    while at < len(stream):
        end = stream.find(b"\n", at)
        if end < 0:
            raise ColumnsError(f"the stream ends inside a block's line at byte {at}")
        try:
            block = json.loads(bytes(view[at:end]))
        except ValueError as e:
            raise ColumnsError(f"byte {at}: not a block line ({e})") from None
        if not isinstance(block, dict):
            raise ColumnsError(f"byte {at}: a block line that is not an object")
        at = end + 1
        if header is None:
            if block.get("format") != FORMAT or block.get("version") != VERSION:
                raise ColumnsError(f"not a {FORMAT} stream of version {VERSION}: {str(block)[:200]}")
            header = block
            continue
        if "table" in block:
            try:
                block["data"], at = _table_columns(stream, at, block)
            except (KeyError, TypeError, ValueError) as e:
                raise ColumnsError(f"byte {at}: table block {str(block)[:200]}: {e!r}") from None
        blocks.append(block)
    if header is None or not blocks or "problems" not in blocks[-1]:
        raise ColumnsError("the stream stops before its last block (the problems and leaks)")
    return header, blocks


def _table_columns(stream, at, block):
    rows, data = int(block["rows"]), {}
    for column in block["columns"]:
        dtype = np.dtype(column["dtype"])
        size = dtype.itemsize * rows
        if at + size > len(stream):
            raise ColumnsError(f"table {block['table']} of {block['file']}: column {column['name']} ends past the stream")
        values = np.frombuffer(stream, dtype=dtype, count=rows, offset=at)
        if "labels" in column:
            labels = np.array(column["labels"] + [""], dtype=object)
            values = labels[np.minimum(values, len(labels) - 1)]
        data[column["name"]] = values
        at += size
    return data, at


def load(paths, symbolize=True):
    """Reads trace files (or job folders) into a Job with these DataFrames:

    ops        one row per collective, point-to-point or one-sided call (group ends left out):
               file, host, pid, world_rank (the process's rank in the job, as `leaks` names it;
               <NA> when unknown), comm_id (16 hex digits, as the reports print it), comm_name
               (the name the application gave it, else ""), rank, nranks, seq, op, count, datatype,
               redop, bytes (nccl-tests' size), peer, stream, launch_id, host_begin_ns, host_end_ns
               (CLOCK_MONOTONIC of the host), wall_begin_ns (the same instant on the host's wall
               clock, CLOCK_REALTIME: comparable across hosts to NTP's precision), group_depth,
               captured, replayed, graph, timed, result, tid, and the launch's GPU timing as the
               reports and the export take it: timing (gpu; gpu_upper_bound: the communicator's
               previous launch, on another stream, was untimed and may be inside it; gpu_end: no
               start event; none; not_completed: promised, never came; lost), gpu_begin_ns (the
               start event, or the previous launch's end where the kernel waited for it),
               gpu_end_ns (host monotonic ns; <NA> where none) and gpu_us (NaN where none). The dtypes are OPS_DTYPES, whatever was timed, also for
               an empty frame. From format 4 on, only the ring's window: the newest ops of each
               process (see processes.ring_*), oldest first
    totals     format 4: one row per (communicator, op, count, datatype) a process called, counted
               over the whole run (group ends too: op ncclGroupEnd, count the ops it launched):
               file, host, pid, comm_id, rank, nranks, op, count, datatype,
               bytes, calls, host_ns (summed enqueue time), gpu_timed (launches of that op alone
               timed on the GPU), gpu_ns (their summed GPU time), first_ns and last_ns (host times
               of the first and latest call), gpu_histogram (an array of counts of those launches
               by GPU time, bucket b from job.totals_bucket_floor_ns[b]), overflow (the row of the
               calls whose key found no room in the table: only calls and times are theirs)
    calls      one row per lifecycle/resource call record (begin and end), in record order: file,
               event, call_id, api, time_ns, comm, comm_id, parent_id, rank, nranks, device, result,
               bytes, resource, tid
    stalls     one row per stall record: file, time_ns, state, op, comm_id, seq, launch_id, pending_ms
    processes  one row per readable file: file, host, pid, ppid, start_wall_ns, start_mono_ns, ended
               (exited, normal (a trace that did not record the status), signal, quick_exit, exec,
               python_finalizing or "" when the process left no final record), signal (the status
               for exited, quick_exit), lost_records, and the ring's window (format 4; else 0):
               ring_slots (its size), ring_written (ops, group ends and GPU timings written to it
               over the run), ring_kept (those still in it: the file's `ops` rows, its group ends
               and their GPU timings)
    env        one row per setting the process recorded (file, key, value): NCCL_*, versions
    comms      one row per communicator instance (a rank of a communicator in a process): comm_id,
               name, rank, nranks, api, state (destroyed, leaked, released_at_exit, init_hung, ...),
               parent, created_at (the call site, the Python line first where Python made it),
               python_site (its Python frames: file, line, function), init_ms, host, pid, file: the
               rows of `ncclwatch-report leaks --json` (symbolize=False skips symbolizing call sites)
    leaks      the communicators and resources never released, as `leaks` lists them
    problems   what could not be read, as the report tool names it: file, problem, fatal (the file
               could not be read at all: it is named in a warning too, and has no rows elsewhere)

    Every file is read once, by the report tool (ncclwatch.report_path()), in one pass.
    """
    from . import report_path
    files = trace_files(paths)
    header, blocks = _run_columns(report_path(), files, symbolize) if files else ({}, [{"problems": [], "leaks": {}}])
    by_table = {name: [] for name in ("ops", "totals", "calls", "stalls")}
    processes, env, process = [], [], {}
    for block in blocks:
        if "process" in block:
            process = {"file": block["file"], **block["process"]}
            processes.append(process)
        elif "table" in block:
            by_table[block["table"]].append(_led(block["data"], file=block["file"], host=process.get("host", ""),
                                                 pid=process.get("pid", 0)))
        elif "env" in block:
            env.extend({"file": block["file"], "key": k, "value": v} for k, v in block["env"])
    last = blocks[-1]
    problems = pd.DataFrame(last["problems"], columns=["file", "problem", "fatal"]).astype({"fatal": bool})
    for file, problem in problems.loc[problems["fatal"], ["file", "problem"]].itertuples(index=False):
        warnings.warn(f"ncclwatch.load: {file}: {problem} (skipped)")
    comms, leaks = _lifecycle_tables(last["leaks"])
    process_table = pd.DataFrame(processes, columns=PROCESS_COLUMNS)
    ops = _ops_table(by_table["ops"])
    return Job(ops=_with_names_and_wall_clock(ops, comms, process_table),
               totals=_table(by_table["totals"], TOTALS_COLUMNS, {"gpu_histogram": object}),
               calls=_table(by_table["calls"], CALL_COLUMNS), stalls=_stalls_table(by_table["stalls"]),
               comms=comms, leaks=leaks, processes=process_table,
               env=pd.DataFrame(env, columns=["file", "key", "value"]), problems=problems,
               totals_bucket_floor_ns=header.get("totals_bucket_floor_ns", []))


def _run_columns(tool, files, symbolize):
    args = [tool, "columns"] + ([] if symbolize else ["--no-symbols"]) + ["--"] + files
    out = subprocess.run(args, capture_output=True)
    try:
        return read_columns(out.stdout)
    except ColumnsError as e:
        said = out.stderr.decode("utf-8", "replace").strip()[-600:]
        raise ColumnsError(f"{tool} columns exited {out.returncode}: {e}{': ' + said if said else ''}") from None


PROCESS_COLUMNS = ["file", "host", "pid", "ppid", "start_wall_ns", "start_mono_ns", "ended", "signal", "lost_records",
                   "ring_slots", "ring_written", "ring_kept"]
TOTALS_COLUMNS = {"file": str, "host": str, "pid": "int64", "comm_id": str, "rank": "int32", "nranks": "int32",
                  "op": str, "count": "uint64", "datatype": str, "bytes": "uint64", "calls": "uint64",
                  "host_ns": "uint64", "gpu_timed": "uint64", "gpu_ns": "uint64", "first_ns": "int64",
                  "last_ns": "int64", "gpu_histogram": object, "overflow": "bool"}
CALL_COLUMNS = {"file": str, "event": str, "call_id": "uint64", "api": str, "time_ns": "int64",
                "comm": "uint64", "comm_id": str, "parent_id": str, "rank": "int32", "nranks": "int32",
                "device": "int32", "result": "int16", "bytes": "uint64", "resource": "uint64", "tid": "uint32"}
STALL_COLUMNS = {"file": str, "time_ns": "int64", "state": str, "op": str, "comm_id": str,
                 "seq": "uint64", "launch_id": "uint64", "enqueued_ns": "int64"}
RAW_OP_COLUMNS = {"file": str, "host": str, "pid": "int64", "comm_id": str, "rank": "int32",
                  "nranks": "int32", "seq": "uint64", "op": str, "count": "uint64", "datatype": str,
                  "redop": str, "bytes": "uint64", "peer": "int32", "stream": "uint64", "launch_id": "uint64",
                  "host_begin_ns": "int64", "host_end_ns": "int64", "group_depth": "uint8", "captured": "bool",
                  "replayed": "bool", "graph": "uint32", "timed": "bool", "result": "int16", "tid": "uint32",
                  "timing": str, "gpu_begin_ns": "int64", "gpu_end_ns": "int64"}

# The ops table's columns and dtypes: the same for every job (nullable Int64 where a value may be
# missing, pandas' string dtype for text).
OPS_DTYPES = {
    "file": "string", "host": "string", "pid": "int64", "world_rank": "Int64", "comm_id": "string",
    "comm_name": "string", "rank": "int32", "nranks": "int32", "seq": "uint64", "op": "string", "count": "uint64",
    "datatype": "string", "redop": "string", "bytes": "uint64", "peer": "int32", "stream": "uint64",
    "launch_id": "uint64", "host_begin_ns": "int64", "host_end_ns": "int64", "wall_begin_ns": "int64",
    "group_depth": "uint8", "captured": "bool", "replayed": "bool", "graph": "uint32", "timed": "bool",
    "result": "int16", "tid": "uint32", "timing": "string", "gpu_begin_ns": "Int64", "gpu_end_ns": "Int64",
    "gpu_us": "float64",
}


def _led(data, **first):
    """A table's columns led by the file's: each first value repeated over its rows."""
    rows = len(next(iter(data.values()))) if data else 0
    led = {name: np.full(rows, value, dtype=object if isinstance(value, str) else np.int64) for name, value in first.items()}
    led.update(data)
    return led


def _table(parts, columns, kinds=None):
    """The files' parts of one table as one frame with `columns` ({name: dtype}), also when empty."""
    frame = {}
    for name, dtype in columns.items():
        values = [p[name] for p in parts if name in p]
        if name in (kinds or {}) and values:
            frame[name] = pd.Series([row for v in values for row in v], dtype=object)
        else:
            frame[name] = pd.Series(np.concatenate(values) if values else np.zeros(0, dtype), dtype=dtype)
    return pd.DataFrame(frame)


def _ops_table(ops):
    """The ops with their launches' GPU times, as the tool paired them (the reports' and the export's)."""
    o = _table(ops, RAW_OP_COLUMNS)
    begun = o["timing"].isin(("gpu", "gpu_upper_bound"))
    o["gpu_begin_ns"] = o["gpu_begin_ns"].astype("Int64").where(begun)
    o["gpu_end_ns"] = o["gpu_end_ns"].astype("Int64").where(begun | (o["timing"] == "gpu_end"))
    o["gpu_us"] = ((o["gpu_end_ns"] - o["gpu_begin_ns"]) / 1e3).astype("float64")
    return o


def _stalls_table(stalls):
    s = _table(stalls, STALL_COLUMNS)
    s["pending_ms"] = (s["time_ns"] - s["enqueued_ns"]) / 1e6
    return s.drop(columns="enqueued_ns")


def _lifecycle_tables(report):
    """The communicators and leaks, as `leaks --json` gives them (its end-state rules are the ones
    the exit alert uses too: not written again here)."""
    rename = {"comm": "comm_id", "trace": "file"}
    return (pd.DataFrame(report.get("communicators", [])).rename(columns=rename),
            pd.DataFrame(report.get("leaks", [])).rename(columns=rename))


def _with_names_and_wall_clock(ops, comms, processes):
    """Adds world_rank and comm_name (from the report tool's communicators) and wall_begin_ns."""
    if len(comms) and {"file", "comm_id", "name", "world_rank"} <= set(comms.columns):
        names = comms[["file", "comm_id", "name"]].drop_duplicates(["file", "comm_id"]).rename(columns={"name": "comm_name"})
        ops = ops.merge(names, on=["file", "comm_id"], how="left")
        ranks = comms[["file", "world_rank"]].dropna().drop_duplicates("file")
        ops = ops.merge(ranks, on="file", how="left")
    else:
        ops = ops.assign(comm_name="", world_rank=pd.NA)
    ops["comm_name"] = ops["comm_name"].fillna("")
    starts = processes[["file", "start_wall_ns", "start_mono_ns"]].astype({"file": object})
    ops = ops.merge(starts, on="file", how="left")
    ops["wall_begin_ns"] = ops["host_begin_ns"] - ops["start_mono_ns"].fillna(0).astype("int64") + \
        ops["start_wall_ns"].fillna(0).astype("int64")
    return ops[list(OPS_DTYPES)].astype(OPS_DTYPES)
