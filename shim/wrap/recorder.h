// The pieces every wrapper uses: the re-entrancy guard, call ids and writing ApiEvents.
// Wrapper shape (lifecycle.cc, resources.cc):
//   resolve → guard → record begin → call the real function → record end → return its answer.
#pragma once

#include "process/process.h"
#include "resolve/resolve.h"
#include "site/site.h"

#include <ncclwatch/trace_format.h>

#include <cstdint>
#include <string_view>

namespace ncclwatch {

// Marks the calling thread as inside an NCCL wrapper. NCCL may call its own public API through
// the PLT (e.g. ncclCommInitAll → ncclGroupStart); such nested calls are forwarded unrecorded.
class ReentryGuard {
 public:
  ReentryGuard() noexcept : outermost_(t_thread.nccl_call_depth++ == 0) {}
  ~ReentryGuard() { --t_thread.nccl_call_depth; }
  ReentryGuard(const ReentryGuard&) = delete;
  ReentryGuard& operator=(const ReentryGuard&) = delete;
  bool outermost() const noexcept { return outermost_; }

 private:
  bool outermost_;
};

// True when calls should be recorded (the shim is not disabled). Also attaches the process:
// exit hooks and signal handlers are installed at the first NCCL call, not before.
bool recording() noexcept;

// The answer for a call we cannot forward: no NCCL loaded, or this NCCL lacks the function.
ncclResult_t unavailable(const RealNccl* real, const char* name) noexcept;

uint64_t next_call_id() noexcept;

// Kernel thread id, cached per thread (a forked child's thread reads it anew).
uint32_t current_tid() noexcept;

// Writes one ApiEvent (header fields of `event` are filled here). `site` may be null; its frames
// and summary go into the record.
void emit_api_event(trace::RecordType type, const trace::ApiEvent& event, const CallSite* site = nullptr,
                    std::string_view comm_name = {}) noexcept;

// An ApiEvent with the common fields set: call id, time, thread, api.
trace::ApiEvent make_event(uint64_t call_id, trace::Api api) noexcept;

// Runs recording code; whatever it throws is swallowed (and said once) so the application's call
// still goes through to NCCL.
void report_internal_error() noexcept;
template <class F> void safely(F&& recording_step) noexcept {
  try {
    recording_step();
  } catch (...) {
    report_internal_error();
  }
}

// The opening every wrapper shares: find the real function (or answer for a missing one), and
// forward unrecorded when nested inside another NCCL call or when recording is off.
#define NCCLWATCH_FORWARD_UNRECORDED(name, ...)              \
  const RealNccl* real = real_nccl();                        \
  if (!real || !real->name) return unavailable(real, #name); \
  ReentryGuard guard;                                        \
  if (!guard.outermost() || !recording()) return real->name(__VA_ARGS__);

inline uint64_t as_u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

// The trace's readers tell results apart by trace::succeeded_or_pending: its values are nccl.h's.
static_assert(trace::kNcclSuccess == ncclSuccess && trace::kNcclInProgress == ncclInProgress);

}  // namespace ncclwatch
