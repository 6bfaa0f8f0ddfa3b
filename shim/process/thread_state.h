// Everything the shim keeps per application thread, in one place: one static TLS block (the shim
// is preloaded, so initial-exec TLS: one instruction per access), and one reset in a forked
// child. Plain data only: the modules that own a part include this file, it includes none of
// them.
#pragma once

#include <ncclwatch/trace_format.h>

#include <cstdint>

namespace ncclwatch {

struct CommTrack;
namespace gpu {
struct LaunchThread;
}

// clock.h: the last clock_gettime sample and the TSC rate measured between the last two.
struct TscScale {
  uint64_t base_tsc = 0;
  int64_t base_ns = 0;
  uint64_t prev_tsc = 0;
  int64_t prev_ns = 0;
  uint64_t ns_per_tick_q32 = 0;  // 0 until a rate is known: then clock_gettime is used
};

// comm_table.h: the last lookup by handle, valid while the table's version is unchanged.
struct CommLookupMemo {
  uint64_t handle = 0;
  uint64_t version = ~0ull;
  CommTrack* track = nullptr;
};

// collectives.cc: what the thread's open NCCL group holds (NCCL groups are per thread).
struct OpenGroup {
  static constexpr int kMaxStreams = 8;  // streams timed per group; more are left untimed
  struct StreamUse {
    uint64_t stream;
    CommTrack* track;  // the last op's comm and seq on this stream: completion tracking
    uint64_t seq;
    trace::Api api;
    uint32_t ops;
    bool several_comms = false;  // its ops are on more than one communicator
  };
  int depth = 0;
  uint64_t launch_id = 0;
  uint32_t ops = 0;
  int nstreams = 0;
  StreamUse streams[kMaxStreams];
};

// trace_refs.cc: the last stream interned, valid for the refs' generation (bumped at fork).
struct StreamRefMemo {
  uint64_t stream = 0;
  uint32_t generation = 0;
  uint16_t index = 0;
};

// op_ring.h: the totals entries the thread used last, by a hash of their key.
inline constexpr int kTotalsMemoEntries = 4;
struct TotalsMemo {
  uint64_t key = 0;         // the entry's key, packed
  void* entry = nullptr;
  uint32_t generation = 0;  // 0: empty
};

// resources.cc: the nearest frames of the last PreMulSum caller, by its return address (PyTorch
// makes one around each collective that uses it, from the same few call instructions).
struct NearestSiteMemo {
  static constexpr int kFrames = 4;
  uint64_t caller = 0;  // 0: empty
  int nframes = 0;
  uint64_t frames[kFrames] = {};
  char summary[192] = {};
  bool in_torch = false;
};

// collectives.cc: the op the thread's wrapper is handing to NCCL right now, for NCCL's profiler
// callbacks that run inside that call (profiler/): launch_id 0 when none. Set only while the
// profiler plugin is armed.
struct IssuingOp {
  uint64_t launch_id = 0;
  uint64_t seq = 0;
  const CommTrack* track = nullptr;  // its communicator (null: one the shim does not know)
  uint64_t count = 0;
  int32_t peer = -1;
  uint16_t api = 0;
  uint8_t datatype = 0;
};

struct ThreadState {
  int nccl_call_depth = 0;             // recorder.h: inside a wrapper (nested NCCL calls pass by)
  uint32_t tid = 0;                    // recorder.cc: gettid(), cached
  uint8_t bound_slot = 0;              // resolver.h: the NCCL copy the running dlsym'd wrapper serves
  uint64_t launch_id_prefix = 0;       // collectives.cc: launch ids, a per-thread prefix ...
  uint64_t launches = 0;               // ... and count
  OpenGroup group;                     // collectives.cc
  IssuingOp issuing;                   // collectives.cc, read by profiler/
  CommLookupMemo last_comm;            // comm_table.h
  TscScale tsc;                        // clock.h
  // trace_refs.h: the streams interned last, by a hash of the stream (a thread that feeds several
  // communicators alternates between their streams: one entry would miss on every call).
  static constexpr int kStreamMemoEntries = 8;
  StreamRefMemo streams[kStreamMemoEntries];
  TotalsMemo totals[kTotalsMemoEntries];  // op_ring.h
  NearestSiteMemo nearest_site;        // resources.cc
  gpu::LaunchThread* gpu = nullptr;    // gpu_timer.cc: this thread's rings and event pool
};

// constinit: constant-initialized, so every access is a plain TLS load (no init guard).
constinit inline thread_local ThreadState t_thread{};

// In a forked child the forking thread's state lives on: what belonged to the parent (its thread
// id, GPU rings, launch ids, an open group) is forgotten; the call depth and bound slot of a
// wrapper that may be running the fork stay.
inline void thread_state_after_fork_in_child() noexcept {
  t_thread.tid = 0;
  t_thread.gpu = nullptr;
  t_thread.launch_id_prefix = 0;
  t_thread.launches = 0;
  t_thread.group = OpenGroup{};
  t_thread.last_comm = CommLookupMemo{};
  for (StreamRefMemo& memo : t_thread.streams) memo = StreamRefMemo{};
  for (TotalsMemo& memo : t_thread.totals) memo = TotalsMemo{};
  t_thread.nearest_site = NearestSiteMemo{};  // the child's trace must describe the modules again
}

}  // namespace ncclwatch
