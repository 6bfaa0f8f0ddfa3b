// Per-communicator state the collective path needs — identity, rank, the sequence counters —
// found by handle without taking a lock: an open-addressing table written only at creation and
// release (rare), read on every collective.
#pragma once

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
  // Point-to-point seqs per peer: [peer] sends, [nranks + peer] receives; allocated on first use.
  std::atomic<std::atomic<uint64_t>*> p2p{nullptr};

  // The next seq of a send to (or receive from) `peer`; 0 when the peer is out of range.
  uint64_t next_p2p_seq(int peer, bool receive) noexcept;
};

// Publishes `track` for its handle (replacing a released comm that had the same handle).
void publish_comm(CommTrack* track) noexcept;
// The comm's state, or nullptr when the shim never saw it created.
CommTrack* find_comm_track(uint64_t handle) noexcept;
// Forgets the handle (the comm was destroyed or aborted).
void retire_comm(uint64_t handle) noexcept;
// Calls `visit(const CommTrack&)` for every live comm (stall snapshots). Lock-free, may miss a comm
// published concurrently.
template <class F> void for_each_comm(F&& visit);

namespace detail {
inline constexpr int kCommSlots = 8192;  // power of two
inline constexpr uint64_t kEmptySlot = 0;
inline constexpr uint64_t kRetiredSlot = 1;  // a handle can never be 1 (pointers are aligned)
struct CommSlot {
  std::atomic<uint64_t> handle{kEmptySlot};
  std::atomic<CommTrack*> track{nullptr};
};
CommSlot* comm_slots() noexcept;
}  // namespace detail

template <class F> void for_each_comm(F&& visit) {
  detail::CommSlot* slots = detail::comm_slots();
  for (int i = 0; i < detail::kCommSlots; ++i) {
    uint64_t handle = slots[i].handle.load(std::memory_order_acquire);
    if (handle == detail::kEmptySlot || handle == detail::kRetiredSlot) continue;
    if (CommTrack* t = slots[i].track.load(std::memory_order_acquire)) visit(*t);
  }
}

}  // namespace ncclwatch

namespace ncclwatch {
// A forked child starts with no communicators.
void clear_comm_table_after_fork() noexcept;
}  // namespace ncclwatch
