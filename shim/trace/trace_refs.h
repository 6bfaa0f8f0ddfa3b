// Interned identities for the ring's compact op records (trace_format.h, CommRef, StreamRef,
// ThreadRef): each communicator, stream and launching thread is written out in full once, to the
// history, and ring slots name it by a small index.
#pragma once

#include "comms/comms.h"
#include "process/process.h"

#include <atomic>
#include <cstdint>

namespace ncclwatch {

// The index of the communicator (its track, or for one the shim never saw made, its handle);
// 0 when it has none. Writes the CommRef record the first time.
uint32_t make_comm_ref_index(CommTrack* track, uint64_t handle) noexcept;
inline uint32_t comm_ref_index(CommTrack* track, uint64_t handle) noexcept {
  // Acquire pairs with the release in make_comm_ref_index(): the CommRef record is written.
  if (track)
    if (uint32_t index = track->trace_index.load(std::memory_order_acquire)) return index;
  return make_comm_ref_index(track, handle);
}

// Bumped at fork: per-thread memos of the parent's indices are stale.
inline std::atomic<uint32_t> g_refs_generation{1};

// The index of `stream`; 0 for the null stream, or past 65,535 streams. Writes the StreamRef
// record the first time.
uint16_t make_stream_ref_index(uint64_t stream) noexcept;
// Which entry of the thread's stream memo `stream` uses (streams are heap pointers: skip the
// alignment bits).
inline int stream_memo_slot(uint64_t stream) noexcept {
  return static_cast<int>((stream >> 6 ^ stream >> 12) % ThreadState::kStreamMemoEntries);
}
inline uint16_t stream_ref_index(uint64_t stream) noexcept {
  if (stream == 0) return 0;
  const StreamRefMemo& memo = t_thread.streams[stream_memo_slot(stream)];
  if (memo.stream == stream && memo.generation == g_refs_generation.load(std::memory_order_relaxed)) return memo.index;
  return make_stream_ref_index(stream);
}

// Says which thread launches with `launch_prefix` (launch_id >> 40): once per thread.
void write_thread_ref(uint64_t launch_prefix, uint32_t tid) noexcept;

// In a forked child: indices restart with the child's own trace.
void trace_refs_after_fork_in_child() noexcept;

}  // namespace ncclwatch
