#include "reports/html_memory.h"

#include "reports/html_svg.h"
#include "reports/leak_report.h"
#include "reports/output.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace ncclwatch::report {
namespace {

constexpr size_t kMostSeries = 8;        // ranks drawn: the largest peaks; a chart of thousands reads as none
constexpr size_t kMostIdleRows = 200;    // a page, not a dump
constexpr const char* kRankColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                                        "#8c564b", "#e377c2", "#17becf", "#bcbd22"};
constexpr double kMiB = 1048576.0;

// The processes to draw: the largest peaks first, at most kMostSeries, then back in the job's order.
std::vector<const ProcessMemory*> drawn_processes(const std::vector<ProcessMemory>& memory) {
  std::vector<const ProcessMemory*> drawn;
  for (const ProcessMemory& m : memory) drawn.push_back(&m);
  std::stable_sort(drawn.begin(), drawn.end(), [](auto* x, auto* y) { return x->peak_bytes > y->peak_bytes; });
  if (drawn.size() > kMostSeries) drawn.resize(kMostSeries);
  std::sort(drawn.begin(), drawn.end());  // `memory` is in the job's order
  return drawn;
}

std::string rank_label(const ProcessMemory& m) {
  return m.rank >= 0 ? fmt::format("rank {}", m.rank) : fmt::format("pid {}", m.process->pid());
}

// One step line per drawn process: its total after each change, held on to its end, in seconds on
// the job's aligned clock from the first change of any of them.
std::string memory_chart(const JobAnalysis& a, const std::vector<const ProcessMemory*>& drawn) {
  auto aligned = [&](const ProcessMemory& m, int64_t ns) { return wrap_add(ns, a.ops[m.process - a.job.processes.data()].clock_offset); };
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const ProcessMemory* m : drawn)
    if (!m->total_over_time.empty()) origin = std::min(origin, aligned(*m, m->total_over_time.front().time_ns));
  std::vector<Series> series;
  double span = 0, top = 0;
  for (size_t i = 0; i < drawn.size(); ++i) {
    const ProcessMemory& m = *drawn[i];
    if (m.total_over_time.empty()) continue;
    Series& s = series.emplace_back(Series{rank_label(m), kRankColours[i % std::size(kRankColours)], "memory", {}, true});
    auto seconds = [&](int64_t ns) { return std::max(0.0, static_cast<double>(wrap_sub(aligned(m, ns), origin)) / 1e9); };
    s.points.push_back({seconds(m.total_over_time.front().time_ns), 0, ""});
    for (const HeldTotal& t : m.total_over_time)
      s.points.push_back({seconds(t.time_ns), t.bytes / kMiB,
                          fmt::format("{}: {} at {:.2f} s", s.label, bytes_text(t.bytes), seconds(t.time_ns))});
    int64_t end = std::max(m.process->last_time_ns, m.total_over_time.back().time_ns);
    s.points.push_back({seconds(end), s.points.back().y, ""});
    span = std::max(span, s.points.back().x);
    top = std::max(top, m.peak_bytes / kMiB);
  }
  if (series.empty()) return "";
  return line_chart(series, linear_axis(span > 0 ? span : 1, "seconds since NCCL first took memory"),
                    linear_axis(std::max(top, 1.0), "GPU memory NCCL held (MiB)"), "NCCL GPU memory over time per rank");
}

std::string idle_table(const std::vector<ProcessMemory>& memory, const std::map<uint64_t, std::string>& names,
                       const IdleSettings& idle, bool symbolize) {
  Symbolizer symbolizer;
  std::string rows;
  size_t count = 0;
  uint64_t bytes = 0;
  for (const ProcessMemory& p : memory)
    for (const CommMemory& c : p.comms) {
      if (!c.idle) continue;
      add_saturated(bytes, c.held.bytes);
      if (count++ >= kMostIdleRows) continue;
      SiteText site = describe_site(symbolize ? &symbolizer : nullptr, *p.process, c.comm->stack, c.comm->site, c.comm->python_site);
      rows += fmt::format("<tr><td>{}</td><td class=n>{}/{}</td><td>{}</td><td class=n>{}</td><td class=n>{:.1f}</td><td>{}</td>"
                          "<td><code>{}</code></td></tr>",
                          comm_html(c.comm->id, names), c.comm->rank, c.comm->nranks, esc(rank_label(p)), esc(bytes_text(c.held.bytes)),
                          c.idle_s(), c.released ? "until destroyed" : "to the end of the trace", esc(site.first));
    }
  std::string settings = fmt::format("no op for {:.0f} s or more while holding {} or more", idle.idle_after_s, bytes_text(idle.min_bytes));
  if (!count) return fmt::format("<p>No idle communicator ({}).</p>", settings);
  std::string out = fmt::format("<p class=\"idle\"><b>{} idle communicator rank(s) held {}</b> ({}):</p>"
                                "<table class=\"idle\"><tr><th>communicator</th><th>rank</th><th>process</th><th>held</th>"
                                "<th>idle s</th><th>idle</th><th>created at</th></tr>{}</table>",
                                count, esc(bytes_text(bytes)), esc(settings), rows);
  if (count > kMostIdleRows)
    out += fmt::format("<p class=\"note\">{} more (see <code>ncclwatch-report memory</code>).</p>", count - kMostIdleRows);
  return out + fmt::format("<p class=\"note\">Remedy: {}.</p>", esc(kIdleRemedy));
}

}  // namespace

std::string memory_section_html(const JobAnalysis& a, const std::map<uint64_t, std::string>& names, const IdleSettings& idle,
                                bool symbolize) {
  std::vector<ProcessMemory> memory = nccl_memory_by_process(a.job, a.ops, idle);
  if (memory.empty()) return "";
  std::vector<const ProcessMemory*> drawn = drawn_processes(memory);
  const ProcessMemory& peak = *largest_peak(memory);
  std::string out = "<h2 id=\"memory\">NCCL GPU memory over time</h2><p class=\"note\">";
  out += fmt::format("What each process's communicators held together: when made, after each set-up call (a first use that "
                     "connects), suspend and resume, until released; all processes on one clock. The most: {} on {} ({:.1f} s "
                     "after it started).",
                     esc(bytes_text(peak.peak_bytes)), esc(rank_label(peak)), peak.peak_after_start_s());
  if (drawn.size() < memory.size())
    out += fmt::format(" <b>Showing {} of {} ranks</b>, the largest peaks.", drawn.size(), memory.size());
  uint64_t unreleased = 0;
  for (const ProcessMemory& m : memory) add_saturated(unreleased, m.held_at_end_bytes);
  if (unreleased) out += fmt::format(" Communicators never released still held {} at the end.", esc(bytes_text(unreleased)));
  out += "</p>" + memory_chart(a, drawn);
  return out + idle_table(memory, names, idle, symbolize);
}

}  // namespace ncclwatch::report
