#include "gpu/comm_memory.h"

#include "gpu/cuda_driver.h"
#include "gpu/timing_mode.h"
#include "process/process.h"
#include "trace/trace.h"

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

}  // namespace

FreeMemoryBefore free_memory_now() noexcept {
  const CudaDriver* cu = driver_for_memory();
  if (!cu) return {};
  CUcontext ctx = nullptr;
  if (cu->ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) return {};  // no device chosen yet
  RelaxedCaptureMode relaxed(*cu);  // another thread may be capturing a graph
  size_t free = 0, total = 0;
  if (cu->mem_get_info(&free, &total) != CUDA_SUCCESS) return {};
  return {static_cast<int64_t>(free)};
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

CommMemory free_memory_change(FreeMemoryBefore before, bool taken) noexcept {
  if (before.bytes < 0) return {};
  FreeMemoryBefore after = free_memory_now();
  if (after.bytes < 0) return {};
  int64_t change = taken ? before.bytes - after.bytes : after.bytes - before.bytes;
  return {static_cast<uint64_t>(change > 0 ? change : 0), trace::kFlagMemoryFromFreeChange};
}

bool begin_setup_reading(CommTrack& track) noexcept {
  if (track.set_up_unread || !driver_for_memory()) return false;
  if (track.memory_readings.fetch_add(1, std::memory_order_relaxed) >= trace::kMaxMemoryReadings) return false;
  track.setup_free_before.store(free_memory_now().bytes, std::memory_order_relaxed);
  return true;
}

namespace {

struct MemoryChange {
  CommMemory held;     // NCCL's count now (flag 0: unknown)
  int64_t taken = 0;   // the free memory's fall, where flags has kFlagMemoryFromFreeChange
  uint32_t flags = 0;
};

MemoryChange read_change(const CommTrack& track, int64_t free_before) noexcept {
  MemoryChange change;
  change.held = nccl_comm_memory(real_nccl(), reinterpret_cast<ncclComm_t>(track.handle), false);
  FreeMemoryBefore after = free_before >= 0 ? free_memory_now() : FreeMemoryBefore{};
  change.flags = change.held.flag;
  if (after.bytes >= 0) {
    change.taken = free_before - after.bytes;
    change.flags |= trace::kFlagMemoryFromFreeChange;
  }
  return change;
}

void write_memory_record(const CommTrack& track, const MemoryChange& change, const SetupCall& call) noexcept {
  RecordSlot slot = reserve_record(sizeof(trace::MemoryRecord));
  if (!slot) return;
  auto* rec = slot.as<trace::MemoryRecord>();
  rec->time_ns = monotonic_ns();
  rec->comm_id = track.id;
  rec->comm = track.handle;
  rec->held_bytes = change.held.bytes;
  rec->taken_bytes = change.taken;
  rec->op_count = call.count;
  rec->flags = change.flags;
  rec->api = call.api;
  rec->datatype = call.datatype;
  rec->rank = track.rank;
  rec->peer = call.peer;
  slot.commit(trace::RecordType::kMemory);
}

}  // namespace

void finish_setup_reading(CommTrack& track, const SetupCall& call) noexcept {
  if (track.closing.load(std::memory_order_acquire)) return;
  int64_t before = track.setup_free_before.load(std::memory_order_relaxed);
  if (!call.free_change_is_its_own || track.free_change_unattributable) before = -1;
  MemoryChange change = read_change(track, before);
  if (!change.flags) return;
  // Without NCCL's count, what it holds is what it took at creation and at each set-up since.
  if (change.held.flag) track.held_bytes.store(change.held.bytes, std::memory_order_relaxed);
  else if (change.taken > 0) track.held_bytes.fetch_add(static_cast<uint64_t>(change.taken), std::memory_order_relaxed);
  write_memory_record(track, change, call);
}

void record_suspend_or_resume(CommTrack& track, uint16_t api, FreeMemoryBefore before) noexcept {
  if (track.set_up_unread || track.closing.load(std::memory_order_acquire) || !driver_for_memory()) return;
  MemoryChange change = read_change(track, track.free_change_unattributable ? -1 : before.bytes);
  if (!change.flags) return;
  if (change.held.flag) {
    track.held_bytes.store(change.held.bytes, std::memory_order_relaxed);
  } else {
    // What it held, less what the suspend gave back (plus what the resume took): never below 0.
    uint64_t held = track.held_bytes.load(std::memory_order_relaxed);
    int64_t now = static_cast<int64_t>(held) + change.taken;
    track.held_bytes.store(now > 0 ? static_cast<uint64_t>(now) : 0, std::memory_order_relaxed);
  }
  write_memory_record(track, change, SetupCall{api, 0, 0, -1, true});
}

}  // namespace ncclwatch
