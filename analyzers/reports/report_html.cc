// html -o FILE: one self-contained page about the job, for people rather than scripts. The
// verdict first (leaks, hang, mismatches, stragglers), then per communicator a busbw-versus-size
// plot and a latency table, a rank x seq heatmap of arrival lateness, the live-communicator count
// over time, NCCL's GPU memory over time per rank with the idle communicators (html_memory.h), and
// the environment differences. Plots are inline SVG drawn here: the page loads
// nothing (no script, font or stylesheet from anywhere) and opens offline.
//
// The figures are the other reports' own (hang_report, latency_table, leak_report,
// environment_differences); only the heatmap needs a pass of its own over the op records (see
// lateness_map.h).
#include "reports/html_memory.h"
#include "reports/html_peers.h"
#include "reports/html_svg.h"
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/job_identity.h"
#include "reports/leak_report.h"
#include "reports/output.h"
#include "reports/summary_report.h"

#include <ncclwatch_version.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string_view>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using namespace trace;

constexpr size_t kMaxTableRows = 200;     // per table: a page, not a dump

// Series colours (one per op across the page) and the heatmap's scale: fixed, distinct values, so
// that a reader (and the browser test) can tell them apart.
constexpr const char* kSeriesColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                                          "#8c564b", "#e377c2", "#17becf", "#bcbd22"};
constexpr const char* kLiveColour = "#0b6e4f";

// A JSON value as plain text: strings without their quotes.
std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : dump_json(v); }

std::string number(const std::optional<double>& v, int precision) {
  return v ? fmt::format("{:.{}f}", *v, precision) : std::string("–");
}

std::string ms_text(double ms) {
  return ms >= 100 ? fmt::format("{:.0f} ms", ms) : ms >= 1 ? fmt::format("{:.2f} ms", ms) : fmt::format("{:.1f} µs", ms * 1e3);
}

std::string heatmap_svg(const LatenessMap& map) {
  int64_t worst = 0;
  for (const auto& l : map.late) worst = std::max(worst, l.load());
  double cell_w = std::clamp(840.0 / static_cast<double>(std::max<size_t>(map.bins, 1)), 3.0, 14.0);
  double cell_h = std::clamp(420.0 / static_cast<double>(std::max<size_t>(map.rows.size(), 1)), 5.0, 18.0);
  constexpr double L = 96, T = 8;
  double grid_w = cell_w * static_cast<double>(map.bins), grid_h = cell_h * static_cast<double>(map.rows.size());
  double W = std::max(L + grid_w + 16, L + 92.0 * static_cast<double>(std::size(kHeatColours)) + 140), H = T + grid_h + 78;
  std::string s = fmt::format(
      R"(<svg class="heatmap" data-comm="{}" data-ranks="{}" data-bins="{}" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" role="img" aria-label="arrival lateness">)",
      hex_id(map.comm_id), map.rows.size(), map.bins, W, H, W, H);
  s += R"(<g shape-rendering="crispEdges">)";
  size_t levels = std::size(kHeatColours);
  // Row labels need 8 px: with thinner rows, every few rows are labelled, and none crowds a straggler's.
  size_t every = cell_h >= 8 ? 1 : static_cast<size_t>(std::ceil(8 / cell_h));
  auto labelled = [&](size_t row) {
    if (row % every) return false;
    for (size_t other = row >= every ? row - every + 1 : 0; other < std::min(map.rows.size(), row + every); ++other)
      if (other != row && map.flagged.count(map.rows[other])) return false;
    return true;
  };
  for (size_t row = 0; row < map.rows.size(); ++row) {
    int32_t rank = map.rows[row];
    double y = T + cell_h * static_cast<double>(row);
    bool flagged = map.flagged.count(rank);
    if (flagged || labelled(row))
      s += fmt::format(R"(<text x="{:.0f}" y="{:.1f}" text-anchor="end" class="{}">rank {}{}</text>)", L - 6,
                       y + std::min(cell_h, 12.0) - 1, flagged ? "rowlabel straggler" : "rowlabel", rank, flagged ? " ◀" : "");
    for (size_t bin = 0; bin < map.bins; ++bin) {
      int64_t late = map.late[row * map.bins + bin].load();
      uint64_t first = map.bin_first(bin), last = map.bin_last(bin);
      std::string seqs = first == last ? fmt::format("seq {}", first) : fmt::format("seqs {}–{}", first, last);
      const char* colour = kNoDataColour;
      std::string tip = fmt::format("rank {}, {}: no start recorded", rank, seqs);
      if (late >= 0) {
        size_t level = worst > 0 ? std::min(levels - 1, static_cast<size_t>(static_cast<double>(late) / static_cast<double>(worst) * static_cast<double>(levels))) : 0;
        colour = kHeatColours[level];
        tip = fmt::format("rank {}, {}: {} late", rank, seqs, ms_text(static_cast<double>(late) / 1e6));
      }
      s += fmt::format(R"(<rect class="cell" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{}</title></rect>)",
                       L + cell_w * static_cast<double>(bin), y, cell_w, cell_h, colour, esc(tip));
    }
  }
  s += "</g>";
  // The seq axis, then the colour scale.
  double axis_y = T + grid_h + 14;
  double labelled_until = -1e9;  // seq labels need room: a crowded one is left out
  for (size_t bin : {size_t{0}, map.bins / 2, map.bins - 1}) {
    double x = L + cell_w * (static_cast<double>(bin) + 0.5);
    if (x - labelled_until < 70) continue;
    labelled_until = x;
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" class="tick">seq {}</text>)",
                     x, axis_y, map.bin_first(bin));
  }
  double scale_y = axis_y + 14;
  s += fmt::format(R"(<text x="{:.0f}" y="{:.1f}" text-anchor="end" class="tick">late by</text>)", L - 6, scale_y + 12);
  for (size_t level = 0; level < levels; ++level) {
    double x = L + 92.0 * static_cast<double>(level);
    s += fmt::format(R"(<rect x="{:.0f}" y="{:.1f}" width="16" height="16" fill="{}" shape-rendering="crispEdges"/>)", x, scale_y,
                     kHeatColours[level]);
    s += fmt::format(R"(<text x="{:.0f}" y="{:.1f}" class="tick">≥{}</text>)", x + 19, scale_y + 12,
                     ms_text(static_cast<double>(worst) * static_cast<double>(level) / static_cast<double>(levels) / 1e6));
  }
  double x = L + 92.0 * static_cast<double>(levels);
  s += fmt::format(R"(<rect x="{:.0f}" y="{:.1f}" width="16" height="16" fill="{}" shape-rendering="crispEdges"/>)", x, scale_y,
                   kNoDataColour);
  s += fmt::format(R"(<text x="{:.0f}" y="{:.1f}" class="tick">no start recorded</text>)", x + 19, scale_y + 12);
  return s + "</svg>";
}

// ---------------------------------------------------------------------------------------------
// Live communicator instances over time, on the job's aligned clock.

std::string live_chart(const JobAnalysis& a, size_t& still_alive) {
  std::vector<std::pair<int64_t, int>> events;  // (aligned ns, +1 / -1)
  still_alive = 0;
  for (size_t i = 0; i < a.job.processes.size(); ++i) {
    const ProcessTrace& p = a.job.processes[i];
    int64_t offset = a.ops[i].clock_offset;
    // The process's last sign of life (aligned): its final record, else its latest call or op.
    int64_t end = wrap_add(p.process_end ? p.process_end->time_ns : p.last_time_ns, offset);
    if (!p.process_end)
      for (const RankComm& rc : a.ops[i].comms) end = std::max(end, rc.last_begin);
    for (const CommInstance& c : p.comms) {
      if (!c.created_ns || c.state == CommState::kInitFailed) continue;
      int64_t created = wrap_add(c.created_ns, offset);
      events.emplace_back(created, +1);
      // Never released (or its release hung): alive for as long as its process was.
      bool released = c.release_end_ns && c.state != CommState::kDestroyHung;
      if (!released) ++still_alive;
      events.emplace_back(released ? wrap_add(c.release_end_ns, offset) : std::max(end, created), -1);
    }
  }
  if (events.empty()) return "";
  std::sort(events.begin(), events.end());
  int64_t origin = events.front().first;
  Series live{"communicator instances alive", kLiveColour, "live", {}, true};
  int count = 0, peak = 0;
  live.points.push_back({0, 0, ""});
  for (size_t i = 0; i < events.size(); ++i) {
    count += events[i].second;
    peak = std::max(peak, count);
    // One point per instant: events at the same time collapse into one step.
    if (i + 1 < events.size() && events[i + 1].first == events[i].first) continue;
    live.points.push_back({static_cast<double>(wrap_sub(events[i].first, origin)) / 1e9, static_cast<double>(count), ""});
  }
  double span = live.points.back().x;
  Axis x = linear_axis(span > 0 ? span : 1, "seconds since the first communicator was created");
  Axis y = linear_axis(std::max(peak, 1), "instances alive", 0);
  y.ticks.erase(std::unique(y.ticks.begin(), y.ticks.end(), [](const auto& p, const auto& q) { return p.second == q.second; }),
                y.ticks.end());
  return line_chart({live}, x, y, "live communicators over time");
}

// ---------------------------------------------------------------------------------------------

const char* kStyle = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1320px;padding:0 16px;color:#1d1d24;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:2px solid #e2e2ea;padding-bottom:4px}
h3{font-size:16px;margin:22px 0 6px}.sub{color:#5a5a66;margin:0 0 16px}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #d8d8e0;border-radius:8px;padding:10px 14px;min-width:240px;flex:1}
.card h3{margin:0 0 6px;font-size:15px}.bad{border-left:6px solid #c0392b}.warn{border-left:6px solid #e67e22}.ok{border-left:6px solid #27ae60}
.look{font-size:16px;background:#f4f4f8;border-radius:8px;padding:10px 14px;margin:8px 0 16px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}th,td{border:1px solid #dcdce4;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f1f1f6}td.n{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12.5px}
.note{color:#5a5a66;font-size:13px}.plots{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}
svg text{font:11px system-ui,sans-serif;fill:#33333d}svg text.axis{font-size:12px}svg text.legend{font-size:12px}
svg text.straggler{fill:#b10026;font-weight:bold}details{margin:8px 0}
)CSS";

// "0", "0,1" (a process driving several GPUs), or "–" (a process that made no communicator).
std::string ranks_cell(const std::set<int32_t>& ranks) {
  return ranks.empty() ? "–" : ranks_text(std::vector<int32_t>(ranks.begin(), ranks.end()));
}

struct Page {
  std::string body;
  void add(const std::string& s) { body += s; }
};

// Leaks, hang, mismatches, stragglers: what a person needs to know before any figure.
void verdict_section(Page& page, const LeakReport& leaks, const HangReport& report, const std::map<uint64_t, std::string>& names) {
  const std::vector<UntracedCopy>& untraced = leaks.untraced;
  size_t leaked_resources = leaks.open_resources.size();
  const std::vector<LeakedComm>& groups = leaks.leaked;
  size_t mismatched = report.mismatched_seqs;
  const std::vector<std::string>& stragglers = report.stragglers;
  std::string first_look = first_look_at(leaks, report);
  page.add(fmt::format(R"(<h2 id="verdict">Verdict</h2><p class="look"><b>Look first at:</b> {}</p><div class="cards">)",
                       esc(first_look)));

  page.add(fmt::format(R"(<div class="card {}" id="leaks"><h3>Leaks</h3>)", leaks.findings() ? "bad" : "ok"));
  if (!leaks.leaks())
    page.add(fmt::format("<p>None: {} communicator instance(s), all released.</p>", leaks.communicators.size()));
  else
    page.add(fmt::format("<p><b>{} communicator(s) never destroyed</b> ({} rank instance(s)), {} NCCL resource(s) never released.</p>",
                         groups.size(), leaks.leaked_instances.size(), leaked_resources));
  // Communicators piling up, resources out of order: as `leaks` words them.
  for (const std::string& line : lifecycle_lines(leaks)) page.add("<p>" + esc(line) + "</p>");
  page.add("</div>");

  bool hung = report.hung();
  page.add(fmt::format(R"(<div class="card {}" id="hang"><h3>Hang</h3><p>{}</p></div>)", hung ? "bad" : "ok",
                       esc(hung ? report.verdict : "No rank stopped short: every rank issued and completed the same ops.")));
  page.add(fmt::format(R"(<div class="card {}" id="mismatches"><h3>Mismatches</h3><p>{}</p></div>)", mismatched ? "bad" : "ok",
                       mismatched ? fmt::format("Ranks passed different arguments to {} collective(s).", mismatched)
                                  : std::string("None: every rank passed the same arguments.")));
  const std::vector<std::string>& slow_peers = report.slow_peers;
  page.add(fmt::format(R"(<div class="card {}" id="stragglers"><h3>Stragglers</h3>)",
                       stragglers.empty() && slow_peers.empty() ? "ok" : "warn"));
  if (stragglers.empty() && slow_peers.empty()) page.add("<p>None found.</p>");
  for (const std::string& t : stragglers) page.add("<p>" + esc(t) + "</p>");
  for (const std::string& t : slow_peers) page.add("<p>" + esc(t) + "</p>");
  page.add("</div></div>");

  if (!groups.empty()) {
    page.add("<h3>Communicators never destroyed</h3><table><tr><th>communicator</th><th>API</th><th>ranks</th><th>how it ended</th>"
             "<th>created at</th><th>hosts</th></tr>");
    size_t shown = 0;
    for (const LeakedComm& g : groups) {
      if (shown++ == kMaxTableRows) break;
      std::string states, hosts;
      for (const std::string& s : g.states) states += (states.empty() ? "" : "<br>") + esc(s);
      size_t listed = 0;
      for (const std::string& h : g.hosts)
        if (listed++ < 8) hosts += (hosts.empty() ? "" : ", ") + esc(h);
      if (listed > 8) hosts += fmt::format(", … ({} hosts)", listed);
      page.add(fmt::format("<tr><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                           comm_html(g.id, names), esc(trace::api_name(g.first->api)),
                           esc(ranks_text(std::vector<int32_t>(g.ranks.begin(), g.ranks.end()))) +
                               (g.world_ranks.empty() || g.world_ranks == g.ranks
                                    ? ""
                                    : " (world " + esc(ranks_text(std::vector<int32_t>(g.world_ranks.begin(), g.world_ranks.end()))) + ")"),
                           g.first->nranks, states,
                           esc(g.site.first), hosts));
    }
    page.add("</table>");
    for (const std::string& remedy : leaks.remedies) page.add(fmt::format("<p class=\"note\">Remedy: {}.</p>", esc(remedy)));
  }
  if (leaked_resources) {
    page.add("<h3>Resources never released</h3><table><tr><th>kind</th><th>API</th><th>comm</th><th>rank</th><th>bytes</th><th>host</th><th>pid</th><th>created at</th></tr>");
    size_t shown = 0;
    for (const OpenResourceRow& row : leaks.open_resources) {
      if (shown++ == kMaxTableRows) break;
      const ResourceInstance& r = *row.resource;
      page.add(fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td><td class=n>{}</td><td><code>{}</code></td></tr>",
                           esc(trace::resource_kind(r.api)), esc(trace::api_name(r.api)), r.comm_id ? comm_html(r.comm_id, names) : "–",
                           r.rank, r.bytes, esc(row.process->host()), row.process->pid(), esc(row.site.first)));
    }
    page.add("</table>");
  }
  for (const UntracedCopy& u : untraced)
    page.add(fmt::format("<p><b>NOT TRACED</b> in {} process(es): <code>{}</code>: {} (its communicators are in no trace)</p>",
                         u.processes, esc(u.path), esc(u.reason)));

  // Per-communicator hang findings, and every mismatch (up to a page of them).
  std::string findings, mismatches;
  size_t mismatch_rows = 0, mismatch_total = 0;
  for (const CommHang& c : report.comms) {
    const std::string& verdict = c.verdict;
    bool straggler_only = std::find(stragglers.begin(), stragglers.end(), verdict) != stragglers.end() ||
                          std::find(slow_peers.begin(), slow_peers.end(), verdict) != slow_peers.end();  // in its card
    if (verdict.rfind("consistent", 0) != 0 && !straggler_only)
      findings += fmt::format("<li>{}</li>", esc(verdict));
    for (const ArgumentMismatch& m : c.mismatches) {
      ++mismatch_total;
      if (mismatch_rows++ >= kMaxTableRows) continue;
      mismatches += fmt::format("<tr><td>{}</td><td class=n>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                                comm_html(c.comm_id, names), m.seq, esc(m.field), esc(value_text(m.value)),
                                esc(ranks_text(m.ranks)), esc(value_text(m.expected)));
    }
  }
  if (!findings.empty()) page.add("<h3>Per communicator</h3><ul>" + findings + "</ul>");
  if (!mismatches.empty()) {
    page.add("<h3>Argument mismatches</h3><table><tr><th>communicator</th><th>seq</th><th>field</th><th>value</th><th>on ranks</th>"
             "<th>the others passed</th></tr>" + mismatches + "</table>");
    if (mismatch_total > kMaxTableRows)
      page.add(fmt::format("<p class=\"note\">{} more (see <code>ncclwatch-report hang --json</code>).</p>", mismatch_total - kMaxTableRows));
  }
}

void communicators_section(Page& page, const LatencyTable& latency, const std::map<uint64_t, std::string>& names,
                           std::map<std::string, std::string>& op_colours) {
  page.add("<h2 id=\"communicators\">Per communicator: bus bandwidth and latency</h2>"
           "<p class=\"note\">Bus bandwidth (nccl-tests' convention, from the median GPU time) for GPU-timed sizes only; "
           "host-timed rows are enqueue times and have none. Percentiles leave out each rank's first call of an op and size "
           "(NCCL's connection set-up), shown apart.</p>");
  std::map<uint64_t, std::vector<const LatencyRow*>> by_comm;
  std::map<uint64_t, uint64_t> calls;
  for (const LatencyRow& r : latency.rows) {
    by_comm[r.comm_id].push_back(&r);
    calls[r.comm_id] += r.calls;
  }
  if (by_comm.empty()) page.add("<p>No timed collectives in these traces.</p>");
  std::vector<uint64_t> busiest_first;
  for (const auto& [comm, rows] : by_comm) busiest_first.push_back(comm);
  std::stable_sort(busiest_first.begin(), busiest_first.end(), [&](uint64_t x, uint64_t y) { return calls[x] > calls[y]; });
  for (uint64_t id : busiest_first) {
    const std::vector<const LatencyRow*>& rows = by_comm[id];
    page.add(fmt::format(R"(<h3 class="comm" data-comm="{}">Communicator {} · {} ranks</h3><div class="plots">)", hex_id(id),
                         comm_html(id, names), rows.front()->nranks));
    // One series per op: the GPU-timed sizes that have a bandwidth.
    std::map<std::string, Series> series, latency_series;
    double lo = 1e300, hi = 0, top = 0, fastest = 1e300, slowest = -1e300;
    for (const LatencyRow* r : rows) {
      if (r->p50_us && *r->p50_us > 0 && r->bytes) {
        // The p50 of every row with a steady state (host-timed rows too: enqueue times), by op and timing.
        std::string key = fmt::format("{} ({})", trace::api_name(r->api), timing_name(r->timing));
        auto [colour, fresh] = op_colours.try_emplace(key, kSeriesColours[op_colours.size() % std::size(kSeriesColours)]);
        Series& s = latency_series[key];
        s.label = key;
        s.colour = colour->second;
        s.css_class = "latency";
        double x = std::log2(static_cast<double>(r->bytes)), y = std::log10(*r->p50_us);
        s.points.push_back({x, y, fmt::format("{} {}: p50 {} µs ({})", trace::api_name(r->api), bytes_text(r->bytes),
                                              number(r->p50_us, 1), timing_name(r->timing))});
        lo = std::min(lo, x), hi = std::max(hi, x), fastest = std::min(fastest, y), slowest = std::max(slowest, y);
      }
      if (!r->busbw_gbps || !r->bytes) continue;
      std::string op = trace::api_name(r->api);
      double busbw = *r->busbw_gbps;
      auto [colour, fresh] = op_colours.try_emplace(op, kSeriesColours[op_colours.size() % std::size(kSeriesColours)]);
      Series& s = series[op];
      s.label = op;
      s.colour = colour->second;
      s.css_class = "busbw";
      double x = std::log2(static_cast<double>(r->bytes));
      s.points.push_back({x, busbw, fmt::format("{} {}: {:.2f} GB/s busbw, p50 {} µs", op, bytes_text(r->bytes), busbw, number(r->p50_us, 1))});
      lo = std::min(lo, x), hi = std::max(hi, x), top = std::max(top, busbw);
    }
    if (series.empty()) {
      page.add("<p class=\"note\">No GPU-timed sizes here: no bandwidth to plot.</p>");
    } else {
      std::vector<Series> list;
      for (auto& [op, s] : series) {
        std::sort(s.points.begin(), s.points.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
        list.push_back(s);
      }
      page.add(line_chart(list, log2_bytes_axis(lo, hi), linear_axis(top, "bus bandwidth (GB/s)"), "busbw versus size"));
    }
    if (!latency_series.empty()) {
      std::vector<Series> list;
      for (auto& [key, s] : latency_series) {
        std::sort(s.points.begin(), s.points.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
        list.push_back(s);
      }
      page.add(line_chart(list, log2_bytes_axis(lo, hi), log10_us_axis(fastest, slowest, "p50 latency (log10 scale)"),
                          "p50 latency versus size"));
    }
    page.add("<table class=\"latency\"><tr><th>op</th><th>size</th><th>calls</th><th>timing</th><th>p50 µs</th><th>p90 µs</th>"
             "<th>p99 µs</th><th>max µs</th><th>busbw GB/s</th><th>first calls</th><th>first call max µs</th></tr>");
    for (const LatencyRow* r : rows)
      page.add(fmt::format(
          "<tr><td>{}</td><td class=n title=\"{} bytes\">{}</td><td class=n>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td>"
          "<td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
          esc(trace::api_name(r->api)), r->bytes, bytes_text(r->bytes), r->calls,
          r->timing == TimingSource::kHost ? "host (enqueue time)" : timing_name(r->timing), number(r->p50_us, 1),
          number(r->p90_us, 1), number(r->p99_us, 1), number(r->max_us, 1), number(r->busbw_gbps, 2), r->first_call_samples,
          number(r->first_call_max_us, 1)));
    page.add("</table></div>");
  }
}

void lateness_section(Page& page, const std::vector<LatenessMap>& maps, const std::map<uint64_t, std::string>& names) {
  page.add("<h2 id=\"lateness\">Arrival lateness</h2>");
  if (maps.empty()) {
    page.add("<p>No communicator with two ranks or more issued collectives.</p>");
    return;
  }
  for (const LatenessMap& map : maps) {
    page.add(fmt::format("<h3>Communicator {}</h3><p class=\"note\">Per rank and seq: how late the rank's launch started against "
                         "the earliest rank at that seq, on one clock for all processes. Measured on <b class=\"measured\">{}</b>.",
                         comm_html(map.comm_id, names),
                         map.on_gpu ? "GPU start times (launches the shim GPU-timed)"
                                    : "host enqueue times (no collective of it was GPU-timed on every rank)"));
    if (map.bins < map.seqs)
      page.add(fmt::format(" Seqs {}–{} in {} bins; each cell shows its bin's largest lateness.", map.first_seq,
                           map.first_seq + map.seqs - 1, map.bins));
    else
      page.add(fmt::format(" Seqs {}–{}, one column each.", map.first_seq, map.first_seq + map.seqs - 1));
    if (map.rows.size() < map.ranks_present)
      page.add(fmt::format(" <b>Showing {} of {} ranks</b> (stragglers and the latest arrivals first, then the lowest ranks).",
                           map.rows.size(), map.ranks_present));
    if (!map.flagged.empty()) page.add(" ◀ marks a straggler the hang report names.");
    page.add("</p>");
    page.add(heatmap_svg(map));
  }
}

void environment_section(Page& page, const std::vector<EnvironmentDifference>& env) {
  page.add("<h2 id=\"environment\">Environment differences</h2>");
  if (env.empty()) {
    page.add("<p>None: every process ran the same NCCL version and <code>NCCL_*</code> settings.</p>");
    return;
  }
  page.add("<table class=\"environment\"><tr><th>setting</th><th>value</th><th>ranks</th><th>processes</th></tr>");
  for (const EnvironmentDifference& e : env)
    for (const EnvironmentDifference::Value& v : e.values)
      page.add(fmt::format("<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td class=n>{}</td></tr>",
                           esc(e.key), esc(v.value), esc(ranks_text(v.ranks)), v.processes));
  page.add("</table>");
}

}  // namespace

// What the job was: its id, when it started, the command, the hosts, and the versions (ncclwatch's,
// NCCL's): the page names its job before it says anything about it.
void header_section(Page& page, const Job& job, const std::set<std::string>& hosts) {
  int64_t started = 0;
  std::string command;
  for (const ProcessTrace& p : job.processes) {
    if (!started || (p.header.start_wall_ns && p.header.start_wall_ns < started)) started = p.header.start_wall_ns;
    if (auto c = p.strings.find(std::string(trace::process_record::kCmdline)); command.empty() && c != p.strings.end())
      command = c->second;
  }
  std::string job_id = job_id_of(job), versions = nccl_versions_of(job);
  std::time_t seconds = static_cast<std::time_t>(started / 1'000'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char when[40] = "unknown";
  if (started > 0) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
  std::string host_list;
  size_t shown = 0;
  for (const std::string& h : hosts) {
    if (shown++ == 8) {
      host_list += fmt::format(" … and {} more", hosts.size() - 8);
      break;
    }
    host_list += (host_list.empty() ? "" : ", ") + esc(h);
  }
  page.add(fmt::format("<table class=\"job\"><tr><th>job</th><td>{}</td></tr><tr><th>started</th><td>{}</td></tr>"
                       "<tr><th>command</th><td><code>{}</code></td></tr><tr><th>hosts</th><td>{}</td></tr>"
                       "<tr><th>versions</th><td>ncclwatch {} · NCCL {}</td></tr></table>",
                       job_id.empty() ? "(no NCCLWATCH_JOB, SLURM_JOB_ID or TORCHELASTIC_RUN_ID)" : esc(job_id), when,
                       esc(command), host_list, NCCLWATCH_VERSION, versions.empty() ? "unknown" : esc(versions)));
}

int run_html(const Options& options, const IdleSettings& idle) {
  if (options.output.empty()) {
    say_in("html", "-o FILE is required");
    return 2;
  }
  AnalysisOptions ao;
  ao.keep_for_later = true;  // the lateness map reads the files again
  std::optional<JobAnalysis> analysis = load_job_or_explain(options.inputs, ao);
  if (!analysis) return kNoUsableInput;
  const JobAnalysis& a = *analysis;
  std::map<uint64_t, std::string> names = comm_names(a.job);
  HangReport hang = hang_report(a);
  LatencyTable latency = latency_table(a);
  LeakReport leaks = leak_report(a.job, options.symbolize);
  say_other_builds(leaks);
  std::vector<LatenessMap> maps = lateness_maps(a, hang);

  std::set<std::string> hosts;
  for (const ProcessTrace& p : a.job.processes) hosts.insert(p.host());
  size_t world_ranks = count_world_ranks(a);

  Page page;
  page.add(fmt::format("<h1>ncclwatch report</h1><p class=\"sub\">{} process trace(s), {} rank(s) on {} host(s), {} communicator(s) "
                       "with ops</p>",
                       a.job.processes.size(), world_ranks, hosts.size(), a.members.size()));
  header_section(page, a.job, hosts);
  if (latency.window.partial()) page.add(fmt::format("<p class=\"note\">{}.</p>", esc(latency.window.text())));
  verdict_section(page, leaks, hang, names);
  std::map<std::string, std::string> op_colours;
  communicators_section(page, latency, names, op_colours);
  lateness_section(page, maps, names);
  page.add(peers_section_html(a, names));

  page.add("<h2 id=\"live\">Live communicators over time</h2>");
  size_t still_alive = 0;
  std::string live = live_chart(a, still_alive);
  if (live.empty()) {
    page.add("<p>No communicator was created in these traces.</p>");
  } else {
    page.add("<p class=\"note\">Communicator instances (one per rank) from creation until destroy or abort returned, all "
             "processes on one clock. ");
    if (still_alive)
      page.add(fmt::format("{} instance(s) were never released (or their release hung): they count until their process ended.",
                           still_alive));
    page.add("</p>" + live);
  }
  page.add(memory_section_html(a, names, idle, options.symbolize));
  environment_section(page, hang.environment);

  page.add("<h2 id=\"traces\">Traces</h2><details><summary>");
  page.add(fmt::format("{} trace file(s); clock alignment: {}</summary><table><tr><th>host</th><th>pid</th><th>rank</th><th>file</th></tr>",
                       a.job.processes.size(), esc(a.clock.method)));
  for (size_t i = 0; i < a.job.processes.size(); ++i) {
    const ProcessTrace& p = a.job.processes[i];
    if (i == kMaxTableRows) {
      page.add(fmt::format("<tr><td colspan=4>… and {} more</td></tr>", a.job.processes.size() - i));
      break;
    }
    page.add(fmt::format("<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td><code>{}</code></td></tr>", esc(p.host()), p.pid(),
                         ranks_cell(world_ranks_of(a, i)), esc(p.path)));
  }
  page.add("</table></details>");

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>ncclwatch report</title><style>";
  html += kStyle;
  html += "</style></head><body>\n" + page.body + "\n</body></html>\n";
  if (!write_output_atomically(options.output, html)) return 2;
  bool findings = leaks.findings() || hang.findings || !leaks.untraced.empty();
  if (options.output != "-")
    std::printf("html: %zu trace(s), %s, written to %s\n", a.job.processes.size(), findings ? "findings" : "nothing found",
                options.output.c_str());
  return findings ? 1 : 0;
}

}  // namespace ncclwatch::report
