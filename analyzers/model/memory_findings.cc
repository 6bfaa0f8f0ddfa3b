#include "model/memory_findings.h"

#include "model/lifecycle_findings.h"

#include <algorithm>
#include <cstdint>

namespace ncclwatch::model {
namespace {

// A change in what the process's communicators hold.
struct MemoryStep {
  int64_t time_ns;
  int64_t bytes;
};

// What `c` added and gave back over its life, in time order: made, then each set-up call (NCCL's
// count moving, or the free memory it took), then its release giving back all it held.
void add_steps(const CommInstance& c, std::vector<MemoryStep>& steps) {
  if (!c.held().known()) return;
  int64_t held = c.memory.known() ? static_cast<int64_t>(c.memory.bytes) : 0;
  steps.push_back({c.created_ns, held});
  for (const MemoryReading& r : c.set_up) {
    int64_t now = r.held_bytes ? static_cast<int64_t>(*r.held_bytes) : held + std::max<int64_t>(r.taken_bytes.value_or(0), 0);
    steps.push_back({r.time_ns, now - held});
    held = now;
  }
  if (c.release_end_ns && !is_leak(c.state)) steps.push_back({c.release_end_ns, -held});
}

}  // namespace

std::vector<ProcessMemory> nccl_memory_by_process(const Job& job) {
  std::vector<ProcessMemory> out;
  for (const ProcessTrace& p : job.processes) {
    ProcessMemory m{&p, world_rank(p)};
    std::vector<MemoryStep> steps;
    for (const CommInstance& c : p.comms) {
      size_t before = steps.size();
      add_steps(c, steps);
      if (steps.size() == before) continue;
      ++m.measured_comms;
      if (is_leak(c.state)) {
        ++m.unreleased_comms;
        if (__builtin_add_overflow(m.held_at_end_bytes, c.held().bytes, &m.held_at_end_bytes)) m.held_at_end_bytes = UINT64_MAX;
      }
    }
    if (!m.measured_comms) continue;
    // Releases before takings at the same instant: the peak is what was held at once.
    std::stable_sort(steps.begin(), steps.end(), [](const MemoryStep& a, const MemoryStep& b) {
      return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.bytes < b.bytes;
    });
    int64_t held = 0;  // each step is within kMostGpuBytes (the fold's bound): saturate the sum
    for (const MemoryStep& s : steps) {
      if (__builtin_add_overflow(held, s.bytes, &held)) held = s.bytes > 0 ? INT64_MAX : INT64_MIN;
      if (held > static_cast<int64_t>(m.peak_bytes)) {
        m.peak_bytes = static_cast<uint64_t>(held);
        m.peak_ns = s.time_ns;
      }
    }
    out.push_back(m);
  }
  return out;
}

const ProcessMemory* largest_peak(const std::vector<ProcessMemory>& memory) {
  const ProcessMemory* best = nullptr;
  for (const ProcessMemory& m : memory)
    if (!best || m.peak_bytes > best->peak_bytes) best = &m;
  return best;
}

}  // namespace ncclwatch::model
