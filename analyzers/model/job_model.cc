#include "model/job_model.h"

#include <ncclwatch/trace_strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string.h>  // sigabbrev_np
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <fmt/format.h>

namespace ncclwatch::model {

using namespace trace;

CommMemoryFigure CommMemoryFigure::of(const ApiEvent& end) {
  if (end.bytes > kMostGpuBytes) return {};
  bool shared = end.flags & kFlagMemorySharedDevice;
  if (end.flags & kFlagMemoryFromNccl) return {end.bytes, "ncclCommMemStats", shared};
  if (end.flags & kFlagMemoryOwnProcess) return {end.bytes, "process_memory", false};
  if (end.flags & kFlagMemoryFromFreeChange) return {end.bytes, "free_memory_change", shared};
  return {};
}

namespace {

uint64_t moved_by(uint64_t held, int64_t taken) {  // taken within kMostGpuBytes (the fold's bound)
  return taken >= 0 ? held + static_cast<uint64_t>(taken) : held - std::min(held, static_cast<uint64_t>(-taken));
}

}  // namespace

// The shim's rule (shim/gpu/comm_memory.cc, held_after): NCCL's count plus what the count has
// missed so far, or where the call's own change says more, what it held plus that change (NCCL
// 2.29+ counts only its memory manager's buffers, not the connections made at first use). A
// set-up call's fall of memory is not a release: only a suspend or resume moves it down.
std::vector<HeldPoint> CommInstance::held_over_time() const {
  std::vector<HeldPoint> points;
  bool any_count = std::any_of(readings.begin(), readings.end(), [](const MemoryReading& r) { return r.held_bytes.has_value(); });
  if (!memory.known() && !any_count) return points;
  uint64_t held = memory.known() ? memory.bytes : 0;
  std::optional<uint64_t> last_count;
  if (memory.known()) {
    points.push_back({created_ns, held, nullptr, memory.from});
    if (std::string_view(memory.from) == "ncclCommMemStats") last_count = held;
  }
  for (const MemoryReading& r : readings) {
    bool own = r.taken_is_own() && (*r.taken_bytes > 0 || r.suspends_or_resumes());
    uint64_t by_change = own ? moved_by(held, *r.taken_bytes) : held;
    const char* by_change_from = r.taken_by_process ? "process_memory" : "free_memory_change";
    if (r.held_bytes) {
      uint64_t missed = held - std::min(held, last_count.value_or(held));
      bool change_says_more = own && by_change > *r.held_bytes;
      held = own ? std::max(*r.held_bytes, by_change) : *r.held_bytes + missed;
      last_count = r.held_bytes;
      points.push_back({r.time_ns, held, &r, change_says_more || missed ? by_change_from : "ncclCommMemStats"});
    } else if (own) {
      held = by_change;
      points.push_back({r.time_ns, held, &r, by_change_from});
    } else if (memory.known()) {
      points.push_back({r.time_ns, held, &r, points.back().from});
    }
  }
  return points;
}

CommMemoryFigure CommInstance::held() const {
  std::vector<HeldPoint> points = held_over_time();
  if (points.empty()) return {};
  bool shared = memory.shared_device ||
                std::any_of(readings.begin(), readings.end(), [](const MemoryReading& r) { return r.shared_device; });
  return {points.back().held_bytes, points.back().from, shared};
}

size_t CommInstance::set_up_calls() const {
  return static_cast<size_t>(std::count_if(readings.begin(), readings.end(), [](const MemoryReading& r) { return !r.suspends_or_resumes(); }));
}

bool CommInstance::suspended() const {
  for (auto it = readings.rbegin(); it != readings.rend(); ++it)
    if (it->suspends_or_resumes()) return it->suspends();
  return false;
}

std::string hex_id(uint64_t id) { return fmt::format("{:016x}", id); }

std::map<std::string, std::string> ProcessTrace::environment() const {
  using trace::process_record::kEnvPrefix;
  std::map<std::string, std::string> env;
  for (const auto& [key, value] : strings)
    if (key.starts_with(kEnvPrefix)) env.emplace(key.substr(kEnvPrefix.size()), value);
  return env;
}

std::map<std::string, std::string> ProcessTrace::nccl_env() const {
  std::map<std::string, std::string> env = environment();
  std::erase_if(env, [](const auto& entry) { return !entry.first.starts_with("NCCL_"); });
  return env;
}

std::string ProcessTrace::nccl_version() const {
  for (const NcclLibrary& lib : libraries)
    if (lib.attached()) return lib.version;
  return {};
}

std::string ProcessTrace::library_path(const CommInstance& c) const {
  int id = c.library ? c.library : 1;
  for (const NcclLibrary& lib : libraries)
    if (lib.id == id) return lib.path;
  return {};
}

std::string nccl_version_text(const std::string& code) {
  char* end = nullptr;
  long value = std::strtol(code.c_str(), &end, 10);
  if (code.empty() || *end != '\0' || value <= 0) return "unknown version";
  if (value >= 20900) return fmt::format("{}.{}.{}", value / 10000, value % 10000 / 100, value % 100);
  return fmt::format("{}.{}.{}", value / 1000, value % 1000 / 100, value % 100);
}

std::vector<UntracedCopy> untraced_copies(const Job& job) {
  std::vector<UntracedCopy> out;
  for (const ProcessTrace& p : job.processes) {
    for (const NcclLibrary& lib : p.libraries) {
      if (!lib.not_traced()) continue;
      auto it = std::find_if(out.begin(), out.end(), [&](const UntracedCopy& u) { return u.path == lib.path && u.reason == lib.reason; });
      if (it == out.end()) out.push_back({lib.path, lib.reason, 1});
      else ++it->processes;
    }
  }
  return out;
}

bool ProcessTrace::has_several_libraries() const {
  return std::count_if(libraries.begin(), libraries.end(), [](const NcclLibrary& l) { return l.attached(); }) > 1;
}

}  // namespace ncclwatch::model
