#include "gpu/comm_memory.h"

#include "gpu/cuda_driver.h"
#include "gpu/gpu_timer.h"

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

CommMemory nccl_comm_memory(const RealNccl* real, ncclComm_t comm) noexcept {
  static std::atomic<bool> refused{[] {
    const char* disabled = std::getenv("NCCL_MEM_MANAGER_DISABLE");  // NCCL would refuse, and warn
    return disabled && *disabled && std::strcmp(disabled, "0") != 0;
  }()};
  uint64_t value = 0;
  if (!comm || !real || !real->ncclCommMemStats || !driver_for_memory() || refused.load(std::memory_order_relaxed)) return {};
  if (real->ncclCommMemStats(comm, ncclStatGpuMemTotal, &value) != ncclSuccess) {
    refused.store(true, std::memory_order_relaxed);
    return {};
  }
  // 0 is what NCCL says of a communicator its memory manager does not track: not a figure.
  return value ? CommMemory{value, trace::kFlagMemoryFromNccl} : CommMemory{};
}

CommMemory free_memory_change(FreeMemoryBefore before, bool taken) noexcept {
  if (before.bytes < 0) return {};
  FreeMemoryBefore after = free_memory_now();
  if (after.bytes < 0) return {};
  int64_t change = taken ? before.bytes - after.bytes : after.bytes - before.bytes;
  return {static_cast<uint64_t>(change > 0 ? change : 0), trace::kFlagMemoryFromFreeChange};
}

}  // namespace ncclwatch
