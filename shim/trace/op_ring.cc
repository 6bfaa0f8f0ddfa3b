#include "trace/op_ring.h"

#include "process/process.h"
#include "trace/trace_writer.h"

#include <cstring>
#include <mutex>

namespace ncclwatch {
namespace {

using namespace trace;

// A chunk that could not be made: its positions' records are counted lost.
std::byte* const kChunkFailed = reinterpret_cast<std::byte*>(1);

struct Ring {
  std::atomic<bool> sized{false};
  TraceBudget budget{};
  uint32_t chunk_shift = 0;                  // log2(budget.chunk_slots)
  std::atomic<uint64_t> next{0};             // slots claimed so far: the next slot's index
  std::atomic<std::byte*> chunks[kMaxRingChunks] = {};  // first slot of each chunk made
  std::mutex make_mutex;                     // taken to make a chunk or the totals: rare
  std::atomic<OpTotalsEntry*> totals{nullptr};
  std::atomic<bool> totals_failed{false};
};

// Constant-initialized, with trivial destructors: usable from the first call to the last
// record of exit, and a plain address on the hot path.
constinit Ring g_ring;
Ring& ring() { return g_ring; }

[[gnu::noinline, gnu::cold]] void size_ring(Ring& r) noexcept {
  // Acquire pairs with the release below: the sizes are in place.
  if (r.sized.load(std::memory_order_acquire)) return;
  std::lock_guard lock(r.make_mutex);
  if (r.sized.load(std::memory_order_relaxed)) return;
  r.budget = trace_budget(trace_capacity_bytes());
  while ((1u << r.chunk_shift) < r.budget.chunk_slots) ++r.chunk_shift;
  r.sized.store(true, std::memory_order_release);
}

[[gnu::noinline, gnu::cold]] std::byte* make_chunk(Ring& r, uint32_t ordinal) noexcept {
  try {
    size_ring(r);
    std::lock_guard lock(r.make_mutex);
    // Acquire pairs with the release below, by a thread that made it first.
    if (std::byte* made = r.chunks[ordinal].load(std::memory_order_acquire)) return made;
    uint64_t bytes = kRingChunkHeaderBytes + uint64_t{r.budget.chunk_slots} * kRingSlotBytes;
    RecordSlot slot = bytes <= kMaxChunkRecordBytes ? reserve_chunk_record(static_cast<uint32_t>(bytes)) : RecordSlot();
    std::byte* first = kChunkFailed;
    if (slot) {
      auto* rec = slot.as<RingChunkRecord>();
      rec->ring_slots = r.budget.ring_slots;
      rec->ordinal = ordinal;
      rec->slots = r.budget.chunk_slots;
      slot.commit(RecordType::kRingChunk);
      first = slot.bytes() + kRingChunkHeaderBytes;
    } else {
      notice_once(Notice::kRingChunkFailed,
                  "ncclwatch: part of the ring of recent ops could not be made (NCCLWATCH_MAX_MB or a full disk); "
                  "the ops that land there are lost and counted");
    }
    // Release pairs with the acquire in claim_ring_slot(): the chunk record is in place.
    r.chunks[ordinal].store(first, std::memory_order_release);
    return first;
  } catch (...) {
    notice_once(Notice::kRingChunkFailed,
                "ncclwatch: part of the ring of recent ops could not be made (an internal error); the ops that "
                "land there are lost and counted");
    return kChunkFailed;
  }
}

}  // namespace

void RingSlotClaim::commit(RingKind kind) const noexcept {
  // Release: pairs with the reader's load of the stamp; the body is in place before it.
  std::atomic_ref<uint64_t>(slot_->stamp).store(ring_stamp(index_, kind), std::memory_order_release);
}

RingSlotClaim claim_ring_slot() noexcept {
  Ring& r = ring();
  // Acquire pairs with the release in size_ring(): the sizes are in place.
  if (!r.sized.load(std::memory_order_acquire)) size_ring(r);
  // Relaxed: the index only hands out positions; the stamp publishes the slot.
  uint64_t index = r.next.fetch_add(1, std::memory_order_relaxed);
  uint64_t position = index % r.budget.ring_slots;
  uint32_t ordinal = static_cast<uint32_t>(position >> r.chunk_shift);
  // Acquire pairs with the release in make_chunk(): the chunk record is in place.
  std::byte* first = r.chunks[ordinal].load(std::memory_order_acquire);
  if (!first) [[unlikely]]
    first = make_chunk(r, ordinal);
  if (first == kChunkFailed) [[unlikely]] {
    count_lost_record();
    return {};
  }
  auto* slot = reinterpret_cast<RingSlot*>(first + (position & (r.budget.chunk_slots - 1)) * kRingSlotBytes);
  // Take the slot from the record a lap older. A writer still filling it (a lap behind, or dead)
  // keeps it: two writers in one slot would leave a torn record that looks committed.
  std::atomic_ref<uint64_t> stamp(slot->stamp);
  uint64_t old = stamp.load(std::memory_order_relaxed);
  if ((old != 0 && (ring_stamp_kind(old) == RingKind::kWriting || ring_stamp_index(old) >= index)) ||
      !stamp.compare_exchange_strong(old, ring_stamp(index, RingKind::kWriting), std::memory_order_acquire)) [[unlikely]] {
    count_lost_record();
    return {};
  }
  return {slot, index};  // the caller writes every byte of the body
}

OpTotalsEntry* find_op_totals_entry(uint32_t comm_index, Api api, uint64_t count, uint8_t datatype, int64_t now_ns) noexcept {
  Ring& r = ring();
  // Acquire pairs with the release when the table was made.
  OpTotalsEntry* table = r.totals.load(std::memory_order_acquire);
  if (!table) {
    if (r.totals_failed.load(std::memory_order_relaxed)) return nullptr;
    try {
      size_ring(r);
      std::lock_guard lock(r.make_mutex);
      table = r.totals.load(std::memory_order_acquire);
      if (!table) {
        RecordSlot slot = reserve_chunk_record(static_cast<uint32_t>(r.budget.totals_bytes()));
        if (!slot) {
          r.totals_failed.store(true, std::memory_order_relaxed);
          return nullptr;
        }
        slot.as<OpTotalsRecord>()->entries = r.budget.totals_entries;
        slot.commit(RecordType::kOpTotals);
        table = reinterpret_cast<OpTotalsEntry*>(slot.bytes() + kOpTotalsHeaderBytes);
        r.totals.store(table, std::memory_order_release);
      }
    } catch (...) {
      notice_once(Notice::kOpTotalsFailed,
                  "ncclwatch: an internal error kept the table of op totals from being made; the trace has no "
                  "totals of the whole run, only its recent ops");
      return nullptr;
    }
  }
  // MurmurHash3's finalizer over the key's fields; 0 marks a free entry.
  uint64_t h = count * 0x9e3779b97f4a7c15ull ^ (uint64_t{comm_index} << 24) ^ (uint64_t{static_cast<uint16_t>(api)} << 8) ^ datatype;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  if (h == 0) h = 1;
  uint32_t entries = r.budget.totals_entries;
  for (uint32_t probe = 0; probe < 16; ++probe) {
    uint32_t i = 1 + static_cast<uint32_t>((h + probe) % (entries - 1));
    OpTotalsEntry& e = table[i];
    std::atomic_ref<uint64_t> key(e.key);
    // Acquire pairs with the release of `ready` below (a claimed entry's fields are in place).
    uint64_t seen = key.load(std::memory_order_acquire);
    if (seen == 0 && key.compare_exchange_strong(seen, h, std::memory_order_acq_rel)) {
      e.count = count;
      e.comm_index = comm_index;
      e.api = static_cast<uint16_t>(api);
      e.datatype = datatype;
      e.first_ns = now_ns;
      // Release: pairs with the reader's and the next caller's acquire of `ready`.
      std::atomic_ref<uint8_t>(e.ready).store(1, std::memory_order_release);
      return &e;
    }
    if (seen != h) continue;
    // Claimed for this hash: wait the few instructions until its fields are written.
    while (!std::atomic_ref<uint8_t>(e.ready).load(std::memory_order_acquire)) {
    }
    if (e.count == count && e.comm_index == comm_index && e.api == static_cast<uint16_t>(api) && e.datatype == datatype)
      return &e;
  }
  return &table[0];
}

void count_op_gpu_time(OpTotalsEntry* e, int64_t gpu_ns) noexcept {
  if (!e || gpu_ns < 0) return;
  // Relaxed: statistics (see count_op_call).
  std::atomic_ref<uint64_t>(e->gpu_timed).fetch_add(1, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(e->gpu_ns).fetch_add(static_cast<uint64_t>(gpu_ns), std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(e->gpu_histogram[totals_bucket(static_cast<uint64_t>(gpu_ns))]).fetch_add(1, std::memory_order_relaxed);
}

void op_ring_after_fork_in_child() noexcept {
  Ring& r = ring();
  g_totals_generation.fetch_add(1, std::memory_order_relaxed);
  r.next.store(0, std::memory_order_relaxed);
  for (auto& chunk : r.chunks) chunk.store(nullptr, std::memory_order_relaxed);
  new (&r.make_mutex) std::mutex();
  r.totals.store(nullptr, std::memory_order_relaxed);
  r.totals_failed.store(false, std::memory_order_relaxed);
}

}  // namespace ncclwatch
