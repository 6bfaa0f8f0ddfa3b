// The op record every op wrapper writes (collectives.cc for calls, cuda_graphs.cc for the ops a
// graph launch replays), and the launch ids ops and GPU timings share.
#pragma once

#include "process/process.h"
#include "trace/trace.h"
#include "wrap/recorder.h"

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace ncclwatch {

// Launch ids: a per-thread prefix taken once from a global counter, then a per-thread count,
// so the hot path touches no shared cache line.
inline std::atomic<uint64_t> g_next_thread_prefix{1};

inline uint64_t new_launch_id() {
  if (t_thread.launch_id_prefix == 0) {
    uint64_t prefix = g_next_thread_prefix.fetch_add(1, std::memory_order_relaxed);
    write_thread_ref(prefix, current_tid());
    t_thread.launch_id_prefix = prefix << trace::kLaunchPrefixShift;
  }
  return t_thread.launch_id_prefix | ++t_thread.launches;
}

struct OpArgs {
  trace::Api api;
  ncclComm_t comm;
  cudaStream_t stream;
  size_t count;
  ncclDataType_t datatype;
  int redop;  // -1 none
  int peer;   // root or peer, -1 none
  bool in_place;
  uint16_t flags = 0;  // trace::kOp* the call itself implies (kOpCollConfig)
};

// `group_depth`: the thread's ncclGroupStart nesting; `graph`: graph_record::kIndex of a captured or
// replayed op, else 0. Always inlined: GCC's own choice flips with the wrapper's size, and a call
// costs the hot path a quarter more instructions (callgrind, hot_path_instructions.py).
__attribute__((always_inline)) inline void write_op_record(const OpArgs& a, uint32_t comm_index, uint64_t seq,
                                                           uint64_t launch_id, int64_t begin_ns, int64_t end_ns,
                                                           ncclResult_t result, uint16_t flags, int group_depth,
                                                           uint32_t graph = 0) noexcept {
  RingSlotClaim claim = claim_ring_slot();
  if (!claim) return;
  trace::CompactOp& op = claim.slot()->op;
  op.seq = seq;
  op.count = a.count;
  op.host_begin_ns = begin_ns;
  op.launch_id = launch_id;
  // Unsigned: the clock never runs backwards between the two readings.
  uint64_t duration = static_cast<uint64_t>(end_ns - begin_ns);
  if (duration > UINT32_MAX) [[unlikely]] {
    duration = std::min<uint64_t>(duration / 1000, UINT32_MAX);
    flags |= trace::kCompactDurationMicros;
  }
  op.host_duration = static_cast<uint32_t>(duration);
  op.comm_index = comm_index;
  op.peer = a.peer;
  op.redop = static_cast<int16_t>(std::min(a.redop, INT16_MAX));  // >= -1
  op.stream_index = stream_ref_index(as_u64(a.stream));
  op.api = static_cast<uint8_t>(a.api);
  op.result = static_cast<int8_t>(result);  // ncclResult_t: 0 to 8
  op.datatype = static_cast<uint8_t>(a.datatype);
  op.group_depth = static_cast<uint8_t>(std::min(group_depth, 255));
  op.flags = flags;
  op.graph = static_cast<uint16_t>(std::min<uint32_t>(graph, UINT16_MAX));
  claim.commit(trace::RingKind::kOp);
}

}  // namespace ncclwatch
