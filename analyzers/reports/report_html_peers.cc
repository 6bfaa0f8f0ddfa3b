#include "reports/html_peers.h"

#include "reports/html_svg.h"
#include "reports/output.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace ncclwatch::report {
namespace {

constexpr size_t kMostRanks = 64;  // rows and columns of one map: a page, not a dump

struct Cell {
  const PeerLink* recv = nullptr;  // the row rank's receives from the column peer
  const PeerLink* send = nullptr;  // its sends to it
};

// One communicator's links as rank (row) x peer (column) cells.
struct PeerMap {
  uint64_t comm_id = 0;
  int32_t nranks = -1;
  std::vector<int32_t> rows, columns;
  std::map<std::pair<int32_t, int32_t>, Cell> cells;
  size_t ranks_present = 0;
  const SlowPeer* slow = nullptr;
};

std::vector<PeerMap> peer_maps(const PeerLinks& links, const std::vector<SlowPeer>& slow) {
  std::map<uint64_t, PeerMap> maps;
  std::map<uint64_t, std::set<int32_t>> ranks, peers;
  for (const auto& [key, link] : links) {
    PeerMap& m = maps[key.comm_id];
    m.comm_id = key.comm_id;
    m.nranks = link.nranks;
    Cell& c = m.cells[{key.rank, key.remote}];
    (key.send ? c.send : c.recv) = &link;
    ranks[key.comm_id].insert(key.rank);
    peers[key.comm_id].insert(key.remote);
  }
  std::vector<PeerMap> out;
  for (auto& [id, m] : maps) {
    for (const SlowPeer& s : slow)
      if (s.comm_id == id) m.slow = &s;
    m.ranks_present = ranks[id].size();
    // The slow rank stays among the rows shown, and its peers among the columns.
    if (m.slow) m.rows.push_back(m.slow->rank);
    for (int32_t r : ranks[id])
      if (m.rows.size() < kMostRanks && (!m.slow || r != m.slow->rank)) m.rows.push_back(r);
    std::sort(m.rows.begin(), m.rows.end());
    for (int32_t p : peers[id])
      if (m.columns.size() < kMostRanks) m.columns.push_back(p);
    out.push_back(std::move(m));
  }
  return out;
}

std::string link_tip(int32_t rank, int32_t peer, const Cell& c) {
  std::string tip = fmt::format("rank {} and peer {}", rank, peer);
  if (c.recv)
    tip += fmt::format(": receives waited {:.1f} µs per step on the peer over {} steps ({:.1f} MiB)",
                       c.recv->peer_wait_us_per_step(), c.recv->steps, double(c.recv->bytes) / 1048576.0);
  if (c.send) {
    tip += fmt::format("{} sends: {:.1f} MiB", c.recv ? ";" : ":", double(c.send->bytes) / 1048576.0);
    if (c.send->moving_ns) tip += fmt::format(" at {:.2f} GB/s", c.send->send_gbps());
  }
  return tip;
}

std::string peer_map_svg(const PeerMap& m) {
  double worst = 0;
  for (const auto& [at, c] : m.cells)
    if (c.recv) worst = std::max(worst, c.recv->peer_wait_us_per_step());
  double cell = std::clamp(640.0 / double(std::max<size_t>(m.columns.size(), 1)), 8.0, 28.0);
  constexpr double L = 96, T = 22;
  double W = std::max(L + cell * double(m.columns.size()) + 16, L + 92.0 * double(std::size(kHeatColours)) + 160);
  double H = T + cell * double(m.rows.size()) + 40;
  std::string s = fmt::format(
      R"(<svg class="peermap" data-comm="{}" data-ranks="{}" data-peers="{}" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" role="img" aria-label="receive wait per peer">)",
      hex_id(m.comm_id), m.rows.size(), m.columns.size(), W, H, W, H);
  for (size_t col = 0; col < m.columns.size(); ++col)
    if (cell >= 14 || col % 4 == 0)
      s += fmt::format(R"(<text x="{:.1f}" y="{:.0f}" text-anchor="middle" class="tick">{}</text>)",
                       L + cell * (double(col) + 0.5), T - 6, m.columns[col]);
  s += fmt::format(R"(<text x="{:.0f}" y="{:.0f}" text-anchor="end" class="tick">peer</text>)", L - 6, T - 6);
  s += R"(<g shape-rendering="crispEdges">)";
  size_t levels = std::size(kHeatColours);
  for (size_t row = 0; row < m.rows.size(); ++row) {
    int32_t rank = m.rows[row];
    double y = T + cell * double(row);
    bool slow = m.slow && m.slow->rank == rank;
    s += fmt::format(R"(<text x="{:.0f}" y="{:.1f}" text-anchor="end" class="{}">rank {}{}</text>)", L - 6,
                     y + cell / 2 + 4, slow ? "rowlabel straggler" : "rowlabel", rank, slow ? " ◀" : "");
    for (size_t col = 0; col < m.columns.size(); ++col) {
      auto it = m.cells.find({rank, m.columns[col]});
      if (it == m.cells.end()) continue;  // no traffic between them: no cell
      const Cell& c = it->second;
      const char* colour = kNoDataColour;
      if (c.recv && worst > 0)
        colour = kHeatColours[std::min(levels - 1, size_t(c.recv->peer_wait_us_per_step() / worst * double(levels)))];
      s += fmt::format(R"(<rect class="cell" data-rank="{}" data-peer="{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{}</title></rect>)",
                       rank, m.columns[col], L + cell * double(col), y, cell, cell, colour, esc(link_tip(rank, m.columns[col], c)));
    }
  }
  s += "</g>";
  double scale_y = T + cell * double(m.rows.size()) + 12;
  s += fmt::format(R"(<text x="{:.0f}" y="{:.1f}" text-anchor="end" class="tick">wait/step</text>)", L - 6, scale_y + 12);
  for (size_t level = 0; level < levels; ++level) {
    double x = L + 92.0 * double(level);
    s += fmt::format(R"(<rect x="{:.0f}" y="{:.1f}" width="16" height="16" fill="{}" shape-rendering="crispEdges"/>)", x, scale_y,
                     kHeatColours[level]);
    s += fmt::format(R"(<text x="{:.0f}" y="{:.1f}" class="tick">≥{:.0f} µs</text>)", x + 19, scale_y + 12,
                     worst * double(level) / double(levels));
  }
  double x = L + 92.0 * double(levels);
  s += fmt::format(R"(<rect x="{:.0f}" y="{:.1f}" width="16" height="16" fill="{}" shape-rendering="crispEdges"/>)", x, scale_y,
                   kNoDataColour);
  s += fmt::format(R"(<text x="{:.0f}" y="{:.1f}" class="tick">sends only</text>)", x + 19, scale_y + 12);
  return s + "</svg>";
}

}  // namespace

std::string peers_section_html(const JobAnalysis& a, const std::map<uint64_t, std::string>& names) {
  if (a.peers.empty()) return "";
  std::vector<SlowPeer> slow = slow_peers(a.peers);
  std::string out = "<h2 id=\"peers\">Peers</h2><p class=\"note\">What NCCL's proxy moved over its network transport "
                    "(<code>NCCLWATCH_PROFILER=peers</code>): per rank (row) and peer (column), how long the rank's "
                    "receive steps waited on the peer, per step; hover a cell for the bytes and the send rate. In a ring "
                    "every rank waits on a slow one but the slow one itself: ◀ marks the rank its peers waited on.</p>";
  for (const PeerMap& m : peer_maps(a.peers, slow)) {
    out += fmt::format("<h3>Communicator {} ({} ranks)</h3>", comm_html(m.comm_id, names), m.nranks);
    if (m.slow) out += "<p><b>Slow peer:</b> " + esc(slow_peer_text(*m.slow, comm_label(m.comm_id, names))) + "</p>";
    if (m.rows.size() < m.ranks_present)
      out += fmt::format("<p class=\"note\"><b>Showing {} of {} ranks</b> (the slow one kept, then the lowest).</p>",
                         m.rows.size(), m.ranks_present);
    out += peer_map_svg(m);
  }
  return out;
}

}  // namespace ncclwatch::report
