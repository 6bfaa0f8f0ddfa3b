// This process's own GPU memory on the calling thread's device, as the driver accounts it per
// process (what nvidia-smi lists), read through NVML (libnvidia-ml.so.1) where the machine has
// it. The device's free memory moves with every process on the GPU (ranks sharing one, a
// colocated inference engine); this figure moves with ours alone.
#pragma once

#include "gpu/cuda_driver.h"

#include <cstdint>

namespace ncclwatch {

struct ProcessGpuMemory {
  // -1: unknown (no NVML, or this pid is not among the device's processes: NVML lists the host's
  // pids, which a container's pid namespace does not see).
  int64_t used_bytes = -1;
  // Compute processes on the device, this one included; -1: unknown.
  int processes = -1;
};

// Only where a CUDA context is current on the calling thread (the caller checks). Never loads NVML
// where the shim is not in gpu timing mode (the caller's driver_for_memory()).
ProcessGpuMemory process_gpu_memory(const CudaDriver& cu) noexcept;

}  // namespace ncclwatch
