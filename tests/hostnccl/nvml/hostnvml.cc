// A CPU stand-in for NVML (libnvidia-ml.so.1), the part the shim asks: each stand-in device's
// compute processes and their GPU memory. This process is listed with what the NCCL stand-in
// holds on the device (hostcuda_device_memory_used), as the driver accounts a process's own.
//   HOSTNVML_OTHER_PROCESSES=N  N more processes on every device (1 GiB each), as when ranks share
//                               a GPU or an inference engine sits beside the job
//   HOSTNVML_PID_HIDDEN=1       this process under another pid, as NVML lists the host's pids to a
//                               container with its own pid namespace
#include "hostcuda.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern "C" {

typedef void* nvmlDevice_t;
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr int kSuccess = 0, kInvalidArgument = 2, kUninitialized = 1, kInsufficientSize = 7, kNotFound = 6;

namespace {
bool g_initialized = false;

int env_int(const char* name) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : 0;
}
}  // namespace

int nvmlInit_v2() {
  g_initialized = true;
  return kSuccess;
}

int nvmlShutdown() { return kSuccess; }

// The stand-in CUDA's UUIDs: "hostcuda", six zero bytes and the device number (cuDeviceGetUuid).
int nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!g_initialized) return kUninitialized;
  if (!uuid || !device) return kInvalidArgument;
  const char* prefix = "GPU-686f7374-6375-6461-0000-0000000000";
  if (strncmp(uuid, prefix, strlen(prefix)) != 0 || strlen(uuid) != strlen(prefix) + 2) return kNotFound;
  int number = int(strtol(uuid + strlen(prefix), nullptr, 16));
  if (number >= hostcuda_device_count()) return kNotFound;
  *device = reinterpret_cast<nvmlDevice_t>(static_cast<intptr_t>(number + 1));
  return kSuccess;
}

int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  if (!g_initialized) return kUninitialized;
  if (!device || !count) return kInvalidArgument;
  int number = int(reinterpret_cast<intptr_t>(device)) - 1;
  unsigned others = unsigned(env_int("HOSTNVML_OTHER_PROCESSES"));
  unsigned listed = 1 + others;
  if (*count < listed) {
    *count = listed;
    return kInsufficientSize;
  }
  unsigned pid = unsigned(getpid());
  infos[0] = {env_int("HOSTNVML_PID_HIDDEN") ? pid + 100000u : pid, (unsigned long long)hostcuda_device_memory_used(number), 0, 0};
  for (unsigned i = 0; i < others; ++i) infos[1 + i] = {4000000u + i, 1ull << 30, 0, 0};
  *count = listed;
  return kSuccess;
}

}  // extern "C"
