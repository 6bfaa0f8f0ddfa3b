#include "gpu/cuda_driver.h"

#include "process/process.h"
#include "resolve/resolve.h"

#include <dlfcn.h>

#include <mutex>

namespace ncclwatch {
namespace {

// cuda.h maps several names to versioned symbols (cuEventElapsedTime → _v2 ...); asking the
// driver through cuGetProcAddress by base name and our header's CUDA_VERSION gets the variant
// that matches the prototypes we compiled against, except where a newer CUDA added a variant with
// more arguments under the same base name while cuda.h keeps the old prototype for the plain name
// (cuCtxGetDevice at 13.0, cuStreamGetCtx at 12.5): those are asked for at the version of the
// prototype we call, else the driver hands out the newer one and reads garbage arguments.
using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

constexpr int kCtxGetDeviceOneArgument = 2000;       // PFN_cuCtxGetDevice_v2000; _v13000 takes a context
constexpr int kStreamGetCtxWithoutGreenCtx = 9020;   // PFN_cuStreamGetCtx_v9020; _v12050 adds a green context

template <class Fn>
bool resolve(GetProcAddressFn get, void* lib, const char* name, const char* symbol, Fn& out,
             int version = CUDA_VERSION) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (get && get(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS && fn) {
    out = reinterpret_cast<Fn>(fn);
    return true;
  }
  fn = real_dlsym(lib, symbol);
  out = reinterpret_cast<Fn>(fn);
  return fn != nullptr;
}

// cuStreamGetCaptureInfo by the version that fixes its arguments: the newest the driver has.
template <class Fn> Fn capture_info_of_version(GetProcAddressFn get, int version) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (!get || get("cuStreamGetCaptureInfo", &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS)
    return nullptr;
  return reinterpret_cast<Fn>(fn);
}

void resolve_capture_info(GetProcAddressFn get, void* lib, CudaDriver& d) {
  d.capture_info_v3 = capture_info_of_version<CudaDriver::GetCaptureInfoV3>(get, 12030);
  if (d.capture_info_v3) return;
  d.capture_info_v2 = capture_info_of_version<CudaDriver::GetCaptureInfoV2>(get, 11030);
  if (d.capture_info_v2) return;
  d.capture_info_v1 = reinterpret_cast<CudaDriver::GetCaptureInfoV1>(real_dlsym(lib, "cuStreamGetCaptureInfo"));
}

#define NCCLWATCH_STR2(x) #x
#define NCCLWATCH_STR(x) NCCLWATCH_STR2(x)

const CudaDriver* load() {
  // The application's own copy if it is loaded; else load it (only used for timing).
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  auto get = reinterpret_cast<GetProcAddressFn>(real_dlsym(lib, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(real_dlsym(lib, "cuInit"));
  if (!init || init(0) != CUDA_SUCCESS) return nullptr;
  auto* d = new CudaDriver();
  // The second name is the symbol cuda.h binds the call to, for drivers without cuGetProcAddress.
  bool ok = resolve(get, lib, "cuCtxGetCurrent", "cuCtxGetCurrent", d->ctx_get_current) &&
            resolve(get, lib, "cuCtxSetCurrent", "cuCtxSetCurrent", d->ctx_set_current) &&
            resolve(get, lib, "cuEventCreate", "cuEventCreate", d->event_create) &&
            resolve(get, lib, "cuEventRecord", NCCLWATCH_STR(cuEventRecord), d->event_record) &&
            resolve(get, lib, "cuEventQuery", "cuEventQuery", d->event_query) &&
            resolve(get, lib, "cuEventSynchronize", "cuEventSynchronize", d->event_synchronize) &&
            resolve(get, lib, "cuEventElapsedTime", NCCLWATCH_STR(cuEventElapsedTime), d->event_elapsed) &&
            resolve(get, lib, "cuEventDestroy", NCCLWATCH_STR(cuEventDestroy), d->event_destroy) &&
            resolve(get, lib, "cuStreamIsCapturing", NCCLWATCH_STR(cuStreamIsCapturing), d->stream_is_capturing) &&
            resolve(get, lib, "cuStreamCreate", "cuStreamCreate", d->stream_create);
  if (!ok) {
    delete d;
    return nullptr;
  }
  if (!resolve(get, lib, "cuStreamGetCtx", NCCLWATCH_STR(cuStreamGetCtx), d->stream_get_ctx,
               kStreamGetCtxWithoutGreenCtx) ||
      !resolve(get, lib, "cuCtxPushCurrent", NCCLWATCH_STR(cuCtxPushCurrent), d->ctx_push_current) ||
      !resolve(get, lib, "cuCtxPopCurrent", NCCLWATCH_STR(cuCtxPopCurrent), d->ctx_pop_current)) {
    d->stream_get_ctx = nullptr;  // all three or none
  }
  if (!resolve(get, lib, "cuMemGetInfo", NCCLWATCH_STR(cuMemGetInfo), d->mem_get_info)) d->mem_get_info = nullptr;
  if (!resolve(get, lib, "cuCtxGetDevice", "cuCtxGetDevice", d->ctx_get_device, kCtxGetDeviceOneArgument) ||
      !resolve(get, lib, "cuDeviceGetUuid", NCCLWATCH_STR(cuDeviceGetUuid), d->device_get_uuid))
    d->ctx_get_device = nullptr;  // both or neither
  if (!resolve(get, lib, "cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode",
               d->exchange_capture_mode))
    d->exchange_capture_mode = nullptr;
  resolve_capture_info(get, lib, *d);
  return d;
}

}  // namespace

const CudaDriver* cuda_driver() noexcept {
  static const CudaDriver* driver = [] {
    try {
      return load();
    } catch (...) {
      notice_once(Notice::kNoCudaDriver,
                  "ncclwatch: an internal error while loading the CUDA driver; timing on the host");
      return static_cast<const CudaDriver*>(nullptr);
    }
  }();
  return driver;
}

uint64_t capture_id_of(const CudaDriver& cu, uint64_t stream) noexcept {
  auto s = reinterpret_cast<CUstream>(stream);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUresult r = CUDA_ERROR_NOT_SUPPORTED;
  if (cu.capture_info_v3) r = cu.capture_info_v3(s, &status, &id, nullptr, nullptr, nullptr, nullptr);
  else if (cu.capture_info_v2) r = cu.capture_info_v2(s, &status, &id, nullptr, nullptr, nullptr);
  else if (cu.capture_info_v1) r = cu.capture_info_v1(s, &status, &id);
  // An invalidated capture is still open (its EndCapture will fail): its ops belong to it.
  return r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE ? id : 0;
}

}  // namespace ncclwatch
