#include "model/op_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace ncclwatch::model {
namespace {

std::string clock_text(int64_t wall_ns) {
  std::time_t t = static_cast<std::time_t>(wall_ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:02}:{:02}:{:02}.{}", tm.tm_hour, tm.tm_min, tm.tm_sec, wall_ns % 1000000000 / 100000000);
}

std::string duration_text(double s) {
  if (s >= 7200) return fmt::format("{:.1f} h", s / 3600);
  if (s >= 120) return fmt::format("{:.1f} min", s / 60);
  if (s >= 1) return fmt::format("{:.1f} s", s);
  return fmt::format("{:.0f} ms", s * 1e3);
}

// 412003118 -> "412,003,118"
std::string thousands(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

OpWindow op_window(const JobAnalysis& a) {
  OpWindow w;
  for (size_t i = 0; i < a.job.processes.size(); ++i) {
    const ProcessTrace& p = a.job.processes[i];
    const ProcessOps& ops = a.ops[i];
    w.total_calls += ops.total_calls;
    w.kept_ops += ops.op_records;
    int64_t start = wrap_add(p.header.start_mono_ns, ops.clock_offset);
    if (!w.run_begin_ns || start < w.run_begin_ns) w.run_begin_ns = start;
    int64_t first = 0, last = 0;
    for (const RankComm& c : ops.comms) {
      if (c.first_begin && (!first || c.first_begin < first)) first = c.first_begin;
      last = std::max(last, c.last_begin);
    }
    w.run_end_ns = std::max(w.run_end_ns, last);
    if (!p.stats.ring_slots) continue;
    ++w.processes;
    w.ring_written += p.stats.ring_written;
    w.ring_kept += p.stats.ring_kept;
    if (p.stats.overwritten()) {
      ++w.wrapped;
      w.window_begin_ns = std::max(w.window_begin_ns, first);
    }
  }
  for (const auto& [key, run] : a.run_totals) w.run_end_ns = std::max(w.run_end_ns, run.last_ns);
  return w;
}

std::string OpWindow::text() const {
  if (!partial()) return "";
  uint64_t earlier = total_calls > kept_ops ? total_calls - kept_ops : 0;
  std::string span = run_end_ns > run_begin_ns ? duration_text(static_cast<double>(run_end_ns - run_begin_ns) / 1e9) : "?";
  return fmt::format("ops kept from {} to {} UTC of a {} run (the newest of each process; {} of {} traces wrapped); {} "
                     "earlier ops are counted in the totals only",
                     clock_text(window_begin_ns), clock_text(run_end_ns), span, wrapped, processes, thousands(earlier));
}

nlohmann::json OpWindow::to_json() const {
  return {{"complete", !partial()},
          {"processes_with_ring", processes},
          {"processes_wrapped", wrapped},
          {"ring_records_written", ring_written},
          {"ring_records_kept", ring_kept},
          {"ops_kept", kept_ops},
          {"ops_counted", total_calls},
          {"window_begin_ns", partial() ? nlohmann::json(window_begin_ns) : nlohmann::json(nullptr)},
          {"run_begin_ns", run_begin_ns},
          {"run_end_ns", run_end_ns},
          {"text", text()}};
}

}  // namespace ncclwatch::model
