// The handles the shim's plugin gives NCCL: slots in fixed arrays, each naming its kind in its
// first member, and the check that a handle NCCL hands back as a parent is one of them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ncclwatch::profiler_slots {

// What a handle we gave NCCL is: its first member, so stopEvent and recordEventState, which get
// only the handle, know it. NCCL hands back only handles we returned there.
enum class SlotKind : uint32_t { kApi = 1, kPlan, kKernelChannel, kProxyOp, kProxyStep };

// The op behind one CollApi/P2pApi event. NCCL keeps the handle until the op's Coll/P2p event,
// which a group may start long after the call returned: slots are reused round-robin, so an op
// is tied to its plan while fewer than kApiSlots later calls on the communicator came between.
struct ApiSlot {
  SlotKind kind = SlotKind::kApi;
  uint64_t launch_id = 0;  // 0: none (a call that did not come through a wrapper)
  uint64_t seq = 0;
  uint64_t comm_id = 0;
  uint64_t count = 0;
  int32_t peer = -1;
  int32_t rank = -1;
  int32_t nranks = -1;
  uint16_t api = 0;
  uint8_t datatype = 0;
  bool graph_captured = false;
  uint8_t nchannels = 0;  // set on the copy a plan slot keeps
};

// The op behind one Coll/P2p event: the parent NCCL's proxy thread names when the op's kernel
// channels run, after the application's thread may have reused the slot for a later op. So it is
// a seqlock: written by the launching thread, read by the proxy thread, which keeps a copy only
// when no write came between (every member atomic: the two threads never race on plain memory).
struct PlanSlot {
  SlotKind kind = SlotKind::kPlan;
  std::atomic<uint32_t> version{0};  // odd while being written
  std::atomic<uint64_t> words[6]{};

  void store(const ApiSlot& op) noexcept {
    uint32_t v = version.load(std::memory_order_relaxed);
    version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    uint64_t w[6] = {op.launch_id, op.seq, op.comm_id, op.count,
                     uint64_t(uint32_t(op.peer)) | uint64_t(uint32_t(op.rank)) << 32,
                     uint64_t(uint32_t(op.nranks)) | uint64_t(op.api) << 32 | uint64_t(op.datatype) << 48 |
                         uint64_t(op.nchannels) << 56};
    for (int i = 0; i < 6; ++i) words[i].store(w[i], std::memory_order_relaxed);
    version.store(v + 2, std::memory_order_release);
  }

  // The op, or false when a write was under way or came between (the slot was reused).
  bool load(ApiSlot& op) const noexcept {
    uint32_t before = version.load(std::memory_order_acquire);
    uint64_t w[6];
    for (int i = 0; i < 6; ++i) w[i] = words[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 || version.load(std::memory_order_relaxed) != before || !w[0]) return false;
    op.launch_id = w[0];
    op.seq = w[1];
    op.comm_id = w[2];
    op.count = w[3];
    op.peer = int32_t(uint32_t(w[4]));
    op.rank = int32_t(uint32_t(w[4] >> 32));
    op.nranks = int32_t(uint32_t(w[5]));
    op.api = uint16_t(w[5] >> 32);
    op.datatype = uint8_t(w[5] >> 48);
    op.nchannels = uint8_t(w[5] >> 56);
    return true;
  }
};

// The op's identity on one of its OpPlan, OpKernel or OpProxy records (the same members in each).
template <class Record> void stamp_op(Record& r, const ApiSlot& op) noexcept {
  r.launch_id = op.launch_id;
  r.seq = op.seq;
  r.comm_id = op.comm_id;
  r.count = op.count;
  r.peer = op.peer;
  r.rank = op.rank;
  r.nranks = op.nranks;
  r.api = op.api;
  r.datatype = op.datatype;
}

// The element of first[0, count) that `handle` points at exactly, or null: a parent NCCL names (one
// of ours, another plugin's, or garbage from a broken NCCL) is never dereferenced unchecked.
template <class T> T* element_at(T* first, size_t count, const void* handle) noexcept {
  auto at = reinterpret_cast<uintptr_t>(handle), begin = reinterpret_cast<uintptr_t>(first);
  if (!first || at < begin || at >= begin + sizeof(T) * count || (at - begin) % sizeof(T) != 0) return nullptr;
  return first + (at - begin) / sizeof(T);
}

}  // namespace ncclwatch::profiler_slots
