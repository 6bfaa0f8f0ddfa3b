#include "model/memory_findings.h"

#include "model/lifecycle_findings.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

namespace ncclwatch::model {
namespace {

// A change in what the process's communicators hold.
struct MemoryStep {
  int64_t time_ns;
  int64_t bytes;
};

// What `c` added and gave back over its life, in time order: made, then each set-up call, suspend
// and resume (CommInstance::held_over_time), then its release giving back all it held.
void add_steps(const CommInstance& c, std::vector<MemoryStep>& steps) {
  int64_t held = 0;  // each figure is within kMostGpuBytes (the fold's bound)
  for (const HeldPoint& point : c.held_over_time()) {
    steps.push_back({point.time_ns, static_cast<int64_t>(point.held_bytes) - held});
    held = static_cast<int64_t>(point.held_bytes);
  }
  if (c.release_end_ns && !is_leak(c.state)) steps.push_back({c.release_end_ns, -held});
}

// Each (communicator, rank)'s last op start in one process (CLOCK_MONOTONIC of the process).
using LastOps = std::map<std::pair<uint64_t, int32_t>, int64_t>;
LastOps last_ops_of(const ProcessOps* ops) {
  LastOps last;
  if (!ops) return last;
  for (const RankComm& rc : ops->comms)
    if (rc.last_begin) {
      int64_t& at = last[{rc.comm_id, rc.rank}];
      at = std::max(at, wrap_sub(rc.last_begin, ops->clock_offset));
    }
  return last;
}

// When `c` last ran an op in this process (its creation when it ran none), and until when it lived.
void place_idle_stretch(const ProcessTrace& p, const LastOps& last_ops, const CommInstance& c, CommMemory& m) {
  m.idle_from_ns = c.created_ns;
  if (auto it = last_ops.find({c.id, c.rank}); it != last_ops.end()) m.idle_from_ns = std::max(m.idle_from_ns, it->second);
  m.released = c.release_begin_ns && !is_leak(c.state);
  m.idle_until_ns = std::max(m.idle_from_ns, m.released ? c.release_begin_ns : p.last_time_ns);
}

void find_peak(std::vector<MemoryStep>& steps, ProcessMemory& m) {
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
    uint64_t total = held > 0 ? static_cast<uint64_t>(held) : 0;
    if (!m.total_over_time.empty() && m.total_over_time.back().time_ns == s.time_ns) m.total_over_time.back().bytes = total;
    else m.total_over_time.push_back({s.time_ns, total});
  }
}

}  // namespace

double ProcessMemory::peak_after_start_s() const {
  return process ? static_cast<double>(wrap_sub(peak_ns, process->header.start_mono_ns)) / 1e9 : 0;
}

std::vector<ProcessMemory> nccl_memory_by_process(const Job& job, const std::vector<ProcessOps>& ops,
                                                  const IdleSettings& idle) {
  std::vector<ProcessMemory> out;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const ProcessTrace& p = job.processes[i];
    ProcessMemory m;
    m.process = &p;
    m.rank = world_rank(p);
    std::vector<MemoryStep> steps;
    LastOps last_ops = last_ops_of(i < ops.size() ? &ops[i] : nullptr);
    for (const CommInstance& c : p.comms) {
      CommMemory& row = m.comms.emplace_back();
      row.comm = &c;
      row.held = c.held();
      if (!row.held.known()) {
        m.comms.pop_back();
        continue;
      }
      add_steps(c, steps);
      place_idle_stretch(p, last_ops, c, row);
      row.idle = row.held.bytes >= idle.min_bytes && row.idle_s() >= idle.idle_after_s;
      if (row.idle) {
        ++m.idle_comms;
        add_saturated(m.idle_bytes, row.held.bytes);
      }
      if (is_leak(c.state)) {
        ++m.unreleased_comms;
        add_saturated(m.held_at_end_bytes, row.held.bytes);
      }
    }
    if (m.comms.empty()) continue;
    find_peak(steps, m);
    out.push_back(std::move(m));
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
