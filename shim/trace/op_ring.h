// Where ops and GPU timings go (trace format 4, see "Retention" in trace_format.h): a ring of
// fixed 64-byte slots holding the newest of them, and a totals table counting every op of the
// run. Both live in the trace file's shared mapping, so a SIGKILL loses nothing committed.
// Lock-free on the hot path; a chunk of the ring or the totals table is made (under a lock) the
// first time it is needed.
#pragma once

#include "process/process.h"

#include <ncclwatch/trace_format.h>

#include <atomic>
#include <cstdint>

namespace ncclwatch {

// One claimed ring slot: fill `body()` (a CompactOp or CompactTiming), then commit().
class RingSlotClaim {
 public:
  RingSlotClaim() = default;
  RingSlotClaim(trace::RingSlot* slot, uint64_t index) : slot_(slot), index_(index) {}
  explicit operator bool() const { return slot_ != nullptr; }
  trace::RingSlot* slot() const { return slot_; }
  // Publishes the slot: readers trust it from now on.
  void commit(trace::RingKind kind) const noexcept;

 private:
  trace::RingSlot* slot_ = nullptr;
  uint64_t index_ = 0;
};

// The next ring slot; the caller writes every byte of its body. Empty when the record is lost (no trace file, its chunk
// could not be made, or a writer a whole lap behind still holds the slot); the loss is counted.
RingSlotClaim claim_ring_slot() noexcept;

// The totals entry of (communicator, op, count, datatype), made on first use; nullptr when there
// is no trace file. Keys past the table's capacity share entry 0.
// `now_ns` is the first call's time, should this be it.
trace::OpTotalsEntry* find_op_totals_entry(uint32_t comm_index, trace::Api api, uint64_t count, uint8_t datatype,
                                           int64_t now_ns) noexcept;

// Bumped at fork: per-thread memos of the parent's entries are stale.
inline std::atomic<uint32_t> g_totals_generation{1};

// As find_op_totals_entry, through the thread's memo of the entries it used last. The memo knows
// keys that pack into 64 bits (count < 2^32, comm_index < 2^16: nearly all), by that packed value.
inline trace::OpTotalsEntry* op_totals_entry(uint32_t comm_index, trace::Api api, uint64_t count, uint8_t datatype,
                                             int64_t now_ns) noexcept {
  if ((count >> 32) == 0 && (comm_index >> 16) == 0) [[likely]] {
    uint64_t key = count | uint64_t{comm_index} << 32 | uint64_t{datatype} << 48 | uint64_t{static_cast<uint8_t>(api)} << 56;
    TotalsMemo& memo = t_thread.totals[(count ^ (count >> 7)) % kTotalsMemoEntries];
    uint32_t generation = g_totals_generation.load(std::memory_order_relaxed);
    if (memo.key == key && memo.generation == generation) return static_cast<trace::OpTotalsEntry*>(memo.entry);
    trace::OpTotalsEntry* entry = find_op_totals_entry(comm_index, api, count, datatype, now_ns);
    if (entry) memo = {key, entry, generation};
    return entry;
  }
  return find_op_totals_entry(comm_index, api, count, datatype, now_ns);
}

// One call of the entry's op, enqueued at `begin_ns` for `host_ns`.
inline void count_op_call(trace::OpTotalsEntry* e, int64_t begin_ns, int64_t host_ns) noexcept {
  if (!e) return;
  // Relaxed: statistics in the shared mapping; the reader takes whatever the last store left.
  std::atomic_ref<uint64_t>(e->calls).fetch_add(1, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(e->host_ns).fetch_add(static_cast<uint64_t>(host_ns), std::memory_order_relaxed);
  std::atomic_ref<int64_t>(e->last_ns).store(begin_ns, std::memory_order_relaxed);
}

// A GPU timing of a launch of the entry's op alone (the collector thread).
void count_op_gpu_time(trace::OpTotalsEntry* e, int64_t gpu_ns) noexcept;

// In a forked child: the parent's ring and table stay the parent's.
void op_ring_after_fork_in_child() noexcept;

}  // namespace ncclwatch
