#include "gpu/comm_memory.h"

#include "gpu/cuda_driver.h"
#include "gpu/process_memory.h"
#include "gpu/timing_mode.h"
#include "process/process.h"
#include "trace/trace.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ncclwatch {
namespace {

const CudaDriver* driver_for_memory() noexcept {
  if (timing_mode() != TimingMode::kGpu) return nullptr;
  const CudaDriver* cu = cuda_driver();
  return cu && cu->mem_get_info ? cu : nullptr;
}

bool is_own(uint32_t flags) noexcept {
  return (flags & trace::kFlagMemoryFromFreeChange) && !(flags & trace::kFlagMemorySharedDevice);
}

}  // namespace

MemorySample memory_now() noexcept {
  const CudaDriver* cu = driver_for_memory();
  if (!cu) return {};
  CUcontext ctx = nullptr;
  if (cu->ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) return {};  // no device chosen yet
  RelaxedCaptureMode relaxed(*cu);  // another thread may be capturing a graph
  size_t free = 0, total = 0;
  if (cu->mem_get_info(&free, &total) != CUDA_SUCCESS || free > total) return {};
  ProcessGpuMemory own = process_gpu_memory(*cu);
  return {static_cast<int64_t>(free), own.used_bytes, own.processes};
}

CommMemory nccl_comm_memory(const RealNccl* real, ncclComm_t comm, bool at_creation) noexcept {
  static std::atomic<bool> refused{[] {
    const char* disabled = std::getenv("NCCL_MEM_MANAGER_DISABLE");  // NCCL would refuse, and warn
    return disabled && *disabled && std::strcmp(disabled, "0") != 0;
  }()};
  uint64_t value = 0;
  if (!comm || !real || !real->ncclCommMemStats || !driver_for_memory() || refused.load(std::memory_order_relaxed)) return {};
  if (real->ncclCommMemStats(comm, ncclStatGpuMemTotal, &value) != ncclSuccess) {
    if (at_creation) refused.store(true, std::memory_order_relaxed);
    return {};
  }
  // 0 is what NCCL says of a communicator its memory manager does not track: not a figure.
  if (!value) return {};
  uint64_t suspended = 0, released = 0;
  if (real->ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended) == ncclSuccess && suspended == 1 &&
      real->ncclCommMemStats(comm, ncclStatGpuMemSuspend, &released) == ncclSuccess)
    value = released < value ? value - released : 0;
  return CommMemory{value, trace::kFlagMemoryFromNccl};
}

namespace {

// The signed change since `before` (positive: taken), with its flags; flags 0 when unknown.
struct MemoryTaken {
  int64_t bytes = 0;
  uint32_t flags = 0;
};

MemoryTaken memory_taken_since(const MemorySample& before) noexcept {
  if (before.device_free < 0) return {};
  MemorySample after = memory_now();
  if (after.device_free < 0) return {};
  if (before.process_used >= 0 && after.process_used >= 0)
    return {after.process_used - before.process_used, trace::kFlagMemoryFromFreeChange | trace::kFlagMemoryOwnProcess};
  uint32_t flags = trace::kFlagMemoryFromFreeChange;
  if (std::max(before.processes, after.processes) > 1) flags |= trace::kFlagMemorySharedDevice;
  return {before.device_free - after.device_free, flags};
}

}  // namespace

CommMemory memory_change(MemorySample before, bool taken) noexcept {
  MemoryTaken change = memory_taken_since(before);
  if (!change.flags) return {};
  int64_t bytes = taken ? change.bytes : -change.bytes;
  return {static_cast<uint64_t>(bytes > 0 ? bytes : 0), change.flags};
}

CommMemory held_at_creation(CommMemory nccl_count, CommMemory taken) noexcept {
  if (!nccl_count.flag) return taken;
  if (is_own(taken.flag) && taken.bytes > nccl_count.bytes) return taken;
  nccl_count.flag |= taken.flag & trace::kFlagMemorySharedDevice;  // for the reports' word on the GPU shared
  return nccl_count;
}

bool begin_setup_reading(CommTrack& track) noexcept {
  if (track.set_up_unread || !driver_for_memory()) return false;
  if (track.memory_readings.fetch_add(1, std::memory_order_relaxed) >= trace::kMaxMemoryReadings) return false;
  MemorySample now = memory_now();
  track.setup_free_before.store(now.device_free, std::memory_order_relaxed);
  track.setup_process_before.store(now.process_used, std::memory_order_relaxed);
  return true;
}

namespace {

struct MemoryChange {
  CommMemory held;  // NCCL's count now (flag 0: unknown)
  MemoryTaken taken;
};

MemoryChange read_change(const CommTrack& track, const MemorySample& before) noexcept {
  return {nccl_comm_memory(real_nccl(), reinterpret_cast<ncclComm_t>(track.handle), false),
          memory_taken_since(before)};
}

// What it holds after a reading: NCCL's count plus what the count has missed so far, or where the
// call's own change says more, what it held plus that change (NCCL 2.29+ counts only its memory
// manager's buffers, not the connections' made at first use). Without NCCL's count, what it held
// plus the change. A set-up call's fall of memory is not a release: only a suspend or resume moves
// it down. ncclwatch-report's CommInstance::held_over_time follows the same rule.
uint64_t held_after(uint64_t held, int64_t last_count, const MemoryChange& change, bool lifecycle) noexcept {
  int64_t taken = change.taken.bytes;
  bool own = is_own(change.taken.flags) && (taken > 0 || lifecycle);
  int64_t moved = static_cast<int64_t>(held) + (own ? taken : 0);
  uint64_t by_change = moved > 0 ? static_cast<uint64_t>(moved) : 0;
  if (!change.held.flag) return by_change;
  uint64_t counted_before = last_count >= 0 ? static_cast<uint64_t>(last_count) : held;
  uint64_t missed = held - std::min(held, counted_before);
  return own ? std::max(change.held.bytes, by_change) : change.held.bytes + missed;
}

void write_memory_record(const CommTrack& track, const MemoryChange& change, const SetupCall& call) noexcept {
  RecordSlot slot = reserve_record(sizeof(trace::MemoryRecord));
  if (!slot) return;
  auto* rec = slot.as<trace::MemoryRecord>();
  rec->time_ns = monotonic_ns();
  rec->comm_id = track.id;
  rec->comm = track.handle;
  rec->held_bytes = change.held.bytes;
  rec->taken_bytes = change.taken.bytes;
  rec->op_count = call.count;
  rec->flags = change.held.flag | change.taken.flags;
  rec->api = call.api;
  rec->datatype = call.datatype;
  rec->rank = track.rank;
  rec->peer = call.peer;
  slot.commit(trace::RecordType::kMemory);
}

void apply_reading(CommTrack& track, const MemoryChange& change, const SetupCall& call, bool lifecycle) noexcept {
  if (!change.held.flag && !change.taken.flags) return;
  uint64_t held = held_after(track.held_bytes.load(std::memory_order_relaxed),
                             track.nccl_count_bytes.load(std::memory_order_relaxed), change, lifecycle);
  track.held_bytes.store(held, std::memory_order_relaxed);
  if (change.held.flag) track.nccl_count_bytes.store(static_cast<int64_t>(change.held.bytes), std::memory_order_relaxed);
  write_memory_record(track, change, call);
}

}  // namespace

void finish_setup_reading(CommTrack& track, const SetupCall& call) noexcept {
  if (track.closing.load(std::memory_order_acquire)) return;
  MemorySample before{track.setup_free_before.load(std::memory_order_relaxed),
                      track.setup_process_before.load(std::memory_order_relaxed), -1};
  if (!call.free_change_is_its_own || track.free_change_unattributable) before.device_free = -1;
  apply_reading(track, read_change(track, before), call, false);
}

void record_suspend_or_resume(CommTrack& track, uint16_t api, MemorySample before) noexcept {
  if (track.set_up_unread || track.closing.load(std::memory_order_acquire) || !driver_for_memory()) return;
  if (track.free_change_unattributable) before.device_free = -1;
  apply_reading(track, read_change(track, before), SetupCall{api, 0, 0, -1, true}, true);
}

}  // namespace ncclwatch
