// The ncclwatch trace file format, shared by the shim (writer) and the analyzers (readers).
//
// One file per process. Layout:
//   [FileHeader, padded to kHeaderBytes] [record] [record] ...
// Every record starts with a RecordHeader and is a multiple of 8 bytes long. The shim writes
// through a shared file mapping, so a record is in the file the moment it is committed, even if
// the process is killed right after. Commit protocol (see shim/trace/trace_writer.cc):
//   1. the writer reserves [offset, offset+size) and stores `size` into the header;
//   2. it fills the body;
//   3. it stores `type | kCommitMark << 16` with release ordering.
// A reader therefore trusts a record only when its commit mark is present. An all-zero word is
// either the end of the data or a record whose writer died between steps 1 and 3; readers skip
// such holes by scanning forward, 8 bytes at a time, for the next committed header.
//
// All integers are little-endian (the shim only runs on x86-64 and aarch64 Linux).
// Bump kVersion on every layout change; bump kMinReadableVersion only when an old reader can no
// longer skip what is new (new record types and fields appended at a record's end are skippable).
#pragma once

#include <ncclwatch/nccl_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ncclwatch::trace {

inline constexpr char kMagic[8] = {'N', 'C', 'C', 'L', 'W', 'T', 'C', 'H'};
inline constexpr uint32_t kVersion = 11;             // 2: ApiEvent carries the call-site summary
                                                     // 3: ApiEvent names its library; kLibrary per copy
                                                     // 4: ops and GPU timings in a ring, op totals
                                                     // 5: LiveAtExit (skippable: format 4 readers read it)
                                                     // 6: CUDA graphs: Graph records, replayed ops
                                                     //    (skippable: format 4 readers take them for
                                                     //    ordinary ops); Stacks records
                                                     // 7: Ending and Signal records (skippable)
                                                     // 8: Memory records (skippable)
                                                     // 9: OpPlan records (skippable)
                                                     // 10: OpKernel records (skippable)
                                                     // 11: OpProxy records (skippable)
inline constexpr uint32_t kMinReadableVersion = 4;  // oldest reader version that can read this file
                                                     // (an older one would skip the ring: no ops)
inline constexpr uint32_t kOldestReadableFormat = 2; // files older than this are refused by readers
inline constexpr uint32_t kHeaderBytes = 4096;       // records start here
inline constexpr const char* kFileExtension = ".nwt"; // a trace file's name ends so; readers look for it
inline constexpr uint16_t kCommitMark = 0xC0DE;
inline constexpr uint32_t kMaxRecordBytes = 1u << 20;  // larger sizes mark a corrupt record ...
inline constexpr uint32_t kMaxChunkRecordBytes = 1u << 30;  // ... except a ring chunk's or op totals' 

// Written once when the file is created, before any record.
struct FileHeader {
  char magic[8];                  // kMagic
  uint32_t version;               // kVersion of the writer
  uint32_t min_reader_version;    // readers older than this must refuse the file
  uint32_t header_bytes;          // offset of the first record (kHeaderBytes)
  uint32_t pid;                   // process id of the writer
  uint32_t ppid;                  // its parent at creation (a fork's child names its parent)
  uint32_t reserved0;
  int64_t start_wall_ns;          // CLOCK_REALTIME at creation, ns since the epoch
  int64_t start_mono_ns;          // CLOCK_MONOTONIC at the same moment: record times use this clock
  char host[64];                  // gethostname(), NUL-terminated
  uint8_t reserved[3984];         // zero; room for later fields
};
static_assert(sizeof(FileHeader) == kHeaderBytes);

// Every record type, once: X(Id, value, name, Struct, time, largest) is RecordType::k<Id> = value,
// stored in files (never reuse or renumber one); `name` is what `dump` and the reports call it;
// `Struct` its fixed part (what follows it, its own); `time` the member that places it among the
// history when a reader merges the ring's ops back in (untimed: it does not move them); `largest`
// its size limit (a ring chunk or the totals table may be larger than any other record).
//   Padding      filler, skip it
//   Process      once, first: strings describing the process
//   Library      an NCCL copy in the process: id (attached ones), path, version,
//                status (attached | unused | not traced), reached, reason, missing
//   Module       a loaded object named by call-site frames
//   CallBegin    an NCCL API call entered ...
//   CallEnd      ... and returned
//   ExitBegin    the program began exiting
//   ProcessEnd   the shim's last word: how the process ended
//   Lost         records the shim could not write
//   Notice       a message the shim printed on stderr (key "text")
//   Collective   one collective, send/recv, one-sided op or group end
//   GpuTiming    when a launch ran on the GPU
//   Stall        an op pending too long, or such a stall resolved
//   RingChunk    a part of the ring of recent ops and GPU timings
//   OpTotals     counts of every op of the whole run
//   CommRef      the communicator a ring op's comm_index names
//   StreamRef    the stream a ring op's stream_index names
//   ThreadRef    the thread whose launch ids carry a prefix
//   LiveAtExit   the communicators still alive when ProcessEnd was written:
//                what a full trace, whose later records were lost, cannot otherwise tell
//   Graph        a CUDA graph holding NCCL ops, or what became of it (trace_strings.h
//                graph_record): instantiated, updated, a capture that failed
//   Stacks       every Python thread's stack at a stall or on request (stacks_record)
//   Ending       how the process ended, in words: its status, an uncaught exception
//   Signal       a watched signal as it arrived, and who sent it
//   Memory       the GPU memory a communicator holds, read after a call that set it up further
//   OpPlan       what NCCL planned for an op, as its profiler interface told: algorithm, protocol,
//                channels
//   OpKernel     when one channel of an op's kernel ran, by the GPU's own timer, as NCCL's profiler
//                interface told
//   OpProxy      what NCCL's proxy thread moved for an op to or from one peer on one channel over the
//                network, and how long its steps waited on the GPU and on the peer
#define NCCLWATCH_RECORD_TYPES(X) \
  X(Padding, 1, "padding",          PaddingRecord,    untimed,     kMaxRecordBytes)      \
  X(Process, 2, "process",          StringsRecord,    time_ns,     kMaxRecordBytes)      \
  X(Library, 3, "library",          StringsRecord,    time_ns,     kMaxRecordBytes)      \
  X(Module, 4, "module",            ModuleRecord,     untimed,     kMaxRecordBytes)      \
  X(CallBegin, 5, "call_begin",     ApiEvent,         time_ns,     kMaxRecordBytes)      \
  X(CallEnd, 6, "call_end",         ApiEvent,         time_ns,     kMaxRecordBytes)      \
  X(ExitBegin, 7, "exit_begin",     ExitRecord,       time_ns,     kMaxRecordBytes)      \
  X(ProcessEnd, 8, "process_end",   ExitRecord,       time_ns,     kMaxRecordBytes)      \
  X(Lost, 9, "lost",                LostRecord,       time_ns,     kMaxRecordBytes)      \
  X(Notice, 10, "notice",           StringsRecord,    time_ns,     kMaxRecordBytes)      \
  X(Collective, 11, "op",           OpRecord,         host_end_ns, kMaxRecordBytes)      \
  X(GpuTiming, 12, "gpu_timing",    GpuTimingRecord,  gpu_end_ns,  kMaxRecordBytes)      \
  X(Stall, 13, "stall",             StallRecord,      time_ns,     kMaxRecordBytes)      \
  X(RingChunk, 14, "ring_chunk",    RingChunkRecord,  untimed,     kMaxChunkRecordBytes) \
  X(OpTotals, 15, "op_totals",      OpTotalsRecord,   untimed,     kMaxChunkRecordBytes) \
  X(CommRef, 16, "comm_ref",        CommRefRecord,    time_ns,     kMaxRecordBytes)      \
  X(StreamRef, 17, "stream_ref",    StreamRefRecord,  time_ns,     kMaxRecordBytes)      \
  X(ThreadRef, 18, "thread_ref",    ThreadRefRecord,  time_ns,     kMaxRecordBytes)      \
  X(LiveAtExit, 19, "live_at_exit", LiveAtExitRecord, untimed,     kMaxRecordBytes)      \
  X(Graph, 20, "graph",             StringsRecord,    time_ns,     kMaxRecordBytes)      \
  X(Stacks, 21, "stacks",           StringsRecord,    time_ns,     kMaxRecordBytes)      \
  X(Ending, 22, "ending",           StringsRecord,    untimed,     kMaxRecordBytes)      \
  X(Signal, 23, "signal",           SignalRecord,     untimed,     kMaxRecordBytes)      \
  X(Memory, 24, "memory",           MemoryRecord,     time_ns,     kMaxRecordBytes)      \
  X(OpPlan, 25, "op_plan",          OpPlanRecord,     untimed,     kMaxRecordBytes)      \
  X(OpKernel, 26, "op_kernel",      OpKernelRecord,   untimed,     kMaxRecordBytes)      \
  X(OpProxy, 27, "op_proxy",        OpProxyRecord,    untimed,     kMaxRecordBytes)

enum class RecordType : uint16_t {
#define NCCLWATCH_RECORD_ENUMERATOR(Id, value, name, Struct, time, largest) k##Id = value,
  NCCLWATCH_RECORD_TYPES(NCCLWATCH_RECORD_ENUMERATOR)
#undef NCCLWATCH_RECORD_ENUMERATOR
};

constexpr const char* record_type_name(RecordType type) {
  switch (type) {
#define NCCLWATCH_RECORD_CASE(Id, value, name, Struct, time, largest) \
  case RecordType::k##Id:                      \
    return name;
    NCCLWATCH_RECORD_TYPES(NCCLWATCH_RECORD_CASE)
#undef NCCLWATCH_RECORD_CASE
  }
  return "unknown";
}

struct RecordHeader {
  uint32_t size;    // whole record in bytes, header included, multiple of 8
  uint16_t type;    // RecordType
  uint16_t commit;  // kCommitMark once the record is complete
};
static_assert(sizeof(RecordHeader) == 8);

struct PaddingRecord {  // filler: its size is all it says
  RecordHeader h;
};

// ApiEvent.flags
inline constexpr uint32_t kFlagDuringExit = 1u << 0;     // the program had begun exiting
inline constexpr uint32_t kFlagNonBlocking = 1u << 1;    // config->blocking == 0
inline constexpr uint32_t kFlagNestedCall = 1u << 2;     // issued from inside another NCCL call
inline constexpr uint32_t kFlagTorchCaller = 1u << 3;    // the call site is inside PyTorch
inline constexpr uint32_t kFlagNvshmemCaller = 1u << 6;  // NVSHMEM made the call (its team communicators)
// A creation's or release's kCallEnd: `bytes` is the GPU memory the communicator held when made
// (or gave back when released), as NCCL counts it (ncclCommMemStats) ...
inline constexpr uint32_t kFlagMemoryFromNccl = 1u << 4;
// ... or as the memory changed across the call (without ncclCommMemStats, or where NCCL counted less).
inline constexpr uint32_t kFlagMemoryFromFreeChange = 1u << 5;
// With kFlagMemoryFromFreeChange: the change is this process's own GPU memory's (NVML's figure per
// process, what nvidia-smi lists), which other processes on the GPU do not move.
inline constexpr uint32_t kFlagMemoryOwnProcess = 1u << 7;
// With kFlagMemoryFromFreeChange alone: other processes were using the same GPU, so the device's
// free memory may have moved by their allocations too: the figure is ambiguous.
inline constexpr uint32_t kFlagMemorySharedDevice = 1u << 8;

// One lifecycle or resource call: a kCallBegin when entered, one kCallEnd per outcome when it
// returned (ncclCommInitAll writes one kCallEnd per communicator it created).
// Followed by `nframes` uint64 return addresses (kCallBegin only; resolved through kModule
// records), `name_len` bytes of config->commName, `site_len` bytes of the call site as the shim
// read it at the time ("function (module)" from the dynamic symbol table, for when the module's
// file is not at hand to symbolize the frames later) and `python_site_len` bytes of the Python
// frames that made the call, innermost first, one "path\tline\tfunction\n" each (the program's own
// frames; PyTorch's, DeepEP's and the standard library's only when there is no other), then,
// where PyTorch made the communicator while creating a process group, one
// kProcessGroupLine "NAME\tDESC\n"; strings not NUL-terminated, padded to 8.
struct ApiEvent {
  RecordHeader h;
  uint64_t call_id;     // pairs kCallBegin with its kCallEnd(s); unique within the file
  int64_t time_ns;      // CLOCK_MONOTONIC
  uint32_t tid;         // kernel thread id of the caller
  uint16_t api;         // Api
  int16_t result;       // ncclResult_t (kCallEnd only; see succeeded_or_pending)
  uint64_t comm;        // communicator handle: the argument, or the one created (kCallEnd)
  uint64_t comm_id;     // communicator identity, the same on every rank (0 when unknown)
  uint64_t parent_id;   // identity of the parent (split/shrink), else 0
  uint64_t resource;    // buffer pointer, registration handle, window, device comm or redop
  uint64_t bytes;       // size of the allocation/registration; a creation's or release's end:
                        // GPU memory (kFlagMemory*); else 0
  int32_t rank;         // rank in `comm` (-1 unknown)
  int32_t nranks;       // its size (-1 unknown)
  int32_t device;       // CUDA device (-1 unknown)
  int32_t arg0;         // split: color; shrink: excluded count; revoke: flags; alloc: 0
  int32_t arg1;         // split: key
  uint32_t flags;       // kFlag*
  uint16_t nframes;     // call-site frames following this struct
  uint16_t name_len;    // commName bytes following the frames
  uint32_t split_index; // split/shrink: how many splits of the parent this rank made before
  uint16_t site_len;    // call-site summary bytes following the name
  uint16_t library;     // id of the kLibrary the call went to (0 unknown: one library, format 2)
  uint16_t python_site_len;  // Python frames following the site (0: none, or a file before them)
  uint16_t reserved1;
};


// Leads the Python site's process group line; its empty second field is no frame's line number,
// so readers of frames skip it.
inline constexpr const char* kProcessGroupLine = "process_group\t\t";
inline constexpr const char* kUndescribedGroup = "undefined";  // PyTorch's group_desc when none was given

// A loaded object, written the first time a frame inside it is recorded.
// Followed by `path_len` bytes of its path, then `build_id_len` bytes of its GNU build ID (format
// 4; older files have none), padded to 8. A reader symbolizes from a file of that path only when
// its build ID is the same: another build of it would name the wrong functions.
struct ModuleRecord {
  RecordHeader h;
  uint64_t base;        // load address (dladdr's dli_fbase)
  uint64_t size_hint;   // bytes mapped from base (0 unknown)
  uint32_t path_len;
  uint8_t build_id_len; // 0: unknown
  uint8_t reserved[3];
};
inline constexpr uint32_t kMaxBuildIdBytes = 64;

// Followed by `bytes` bytes of "key=value\0" strings, padded to 8.
struct StringsRecord {
  RecordHeader h;
  int64_t time_ns;      // CLOCK_MONOTONIC
  uint32_t bytes;
  uint32_t reserved;
};

enum class ExitReason : uint32_t {
  kNormal = 1,          // exit() or return from main
  kSignal = 2,          // a fatal signal (ExitRecord.signal)
  kPythonFinalizing = 3, // the Python interpreter began shutting down
  kQuickExit = 4,        // _exit()/_Exit() called directly (ExitRecord.signal holds its status)
  kExec = 5,             // an exec replaced the process image
  kExited = 6            // exit() or return from main, its status known (ExitRecord.signal holds it)
  // (new reasons need no new format: a reader that does not know one takes it for a normal end)
};

struct ExitRecord {
  RecordHeader h;
  int64_t time_ns;       // CLOCK_MONOTONIC
  uint32_t reason;       // ExitReason
  int32_t signal;        // kSignal: the signal; kQuickExit, kExited: the exit status
  uint32_t live_comms;   // communicators not destroyed at this point (kProcessEnd)
  uint32_t live_resources;
  uint64_t lost_records; // records dropped so far
};

// A watched signal (SIGTERM, SIGINT, SIGHUP) as it arrived, once per signal number: who sent it
// where the kernel says (kill, tgkill, sigqueue), whether it then killed the process or went to the
// application's handler. Written in the handler, from the exit reserve.
struct SignalRecord {
  RecordHeader h;
  int64_t time_ns;       // CLOCK_MONOTONIC
  int32_t signal;
  int32_t code;          // siginfo's si_code: SI_USER (kill), SI_TKILL, SI_QUEUE, SI_KERNEL, ...
  int32_t sender_pid;    // 0 when the code names no sending process
  uint32_t sender_uid;
  uint32_t sender_is_parent;  // 1: the sender was this process's parent (a launcher, a shell)
  uint32_t handled;      // 1: passed to the application's handler; 0: the default action killed
  char sender_name[16];  // the sender's /proc/<pid>/comm, read as the signal arrived ("" if gone)
};

// What a communicator's GPU memory became after a call that may have set it up further: each op
// shape's first launch on it (NCCL >= 2.22 connects the peers an algorithm needs at its first use,
// and 2.29 allocates most buffers then, after init), a group's first launch of its shape. A
// creation's and a release's figures are in their kCallEnd (ApiEvent.bytes). At most
// kMaxMemoryReadings per communicator.
struct MemoryRecord {
  RecordHeader h;
  int64_t time_ns;       // CLOCK_MONOTONIC when the call returned
  uint64_t comm_id;      // as ApiEvent.comm_id
  uint64_t comm;         // handle
  uint64_t held_bytes;   // kFlagMemoryFromNccl: NCCL's count of all it holds for the communicator now
  int64_t taken_bytes;   // kFlagMemoryFromFreeChange: what the call took, by this process's GPU memory
                         // (kFlagMemoryOwnProcess) or the device's free memory (negative: gave back)
  uint64_t op_count;     // the call's count argument (a group end: its ops)
  uint32_t flags;        // kFlagMemoryFromNccl and/or kFlagMemoryFromFreeChange (with its kFlagMemory*)
  uint16_t api;          // Api of the call: a collective, a point-to-point call or kGroupEnd
  uint8_t datatype;      // ncclDataType_t
  uint8_t reserved0;
  int32_t rank;          // in `comm`
  int32_t peer;          // root or peer of the call, else -1
};
inline constexpr uint32_t kMaxMemoryReadings = 32;

// What NCCL planned for one op, from its profiler interface (NCCLWATCH_PROFILER, NCCL >= 2.28):
// written when NCCL started the op's Coll or P2p event, on the thread that launched it. The op is
// the OpRecord with the same launch_id, api, seq and peer.
struct OpPlanRecord {
  RecordHeader h;
  uint64_t launch_id;    // OpRecord.launch_id
  uint64_t seq;          // OpRecord.seq
  uint64_t comm_id;      // OpRecord.comm_id (0 unknown)
  uint64_t count;        // OpRecord.count
  uint64_t nccl_seq;     // collectives: NCCL's count of the communicator's earlier ones of this kind
  int32_t peer;          // OpRecord.peer
  int32_t rank;          // OpRecord.rank
  int32_t nranks;        // OpRecord.nranks
  uint16_t api;          // OpRecord.api
  uint8_t datatype;      // OpRecord.datatype
  uint8_t nchannels;     // channels NCCL runs it on
  char algo[16];         // collectives: "RING", "TREE", "NVLS", ..., NUL-terminated; else ""
  char proto[8];         // collectives: "LL", "LL128", "SIMPLE"; else ""
  uint8_t nwarps;        // collectives: warps per channel
  uint8_t reserved0[3];
  uint32_t flags;        // kPlan*
};
static_assert(sizeof(OpPlanRecord) == 96);
inline constexpr uint32_t kPlanGraphCaptured = 1u << 0;  // NCCL planned it into a CUDA graph

// One channel of an op's kernel, from NCCL's KernelCh event (NCCLWATCH_PROFILER): the GPU's global
// timer (ns, its own clock: comparable within a GPU, not mapped onto the host's) when the channel
// began the op's work and finished it. Written by NCCL's proxy thread once the channel stopped; an
// op's kernel time is its channels' first start to their last stop. The op is the OpRecord with the
// same launch_id, api, seq and peer, as for OpPlanRecord. Graph-captured ops have none (their
// replays share one plan).
struct OpKernelRecord {
  RecordHeader h;
  uint64_t launch_id;    // OpRecord.launch_id
  uint64_t seq;          // OpRecord.seq
  uint64_t comm_id;      // OpRecord.comm_id (0 unknown)
  uint64_t count;        // OpRecord.count
  uint64_t gpu_start_ns; // the channel's start, GPU global timer
  uint64_t gpu_stop_ns;  // its end (0: NCCL gave none)
  int32_t peer;          // OpRecord.peer
  int32_t rank;          // OpRecord.rank
  int32_t nranks;        // OpRecord.nranks
  uint16_t api;          // OpRecord.api
  uint8_t datatype;      // OpRecord.datatype
  uint8_t channel;       // NCCL's channel id
  uint8_t nchannels;     // channels NCCL planned the op on (its OpPlanRecord's): how many to expect
  uint8_t reserved0[7];
};
static_assert(sizeof(OpKernelRecord) == 80);

// One proxy operation, from NCCL's ProxyOp and ProxyStep events (NCCLWATCH_PROFILER=peers): what
// NCCL's proxy thread sent to or received from one peer on one channel for an op, over the network
// transport (NCCL reports no proxy steps for P2P/NVLink or shared memory, which the kernel moves
// itself). Each step's time is split where NCCL marks it: waiting on this GPU (send: for the data to
// send; receive: for the kernel to take it), on the peer and the network (send: for the peer's
// buffer and the transfer; receive: for the data to arrive), and the rest. Times are CLOCK_MONOTONIC
// (the trace's clock), read on the proxy thread as NCCL reports each state. The op is the OpRecord
// with the same launch_id, api, seq and peer, as for OpPlanRecord (launch_id 0: an op NCCL planned
// for a call the shim did not see).
struct OpProxyRecord {
  RecordHeader h;
  uint64_t launch_id;     // OpRecord.launch_id
  uint64_t seq;           // OpRecord.seq
  uint64_t comm_id;       // OpRecord.comm_id (0 unknown)
  uint64_t count;         // OpRecord.count
  int64_t start_ns;       // NCCL started the proxy operation
  int64_t stop_ns;        // it stopped: every step done
  uint64_t bytes;         // the steps' sizes as NCCL reported them
  uint64_t gpu_wait_ns;   // summed over the steps
  uint64_t peer_wait_ns;  // summed over the steps
  uint64_t step_ns;       // the steps' whole time, summed
  int32_t peer;           // OpRecord.peer
  int32_t rank;           // OpRecord.rank
  int32_t nranks;         // OpRecord.nranks
  uint16_t api;           // OpRecord.api
  uint8_t datatype;       // OpRecord.datatype
  uint8_t channel;        // NCCL's channel id
  uint32_t steps_planned; // NCCL's count for the operation
  uint32_t steps_done;    // steps that stopped
  uint32_t chunk_bytes;   // NCCL's chunk size per step
  uint32_t flags;         // kProxy*
  int32_t remote;         // the rank of the communicator the proxy moved data to or from
  // A send's data began moving this long after start_ns, in microseconds: its first step's data was
  // ready for the network (kProxyMoving says it did; zero in files before it was written). NCCL
  // starts an op's proxy operations as it is enqueued: before this the steps waited for the kernel.
  uint32_t moving_after_us;
};
static_assert(sizeof(OpProxyRecord) == 128);
inline constexpr uint32_t kProxySend = 1u << 0;        // sent to the peer (else received from it)
inline constexpr uint32_t kProxyStepsLost = 1u << 1;   // a step came for a slot still in use: its times are partial
inline constexpr uint32_t kProxyMoving = 1u << 2;      // moving_after_us holds

// Written just before ProcessEnd, from the exit reserve: every communicator still in the shim's
// table (or as many as fit), so a reader need not guess the end of one whose records were lost.
struct LiveAtExitRecord {
  RecordHeader h;
  int64_t time_ns;
  uint32_t count;        // LiveComm entries that follow
  uint32_t complete;     // 1: every communicator alive then is listed; 0: the table was busy or too long
};

struct LiveComm {
  uint64_t handle;       // the ncclComm_t
  uint64_t comm_id;      // as ApiEvent.comm_id
  int32_t rank;
  int32_t nranks;
  uint32_t end_state;    // lifecycle::EndState if the process ended now (leaked, finalized, ...)
  uint32_t reserved;
};
static_assert(sizeof(LiveComm) == 32);

struct LostRecord {
  RecordHeader h;
  int64_t time_ns;
  uint64_t count;        // records dropped since the previous kLost
};

// OpRecord.flags
inline constexpr uint16_t kOpCaptured = 1u << 0;    // issued on a stream under CUDA-graph capture: it runs at replay
inline constexpr uint16_t kOpTimed = 1u << 1;       // GPU events bracket its launch (a kGpuTiming will follow)
inline constexpr uint16_t kOpInPlace = 1u << 2;     // sendbuff == recvbuff (for the analyzers' byte counts)
inline constexpr uint16_t kOpCollConfig = 1u << 3;  // called as its *Config variant (NCCL >= 2.31); `api` is the base op
// Run by a launch of a CUDA graph that captured it (format 6): the record is written by the shim at
// cuGraphLaunch, with the communicator's next seq; host times are the graph launch's, `graph` names
// the graph (kGraph index) and `launch_id` the replay, which GPU timings (if any) cover whole.
// An op marked kOpCaptured instead is the capture itself: it ran nothing, and has seq 0 (format 6).
inline constexpr uint16_t kOpReplayed = 1u << 4;

// One collective or point-to-point call (or a group end), written when the call returns.
struct OpRecord {
  RecordHeader h;
  uint64_t comm_id;        // communicator identity, the same on every rank (0 unknown)
  uint64_t comm;           // communicator handle
  uint64_t seq;            // collectives: per communicator, from 1, in issue order — the same on every
                           // rank for the same logical collective. Send/Recv: per (comm, peer,
                           // direction), from 1. Group end: 0.
  uint64_t count;          // NCCL's count argument (AllGather: sendcount; ReduceScatter: recvcount);
                           // group end: ops launched by it
  uint64_t stream;         // cudaStream_t value
  int64_t host_begin_ns;   // CLOCK_MONOTONIC when the call entered the shim
  int64_t host_end_ns;     // ... when NCCL returned
  uint64_t launch_id;      // the launch the op belongs to: its own for an ungrouped call, else that of
                           // the outermost group; kGpuTiming records refer to it. Unique per file.
  uint32_t tid;            // kernel thread id of the caller
  uint16_t api;            // Api: a collective, point-to-point, one-sided or group end
  int16_t result;          // ncclResult_t returned
  int32_t peer;            // root of rooted collectives, peer of send/recv, else -1
  int32_t rank;            // caller's rank in the communicator (-1 unknown)
  int32_t nranks;          // communicator size (-1 unknown)
  uint8_t datatype;        // ncclDataType_t
  uint8_t group_depth;     // ncclGroupStart nesting when called (0 = not in a group)
  uint16_t flags;          // kOp*
  int32_t redop;           // ncclRedOp_t (PreMulSum ops are >= ncclNumOps), -1 when the op has none
  uint32_t graph;          // kOpReplayed, kOpCaptured: index of the graph (graph_record::kIndex), else 0
};

// GpuTimingRecord.flags
inline constexpr uint32_t kTimingHasBegin = 1u << 0;  // gpu_begin_ns measured (else only the end is known)
inline constexpr uint32_t kTimingAlike = 1u << 1;  // a collective launch every rank times (live straggler series)

// When one launch ran on one stream, from CUDA events the shim recorded around it, written by the
// shim's collector thread once the end event completed. Times are mapped onto this process's
// CLOCK_MONOTONIC (see clock_error_ns).
struct GpuTimingRecord {
  RecordHeader h;
  uint64_t launch_id;      // OpRecord.launch_id
  uint64_t stream;
  int64_t gpu_begin_ns;    // the launch's work began (the stream reached the start event)
  int64_t gpu_end_ns;      // ... and finished
  int64_t clock_error_ns;  // how far the mapping onto the host clock may be off
  uint32_t ops;            // ops of that launch on this stream
  uint32_t flags;          // kTiming*
};

enum class StallState : uint32_t { kStalled = 1, kResolved = 2 };

// Per communicator, in a StallRecord.
struct StallComm {
  uint64_t comm_id;
  uint64_t last_issued_seq;     // highest collective seq issued on this rank
  uint64_t last_completed_seq;  // highest seq known complete on the GPU (0 none)
  int32_t rank;
  int32_t nranks;
};
static_assert(sizeof(StallComm) == 32);

// An op enqueued but not complete for NCCLWATCH_STALL_SEC (kStalled), with a snapshot of every
// communicator of this process; or that op completing later (kResolved). Followed by `ncomms`
// StallComm entries.
struct StallRecord {
  RecordHeader h;
  int64_t time_ns;             // CLOCK_MONOTONIC when written
  uint64_t launch_id;          // the oldest pending launch
  uint64_t comm_id;            // its communicator
  uint64_t seq;                // its seq
  int64_t enqueued_ns;         // when it was enqueued
  uint16_t api;                // its op
  uint16_t reserved0;
  uint32_t state;              // StallState
  uint32_t ncomms;
  uint32_t reserved1;
};

}  // namespace ncclwatch::trace

#define NCCLWATCH_INSIDE_TRACE_FORMAT
#include <ncclwatch/trace_retention.h>
#undef NCCLWATCH_INSIDE_TRACE_FORMAT

namespace ncclwatch::trace {

constexpr uint32_t padded_size(size_t bytes) { return static_cast<uint32_t>((bytes + 7) & ~size_t{7}); }

// The record table's struct, time and size columns, for readers (here, after every struct).
#define NCCLWATCH_TIME_OF_untimed(Struct) nullptr
#define NCCLWATCH_TIME_OF_time_ns(Struct) &Struct::time_ns
#define NCCLWATCH_TIME_OF_host_end_ns(Struct) &Struct::host_end_ns
#define NCCLWATCH_TIME_OF_gpu_end_ns(Struct) &Struct::gpu_end_ns

// Every record's fixed part starts with its header and is whole 8-byte words, within its size
// limit; its time is an int64_t (CLOCK_MONOTONIC ns).
#define NCCLWATCH_RECORD_CHECK(Id, value, name, Struct, time, largest)                                     \
  static_assert(offsetof(Struct, h) == 0 && sizeof(Struct) % 8 == 0 && sizeof(Struct) <= largest, #Struct); \
  static_assert(std::is_same_v<decltype(NCCLWATCH_TIME_OF_##time(Struct)), std::nullptr_t> ||               \
                    std::is_same_v<decltype(NCCLWATCH_TIME_OF_##time(Struct)), int64_t Struct::*>,          \
                #Id "'s time is an int64_t of its struct");
NCCLWATCH_RECORD_TYPES(NCCLWATCH_RECORD_CHECK)
#undef NCCLWATCH_RECORD_CHECK

// The size of a record type's fixed part (0 for a type not in the table).
constexpr size_t record_fixed_bytes(RecordType type) {
  switch (type) {
#define NCCLWATCH_RECORD_FIXED(Id, value, name, Struct, time, largest) \
  case RecordType::k##Id:                                              \
    return sizeof(Struct);
    NCCLWATCH_RECORD_TYPES(NCCLWATCH_RECORD_FIXED)
#undef NCCLWATCH_RECORD_FIXED
  }
  return 0;
}

// The largest a record of this type may be; larger marks it corrupt (types not in the table: the
// common limit, so that a reader steps over a newer writer's records).
constexpr uint32_t record_largest_bytes(uint16_t type) {
  switch (static_cast<RecordType>(type)) {
#define NCCLWATCH_RECORD_LARGEST(Id, value, name, Struct, time, largest) \
  case RecordType::k##Id:                                                \
    return largest;
    NCCLWATCH_RECORD_TYPES(NCCLWATCH_RECORD_LARGEST)
#undef NCCLWATCH_RECORD_LARGEST
  }
  return kMaxRecordBytes;
}

}  // namespace ncclwatch::trace
