// The CUDA driver entry points the shim uses for GPU timing, loaded at run time from
// libcuda.so.1 (the shim never links the CUDA runtime or driver).
#pragma once

#include <cuda.h>

namespace ncclwatch {

struct CudaDriver {
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;
  decltype(&::cuStreamIsCapturing) stream_is_capturing = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  // Optional (absent in minimal drivers): which context a stream belongs to, and switching to it
  // to create events there when one thread drives several GPUs.
  decltype(&::cuStreamGetCtx) stream_get_ctx = nullptr;
  decltype(&::cuCtxPushCurrent) ctx_push_current = nullptr;
  decltype(&::cuCtxPopCurrent) ctx_pop_current = nullptr;
};

// The driver, or nullptr when no usable libcuda.so.1 is present (then timing falls back to host).
const CudaDriver* cuda_driver() noexcept;

}  // namespace ncclwatch
