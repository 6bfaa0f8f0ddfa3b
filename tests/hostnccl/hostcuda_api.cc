// The driver entry points of the libcuda stand-in, with the exact prototypes
// of cuda.h, plus the versioned names cuda.h maps some of them to.
#include "hostcuda_streams.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

// cuda.h #defines these names to their newest versions; the library must
// also export the plain (older) symbols, so declare those ourselves.
#undef cuStreamDestroy
#undef cuEventDestroy
#undef cuEventElapsedTime
#undef cuStreamBeginCapture
#undef cuStreamGetCaptureInfo
#undef cuGetProcAddress
#undef cuGraphInstantiate
#undef cuCtxCreate
#undef cuDevicePrimaryCtxRelease
#undef cuDeviceGetUuid

extern "C" {
CUresult cuStreamDestroy(CUstream hStream);
CUresult cuEventDestroy(CUevent hEvent);
CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult cuStreamBeginCapture(CUstream hStream);
CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                cuuint64_t* id_out);
CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                   cuuint64_t* id_out, CUgraph* graph_out,
                                   const CUgraphNode** dependencies_out, size_t* numDependencies_out);
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);
CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                            char* logBuffer, size_t bufferSize);
CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                               char* logBuffer, size_t bufferSize);
CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);
}

// Contexts are tokens: there is no device state to hold.
struct CUctx_st {
  int device;
};

namespace {

using hostcuda::Worker;

std::atomic<int> g_events_while_capturing{0};
// CUDA-graph capture modes (the rule of cudaStreamCaptureModeGlobal): while any thread captures
// in global mode, a potentially synchronizing call (event query or wait, stream or device wait)
// from a thread not in relaxed mode invalidates those captures and fails with
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; their end then reports CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
std::mutex g_global_captures_mu;
std::map<CUstream, bool> g_global_captures;  // capturing stream -> invalidated

// True when the call must fail (and has invalidated the global captures).
bool unsafe_during_global_capture() {
  if (t_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return false;
  std::lock_guard<std::mutex> g(g_global_captures_mu);
  if (g_global_captures.empty()) return false;
  for (auto& [stream, invalidated] : g_global_captures) invalidated = true;
  return true;
}

// Driver calls the calling thread made to the entry points a profiler like ncclwatch uses (the
// cost its launch path adds, counted by tests/bench).
thread_local long t_driver_calls = 0;
std::atomic<uint64_t> g_capture_ids{0};

// Every context handed out (primary or created), never freed (used during exit too): the calls
// that take a context check theirs is one of them.
// Function-local, so a constructor in another file that asks for a context finds it built.
struct ContextRegistry {
  std::mutex mu;
  std::vector<CUctx_st*> contexts;
};
ContextRegistry& context_registry() {
  static auto* registry = new ContextRegistry;
  return *registry;
}

CUctx_st* new_context(int device) {
  auto& r = context_registry();
  std::lock_guard<std::mutex> g(r.mu);
  return r.contexts.emplace_back(new CUctx_st{device});
}

bool known_context(CUcontext ctx) {
  auto& r = context_registry();
  std::lock_guard<std::mutex> g(r.mu);
  return std::find(r.contexts.begin(), r.contexts.end(), ctx) != r.contexts.end();
}

// One primary context per device.
CUctx_st* primary_context(int device = 0) {
  static std::mutex mu;
  static auto* contexts = new std::vector<CUctx_st*>;
  std::lock_guard<std::mutex> g(mu);
  while (int(contexts->size()) <= device) contexts->push_back(new_context(int(contexts->size())));
  return (*contexts)[size_t(device)];
}

// The newer variants some calls gained under their old base name: a caller with the old prototype
// that gets one reads garbage arguments on a real driver; here it stops loudly, naming the call.
[[noreturn]] void wrong_variant(const char* call, int since) {
  fprintf(stderr, "hostcuda: %s's variant of CUDA %d.%d was called: its caller asked cuGetProcAddress "
                  "at that version or later but calls the older prototype; ask at the older one's version\n",
          call, since / 1000, since % 1000 / 10);
  abort();
}

bool valid_device(CUdevice dev) { return dev >= 0 && dev < hostcuda_device_count(); }

thread_local CUcontext t_current = nullptr;
thread_local bool t_current_set = false;
thread_local std::vector<CUcontext> t_pushed;  // the contexts cuCtxPushCurrent put below

struct Marker {
  std::shared_ptr<EventState> ev;
  uint64_t generation;
};

void run_marker(void* p) {
  auto* m = static_cast<Marker*>(p);
  std::lock_guard<std::mutex> g(m->ev->mu);
  if (m->generation >= m->ev->completed) {
    m->ev->completed = m->generation;
    m->ev->time_ns = hostcuda::now_ns();
  }
  m->ev->cv.notify_all();
}

void release_marker(void* p) { delete static_cast<Marker*>(p); }

struct StreamWait {
  std::shared_ptr<EventState> ev;
  uint64_t generation;
};

void run_stream_wait(void* p) {
  auto* w = static_cast<StreamWait*>(p);
  std::unique_lock<std::mutex> l(w->ev->mu);
  w->ev->cv.wait(l, [&] { return w->ev->completed >= w->generation; });
}

void release_stream_wait(void* p) { delete static_cast<StreamWait*>(p); }

struct HostFunc {
  CUhostFn fn;
  void* data;
};

void run_host_func(void* p) {
  auto* h = static_cast<HostFunc*>(p);
  h->fn(h->data);
}

void release_host_func(void* p) { delete static_cast<HostFunc*>(p); }

}  // namespace

extern "C" {

// ---------------------------------------------------------------- internal

void hostcuda_enqueue(CUstream stream, void (*fn)(void*), void* arg) {
  hostcuda::enqueue(stream, hostcuda_work_ops{fn, nullptr, nullptr}, arg);
}

void hostcuda_enqueue_work(CUstream stream, const hostcuda_work_ops* ops, void* tmpl) {
  hostcuda::enqueue(stream, *ops, tmpl);
}

int hostcuda_is_capturing(CUstream stream) {
  Worker* w = hostcuda::find_worker(stream);
  return w && w->is_capturing() ? 1 : 0;
}

int hostcuda_pending(CUstream stream) {
  Worker* w = hostcuda::find_worker(stream);
  return w ? w->pending() : 0;
}

int hostcuda_events_recorded_while_capturing(void) { return g_events_while_capturing.load(); }

long hostcuda_driver_calls_on_this_thread(void) { return t_driver_calls; }

// 80 GiB per stand-in device, less what the NCCL stand-in holds there.
constexpr long long kDeviceBytes = 80ll << 30;
std::atomic<long long> g_device_used[64];

// HOSTCUDA_OTHERS_MIB: another process on the same device allocates this much each time ours
// takes memory, so that the device's free memory falls by more than ours (the stand-in NVML
// still lists ours alone).
std::atomic<long long> g_others_used[64];

long long others_allocate_bytes() {
  static const long long bytes = [] {
    const char* env = getenv("HOSTCUDA_OTHERS_MIB");
    return env && *env ? atoll(env) << 20 : 0ll;
  }();
  return bytes;
}

void hostcuda_account_device_memory(int device, long long delta) {
  if (device < 0 || device >= 64) return;
  g_device_used[device].fetch_add(delta);
  if (delta > 0) g_others_used[device].fetch_add(others_allocate_bytes());
}

long long hostcuda_device_memory_used(int device) { return device >= 0 && device < 64 ? g_device_used[device].load() : 0; }

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = t_current_set ? t_current : primary_context();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  long long used = c->device < 64 ? g_device_used[c->device].load() + g_others_used[c->device].load() : 0;
  *total = size_t(kDeviceBytes);
  *free = size_t(kDeviceBytes - used);
  return CUDA_SUCCESS;
}

int hostcuda_current_device(void) {
  CUcontext c = t_current_set ? t_current : primary_context();
  return c ? c->device : 0;
}

int hostcuda_device_count(void) {
  const char* env = getenv("HOSTCUDA_DEVICES");
  if (!env || !*env) return 8;
  int n = atoi(env);
  return n < 0 ? 0 : n;
}

// ------------------------------------------------------------ init, devices

CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }

CUresult cuDriverGetVersion(int* driverVersion) {
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = 13000;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = hostcuda_device_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= hostcuda_device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, size_t(len), "hostcuda CPU stand-in %d", int(dev));
  return CUDA_SUCCESS;
}

// Distinct per device and stable across processes, like real UUIDs.
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  memset(uuid->bytes, 0, sizeof uuid->bytes);
  memcpy(uuid->bytes, "hostcuda", 8);
  uuid->bytes[15] = char(dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

// ------------------------------------------------------------------ contexts

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = primary_context(dev);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return valid_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

// Waits for every stream, as the device-wide synchronisation does.
CUresult cuCtxSynchronize(void) {
  if (unsafe_during_global_capture()) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  for (Worker* w : hostcuda::all_workers()) w->wait_idle();
  return CUDA_SUCCESS;
}

// Threads start with the primary context current, as after cudaSetDevice.
CUresult cuCtxGetCurrent(CUcontext* pctx) {
  ++t_driver_calls;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = t_current_set ? t_current : primary_context();
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  ++t_driver_calls;
  t_current = ctx;
  t_current_set = true;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = t_current_set ? t_current : primary_context();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *device = c->device;
  return CUDA_SUCCESS;
}

// CUDA 13's variant, under the same base name, takes the context too. Nothing here calls it by
// that prototype: a call means its caller asked cuGetProcAddress at CUDA 13 for the old one and
// passes garbage for the context (so the shim pins the version it asks at).
CUresult cuCtxGetDevice_v2(CUdevice*, CUcontext) { wrong_variant("cuCtxGetDevice", 13000); }

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (!known_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  t_pushed.push_back(t_current_set ? t_current : primary_context());
  return cuCtxSetCurrent(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (t_pushed.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = t_current_set ? t_current : primary_context();
  CUcontext below = t_pushed.back();
  t_pushed.pop_back();
  return cuCtxSetCurrent(below);
}

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams*, unsigned int, CUdevice dev) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = new_context(dev);
  return cuCtxSetCurrent(*pctx);
}

CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return cuCtxCreate_v4(pctx, nullptr, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return cuCtxCreate_v4(pctx, nullptr, flags, dev);
}

// ------------------------------------------------------------------- streams

CUresult cuStreamCreate(CUstream* phStream, unsigned int) {
  ++t_driver_calls;
  if (!phStream) return CUDA_ERROR_INVALID_VALUE;
  *phStream = hostcuda::new_stream();
  return CUDA_SUCCESS;
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int) {
  return cuStreamCreate(phStream, flags);
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
  if (hostcuda::is_default_stream(hStream)) return CUDA_ERROR_INVALID_HANDLE;
  hostcuda::destroy_stream(hStream);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream) { return cuStreamDestroy_v2(hStream); }

// Streams keep no context here: the caller's current one stands for the stream's.
CUresult cuStreamGetCtx(CUstream, CUcontext* pctx) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = t_current_set ? t_current : primary_context();
  return *pctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// CUDA 12.5's variant, under the same base name, also writes the stream's green context where a
// third argument points; as with cuCtxGetDevice_v2, nothing here calls it by that prototype.
CUresult cuStreamGetCtx_v2(CUstream, CUcontext*, CUgreenCtx*) { wrong_variant("cuStreamGetCtx", 12050); }

// Streams are identified by their handle value (the default stream by 0).
CUresult cuStreamGetId(CUstream hStream, unsigned long long* streamId) {
  if (!streamId) return CUDA_ERROR_INVALID_VALUE;
  *streamId = hostcuda::is_default_stream(hStream) ? 0 : reinterpret_cast<uintptr_t>(hStream);
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream) {
  if (unsafe_during_global_capture()) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  if (Worker* w = hostcuda::find_worker(hStream)) w->wait_idle();  // no worker: nothing queued
  return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream hStream) {
  return hostcuda_pending(hStream) == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int) {
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t gen;
  {
    std::lock_guard<std::mutex> g(hEvent->state->mu);
    gen = hEvent->state->recorded;
  }
  if (gen == 0) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  hostcuda::enqueue(hStream, hostcuda_work_ops{run_stream_wait, nullptr, release_stream_wait},
                    new StreamWait{hEvent->state, gen});
  return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  hostcuda::enqueue(hStream, hostcuda_work_ops{run_host_func, nullptr, release_host_func},
                    new HostFunc{fn, userData});
  return CUDA_SUCCESS;
}

// -------------------------------------------------------------------- events

CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  ++t_driver_calls;
  if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new CUevent_st{std::make_shared<EventState>()};
  e->state->timing = (Flags & CU_EVENT_DISABLE_TIMING) == 0;
  *phEvent = e;
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent) {
  ++t_driver_calls;
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  delete hEvent;  // a queued marker keeps the state alive
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int) {
  ++t_driver_calls;
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  if (hostcuda_is_capturing(hStream)) {
    // Real CUDA would add an event node to the user's graph. Count it so
    // tests can check that ncclwatch never does this.
    g_events_while_capturing.fetch_add(1);
    return CUDA_SUCCESS;
  }
  uint64_t gen;
  {
    std::lock_guard<std::mutex> g(hEvent->state->mu);
    gen = ++hEvent->state->recorded;
  }
  hostcuda::enqueue(hStream, hostcuda_work_ops{run_marker, nullptr, release_marker},
                    new Marker{hEvent->state, gen});
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  return cuEventRecordWithFlags(hEvent, hStream, 0);
}

CUresult cuEventQuery(CUevent hEvent) {
  ++t_driver_calls;
  if (unsafe_during_global_capture()) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> g(hEvent->state->mu);
  return hEvent->state->completed >= hEvent->state->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent) {
  ++t_driver_calls;
  if (unsafe_during_global_capture()) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  EventState& s = *hEvent->state;
  std::unique_lock<std::mutex> l(s.mu);
  s.cv.wait(l, [&] { return s.completed >= s.recorded; });
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  ++t_driver_calls;
  if (!pMilliseconds) return CUDA_ERROR_INVALID_VALUE;
  if (!hStart || !hEnd) return CUDA_ERROR_INVALID_HANDLE;
  int64_t t0, t1;
  {
    std::lock_guard<std::mutex> g(hStart->state->mu);
    if (!hStart->state->timing || hStart->state->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (hStart->state->completed < hStart->state->recorded) return CUDA_ERROR_NOT_READY;
    t0 = hStart->state->time_ns;
  }
  {
    std::lock_guard<std::mutex> g(hEnd->state->mu);
    if (!hEnd->state->timing || hEnd->state->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (hEnd->state->completed < hEnd->state->recorded) return CUDA_ERROR_NOT_READY;
    t1 = hEnd->state->time_ns;
  }
  *pMilliseconds = float(double(t1 - t0) / 1e6);
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

// ------------------------------------------------------------------- capture

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  if (hostcuda::is_default_stream(hStream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!hostcuda::worker_for(hStream)->begin_capture(++g_capture_ids)) return CUDA_ERROR_ILLEGAL_STATE;
  if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
    std::lock_guard<std::mutex> g(g_global_captures_mu);
    g_global_captures[hStream] = false;
  }
  return CUDA_SUCCESS;
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream hStream) {
  return cuStreamBeginCapture_v2(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
  Worker* w = hostcuda::find_worker(hStream);
  if (!w) return CUDA_ERROR_ILLEGAL_STATE;
  bool was = false;
  hostcuda::CapturedList items = w->end_capture(&was);
  if (!was) return CUDA_ERROR_ILLEGAL_STATE;
  bool invalidated = false;
  {
    std::lock_guard<std::mutex> g(g_global_captures_mu);
    auto it = g_global_captures.find(hStream);
    if (it != g_global_captures.end()) {
      invalidated = it->second;
      g_global_captures.erase(it);
    }
  }
  if (invalidated) {
    *phGraph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *phGraph = new CUgraph_st{std::move(items)};
  return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  ++t_driver_calls;
  if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
  *captureStatus = hostcuda_is_capturing(hStream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                  : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                   cuuint64_t* id_out, CUgraph* graph_out,
                                   const CUgraphNode** dependencies_out,
                                   const CUgraphEdgeData** edgeData_out, size_t* numDependencies_out) {
  if (!captureStatus_out) return CUDA_ERROR_INVALID_VALUE;
  Worker* w = hostcuda::find_worker(hStream);
  uint64_t id = w ? w->capture_id() : 0;
  *captureStatus_out = id ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id_out) *id_out = id;
  // The graph under construction is not materialised before EndCapture.
  if (graph_out) *graph_out = nullptr;
  if (dependencies_out) *dependencies_out = nullptr;
  if (edgeData_out) *edgeData_out = nullptr;
  if (numDependencies_out) *numDependencies_out = 0;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                   cuuint64_t* id_out, CUgraph* graph_out,
                                   const CUgraphNode** dependencies_out, size_t* numDependencies_out) {
  return cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                                   nullptr, numDependencies_out);
}

CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                cuuint64_t* id_out) {
  return cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, nullptr, nullptr, nullptr,
                                   nullptr);
}

// -------------------------------------------------------------------- graphs

CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long) {
  if (!phGraphExec || !hGraph) return CUDA_ERROR_INVALID_VALUE;
  *phGraphExec = new CUgraphExec_st{hGraph->items};
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                            char* logBuffer, size_t bufferSize) {
  if (phErrorNode) *phErrorNode = nullptr;
  if (logBuffer && bufferSize) logBuffer[0] = 0;
  return cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
}

CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                               char* logBuffer, size_t bufferSize) {
  return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  if (!hGraphExec) return CUDA_ERROR_INVALID_VALUE;
  hostcuda::launch(hGraphExec->items, hStream);
  return CUDA_SUCCESS;
}

CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo* resultInfo) {
  if (!hGraphExec || !hGraph) return CUDA_ERROR_INVALID_VALUE;
  hGraphExec->items = hGraph->items;
  if (resultInfo) *resultInfo = CUgraphExecUpdateResultInfo{};
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  delete hGraph;
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  delete hGraphExec;
  return CUDA_SUCCESS;
}

// -------------------------------------------------------------------- errors

namespace {
struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

const ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* find_error(CUresult e) {
  for (const auto& t : kErrors)
    if (t.code == e) return &t;
  return nullptr;
}
}  // namespace

CUresult cuGetErrorString(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* t = find_error(error);
  *pStr = t ? t->text : nullptr;
  return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* t = find_error(error);
  *pStr = t ? t->name : nullptr;
  return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ----------------------------------------------------------- cuGetProcAddress

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus);

}  // extern "C"

namespace {

// A versioned entry: cuGetProcAddress hands out the newest one whose
// minimum version does not exceed the caller's, as the real driver does.
struct ProcEntry {
  const char* name;
  int since;
  void* fn;
};

template <class F>
void* fnptr(F* f) {
  return reinterpret_cast<void*>(f);
}

const ProcEntry kProcs[] = {
    {"cuInit", 2000, fnptr(cuInit)},
    {"cuDriverGetVersion", 2020, fnptr(cuDriverGetVersion)},
    {"cuDeviceGetCount", 2000, fnptr(cuDeviceGetCount)},
    {"cuDeviceGet", 2000, fnptr(cuDeviceGet)},
    {"cuDeviceGetName", 2000, fnptr(cuDeviceGetName)},
    {"cuDeviceGetUuid", 9020, fnptr(cuDeviceGetUuid)},
    {"cuDeviceGetUuid", 11040, fnptr(cuDeviceGetUuid_v2)},
    {"cuDevicePrimaryCtxRetain", 7000, fnptr(cuDevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", 7000, fnptr(cuDevicePrimaryCtxRelease)},
    {"cuDevicePrimaryCtxRelease", 11000, fnptr(cuDevicePrimaryCtxRelease_v2)},
    {"cuCtxSynchronize", 2000, fnptr(cuCtxSynchronize)},
    {"cuStreamGetId", 12000, fnptr(cuStreamGetId)},
    {"cuCtxGetCurrent", 4000, fnptr(cuCtxGetCurrent)},
    {"cuMemGetInfo", 3020, fnptr(cuMemGetInfo_v2)},
    {"cuCtxSetCurrent", 4000, fnptr(cuCtxSetCurrent)},
    {"cuCtxGetDevice", 2000, fnptr(cuCtxGetDevice)},
    {"cuCtxGetDevice", 13000, fnptr(cuCtxGetDevice_v2)},
    {"cuCtxPushCurrent", 4000, fnptr(cuCtxPushCurrent_v2)},
    {"cuCtxPopCurrent", 4000, fnptr(cuCtxPopCurrent_v2)},
    {"cuStreamGetCtx", 9020, fnptr(cuStreamGetCtx)},
    {"cuStreamGetCtx", 12050, fnptr(cuStreamGetCtx_v2)},
    {"cuCtxCreate", 2000, fnptr(cuCtxCreate)},
    {"cuCtxCreate", 3020, fnptr(cuCtxCreate_v2)},
    {"cuCtxCreate", 12050, fnptr(cuCtxCreate_v4)},
    {"cuStreamCreate", 2000, fnptr(cuStreamCreate)},
    {"cuStreamCreateWithPriority", 5050, fnptr(cuStreamCreateWithPriority)},
    {"cuStreamDestroy", 2000, fnptr(cuStreamDestroy)},
    {"cuStreamDestroy", 4000, fnptr(cuStreamDestroy_v2)},
    {"cuStreamSynchronize", 2000, fnptr(cuStreamSynchronize)},
    {"cuStreamQuery", 2000, fnptr(cuStreamQuery)},
    {"cuStreamWaitEvent", 3020, fnptr(cuStreamWaitEvent)},
    {"cuLaunchHostFunc", 10000, fnptr(cuLaunchHostFunc)},
    {"cuEventCreate", 2000, fnptr(cuEventCreate)},
    {"cuEventRecord", 2000, fnptr(cuEventRecord)},
    {"cuEventRecordWithFlags", 11010, fnptr(cuEventRecordWithFlags)},
    {"cuEventQuery", 2000, fnptr(cuEventQuery)},
    {"cuEventSynchronize", 2000, fnptr(cuEventSynchronize)},
    {"cuEventElapsedTime", 2000, fnptr(cuEventElapsedTime)},
    {"cuEventElapsedTime", 12080, fnptr(cuEventElapsedTime_v2)},
    {"cuEventDestroy", 2000, fnptr(cuEventDestroy)},
    {"cuEventDestroy", 4000, fnptr(cuEventDestroy_v2)},
    {"cuStreamIsCapturing", 10000, fnptr(cuStreamIsCapturing)},
    {"cuStreamGetCaptureInfo", 10010, fnptr(cuStreamGetCaptureInfo)},
    {"cuStreamGetCaptureInfo", 11030, fnptr(cuStreamGetCaptureInfo_v2)},
    {"cuStreamGetCaptureInfo", 12030, fnptr(cuStreamGetCaptureInfo_v3)},
    {"cuStreamBeginCapture", 10000, fnptr(cuStreamBeginCapture)},
    {"cuStreamBeginCapture", 10010, fnptr(cuStreamBeginCapture_v2)},
    {"cuStreamEndCapture", 10000, fnptr(cuStreamEndCapture)},
    {"cuThreadExchangeStreamCaptureMode", 10010, fnptr(cuThreadExchangeStreamCaptureMode)},
    {"cuGraphInstantiate", 10000, fnptr(cuGraphInstantiate)},
    {"cuGraphInstantiate", 11000, fnptr(cuGraphInstantiate_v2)},
    {"cuGraphInstantiate", 12000, fnptr(cuGraphInstantiateWithFlags)},
    {"cuGraphInstantiateWithFlags", 11040, fnptr(cuGraphInstantiateWithFlags)},
    {"cuGraphLaunch", 10000, fnptr(cuGraphLaunch)},
    {"cuGraphExecUpdate", 12000, fnptr(cuGraphExecUpdate_v2)},
    {"cuGraphDestroy", 10000, fnptr(cuGraphDestroy)},
    {"cuGraphExecDestroy", 10000, fnptr(cuGraphExecDestroy)},
    {"cuGetErrorString", 6000, fnptr(cuGetErrorString)},
    {"cuGetErrorName", 6000, fnptr(cuGetErrorName)},
    {"cuGetProcAddress", 11030, fnptr(cuGetProcAddress)},
    {"cuGetProcAddress", 12000, fnptr(cuGetProcAddress_v2)},
};

}  // namespace

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const ProcEntry* best = nullptr;
  bool known = false;
  for (const auto& e : kProcs) {
    if (strcmp(e.name, symbol) != 0) continue;
    known = true;
    if (e.since <= cudaVersion && (!best || e.since > best->since)) best = &e;
  }
  if (symbolStatus) {
    *symbolStatus = best ? CU_GET_PROC_ADDRESS_SUCCESS
                         : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                 : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  if (!best) return CUDA_ERROR_NOT_FOUND;
  *pfn = best->fn;
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"
