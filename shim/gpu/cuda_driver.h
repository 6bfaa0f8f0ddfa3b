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
  // Optional: the device's free memory, for what a communicator holds (comm_memory.h).
  decltype(&::cuMemGetInfo) mem_get_info = nullptr;
  // Optional: the current context's device and its UUID, to find this process's own GPU memory
  // through NVML (process_memory.h).
  decltype(&::cuCtxGetDevice) ctx_get_device = nullptr;
  decltype(&::cuDeviceGetUuid) device_get_uuid = nullptr;
  // Optional: this thread's interaction with other threads' CUDA-graph captures (see below).
  decltype(&::cuThreadExchangeStreamCaptureMode) exchange_capture_mode = nullptr;
  // Optional: which capture a stream is part of. The oldest form (CUDA 10.1) answers the status
  // and id, all the shim asks; newer drivers may drop it, so it is resolved by version.
  using GetCaptureInfoV1 = CUresult (*)(CUstream, CUstreamCaptureStatus*, cuuint64_t*);
  using GetCaptureInfoV2 = CUresult (*)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                                        const CUgraphNode**, size_t*);
  using GetCaptureInfoV3 = CUresult (*)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                                        const CUgraphNode**, const CUgraphEdgeData**, size_t*);
  GetCaptureInfoV3 capture_info_v3 = nullptr;
  GetCaptureInfoV2 capture_info_v2 = nullptr;
  GetCaptureInfoV1 capture_info_v1 = nullptr;
};

// While another thread captures a CUDA graph in global mode (PyTorch's default), a call that may
// synchronize (event query or wait) from any thread not in relaxed mode invalidates that capture:
// the application's next captured call fails, and the driver may crash (measured on an H200 with
// the collector polling during a capture: 31 crashes in 40 runs). The collector thread runs in
// relaxed mode throughout; application threads enter it around such calls of ours.
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const CudaDriver& cu) noexcept : cu_(cu) {
    swapped_ = cu.exchange_capture_mode && cu.exchange_capture_mode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (swapped_) cu_.exchange_capture_mode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  const CudaDriver& cu_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;  // the thread's own mode while swapped
  bool swapped_ = false;
};

// The driver, or nullptr when no usable libcuda.so.1 is present (then timing falls back to host).
const CudaDriver* cuda_driver() noexcept;

// The id of the capture `stream` is part of, 0 when it is not capturing (or the driver cannot say).
uint64_t capture_id_of(const CudaDriver& cu, uint64_t stream) noexcept;

}  // namespace ncclwatch
