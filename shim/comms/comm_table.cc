#include "comms/comm_table.h"

#include "process/process.h"

#include <mutex>

namespace ncclwatch {
namespace detail {

namespace {
// Constant-initialized, never destroyed (its members' destructors are trivial): the exit alert
// reads it from signal handlers, where a lazily built table could be caught half-built by the
// very thread that builds it (a function-local static's guard then throws in the handler).
constinit CommSlot g_comm_slots[kCommSlots];
}  // namespace

CommSlot* comm_slots() noexcept { return g_comm_slots; }

}  // namespace detail

namespace {

using detail::CommSlot;
using detail::kCommSlots;
using detail::kEmptySlot;
using detail::kRetiredSlot;

std::mutex g_writers;  // serializes publish/retire; lookups never take it

uint32_t home_slot(uint64_t handle) {
  // Comm handles are heap pointers: mix the bits so neighbours spread out.
  handle ^= handle >> 33;
  handle *= 0xff51afd7ed558ccdull;
  handle ^= handle >> 33;
  return static_cast<uint32_t>(handle) & (kCommSlots - 1);
}

}  // namespace

uint64_t CommTrack::next_p2p_seq(int peer, bool receive) noexcept {
  if (nranks <= 0 || peer < 0 || peer >= nranks) return 0;
  // Acquire pairs with the release CAS below: a winner's zeroed array is visible.
  std::atomic<uint64_t>* counters = p2p.load(std::memory_order_acquire);
  if (!counters) {
    auto* fresh = new (std::nothrow) std::atomic<uint64_t>[2 * static_cast<size_t>(nranks)]();
    if (!fresh) return 0;
    if (p2p.compare_exchange_strong(counters, fresh, std::memory_order_acq_rel)) counters = fresh;
    else delete[] fresh;  // another thread won; `counters` now holds its array
  }
  return counters[(receive ? nranks : 0) + peer].fetch_add(1, std::memory_order_relaxed) + 1;
}

uint64_t CommTrack::p2p_issued() const noexcept {
  const std::atomic<uint64_t>* counters = p2p.load(std::memory_order_acquire);
  uint64_t total = 0;
  for (size_t i = 0; counters && i < 2 * static_cast<size_t>(nranks); ++i) total += counters[i].load(std::memory_order_relaxed);
  return total;
}

namespace {
// Bumps the table's version when a change is done (after the table itself changed).
struct TableChange {
  ~TableChange() { detail::g_comm_table_version.fetch_add(1, std::memory_order_release); }
};
}  // namespace

uint32_t CommTrack::count_launch_of_shape(uint64_t shape) noexcept {
  if (shape == 0) shape = 1;  // 0 marks a free slot
  for (uint32_t probe = 0; probe < 8; ++probe) {
    ShapeCount& slot = shape_counts[(shape + probe) % kShapeSlots];
    uint64_t seen = slot.shape.load(std::memory_order_relaxed);
    if (seen == 0 && slot.shape.compare_exchange_strong(seen, shape, std::memory_order_relaxed)) seen = shape;
    if (seen == shape) return slot.launches.fetch_add(1, std::memory_order_relaxed);
  }
  return other_shape_launches.fetch_add(1, std::memory_order_relaxed);
}

void publish_comm(CommTrack* track) noexcept {
  std::lock_guard lock(g_writers);
  track->published_before = detail::g_newest_published.load(std::memory_order_relaxed);
  detail::g_newest_published.store(track, std::memory_order_release);
  TableChange change;
  CommSlot* slots = detail::comm_slots();
  uint32_t home = home_slot(track->handle);
  int reusable = -1;
  for (int probe = 0; probe < kCommSlots; ++probe) {
    CommSlot& slot = slots[(home + probe) & (kCommSlots - 1)];
    uint64_t handle = slot.handle.load(std::memory_order_relaxed);
    if (handle == track->handle) {
      // Release: pairs with the acquire in find_comm_track(); the track's fields are visible.
      slot.track.store(track, std::memory_order_release);
      return;
    }
    if (handle == kRetiredSlot && reusable < 0) reusable = static_cast<int>((home + probe) & (kCommSlots - 1));
    if (handle == kEmptySlot) {
      CommSlot& target = reusable >= 0 ? slots[reusable] : slot;
      target.track.store(track, std::memory_order_release);
      target.handle.store(track->handle, std::memory_order_release);
      return;
    }
  }
  if (reusable >= 0) {
    slots[reusable].track.store(track, std::memory_order_release);
    slots[reusable].handle.store(track->handle, std::memory_order_release);
    return;
  }
  notice_once(Notice::kTooManyComms,
              "ncclwatch: more than 8192 live communicators; collectives on the newest carry no identity");
}

CommTrack* detail::find_comm_track_in_table(uint64_t handle) noexcept {
  CommSlot* slots = detail::comm_slots();
  uint32_t home = home_slot(handle);
  for (int probe = 0; probe < kCommSlots; ++probe) {
    CommSlot& slot = slots[(home + probe) & (kCommSlots - 1)];
    // Acquire pairs with the release stores in publish_comm().
    uint64_t seen = slot.handle.load(std::memory_order_acquire);
    if (seen == handle) return slot.track.load(std::memory_order_acquire);
    if (seen == kEmptySlot) return nullptr;
  }
  return nullptr;
}

void retire_comm(uint64_t handle) noexcept {
  std::lock_guard lock(g_writers);
  TableChange change;
  CommSlot* slots = detail::comm_slots();
  uint32_t home = home_slot(handle);
  for (int probe = 0; probe < kCommSlots; ++probe) {
    CommSlot& slot = slots[(home + probe) & (kCommSlots - 1)];
    uint64_t seen = slot.handle.load(std::memory_order_relaxed);
    if (seen == handle) {
      // The track stays allocated: a racing reader may still hold it (the comm is gone anyway).
      slot.handle.store(kRetiredSlot, std::memory_order_release);
      return;
    }
    if (seen == kEmptySlot) return;
  }
}

}  // namespace ncclwatch

namespace ncclwatch {
void comm_table_after_fork_in_child() noexcept {
  new (&g_writers) std::mutex();
  detail::g_newest_published.store(nullptr, std::memory_order_relaxed);
  TableChange change;
  detail::CommSlot* slots = detail::comm_slots();
  for (int i = 0; i < detail::kCommSlots; ++i) {
    slots[i].handle.store(detail::kEmptySlot, std::memory_order_relaxed);
    slots[i].track.store(nullptr, std::memory_order_relaxed);
  }
}
}  // namespace ncclwatch
