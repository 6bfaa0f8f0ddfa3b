#include "gpu/process_memory.h"

#include "resolve/resolve.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace ncclwatch {
namespace {

// NVML's ABI as the shim uses it (nvml.h is not part of the CUDA toolkit's headers everywhere):
// nvmlProcessInfo_v2_t, the element of nvmlDeviceGetComputeRunningProcesses_v2 and _v3.
using NvmlDevice = void*;
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ull;
constexpr int kMaxDevices = 64;
constexpr unsigned kMaxListed = 64;  // more processes than this on one GPU: used_bytes unknown

struct Nvml {
  int (*device_by_uuid)(const char*, NvmlDevice*) = nullptr;
  int (*compute_processes)(NvmlDevice, unsigned*, NvmlProcessInfo*) = nullptr;
};

const Nvml* load_nvml() noexcept {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);  // the application's, if loaded
  if (!lib) lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  auto init = reinterpret_cast<int (*)()>(real_dlsym(lib, "nvmlInit_v2"));
  static Nvml nvml;
  nvml.device_by_uuid = reinterpret_cast<decltype(nvml.device_by_uuid)>(real_dlsym(lib, "nvmlDeviceGetHandleByUUID"));
  void* list = real_dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!list) list = real_dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  nvml.compute_processes = reinterpret_cast<decltype(nvml.compute_processes)>(list);
  // nvmlInit is counted: the application's own init and shutdown are not disturbed by ours.
  if (!init || !nvml.device_by_uuid || !nvml.compute_processes || init() != kNvmlSuccess) return nullptr;
  return &nvml;
}

const Nvml* nvml() noexcept {
  static const Nvml* loaded = load_nvml();
  return loaded;
}

// NVML names a device by the UUID CUDA gives it, whatever CUDA_VISIBLE_DEVICES renumbered.
NvmlDevice device_of_current_context(const CudaDriver& cu, const Nvml& lib) noexcept {
  static std::atomic<NvmlDevice> handles[kMaxDevices];
  CUdevice device = -1;
  if (!cu.ctx_get_device || cu.ctx_get_device(&device) != CUDA_SUCCESS || device < 0 || device >= kMaxDevices)
    return nullptr;
  if (NvmlDevice known = handles[device].load(std::memory_order_acquire)) return known;
  CUuuid uuid{};
  if (!cu.device_get_uuid || cu.device_get_uuid(&uuid, device) != CUDA_SUCCESS) return nullptr;
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[48];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  NvmlDevice handle = nullptr;
  if (lib.device_by_uuid(text, &handle) != kNvmlSuccess) return nullptr;
  handles[device].store(handle, std::memory_order_release);
  return handle;
}

}  // namespace

ProcessGpuMemory process_gpu_memory(const CudaDriver& cu) noexcept {
  const Nvml* lib = nvml();
  NvmlDevice device = lib ? device_of_current_context(cu, *lib) : nullptr;
  if (!device) return {};
  NvmlProcessInfo listed[kMaxListed];
  unsigned count = kMaxListed;
  int status = lib->compute_processes(device, &count, listed);
  if (status == kNvmlInsufficientSize) return {-1, static_cast<int>(count)};
  if (status != kNvmlSuccess || count > kMaxListed) return {};
  ProcessGpuMemory memory{-1, static_cast<int>(count)};
  unsigned pid = static_cast<unsigned>(getpid());
  for (unsigned i = 0; i < count; ++i)
    if (listed[i].pid == pid && listed[i].used_gpu_memory != kNvmlValueNotAvailable)
      memory.used_bytes = static_cast<int64_t>(listed[i].used_gpu_memory);
  return memory;
}

}  // namespace ncclwatch
