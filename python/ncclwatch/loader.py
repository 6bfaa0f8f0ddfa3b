"""ncclwatch.load(): the trace files of a job as pandas DataFrames, read straight from the binary
format (trace_format.py), by the rules of the C++ reader (analyzers/model/trace_reader.cc): a
record counts once its commit mark is there; a reserved, never committed record is stepped over;
anything else is skipped 8 bytes at a time up to the next committed header. From format 4 on, a
process's ops and GPU timings are in a ring that keeps the newest of them (ops then holds that
window; processes.ring_* say how much of the run it is) and `totals` counts every op of the run.

Times are each process's CLOCK_MONOTONIC in ns, as recorded: on one host they compare directly;
across hosts, `ncclwatch-report` aligns them (processes.start_* give each file's wall-clock anchor).
"""
import bisect
import errno
import json
import mmap
import os
import stat
import struct
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd

from . import trace_format as tf

_HEADER = struct.Struct("<II")


class Job:
    """The tables of a job: ops, totals, calls, stalls, processes, env, comms, leaks, problems (see
    load())."""

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


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)


class _Unreadable(Exception):
    """A file that cannot be read at all; its message says why, as the report tool says it."""


def _data_extents(fd, size):
    """The [begin, end) runs of the file that hold data (SEEK_DATA/SEEK_HOLE), in order; the whole
    file where the system cannot tell."""
    if not hasattr(os, "SEEK_DATA"):
        return [(0, size)]
    extents, at = [], 0
    while at < size:
        try:
            begin = os.lseek(fd, at, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: nothing but a hole from here on
                extents.append((at, size))
            break
        if begin >= size:
            break
        try:
            end = min(os.lseek(fd, begin, os.SEEK_HOLE), size)
        except OSError:
            end = size
        end = end if end > begin else size
        extents.append((begin, end))
        at = end
    return extents


def _read_into(fd, view, offset):
    """Reads into `view` from `offset`: the bytes read."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], offset)
    chunk = os.pread(fd, len(view), offset)
    view[:len(chunk)] = chunk
    return len(chunk)


def _read_image(path):
    """A trace file's bytes and its data extents, read as the report tool reads them (trace_image.cc),
    so that a file in a folder others can write costs no more than the data it holds: opened without
    waiting (a FIFO waits for a writer forever), regular files only, and only the data extents read.
    A hole (a sparse file: `truncate -s 40G`, or a trace copied with cp -S) takes no memory: past the
    last data nothing is kept, and between data it is an untouched page of an anonymous mapping.
    Returns (data, extents): data a buffer of the file up to its last data; raises _Unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise _Unreadable(f"cannot open: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a file")
            raise _Unreadable(f"not a regular file ({kind})")
        if st.st_size == 0:
            raise _Unreadable("empty file")
        extents = _data_extents(fd, st.st_size)
        # A writer that died before its header may leave the first page a hole: the header reads zeros.
        span = max(extents[-1][1] if extents else 0, min(st.st_size, tf.HEADER_BYTES))
        holes = sum(end - begin for begin, end in extents) < span
        if holes:
            page = mmap.PAGESIZE
            buffer = mmap.mmap(-1, (span + page - 1) // page * page, flags=mmap.MAP_PRIVATE | _MAP_NORESERVE,
                               prot=mmap.PROT_READ | mmap.PROT_WRITE)
        else:
            buffer = bytearray(span)
        view = memoryview(buffer)
        kept = []
        for begin, end in extents:
            at = begin
            while at < end:
                n = _read_into(fd, view[at:min(end, at + (1 << 30))], at)
                if n <= 0:  # shrank while being read: what came before stands
                    break
                at += n
            if at > begin:
                kept.append((begin, at))
            if at < end:
                span = at
                break
        return view[:span], kept
    except OSError as e:
        raise _Unreadable(f"cannot read: {e.strerror}") from None
    finally:
        os.close(fd)


def _records(data, path, problems, extents=None):
    """Offsets of committed records by type, and the file header; None when the file is unusable.
    `extents`: the runs of `data` that hold data (the rest is zeros, a file's holes: stepped over)."""
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
    extents = extents if extents is not None else [(0, size)]
    _, data_end = _next_data(extents, offset, size)
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
        dirty = False
        while offset + 8 <= size and not plausible(offset):
            offset += 8
            if offset >= data_end:
                # Zeros hold no record: a hole (gigabytes of one, in a sparse file) is stepped over.
                dirty = dirty or any(data[start:min(offset, data_end)])
                offset, data_end = _next_data(extents, offset, size)
                start = offset
        if dirty or any(data[start:offset]):
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


def _next_data(extents, offset, size):
    """(where the scan goes on, the end of that run of data): `offset` where it lies in data, else
    the start of the next data (a multiple of 8); (size, size) when no data follows."""
    i = bisect.bisect_right(extents, offset, key=lambda e: e[1]) if sys.version_info >= (3, 10) else \
        next((i for i, e in enumerate(extents) if e[1] > offset), len(extents))
    if i == len(extents):
        return size, size
    begin, end = extents[i]
    return max(offset, (begin + 7) // 8 * 8), end


def _gather(words, offsets, dtype):
    """The `dtype` items at byte `offsets` (multiples of 8) as one structured array: gathered as
    rows of 8-byte words, then seen as the dtype."""
    offsets = np.asarray(offsets, dtype=np.int64)
    rows = words[(offsets // 8)[:, None] + np.arange(dtype.itemsize // 8)]
    return np.ascontiguousarray(rows).view(dtype).reshape(len(offsets))


def _sized(words, offsets, dtype):
    """The records at `offsets` that are at least as large as `dtype` (the C++ reader leaves shorter
    ones out)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    return offsets[(words[offsets // 8] & 0xFFFFFFFF) >= dtype.itemsize]


def _table(data, offsets, dtype):
    """The records at `offsets` as one structured array (each cut to the dtype's size)."""
    if not len(offsets):
        return np.zeros(0, dtype)
    words = np.frombuffer(data, "<u8", count=len(data) // 8)
    return _gather(words, _sized(words, offsets, dtype), dtype)


def _strings(data, offset):
    """A StringsRecord's "key=value" entries."""
    size, _ = _HEADER.unpack_from(data, offset)
    (length,) = struct.unpack_from("<I", data, offset + 16)
    blob = bytes(data[offset + 24:offset + min(size, 24 + length)])
    return dict(entry.split("=", 1) for entry in blob.decode("utf-8", "replace").split("\0") if "=" in entry)


def _frame(array, drop=()):
    return pd.DataFrame({name: array[name] for name in array.dtype.names if name not in drop})


# Format 4 ---------------------------------------------------------------------------------------
# The ring's slots and the totals' entries name communicators, streams and threads by index; the
# Ref records say what each index stands for. Rules as in RingIndex (analyzers/model/trace_reader.cc).

class _Refs:
    """A file's CommRef, StreamRef and ThreadRef records, each table sorted by its key; of records
    with the same key the last one counts, and keys out of range are ignored."""

    def __init__(self, data, by_type):
        def last_of_each(kind, dtype, key, low, high):
            table = _table(data, by_type.get(tf.RECORD_TYPE[kind], []), dtype)
            table = table[(table[key] >= low) & (table[key] < high)]
            # np.unique indexes the first of equal keys: in the reversed table, the last record.
            _, first = np.unique(table[key][::-1], return_index=True)
            return table[::-1][first]

        self.comms = last_of_each("comm_ref", tf.COMM_REF_RECORD, "index", 1, 1 << 24)
        self.streams = last_of_each("stream_ref", tf.STREAM_REF_RECORD, "index", 1, 1 << 16)
        self.threads = last_of_each("thread_ref", tf.THREAD_REF_RECORD, "launch_prefix", 0, 1 << 24)

    def comm(self, comm_index):
        """comm_id, comm, rank, nranks of each comm_index (0 or unknown: 0, 0, -1, -1)."""
        return _resolve(self.comms, "index", comm_index, {"comm_id": 0, "comm": 0, "rank": -1, "nranks": -1})

    def stream(self, stream_index):
        return _resolve(self.streams, "index", stream_index, {"stream": 0})["stream"]

    def tid(self, launch_id):
        prefix = np.asarray(launch_id, dtype=np.uint64) >> np.uint64(tf.LAUNCH_PREFIX_SHIFT)
        return _resolve(self.threads, "launch_prefix", prefix, {"tid": 0})["tid"]


def _resolve(table, key, values, defaults):
    """{column: table[column] in the row whose `key` is each of `values`, else the default}."""
    keys = table[key]
    values = np.asarray(values, dtype=keys.dtype)
    at = np.searchsorted(keys, values)
    found = at < len(keys)
    found[found] = keys[at[found]] == values[found]
    at = np.where(found, at, len(keys))  # the default's row, appended below
    return {name: np.append(table[name], np.array(default, table[name].dtype))[at] for name, default in defaults.items()}


_RING_CHUNK = struct.Struct("<I4xQII")  # RecordHeader.size, RingChunkRecord.ring_slots, ordinal, slots


def _ring(data, by_type, path, problems):
    """The ring's window as RingIndex finds it: of the slots that hold an op or a GPU timing whose
    index fits their position, those of the newest ring_slots indices, oldest first, as RING_SLOT
    rows; and the window's (ring_slots, written, kept). Chunks that disagree with the first one
    about the ring's size are named in `problems` and left out."""
    ring_slots = chunk_slots = 0
    chunks = {}  # ordinal -> offset of its first slot; of two chunks of one ordinal, the later
    for offset in by_type.get(tf.RECORD_TYPE["ring_chunk"], []):
        if _HEADER.unpack_from(data, offset)[0] < tf.RING_CHUNK_RECORD.itemsize:
            continue
        size, ring, ordinal, slots = _RING_CHUNK.unpack_from(data, offset)
        fits = slots > 0 and tf.RING_CHUNK_HEADER_BYTES + slots * tf.RING_SLOT_BYTES <= size
        if chunks:
            agrees = ring == ring_slots and slots == chunk_slots
        else:
            agrees = ring > 0 and slots > 0 and ring % slots == 0 and ring // slots <= tf.MAX_RING_CHUNKS
        if not fits or not agrees or ordinal * slots >= ring:
            problems.append((path, f"ring chunk at offset {offset} disagrees with the ring's size; its ops are left out"))
            continue
        ring_slots, chunk_slots = ring, slots
        chunks[ordinal] = offset + tf.RING_CHUNK_HEADER_BYTES
    empty = np.zeros(0, tf.RING_SLOT), (0, 0, 0)
    if not chunks:
        return empty
    words = np.frombuffer(data, "<u8", count=len(data) // 8)
    in_chunk = np.arange(chunk_slots, dtype=np.uint64)
    positions = (np.fromiter(chunks, np.uint64, len(chunks))[:, None] * np.uint64(chunk_slots) + in_chunk).ravel()
    offsets = (np.fromiter(chunks.values(), np.int64, len(chunks))[:, None] +
               in_chunk.astype(np.int64) * tf.RING_SLOT_BYTES).ravel()
    stamps = words[offsets // 8]
    kind = stamps & np.uint64(0xFF)
    index = (stamps >> np.uint64(8)) - np.uint64(1)
    # A stamp below 256 stands for index -1 (the C++ reader takes it as 2^64 - 1): never written.
    valid = (((kind == tf.RING_OP) | (kind == tf.RING_GPU_TIMING)) & (stamps >= np.uint64(256)) &
             (index % np.uint64(ring_slots) == positions))
    if not valid.any():
        return empty
    newest = int(index[valid].max())
    keep = valid & (index >= np.uint64(max(newest + 1 - ring_slots, 0)))
    order = np.argsort(index[keep], kind="stable")
    slots = _gather(words, offsets[keep][order], tf.RING_SLOT)
    return slots, (ring_slots, newest + 1, len(slots))


def _columns(array, dtype=None):
    """A structured array as {field: column}, each cast to `dtype`'s field of that name."""
    dtype = dtype or array.dtype
    return {name: np.asarray(array[name], dtype=dtype.fields[name][0]) for name in dtype.names}


def _expand_ops(compact, refs):
    """CompactOps as OpRecord columns (RingIndex::expand)."""
    micros = (compact["flags"] & tf.COMPACT_DURATION_MICROS) != 0
    columns = refs.comm(compact["comm_index"])  # comm_id, comm, rank, nranks
    columns.update({name: compact[name] for name in ("seq", "count", "host_begin_ns", "launch_id", "api", "result",
                                                     "peer", "datatype", "group_depth", "redop", "graph")})
    columns["stream"] = refs.stream(compact["stream_index"])
    columns["tid"] = refs.tid(compact["launch_id"])
    columns["host_end_ns"] = compact["host_begin_ns"] + compact["host_duration"].astype(np.int64) * np.where(micros, 1000, 1)
    columns["flags"] = compact["flags"] & ~np.uint16(tf.COMPACT_DURATION_MICROS)
    return _columns(columns, tf.OP_RECORD)


# When each record the C++ reader delivers was written (record_time() there): it hands on each of
# the ring's records before the first other record that is later.
_RECORD_TIMES = {"call_begin": (tf.API_EVENT, "time_ns"), "call_end": (tf.API_EVENT, "time_ns"),
                 "process": (tf.STRINGS_RECORD, "time_ns"), "library": (tf.STRINGS_RECORD, "time_ns"),
                 "notice": (tf.STRINGS_RECORD, "time_ns"), "graph": (tf.STRINGS_RECORD, "time_ns"),
                 "stacks": (tf.STRINGS_RECORD, "time_ns"), "exit_begin": (tf.EXIT_RECORD, "time_ns"),
                 "process_end": (tf.EXIT_RECORD, "time_ns"), "lost": (tf.LOST_RECORD, "time_ns"),
                 "stall": (tf.STALL_RECORD, "time_ns"), "op": (tf.OP_RECORD, "host_end_ns"),
                 "gpu_timing": (tf.GPU_TIMING_RECORD, "gpu_end_ns"), "comm_ref": (tf.COMM_REF_RECORD, "time_ns"),
                 "stream_ref": (tf.STREAM_REF_RECORD, "time_ns"), "thread_ref": (tf.THREAD_REF_RECORD, "time_ns")}


def _ring_records_before(data, by_type, at, ring_times):
    """For each record at the offsets `at`, how many of the ring's records (times `ring_times`, in
    the ring's order) the C++ reader delivers before it."""
    words = np.frombuffer(data, "<u8", count=len(data) // 8)
    offsets, times = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for kind, (dtype, field) in _RECORD_TIMES.items():
        sized = _sized(words, by_type.get(tf.RECORD_TYPE[kind], []), dtype)
        offsets.append(sized)
        times.append(words[(sized + dtype.fields[field][1]) // 8].view(np.int64))
    offsets, times = np.concatenate(offsets), np.concatenate(times)
    order = np.argsort(offsets)
    latest = np.maximum.accumulate(times[order])  # the latest time read so far, at each record
    history = latest[np.searchsorted(offsets[order], at)]
    return np.searchsorted(np.maximum.accumulate(ring_times), history, side="left")


def _ops_and_timings(data, by_type, header, refs, path, problems):
    """A file's ops (OP_RECORD columns) and GPU timings (GPU_TIMING_RECORD columns), of its records
    and of its ring's window, in the order the C++ reader delivers them; and the ring's window."""
    words = np.frombuffer(data, "<u8", count=len(data) // 8)
    op_at = _sized(words, by_type.get(tf.RECORD_TYPE["op"], []), tf.OP_RECORD)
    ops = _columns(_gather(words, op_at, tf.OP_RECORD))
    timings = _columns(_table(data, by_type.get(tf.RECORD_TYPE["gpu_timing"], []), tf.GPU_TIMING_RECORD))
    if header["version"] < 4:
        return ops, timings, (0, 0, 0)
    slots, window = _ring(data, by_type, path, problems)
    is_op = (slots["stamp"] & np.uint64(0xFF)) == tf.RING_OP
    ring_ops = _expand_ops(slots["op"][is_op], refs)
    ring_timings = _columns(slots["timing"][~is_op], tf.GPU_TIMING_RECORD)
    order = slice(None)
    if len(op_at) and len(slots):
        ring_times = np.empty(len(slots), np.int64)
        ring_times[is_op] = ring_ops["host_end_ns"]
        ring_times[~is_op] = ring_timings["gpu_end_ns"]
        # Sort keys: the k-th of the ring's records 2k + 1, a record with k of them before it 2k.
        keys = np.concatenate([2 * _ring_records_before(data, by_type, op_at, ring_times),
                               2 * np.flatnonzero(is_op) + 1])
        order = np.argsort(keys, kind="stable")
    ops = {name: np.concatenate([ops[name], ring_ops[name]])[order] for name in tf.OP_RECORD.names}
    timings = {name: np.concatenate([timings[name], ring_timings[name]]) for name in tf.GPU_TIMING_RECORD.names}
    return ops, timings, window


def _totals(data, by_type, refs):
    """The entries of a file's op totals that are in use, with their communicators: TotalsEntry
    fields and comm_id, rank, nranks, overflow (entry 0: the keys that found no free entry)."""
    parts = []
    for offset in by_type.get(tf.RECORD_TYPE["op_totals"], []):
        size, _ = _HEADER.unpack_from(data, offset)
        if size < tf.OP_TOTALS_RECORD.itemsize:
            continue
        (entries,) = struct.unpack_from("<I", data, offset + tf.OP_TOTALS_RECORD.fields["entries"][1])
        entries = min(entries, max(size - tf.OP_TOTALS_HEADER_BYTES, 0) // tf.OP_TOTALS_ENTRY.itemsize)
        table = np.frombuffer(data, tf.OP_TOTALS_ENTRY, count=entries, offset=offset + tf.OP_TOTALS_HEADER_BYTES)
        overflow = np.arange(entries) == 0
        used = np.where(overflow, table["calls"] > 0, table["ready"] != 0)
        parts.append((table[used], overflow[used]))  # a copy: the file's bytes can go
    entries = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, tf.OP_TOTALS_ENTRY)
    overflow = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, bool)
    columns = refs.comm(np.where(overflow, 0, entries["comm_index"]))
    columns.update({name: entries[name] for name in ("api", "count", "datatype", "calls", "host_ns", "gpu_timed",
                                                      "gpu_ns", "first_ns", "last_ns")})
    columns["gpu_histogram"] = list(entries["gpu_histogram"])
    columns["overflow"] = overflow
    return pd.DataFrame(columns)


def load(paths, symbolize=True):
    """Reads trace files (or job folders) into a Job with these DataFrames:

    ops        one row per collective, point-to-point or one-sided call (group ends left out):
               file, host, pid, world_rank (the process's rank in the job, as `leaks` names it;
               <NA> when unknown), comm_id (16 hex digits, as the reports print it), comm_name
               (the name the application gave it, else ""), rank, nranks, seq, op, count, datatype,
               redop, bytes (nccl-tests' size), peer, stream, launch_id, host_begin_ns, host_end_ns
               (CLOCK_MONOTONIC of the host), wall_begin_ns (the same instant on the host's wall
               clock, CLOCK_REALTIME: comparable across hosts to NTP's precision), group_depth,
               captured, replayed, graph, timed, result, tid, and from the launch's GPU timing on
               that stream: gpu_begin_ns, gpu_end_ns (host monotonic ns; <NA> where none) and
               gpu_us (NaN where none). The dtypes are OPS_DTYPES, whatever was timed, also for
               an empty frame. From format 4 on, only the ring's window: the newest ops of each
               process (see processes.ring_*), oldest first
    totals     format 4: one row per (communicator, op, count, datatype) a process called, counted
               over the whole run (group ends too: op ncclGroupEnd, count the ops it launched):
               file, host, pid, comm_id, rank, nranks, op, count, datatype,
               bytes, calls, host_ns (summed enqueue time), gpu_timed (launches of that op alone
               timed on the GPU), gpu_ns (their summed GPU time), first_ns and last_ns (host times
               of the first and latest call), gpu_histogram (an array of tf.TOTALS_BUCKETS counts of
               those launches by GPU time, bucket b from tf.totals_bucket_floor_ns(b)), overflow (the
               row of the calls whose key found no room in the table: only calls and times are theirs)
    calls      one row per lifecycle/resource call record (begin and end): file, event, call_id,
               api, time_ns, comm, comm_id, parent_id, rank, nranks, device, result, bytes, resource
    stalls     one row per stall record: file, time_ns, state, op, comm_id, seq, launch_id, pending_ms
    processes  one row per file: file, host, pid, ppid, start_wall_ns, start_mono_ns, ended (exited,
               normal (a trace that did not record the status), signal, quick_exit, exec, python_finalizing
               or "" when the process left no final record), signal (the status for exited, quick_exit),
               lost_records, and the ring's window (format 4; else 0): ring_slots (its size),
               ring_written (ops, group ends and GPU timings written to it over the run), ring_kept
               (those still in it: the file's `ops` rows, its group ends and their GPU timings)
    env        one row per setting the process recorded (file, key, value): NCCL_*, versions
    comms      one row per communicator instance (a rank of a communicator in a process): comm_id,
               name, rank, nranks, api, state (destroyed, leaked, released_at_exit, init_hung, ...),
               parent, created_at (the call site, the Python line first where Python made it),
               python_site (its Python frames: file, line, function), init_ms, host, pid, file. End states follow rules
               kept in one place, the report tool's: these rows are `ncclwatch-report leaks --json`'s
               (symbolize=False skips symbolizing the call sites; None when the tool is not found)
    leaks      the communicators and resources never released, as `leaks` lists them
    problems   what could not be read: file, problem. A file that is not a regular one (a FIFO, a
               device) is refused unopened and named in a warning too; a sparse file costs the data
               it holds, not the size it claims
    """
    problems = []
    ops, timings, totals, calls, stalls, processes, env = [], [], [], [], [], [], []
    for path in trace_files(paths):
        try:
            data, extents = _read_image(path)
        except _Unreadable as e:
            problems.append((path, str(e)))
            warnings.warn(f"ncclwatch.load: {path}: {e} (skipped)")
            continue
        by_type, header = _records(data, path, problems, extents)
        if by_type is None:
            continue
        host = header["host"].split(b"\0", 1)[0].decode("utf-8", "replace")
        pid = int(header["pid"])

        def led(frame, **first_columns):
            """`frame` led by the file's columns and `first_columns`."""
            for position, (name, value) in enumerate({"file": path, **first_columns}.items()):
                frame.insert(position, name, value)
            return frame

        def records(kind, dtype, **first_columns):
            """The file's records of one kind as a DataFrame, led by `first_columns`."""
            return led(_frame(_table(data, by_type.get(tf.RECORD_TYPE[kind], []), dtype)), **first_columns)

        refs = _Refs(data, by_type)
        file_ops, file_timings, (ring_slots, ring_written, ring_kept) = _ops_and_timings(data, by_type, header, refs,
                                                                                         path, problems)
        ops.append(led(pd.DataFrame(file_ops), host=host, pid=pid))
        timings.append(led(pd.DataFrame(file_timings)))
        totals.append(led(_totals(data, by_type, refs), host=host, pid=pid))
        calls.extend(records(kind, tf.API_EVENT, event=kind) for kind in ("call_begin", "call_end"))
        stalls.append(records("stall", tf.STALL_RECORD))
        end = _table(data, by_type.get(tf.RECORD_TYPE["process_end"], [])[-1:], tf.EXIT_RECORD)
        processes.append({"file": path, "host": host, "pid": pid, "ppid": int(header["ppid"]),
                          "start_wall_ns": int(header["start_wall_ns"]), "start_mono_ns": int(header["start_mono_ns"]),
                          "ended": tf.EXIT_REASONS.get(int(end["reason"][0]), "") if len(end) else "",
                          "signal": int(end["signal"][0]) if len(end) else 0,
                          "lost_records": int(end["lost_records"][0]) if len(end) else 0,
                          "ring_slots": ring_slots, "ring_written": ring_written, "ring_kept": ring_kept})
        for offset in by_type.get(tf.RECORD_TYPE["process"], []):
            env.extend({"file": path, "key": k, "value": v} for k, v in _strings(data, offset).items())
    comms, leaks = _lifecycles([p["file"] for p in processes], symbolize)
    process_table = pd.DataFrame(processes, columns=["file", "host", "pid", "ppid", "start_wall_ns", "start_mono_ns",
                                                     "ended", "signal", "lost_records", "ring_slots", "ring_written",
                                                     "ring_kept"])
    return Job(ops=_with_names_and_wall_clock(_ops_table(ops, timings), comms, process_table), totals=_totals_table(totals),
               calls=_calls_table(calls), stalls=_stalls_table(stalls), comms=comms, leaks=leaks,
               processes=process_table,
               env=pd.DataFrame(env, columns=["file", "key", "value"]),
               problems=pd.DataFrame(problems, columns=["file", "problem"]))


# The ops table's columns and dtypes: the same for every job (nullable Int64 where a value may be
# missing, pandas' string dtype for text).
OPS_DTYPES = {
    "file": "string", "host": "string", "pid": "int64", "world_rank": "Int64", "comm_id": "string",
    "comm_name": "string", "rank": "int32", "nranks": "int32", "seq": "uint64", "op": "string", "count": "uint64",
    "datatype": "string", "redop": "string", "bytes": "uint64", "peer": "int32", "stream": "uint64",
    "launch_id": "uint64", "host_begin_ns": "int64", "host_end_ns": "int64", "wall_begin_ns": "int64",
    "group_depth": "uint8", "captured": "bool", "replayed": "bool", "graph": "uint32", "timed": "bool",
    "result": "int16", "tid": "uint32", "gpu_begin_ns": "Int64", "gpu_end_ns": "Int64", "gpu_us": "float64",
}


def _with_names_and_wall_clock(ops, comms, processes):
    """Adds world_rank and comm_name (from the report tool's communicators) and wall_begin_ns."""
    if comms is not None and len(comms) and {"file", "comm_id", "name", "world_rank"} <= set(comms.columns):
        names = comms[["file", "comm_id", "name"]].drop_duplicates(["file", "comm_id"]).rename(columns={"name": "comm_name"})
        ops = ops.merge(names.astype({"file": "string", "comm_id": "string"}), on=["file", "comm_id"], how="left")
        ranks = comms[["file", "world_rank"]].dropna().drop_duplicates("file")
        ops = ops.merge(ranks.astype({"file": "string"}), on="file", how="left")
    else:
        ops = ops.assign(comm_name="", world_rank=pd.NA)
    ops["comm_name"] = ops["comm_name"].fillna("")
    starts = processes[["file", "start_wall_ns", "start_mono_ns"]].astype({"file": "string"})
    ops = ops.merge(starts, on="file", how="left")
    ops["wall_begin_ns"] = ops["host_begin_ns"] - ops["start_mono_ns"].fillna(0).astype("int64") + \
        ops["start_wall_ns"].fillna(0).astype("int64")
    return ops[list(OPS_DTYPES)].astype(OPS_DTYPES)


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


def _api_names():
    names = ["unknown"] * (max(tf.APIS) + 1)
    for value, (name, _) in tf.APIS.items():
        names[value] = name
    return names


def _name_op_and_size(o):
    """Names the frame's api (as `op`) and datatype; adds `bytes`, nccl-tests' size."""
    raw_datatype = o["datatype"].to_numpy().astype(np.int64)
    o["op"] = _lookup(_api_names(), o["api"].to_numpy(), "unknown")
    o["comm_id"] = _hex(o["comm_id"].to_numpy())
    o["datatype"] = _lookup(tf.DATATYPES, raw_datatype, "unknown")
    element = np.array(tf.DATATYPE_BYTES + [0], dtype=np.uint64)[np.where(raw_datatype < len(tf.DATATYPE_BYTES), raw_datatype,
                                                                           len(tf.DATATYPE_BYTES))]
    per_rank = np.isin(o["op"].to_numpy(), list(tf.COUNT_PER_RANK))
    nranks = np.maximum(o["nranks"].to_numpy(), 1).astype(np.uint64)
    # As the report tool counts (bytes_of): a size past 2^64 (a damaged or hostile trace's count) is
    # 2^64 - 1, never the product wrapped round to a small size.
    count = o["count"].to_numpy().astype(np.uint64)
    factor = element * np.where(per_rank, nranks, np.uint64(1))
    with np.errstate(over="ignore"):
        size = count * factor
    past = (factor != 0) & (count > np.iinfo(np.uint64).max // np.maximum(factor, np.uint64(1)))
    o["bytes"] = np.where(past, np.iinfo(np.uint64).max, size).astype(np.uint64)


def _led_by_file(frames, empty):
    """The files' frames as one (`empty`'s columns when there are none), led by file, host, pid."""
    o = pd.concat(frames, ignore_index=True) if frames else empty
    for position, name in enumerate(["file", "host", "pid"]):
        if name not in o:
            o.insert(position, name, pd.Series(dtype=str if name != "pid" else np.int64))
    return o


def _ops_table(ops, timings):
    o = _led_by_file(ops, _frame(np.zeros(0, tf.OP_RECORD)))
    o = o[o["api"].to_numpy() != _api_names().index("ncclGroupEnd")].reset_index(drop=True)
    _name_op_and_size(o)
    redop = o["redop"].to_numpy().astype(np.int64)
    o["redop"] = np.where(redop > 4, "custom", _lookup(["none", "sum", "prod", "max", "min", "avg"], redop + 1, "custom"))
    o["captured"] = (o["flags"] & tf.OP_CAPTURED) != 0
    o["replayed"] = (o["flags"] & tf.OP_REPLAYED) != 0
    o["timed"] = (o["flags"] & tf.OP_TIMED) != 0
    columns = ["file", "launch_id", "stream", "gpu_begin_ns", "gpu_end_ns"]
    t = pd.concat(timings, ignore_index=True) if timings else pd.DataFrame(columns=columns + ["flags"])
    t = t.astype({"launch_id": "uint64", "stream": "uint64", "gpu_begin_ns": "Int64", "gpu_end_ns": "Int64"})
    if len(t):
        t = t.drop_duplicates(["file", "launch_id", "stream"])
        t = t.assign(gpu_begin_ns=t["gpu_begin_ns"].where((t["flags"] & tf.TIMING_HAS_BEGIN) != 0))
    o = o.merge(t[columns], on=["file", "launch_id", "stream"], how="left")
    o["gpu_us"] = ((o["gpu_end_ns"] - o["gpu_begin_ns"]) / 1e3).astype("float64")
    columns = ["file", "host", "pid", "comm_id", "rank", "nranks", "seq", "op", "count", "datatype", "redop", "bytes",
               "peer", "stream", "launch_id", "host_begin_ns", "host_end_ns", "group_depth", "captured", "replayed",
               "graph", "timed", "result", "tid", "gpu_begin_ns", "gpu_end_ns", "gpu_us"]
    return o[columns]


def _totals_table(totals):
    t = _led_by_file(totals, _totals(b"", {}, _Refs(b"", {})))
    _name_op_and_size(t)
    return t[["file", "host", "pid", "comm_id", "rank", "nranks", "op", "count", "datatype", "bytes", "calls", "host_ns",
              "gpu_timed", "gpu_ns", "first_ns", "last_ns", "gpu_histogram", "overflow"]]


def _calls_table(calls):
    c = pd.concat(calls, ignore_index=True) if calls else _frame(np.zeros(0, tf.API_EVENT)).assign(file="", event="")
    c["api"] = [tf.api_name(v) for v in c["api"].tolist()]
    c["comm_id"] = _hex(c["comm_id"].to_numpy())
    c["parent_id"] = _hex(c["parent_id"].to_numpy())
    return c[["file", "event", "call_id", "api", "time_ns", "comm", "comm_id", "parent_id", "rank", "nranks", "device",
              "result", "bytes", "resource", "tid"]]


def _stalls_table(stalls):
    s = pd.concat(stalls, ignore_index=True) if stalls else _frame(np.zeros(0, tf.STALL_RECORD)).assign(file="")
    s["state"] = [tf.STALL_STATES.get(v, "unknown") for v in s["state"].tolist()]
    s["op"] = [tf.api_name(v) for v in s["api"].tolist()]
    s["comm_id"] = _hex(s["comm_id"].to_numpy())
    s["pending_ms"] = (s["time_ns"] - s["enqueued_ns"]) / 1e6
    return s[["file", "time_ns", "state", "op", "comm_id", "seq", "launch_id", "pending_ms"]]
