#include "gpu/gpu_clock_refs.h"

#include "process/process.h"

#include <deque>
#include <map>
#include <mutex>
#include <new>

namespace ncclwatch::gpu {
namespace {

struct ContextClock {
  CUstream stream = nullptr;
  std::deque<ClockReference> refs;  // oldest first
};

// Application threads touch this once per context; the collector about once a second.
std::mutex g_clocks_mutex;
std::map<CUcontext, ContextClock>* g_clocks = nullptr;

ContextClock& clock_of(CUcontext ctx) {
  if (!g_clocks) g_clocks = new std::map<CUcontext, ContextClock>();
  return (*g_clocks)[ctx];
}

void record_reference(const CudaDriver& cu, ContextClock& clock) {
  if (!clock.stream && cu.stream_create(&clock.stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return;
  ClockReference ref;
  if (cu.event_create(&ref.event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return;
  int64_t t0 = monotonic_ns();
  // Our own idle stream: waiting here never waits for the application's work.
  if (cu.event_record(ref.event, clock.stream) != CUDA_SUCCESS || cu.event_synchronize(ref.event) != CUDA_SUCCESS) {
    cu.event_destroy(ref.event);
    return;
  }
  int64_t t1 = monotonic_ns();
  ref.host_ns = t0 + (t1 - t0) / 2;
  ref.error_ns = (t1 - t0) / 2;
  clock.refs.push_back(ref);
  // Keep a minute of references: launches pending longer than that lose their timing.
  while (clock.refs.size() > 64) {
    cu.event_destroy(clock.refs.front().event);
    clock.refs.pop_front();
  }
}

// Takes a reference in `ctx`, leaving the calling thread's current context as it found it.
void add_reference(const CudaDriver& cu, CUcontext ctx, ContextClock& clock) {
  CUcontext current = nullptr;
  if (cu.ctx_get_current(&current) != CUDA_SUCCESS) return;
  if (current != ctx && cu.ctx_set_current(ctx) != CUDA_SUCCESS) return;
  record_reference(cu, clock);
  if (current != ctx) cu.ctx_set_current(current);
}

}  // namespace

void ensure_clock_reference(const CudaDriver& cu, CUcontext ctx) noexcept {
  try {
    RelaxedCaptureMode relaxed(cu);  // an application thread waits for an event here
    std::lock_guard lock(g_clocks_mutex);
    ContextClock& clock = clock_of(ctx);
    if (clock.refs.empty()) add_reference(cu, ctx, clock);
  } catch (...) {
    // Silent: nothing is lost; clock_reference_before takes a reference when the collector needs one.
  }
}

bool clock_reference_before(const CudaDriver& cu, CUcontext ctx, int64_t recorded_ns, ClockReference& out) {
  std::lock_guard lock(g_clocks_mutex);
  ContextClock& clock = clock_of(ctx);
  if (clock.refs.empty() || monotonic_ns() - clock.refs.back().host_ns > 1'000'000'000) add_reference(cu, ctx, clock);
  for (auto it = clock.refs.rbegin(); it != clock.refs.rend(); ++it) {
    if (it->host_ns + it->error_ns <= recorded_ns) {
      out = *it;
      return true;
    }
  }
  return false;
}

void clock_refs_after_fork_in_child() noexcept {
  // The references belong to the parent's contexts.
  new (&g_clocks_mutex) std::mutex();
  g_clocks = nullptr;
}

}  // namespace ncclwatch::gpu
