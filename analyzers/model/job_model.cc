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
  if (end.flags & kFlagMemoryFromNccl) return {end.bytes, "ncclCommMemStats"};
  if (end.flags & kFlagMemoryFromFreeChange) return {end.bytes, "free_memory_change"};
  return {};
}

std::vector<HeldPoint> CommInstance::held_over_time() const {
  std::vector<HeldPoint> points;
  bool any_count = std::any_of(readings.begin(), readings.end(), [](const MemoryReading& r) { return r.held_bytes.has_value(); });
  if (!memory.known() && !any_count) return points;
  uint64_t held = memory.known() ? memory.bytes : 0;
  if (memory.known()) points.push_back({created_ns, held, nullptr});
  for (const MemoryReading& r : readings) {
    if (r.held_bytes) {
      held = *r.held_bytes;
    } else if (r.taken_bytes && (*r.taken_bytes > 0 || r.suspends_or_resumes())) {
      int64_t taken = *r.taken_bytes;  // within kMostGpuBytes (the fold's bound)
      held = taken >= 0 ? held + static_cast<uint64_t>(taken) : held - std::min(held, static_cast<uint64_t>(-taken));
    } else if (!memory.known()) {
      continue;  // no figure to move yet
    }
    points.push_back({r.time_ns, held, &r});
  }
  return points;
}

CommMemoryFigure CommInstance::held() const {
  std::vector<HeldPoint> points = held_over_time();
  if (points.empty()) return {};
  const MemoryReading* last = points.back().after;
  const char* from = !last ? memory.from : last->held_bytes ? "ncclCommMemStats" : "free_memory_change";
  return {points.back().held_bytes, from};
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

std::map<std::string, std::string> ProcessTrace::nccl_env() const {
  using trace::process_record::kEnvPrefix;
  const std::string nccl_prefix = std::string(kEnvPrefix) + "NCCL_";
  std::map<std::string, std::string> env;
  for (const auto& [key, value] : strings)
    if (key.starts_with(nccl_prefix)) env.emplace(key.substr(kEnvPrefix.size()), value);
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
