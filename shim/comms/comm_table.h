// Per-communicator state the collective path needs — identity, rank, the sequence counters —
// found by handle without taking a lock: an open-addressing table written only at creation and
// release (rare), read on every collective.
#pragma once

#include "process/process.h"

#include <atomic>
#include <cstdint>

namespace ncclwatch {

struct CommTrack {
  uint64_t handle = 0;
  uint64_t id = 0;
  int32_t rank = -1;
  int32_t nranks = -1;
  // Collectives issued on this comm; relaxed: each value is taken by exactly one call, and the
  // order between threads sharing a comm is the application's business (NCCL requires it be
  // serialized anyway).
  std::atomic<uint64_t> issued{0};
  // Highest seq known complete on the GPU (collector thread writes, watchdog snapshots read).
  std::atomic<uint64_t> completed{0};
  // Stalls the watchdog reported on this comm, and those not resolved yet (live metrics).
  std::atomic<uint32_t> stalls{0};
  std::atomic<uint32_t> unresolved_stalls{0};
  // Launches per op shape, choosing which get GPU timestamps (gpu_timer.cc): a small lock-free
  // open-addressing table; shapes past its capacity share one overflow count.
  static constexpr uint32_t kShapeSlots = 64;
  struct ShapeCount {
    std::atomic<uint64_t> shape{0};
    std::atomic<uint32_t> launches{0};
  };
  ShapeCount shape_counts[kShapeSlots];
  std::atomic<uint32_t> other_shape_launches{0};
  // How many launches of `shape` (a hash, op_shape()) came before this one.
  uint32_t count_launch_of_shape(uint64_t shape) noexcept;
  // On a communicator driven from more than one stream, the launch after one timestamped by its
  // turn is timestamped too: NCCL runs it after that one, so only the pair gives its own start
  // (gpu_timer.cc). Relaxed loads and stores: a hint for sampling, written by the launching threads.
  std::atomic<uint64_t> last_stream{0};
  std::atomic<bool> several_streams{false};
  std::atomic<bool> last_timed_by_turn{false};
  // The highest collective seq whose GPU timing the collector wrote, and its end (collector thread only).
  uint64_t timed_end_seq = 0;
  int64_t timed_end_ns = 0;
  // GPU time of the launches timed alike on every rank (LaunchEvents::timed_alike), and how many:
  // the live straggler series (collector thread writes, the metrics writer reads).
  std::atomic<uint64_t> alike_gpu_ns{0};
  std::atomic<uint64_t> alike_launches{0};
  // The track published before this one (every track ever published, newest first: counters
  // outlive the communicator, for the live metrics).
  CommTrack* published_before = nullptr;
  // Point-to-point seqs per peer: [peer] sends, [nranks + peer] receives; allocated on first use.
  std::atomic<std::atomic<uint64_t>*> p2p{nullptr};
  // Its CommRef index in the trace (trace_refs.cc); 0 until its first op.
  std::atomic<uint32_t> trace_index{0};
  // (Memory, after what the collective path reads: cold, read at set-up calls and by the writers.)
  // The GPU memory it holds as last read (at creation, then after set-up calls: comm_memory.h),
  // for the exit alert, and how many set-up readings it has had (at most kMaxMemoryReadings).
  std::atomic<uint64_t> held_bytes{0};
  std::atomic<uint32_t> memory_readings{0};
  // The device's free memory before its set-up call in progress (-1 unknown). NCCL serializes the
  // calls on one communicator; a group driving it on several streams reads NCCL's count only.
  std::atomic<int64_t> setup_free_before{-1};
  std::atomic<int64_t> setup_process_before{-1};  // this process's GPU memory then (NVML), -1 unknown
  // NCCL's count at the last reading (-1: none yet, or held_bytes came from another figure): what
  // held_bytes holds beyond it is what NCCL's count missed.
  std::atomic<int64_t> nccl_count_bytes{-1};
  // Set at creation, before it is published: its set-up calls are not read at all (non-blocking:
  // its set-up runs in NCCL's threads after a call returns), or not by the free memory's change
  // (made with others on several devices by one call, whose device the thread's may not be).
  bool set_up_unread = false;
  bool free_change_unattributable = false;
  // A finalize, destroy, abort or revoke has been entered: NCCL is not asked about it any more.
  std::atomic<bool> closing{false};

  // The next seq of a send to (or receive from) `peer`; 0 when the peer is out of range.
  uint64_t next_p2p_seq(int peer, bool receive) noexcept;
  // Sends and receives issued so far, over every peer (the metrics writer; relaxed reads).
  uint64_t p2p_issued() const noexcept;
};

// Publishes `track` for its handle (replacing a released comm that had the same handle).
void publish_comm(CommTrack* track) noexcept;
// The comm's state, or nullptr when the shim never saw it created (inline below: a per-thread
// memo of the last lookup, checked against the table's version, spares the hash probe).
inline CommTrack* find_comm_track(uint64_t handle) noexcept;
// Forgets the handle (the comm was destroyed or aborted).
void retire_comm(uint64_t handle) noexcept;
// Calls `visit(const CommTrack&)` for every live comm (stall snapshots). Lock-free, may miss a comm
// published concurrently.
template <class F> void for_each_comm(F&& visit);
// Calls `visit(const CommTrack&)` for every comm published in this process, released or not.
template <class F> void for_each_comm_ever(F&& visit);

namespace detail {
inline constexpr int kCommSlots = 8192;  // power of two
inline constexpr uint64_t kEmptySlot = 0;
inline constexpr uint64_t kRetiredSlot = 1;  // a handle can never be 1 (pointers are aligned)
struct CommSlot {
  std::atomic<uint64_t> handle{kEmptySlot};
  std::atomic<CommTrack*> track{nullptr};
};
CommSlot* comm_slots() noexcept;
CommTrack* find_comm_track_in_table(uint64_t handle) noexcept;
// Bumped after every change to the table: a memo taken at an older version is stale.
inline std::atomic<uint64_t> g_comm_table_version{0};
inline std::atomic<CommTrack*> g_newest_published{nullptr};
}  // namespace detail

inline CommTrack* find_comm_track(uint64_t handle) noexcept {
  // Acquire pairs with the release bump after a change: the changed table is visible.
  uint64_t version = detail::g_comm_table_version.load(std::memory_order_acquire);
  CommLookupMemo& last = t_thread.last_comm;
  if (last.handle == handle && last.version == version) return last.track;
  CommTrack* track = detail::find_comm_track_in_table(handle);
  last = {handle, version, track};
  return track;
}

template <class F> void for_each_comm(F&& visit) {
  detail::CommSlot* slots = detail::comm_slots();
  for (int i = 0; i < detail::kCommSlots; ++i) {
    uint64_t handle = slots[i].handle.load(std::memory_order_acquire);
    if (handle == detail::kEmptySlot || handle == detail::kRetiredSlot) continue;
    if (CommTrack* t = slots[i].track.load(std::memory_order_acquire)) visit(*t);
  }
}

template <class F> void for_each_comm_ever(F&& visit) {
  // Acquire pairs with the release in publish_comm(): each track is complete when seen.
  for (CommTrack* t = detail::g_newest_published.load(std::memory_order_acquire); t; t = t->published_before) visit(*t);
}

}  // namespace ncclwatch

namespace ncclwatch {
// A forked child starts with no communicators.
void comm_table_after_fork_in_child() noexcept;
}  // namespace ncclwatch
