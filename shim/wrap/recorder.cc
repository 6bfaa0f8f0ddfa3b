#include "wrap/recorder.h"

#include "exit/exit.h"
#include "process/process.h"
#include "profiler/profiler.h"
#include "resolve/resolve.h"
#include "trace/trace.h"

#include <atomic>
#include <cstring>
#include <string>

namespace ncclwatch {

namespace {
std::atomic<uint64_t> g_next_call_id{1};
}  // namespace

uint32_t current_tid() noexcept {
  if (t_thread.tid == 0) t_thread.tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_thread.tid;
}

bool recording() noexcept {
  // Hot path: once attached, one load (a forked child starts unattached and attaches anew).
  if (process_attached()) return true;
  if (!config().record || another_shim_copy_traces()) return false;
  attach_process();
  set_up_profiler_plugin();
  return true;
}

ncclResult_t unavailable(const RealNccl* real, const char* name) noexcept {
  if (!real) return ncclSystemError;  // resolver already said why
  std::string text = std::string("ncclwatch: the loaded NCCL (") + real->path + ") has no " + name +
                     "; the call is answered with ncclInvalidUsage";
  notice_once(Notice::kMissingFunction, text.c_str());
  return ncclInvalidUsage;
}

void report_internal_error() noexcept {
  notice_once(Notice::kInternalError,
              "ncclwatch: an internal error stopped one record; NCCL calls are unaffected, some records are missing");
}

uint64_t next_call_id() noexcept {
  // Relaxed: ids only need to be unique, not ordered with other memory.
  return g_next_call_id.fetch_add(1, std::memory_order_relaxed);
}

trace::ApiEvent make_event(uint64_t call_id, trace::Api api) noexcept {
  trace::ApiEvent e{};
  e.call_id = call_id;
  e.time_ns = monotonic_ns();
  e.tid = current_tid();
  e.api = static_cast<uint16_t>(api);
  e.rank = -1;
  e.nranks = -1;
  e.device = -1;
  e.library = current_library_id();
  if (program_exiting()) e.flags |= trace::kFlagDuringExit;
  return e;
}

void emit_api_event(trace::RecordType type, const trace::ApiEvent& event, const CallSite* site,
                    std::string_view comm_name) noexcept {
  uint16_t nframes = site ? static_cast<uint16_t>(site->nframes) : 0;
  uint16_t name_len = static_cast<uint16_t>(std::min<size_t>(comm_name.size(), 256));
  uint16_t site_len = site ? static_cast<uint16_t>(strnlen(site->summary, sizeof(site->summary))) : 0;
  uint16_t python_len = site ? static_cast<uint16_t>(strnlen(site->python, sizeof(site->python))) : 0;
  size_t frames_bytes = size_t{nframes} * sizeof(uint64_t);
  RecordSlot slot =
      reserve_record(trace::padded_size(sizeof(trace::ApiEvent) + frames_bytes + name_len + site_len + python_len));
  if (!slot) return;
  auto* out = slot.as<trace::ApiEvent>();
  // Everything after the record header; the header belongs to the writer's commit protocol.
  std::memcpy(reinterpret_cast<std::byte*>(out) + sizeof(trace::RecordHeader),
              reinterpret_cast<const std::byte*>(&event) + sizeof(trace::RecordHeader),
              sizeof(trace::ApiEvent) - sizeof(trace::RecordHeader));
  out->nframes = nframes;
  out->name_len = name_len;
  out->site_len = site_len;
  out->python_site_len = python_len;
  std::byte* tail = slot.bytes() + sizeof(trace::ApiEvent);
  if (nframes) std::memcpy(tail, site->frames, frames_bytes);
  if (name_len) std::memcpy(tail + frames_bytes, comm_name.data(), name_len);
  if (site_len) std::memcpy(tail + frames_bytes + name_len, site->summary, site_len);
  if (python_len) std::memcpy(tail + frames_bytes + name_len + site_len, site->python, python_len);
  slot.commit(type);
}

}  // namespace ncclwatch
