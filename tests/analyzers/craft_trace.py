"""Hand-made trace files for the hostile-input tests, laid out byte for byte as
common/ncclwatch/trace_format.h says, so that a test can put any value in any field.

Run as a script to (re)write the crafted seeds of the fuzz corpus:
    python3 tests/analyzers/craft_trace.py tests/analyzers/corpus
"""
import os
import struct
import sys

MAGIC = b"NCCLWTCH"
VERSION = 3
MIN_READER = 2
HEADER_BYTES = 4096
COMMIT = 0xC0DE

# RecordType
PROCESS, LIBRARY, MODULE, CALL_BEGIN, CALL_END, EXIT_BEGIN, PROCESS_END, LOST, NOTICE, COLLECTIVE = range(2, 12)
GPU_TIMING, STALL = 12, 13
RING_CHUNK, COMM_REF, THREAD_REF = 14, 16, 18
MEMORY = 24
OP_PLAN = 25
OP_KERNEL = 26
OP_PROXY = 27
MEMORY_FROM_NCCL, MEMORY_FROM_FREE_CHANGE = 1 << 4, 1 << 5  # ApiEvent and MemoryRecord flags
MEMORY_SHARED_DEVICE = 1 << 8  # with MEMORY_FROM_FREE_CHANGE: other processes used the GPU
# Api
COMM_INIT_RANK, COMM_DESTROY, COMM_SUSPEND, ALL_REDUCE, GROUP_END = 1, 8, 12, 40, 52
# The ring (format 4): RingChunkRecord's header, RingSlot, RingKind::kOp
RING_CHUNK_HEADER_BYTES, RING_SLOT_BYTES, RING_KIND_OP = 64, 64, 1
LARGEST_REF_INDEX = (1 << 24) - 1  # the largest CommRef index and launch prefix the reader once accepted
# OpRecord.flags
OP_CAPTURED = 1  # OpRecord.flags (kOpCaptured)
OP_TIMED = 2
COMPACT_DURATION_MICROS = 1 << 15  # CompactOp.flags: host_duration counts microseconds

HOST_OFFSET = 48  # FileHeader.host


def file_header(host=b"node0", pid=4242, wall_ns=1_700_000_000_000_000_000, mono_ns=5_000_000_000, version=VERSION):
    """version 4 and later: the ring, the op totals and the Ref records (which need a reader of format 4)."""
    h = bytearray(HEADER_BYTES)
    struct.pack_into("<8sIIIIII", h, 0, MAGIC, version, MIN_READER if version < 4 else 4, HEADER_BYTES, pid, 1, 0)
    struct.pack_into("<qq", h, 32, wall_ns, mono_ns)
    h[HOST_OFFSET:HOST_OFFSET + len(host)] = host
    return bytes(h)


def pad8(b):
    return b + b"\0" * (-len(b) % 8)


def record(rtype, body):
    """A committed record: header, body, padding to 8."""
    size = 8 + len(pad8(body))
    return struct.pack("<IHH", size, rtype, COMMIT) + pad8(body)


def strings(rtype, entries, time_ns=5_000_000_000):
    blob = b"".join(e + b"\0" for e in entries)
    return record(rtype, struct.pack("<qII", time_ns, len(blob), 0) + blob)


def module(path, base):
    return record(MODULE, struct.pack("<QQII", base, 0, len(path), 0) + path)


def api_event(rtype, call_id, api, time_ns, comm=0, comm_id=0, rank=0, nranks=1, frames=(), name=b"", site=b"",
              result=0, gpu_bytes=0, flags=0):
    """`gpu_bytes` with MEMORY_* `flags`: a creation's or release's end measured the GPU memory."""
    body = struct.pack("<QqIHhQQQQQiiiiiIHHIHHI", call_id, time_ns, 4242, api, result, comm, comm_id, 0, 0, gpu_bytes,
                       rank, nranks, 0, 0, 0, flags, len(frames), len(name), 0, len(site), 0, 0)
    tail = b"".join(struct.pack("<Q", f) for f in frames) + name + site
    return record(rtype, body + tail)


def op(comm_id, seq, rank=0, nranks=2, count=1024, time_ns=6_000_000_000, launch_id=None, api=ALL_REDUCE, flags=0,
       group_depth=0, stream=0x5000):
    body = struct.pack("<QQQQQqqQIHhiiiBBHiI", comm_id, 0x1000, seq, count, stream, time_ns, time_ns + 5000,
                       launch_id if launch_id is not None else seq, 4242, api, 0, -1, rank, nranks, 7, group_depth, flags,
                       0, 0)
    return record(COLLECTIVE, body)


def group_end(comm_id, launch_id, ops, time_ns, timed, rank=0, nranks=2):
    """The outermost ncclGroupEnd's record: its OP_TIMED flag promises a timing of the launch."""
    return op(comm_id, 0, rank=rank, nranks=nranks, count=ops, time_ns=time_ns, launch_id=launch_id, api=GROUP_END,
              flags=OP_TIMED if timed else 0)


def gpu_timing(launch_id, begin_ns, end_ns, stream=0x5000, ops=1):
    return record(GPU_TIMING, struct.pack("<QQqqqII", launch_id, stream, begin_ns, end_ns, 0, ops, 1))


def comm_destroyed(call_id, comm, comm_id, rank=0, nranks=2, time_ns=8_000_000_000):
    """A ncclCommDestroy that returned: begin and end records."""
    return (api_event(CALL_BEGIN, call_id, COMM_DESTROY, time_ns, comm=comm, comm_id=comm_id, rank=rank, nranks=nranks) +
            api_event(CALL_END, call_id, COMM_DESTROY, time_ns + 100_000, comm=comm, comm_id=comm_id, rank=rank,
                      nranks=nranks))


def comm_ref(index, comm_id, comm=0xC0FFEE, rank=0, nranks=2, time_ns=5_500_000_000):
    """Names the communicator that ring slots with this comm_index mean (format 4)."""
    return record(COMM_REF, struct.pack("<qQQIiiI", time_ns, comm_id, comm, index, rank, nranks, 0))


def thread_ref(launch_prefix, tid=4242, time_ns=5_500_000_000):
    """Names the thread whose launch ids carry this prefix (format 4)."""
    return record(THREAD_REF, struct.pack("<qQII", time_ns, launch_prefix, tid, 0))


def ring_chunk_header(ring_slots, ordinal, slots):
    """A RingChunkRecord's 64 bytes; `slots` RingSlots (64 bytes each) must follow."""
    size = RING_CHUNK_HEADER_BYTES + slots * RING_SLOT_BYTES
    return struct.pack("<IHHQII4Q", size, RING_CHUNK, COMMIT, ring_slots, ordinal, slots, 0, 0, 0, 0).ljust(
        RING_CHUNK_HEADER_BYTES, b"\0")


def ring_op_slot(index, seq, comm_index, launch_id, time_ns=6_000_000_000, count=1024):
    """A committed ring slot holding the ring's `index`-th record: an all-reduce (CompactOp)."""
    stamp = (index + 1) << 8 | RING_KIND_OP
    return struct.pack("<QQQqQIIihHBbBBHH", stamp, seq, count, time_ns, launch_id, 5000, comm_index, -1, 0, 0,
                       ALL_REDUCE, 0, 7, 0, 0, 0)


def memory_reading(comm, comm_id, time_ns, held=None, taken=None, api=ALL_REDUCE, count=1024, rank=0):
    """A MemoryRecord (format 8): NCCL's count after a set-up call and/or the free memory it took."""
    flags = (MEMORY_FROM_NCCL if held is not None else 0) | (MEMORY_FROM_FREE_CHANGE if taken is not None else 0)
    return record(MEMORY, struct.pack("<qQQQqQIHBBii", time_ns, comm_id, comm, held or 0, taken or 0, count, flags, api,
                                      7, 0, rank, -1))


def hostile_memory_readings():
    """Readings no NCCL makes, each a reader must bound: one communicator's NCCL count at 2^64 - 1,
    another's free-memory takings of 2^62 each, more of them than the shim ever writes, a taking
    below -2^63 + 1, and a reading for a communicator never made; then an ordinary one."""
    out = file_header(version=8) + process()
    out += comm_created(1, 0xA, 0x11) + comm_created(2, 0xB, 0x22)
    t = 6_000_000_000
    out += memory_reading(0xA, 0x11, t, held=(1 << 64) - 1)
    for i in range(80):
        out += memory_reading(0xB, 0x22, t + i, taken=1 << 62)
    out += memory_reading(0xB, 0x22, t + 100, taken=-(1 << 63))
    out += memory_reading(0xDEAD, 0x33, t + 200, held=1 << 30)
    out += memory_reading(0xA, 0x11, t + 300, held=64 << 20, taken=8 << 20)
    return out + exit_records()


def op_plan(launch_id, seq, comm_id, algo=b"RING", proto=b"SIMPLE", channels=4, api=ALL_REDUCE, count=1024, nranks=2,
            rank=0, flags=0):
    """An OpPlanRecord (format 9): what NCCL planned for one op (its profiler interface)."""
    return record(OP_PLAN, struct.pack("<QQQQQiiiHBB16s8sB3xI", launch_id, seq, comm_id, count, seq - 1, -1, rank,
                                       nranks, api, 7, channels, algo, proto, 8, flags))


def hostile_op_plans():
    """Plans no NCCL makes, each a reader must bound: names that fill their fields with no NUL and
    bytes that are not text, more ways for one op and size than NCCL has, an op kind no API has,
    an implausible size, a communicator never made; then an ordinary one. With an op of each size,
    so that latency has rows to name them on."""
    out = file_header(version=9) + process() + comm_created(1, 0xA, 0x11)
    out += op(0x11, 2, count=1024) + op(0x11, 93, count=16)
    out += op_plan(1, 1, 0x11, algo=b"\xff" * 16, proto=b"\x1b[31m\x07AB")
    for i in range(80):
        out += op_plan(2 + i, 2 + i, 0x11, algo=b"ALGO%d" % i)
    out += op_plan(90, 90, 0x11, api=9999)
    out += op_plan(91, 91, 0x11, nranks=1 << 30)
    out += op_plan(92, 92, 0xDEAD)
    out += op_plan(93, 93, 0x11, algo=b"TREE", proto=b"LL", channels=1, count=16)
    return out + exit_records()


def op_kernel(launch_id, seq, comm_id, start, stop, channel=0, channels=1, api=ALL_REDUCE, count=1024, nranks=2,
              rank=0):
    """An OpKernelRecord (format 10): one channel of an op's kernel by the GPU's timer."""
    return record(OP_KERNEL, struct.pack("<QQQQQQiiiHBBB7x", launch_id, seq, comm_id, count, start, stop, -1, rank,
                                         nranks, api, 7, channel, channels))


def hostile_op_kernels():
    """Kernel channels no NCCL reports, each a reader must leave out or bound: no stop, a stop
    before its start, a span of days, an op kind no API has; 300 ops whose second channel never
    comes (more than the reader keeps open); then ordinary ops of 1024 floats: two of 2 channels
    each, 10 us and 30 us from first start to last stop, their channels' records interleaved."""
    out = file_header(version=10) + process() + comm_created(1, 0xA, 0x11)
    out += op(0x11, 1, count=1024) + op(0x11, 2, count=16)
    t = 5_000_000_000
    out += op_kernel(1, 1, 0x11, t, 0)
    out += op_kernel(2, 2, 0x11, t, t - 1)
    out += op_kernel(3, 3, 0x11, t, t + 3 * 86400 * 10**9)
    out += op_kernel(4, 4, 0x11, t, t + 1000, api=9999)
    for i in range(300):
        out += op_kernel(100 + i, 100 + i, 0x11, t, t + 2000, count=16, channels=2)
    out += op_kernel(900, 900, 0x11, t, t + 8_000, channel=0, channels=2)
    out += op_kernel(901, 901, 0x11, t + 50_000, t + 70_000, channel=1, channels=2)
    out += op_kernel(900, 900, 0x11, t + 1_000, t + 10_000, channel=1, channels=2)
    out += op_kernel(901, 901, 0x11, t + 40_000, t + 65_000, channel=0, channels=2)
    return out + exit_records()


PROXY_MOVING = 1 << 2


def op_proxy(launch_id, seq, comm_id, rank, remote, send, start, stop, steps_ns, gpu_wait, peer_wait, bytes_=4096,
             steps=4, nranks=4, count=1024, moving_after_us=None):
    """An OpProxyRecord (format 11): one proxy operation to or from a peer, its steps' waits; a
    send's data moving from `moving_after_us` after its start where given (kProxyMoving)."""
    flags = (1 if send else 0) | (PROXY_MOVING if moving_after_us is not None else 0)
    return record(OP_PROXY, struct.pack("<QQQQqqQQQQiiiHBBIIIIiI", launch_id, seq, comm_id, count, start, stop, bytes_,
                                        gpu_wait, peer_wait, steps_ns, -1, rank, nranks, ALL_REDUCE, 7, 0, steps, steps,
                                        1 << 17, flags, remote, moving_after_us or 0))


def hostile_op_proxies():
    """Proxy operations no NCCL reports, each left out and named: a peer outside the communicator,
    a stop before its start, waits longer than the steps, a span past any clock's; then two plausible ones of 4 steps and
    4096 bytes each, a send to rank 1 and a receive from rank 3; then sends to rank 2 whose data
    moved from past their end (no rate) or from just before a clock's end (no overflow), and one
    of 1 MB moving for 1 ms (1 GB/s)."""
    out = file_header(version=11) + process() + comm_created(1, 0xA, 0x11)
    out += op(0x11, 1, count=1024)
    t = 5_000_000_000
    out += op_proxy(1, 1, 0x11, 0, 9, True, t, t + 1000, 800, 100, 100)
    out += op_proxy(1, 1, 0x11, 0, 1, True, t, t - 1, 800, 100, 100)
    out += op_proxy(1, 1, 0x11, 0, 1, True, t, t + 1000, 800, 500, 500)
    out += op_proxy(1, 1, 0x11, 0, 1, True, -(1 << 63), (1 << 63) - 1, 800, 100, 100)  # a span no clock holds
    out += op_proxy(1, 1, 0x11, 0, 1, True, t, t + 4096, 4000, 1000, 2000)
    out += op_proxy(1, 1, 0x11, 0, 3, False, t, t + 4096, 4000, 1000, 2000)
    out += op_proxy(1, 1, 0x11, 0, 2, True, t, t + 4096, 4000, 1000, 2000, moving_after_us=5)
    out += op_proxy(1, 1, 0x11, 0, 2, True, (1 << 63) - 2000, (1 << 63) - 1, 1000, 0, 0, moving_after_us=0xFFFFFFFF)
    out += op_proxy(1, 1, 0x11, 0, 2, True, t, t + 3_000_000, 1_000_000, 0, 0, bytes_=1_000_000, moving_after_us=2000)
    return out + exit_records()


def exit_records(time_ns=9_000_000_000):
    body = struct.pack("<qIiIIQ", time_ns, 1, 0, 0, 0, 0)
    return record(EXIT_BEGIN, body) + record(PROCESS_END, body)


def process(host=b"node0", pid=4242):
    return strings(PROCESS, [b"host=" + host, b"pid=%d" % pid]) + strings(LIBRARY, [b"path=/usr/lib/libnccl.so.2",
                                                                                     b"version=22809"])


def comm_created(call_id, comm, comm_id, rank=0, nranks=2, name=b"", frames=(), site=b"", time_ns=5_100_000_000,
                 gpu_bytes=0, memory_flags=0):
    """A ncclCommInitRank that returned (300 us after `time_ns`): begin and end records; the end
    measured `gpu_bytes` of GPU memory where `memory_flags` (MEMORY_*) say how."""
    return (api_event(CALL_BEGIN, call_id, COMM_INIT_RANK, time_ns, comm_id=comm_id, rank=rank, nranks=nranks,
                      frames=frames, name=name, site=site) +
            api_event(CALL_END, call_id, COMM_INIT_RANK, time_ns + 300_000, comm=comm, comm_id=comm_id, rank=rank,
                      nranks=nranks, gpu_bytes=gpu_bytes, flags=memory_flags))


# The traces the tests and the fuzz corpus share ---------------------------------------------------

def leaked_comm_named(name):
    """One process that created a communicator called `name` and never destroyed it."""
    return file_header() + process() + comm_created(1, 0xC0FFEE, 0xA11CE00000000001, name=name) + \
        op(0xA11CE00000000001, 1) + exit_records()


def leaked_comm_in_module(path, base=0x7f0000000000, offset=0x1234):
    """A leaked communicator whose creating call site is a frame inside the module at `path`."""
    return file_header() + process() + module(path, base) + \
        comm_created(1, 0xC0FFEE, 0xA11CE00000000001, frames=(base + offset,)) + exit_records()


def huge_nranks(comms=50, nranks=1 << 20):
    """`comms` communicators, each created and used once, each claiming `nranks` ranks."""
    out = file_header() + process()
    for i in range(comms):
        comm_id = 0xB16_0000_0000_0000 + i
        out += comm_created(2 * i + 1, 0x1000 + i, comm_id, rank=0, nranks=nranks)
        out += op(comm_id, 1, rank=0, nranks=nranks, launch_id=i + 1)
    return out + exit_records()


def seq_jumps(records=400, jump=1 << 16):
    """Collectives whose seqs leap by `jump`: a slot table sized by seq would reach ~records x jump."""
    out = file_header() + process() + comm_created(1, 0x1000, 0x5E0, nranks=2)
    for i in range(records):
        out += op(0x5E0, 1 + i * jump, rank=0, nranks=2, launch_id=i + 1)
    return out + exit_records()


def divergence_seq_jumps(rank, records=400, jump=(1 << 20) - 1):
    """One rank of a 2-rank job whose op counts on communicator A differ (so the divergence pass reads
    both files again) while communicator B's seqs leap by `jump`."""
    a, b = 0xA000, 0xB000
    out = file_header(pid=4242 + rank) + process() + comm_created(1, 0x1000, a, rank=rank) + \
        comm_created(2, 0x1001, b, rank=rank)
    launch = 0
    for i in range(records):
        launch += 1
        out += op(b, 1 + i * jump, rank=rank, launch_id=launch)
        if i < 3 - rank:
            launch += 1
            out += op(a, 1 + i, rank=rank, launch_id=launch)
    return out + exit_records()


def init_all_ends(ends=2000, frames=20000, text=20000):
    """An ncclCommInitAll whose one begin record carries a large call site, then `ends` end records
    (ncclCommInitAll writes one per communicator it made): each communicator keeps the call site."""
    init_all = 3
    out = file_header() + process()
    out += api_event(CALL_BEGIN, 1, init_all, 5_100_000_000, nranks=ends,
                     frames=tuple(0x7f0000001000 + i for i in range(frames)), name=b"n" * text, site=b"s" * text)
    for i in range(ends):
        out += api_event(CALL_END, 1, init_all, 5_200_000_000, comm=0x1000 + i, comm_id=0xA0000 + i, rank=i % 8,
                         nranks=8)
    return out + exit_records()


def largest_ref_index(index=LARGEST_REF_INDEX):
    """A format-4 trace whose communicator and thread references name `index` (a table indexed by
    them, sized by the largest, takes ~1 GB): one ring op refers to both."""
    comm_id = 0xA11CE00000000001
    out = file_header(version=4) + process() + comm_created(1, 0xC0FFEE, comm_id)
    out += comm_ref(index, comm_id) + thread_ref(index)
    out += ring_chunk_header(ring_slots=4, ordinal=0, slots=4)
    out += ring_op_slot(0, seq=1, comm_index=index, launch_id=index << 40 | 1)
    out += b"\0" * (3 * RING_SLOT_BYTES)
    return out + exit_records()


def ring_claiming_more_chunks_parts(slots=1, chunks=4096, lap=7):
    """A format-4 trace with one ring chunk of `slots` slots claiming a ring of `chunks` times that
    (chunks the first lap never reached are legitimately absent), its one op in the chunk's last
    slot, `lap` laps on; then the communicator's destroy. As (bytes before, zero bytes, bytes after)
    the chunk's unused slots, so that a test can leave those a hole."""
    comm_id = 0xA11CE00000000001
    ring_slots = slots * chunks
    before = file_header(version=4) + process() + comm_created(1, 0xC0FFEE, comm_id) + comm_ref(1, comm_id)
    before += ring_chunk_header(ring_slots=ring_slots, ordinal=0, slots=slots)
    after = ring_op_slot(lap * ring_slots + slots - 1, seq=1, comm_index=1, launch_id=1)
    after += comm_destroyed(2, 0xC0FFEE, comm_id) + exit_records()
    return before, (slots - 1) * RING_SLOT_BYTES, after


def ring_claiming_more_chunks(slots=1, chunks=4096, lap=7):
    before, zeros, after = ring_claiming_more_chunks_parts(slots, chunks, lap)
    return before + bytes(zeros) + after


def records_after_a_hole():
    """A communicator made, a page of zeros at a page boundary (a hole, once the file is made sparse),
    then its destroy and the exit: records past a hole are records all the same."""
    comm_id = 0xA11CE00000000001
    before = file_header() + process() + comm_created(1, 0xC0FFEE, comm_id)
    return before + bytes(-len(before) % 4096 + 4096) + comm_destroyed(2, 0xC0FFEE, comm_id) + exit_records()


def host_named_like_a_path():
    """A process on a host whose name (sethostname() takes any bytes) climbs folders and holds a
    terminal's escape sequences: what the shared-folder attacks put into a trace's header and
    process record (the shim names the file by a sanitized copy, the trace keeps the real name)."""
    host = b"../../escaped\x1b]0;owned\x07\x1b[31m"
    return file_header(host=host) + process(host=host) + \
        comm_created(1, 0xC0FFEE, 0xA11CE00000000001) + op(0xA11CE00000000001, 1) + exit_records()


# Terminal escape sequences a trace may carry in any text: retitle the window (OSC 0 ... BEL), colour
# what follows red (CSI 31 m), a newline that would forge a report line, DEL, and CSI as the C1
# control U+009B (two bytes in UTF-8).
ESCAPES = b"\x1b]0;owned\x07\x1b[31m\nFAKE: all clear\x7f\xc2\x9b2J"


def control_characters(rank=0, nranks=2, escapes=ESCAPES):
    """Rank `rank` of a communicator it leaked, every text of it holding `escapes`: the host (file
    header and process record), the communicator's name, its recorded call site, the NCCL library's
    path and an NCCL_ setting whose value differs between ranks."""
    host = b"node" + escapes[:40]
    comm_id = 0xE5C0000000000001
    out = file_header(host=host, pid=4242 + rank)
    out += strings(PROCESS, [b"host=" + host, b"pid=%d" % (4242 + rank), b"env.NCCL_ALGO=Ring" + escapes + b"%d" % rank])
    out += strings(LIBRARY, [b"path=/usr/lib/" + escapes + b"/libnccl.so.2", b"version=22809"])
    out += comm_created(1, 0xC0FFEE, comm_id, rank=rank, nranks=nranks, name=b"tp" + escapes,
                        site=b"train.py:7 (main" + escapes + b")")
    out += op(comm_id, 1, rank=rank, nranks=nranks, launch_id=1)
    if rank == 0:
        out += op(comm_id, 2, rank=rank, nranks=nranks, launch_id=2)  # a seq rank 1 never issued
    return out + exit_records()


# memory_and_idle_comms: per communicator, (name, comm_id, MiB when made (None: not measured), how
# measured, the seconds of its ops, a suspend's second (it gives back all but 16 MiB), the second its
# destroy was entered (None: never destroyed)). Made at 5.1 s + 0.1 s per row (each returns 300 us
# later), rank r's figures r MiB more; the trace ends at 160 s.
MEMORY_JOB_END_S = 160
MEMORY_JOB_COMMS = (
    ("busy", 0xB0, 512, MEMORY_FROM_NCCL, (6, 150), None, None),          # 10 s since its last op
    ("idle_destroyed", 0x1D, 300, MEMORY_FROM_FREE_CHANGE, (10,), None, 100),  # 90 s (rank 1: 85 s)
    ("unused", 0x0E, 1024, MEMORY_FROM_NCCL, (), None, None),               # from its creation on
    ("small", 0x5A, 64, MEMORY_FROM_NCCL, (), None, None),                  # idle, but holding little
    ("suspended", 0x5E, 400, MEMORY_FROM_NCCL, (7,), 8, None),              # 16 MiB after its suspend
    ("unmeasured", 0x0F, None, 0, (12,), None, None),
)


def memory_and_idle_comms(rank):
    """Rank `rank` (pid 4242 + rank) of a 2-rank job in gpu timing mode whose communicators
    (MEMORY_JOB_COMMS) hold GPU memory, some of them idle. `busy` takes 8 MiB more at its first
    all-reduce (NCCL's count); on rank 1, `idle_destroyed`'s figure is the free memory of a GPU other
    processes used (ambiguous), and its destroy comes 5 s sooner. Records in time order."""
    mib, s = 1 << 20, 1_000_000_000
    records = []  # (time, bytes)
    launch = 0
    for i, (name, tag, made, how, ops, suspend, destroy) in enumerate(MEMORY_JOB_COMMS):
        comm, comm_id = 0xC000 + i, 0xC0_0000_0000_0000 | tag
        flags = how | (MEMORY_SHARED_DEVICE if name == "idle_destroyed" and rank == 1 else 0)
        made_at = 5_100_000_000 + i * s // 10
        records.append((made_at, comm_created(2 * i + 1, comm, comm_id, rank=rank, name=name.encode(), time_ns=made_at,
                                              gpu_bytes=(made + rank) * mib if made else 0,
                                              memory_flags=flags if made else 0)))
        for k, at in enumerate(ops):
            launch += 1
            records.append((at * s, op(comm_id, 1 + k, rank=rank, time_ns=at * s, launch_id=launch)))
            if name == "busy" and k == 0:
                records.append((at * s + 10_000, memory_reading(comm, comm_id, at * s + 10_000,
                                                                held=(made + rank + 8) * mib, rank=rank)))
        if suspend:
            records.append((suspend * s, memory_reading(comm, comm_id, suspend * s, taken=-(made - 16) * mib,
                                                        api=COMM_SUSPEND, rank=rank)))
        if destroy:
            at = (destroy - 5 * rank) * s
            records.append((at, comm_destroyed(2 * i + 2, comm, comm_id, rank=rank, time_ns=at)))
    records.sort(key=lambda r: r[0])
    out = file_header(version=8, pid=4242 + rank) + process(pid=4242 + rank)
    return out + b"".join(r for _, r in records) + exit_records(MEMORY_JOB_END_S * s)


def huge_counts(counts=(1 << 62, (1 << 64) - 1, (1 << 61) - 1, 1024)):
    """All-reduces of float32 elements with these counts: 2^62 and 2^64 - 1 make sizes past 2^64
    bytes (a product wrapped round to 0 and to 2^64 - 4), 2^61 - 1 the largest size within BIGINT's
    range (2^63 - 4 bytes)."""
    comm_id = 0xA11CE00000000001
    ops = b"".join(op(comm_id, 1 + i, count=count, launch_id=1 + i) for i, count in enumerate(counts))
    return file_header() + process() + comm_created(1, 0xC0FFEE, comm_id) + ops + exit_records()


def corpus(folder):
    """The crafted seeds of the fuzz corpus (small files, one per hostile shape). The corpus also
    holds inputs the fuzzer found, kept as they were (e.g. leak_age_overflow.nwt)."""
    seeds = {
        "header_only.nwt": file_header(),
        "comm_name_cut_mid_character.nwt": leaked_comm_named("wörld".encode()[:2]),
        "host_not_utf8.nwt": bytearray(leaked_comm_named(b"world")),
        "module_path_fifo.nwt": leaked_comm_in_module(b"/dev/stdin"),
        "module_path_not_elf.nwt": leaked_comm_in_module(b"/etc/hostname"),
        "nranks_2_pow_20.nwt": huge_nranks(comms=8),
        "seq_jumps.nwt": seq_jumps(records=8),
        "init_all_large_call_site.nwt": init_all_ends(ends=8, frames=100, text=100),
        "ref_index_2_pow_24_minus_1.nwt": largest_ref_index(),
        "ring_chunk_claims_4096_chunks.nwt": ring_claiming_more_chunks(),
        "ring_chunk_mostly_unwritten.nwt": ring_claiming_more_chunks(slots=128, chunks=2, lap=3),
        "records_after_a_hole.nwt": records_after_a_hole(),
        "host_named_like_a_path.nwt": host_named_like_a_path(),
        "control_characters_rank_0.nwt": control_characters(rank=0),
        "control_characters_rank_1.nwt": control_characters(rank=1),
        "huge_counts.nwt": huge_counts(),
        "hostile_memory_readings.nwt": hostile_memory_readings(),
        "hostile_op_plans.nwt": hostile_op_plans(),
        "hostile_op_kernels.nwt": hostile_op_kernels(),
        "hostile_op_proxies.nwt": hostile_op_proxies(),
    }
    seeds["host_not_utf8.nwt"][HOST_OFFSET + 1:HOST_OFFSET + 3] = b"\xff\xfe"
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes(data))


if __name__ == "__main__":
    corpus(sys.argv[1])
