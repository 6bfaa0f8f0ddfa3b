#include "model/op_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ncclwatch::model {

using namespace trace;

void note_rank(std::vector<int32_t>& ranks, int32_t rank) {
  // Files are read one after another and a file's samples come from one rank: mostly the last one
  // noted, or a new one after it.
  if (!ranks.empty() && ranks.back() == rank) return;
  if (ranks.empty() || ranks.back() < rank) {
    ranks.push_back(rank);
    return;
  }
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
  if (it == ranks.end() || *it != rank) ranks.insert(it, rank);
}

void RunTotals::merge(const RunTotals& o) {
  calls += o.calls;
  std::vector<int32_t> both;
  std::set_union(ranks.begin(), ranks.end(), o.ranks.begin(), o.ranks.end(), std::back_inserter(both));
  ranks = std::move(both);
  gpu_timed += o.gpu_timed;
  gpu_ns += o.gpu_ns;
  for (int b = 0; b < kTotalsBuckets; ++b) gpu_histogram[b] += o.gpu_histogram[b];
  if (o.first_ns && (!first_ns || o.first_ns < first_ns)) first_ns = o.first_ns;
  last_ns = std::max(last_ns, o.last_ns);
}

std::optional<double> RunTotals::gpu_percentile_ns(double pct) const {
  uint64_t n = 0;
  for (uint64_t c : gpu_histogram) n += c;
  if (n == 0) return std::nullopt;
  uint64_t want = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(pct / 100.0 * static_cast<double>(n))));
  uint64_t seen = 0;
  for (int b = 0; b < kTotalsBuckets; ++b) {
    seen += gpu_histogram[b];
    if (seen >= want) {
      double lo = totals_bucket_floor_ns(b);
      double hi = b + 1 < kTotalsBuckets ? totals_bucket_floor_ns(b + 1) : lo * 1.5;
      return std::sqrt(lo * hi);
    }
  }
  return std::nullopt;
}

const char* timing_name(TimingSource t) {
  switch (t) {
    case TimingSource::kGpu: return "gpu";
    case TimingSource::kHost: return "host";
    case TimingSource::kHostToGpuEnd: return "host_to_gpu_end";
    case TimingSource::kGpuRunHistogram: return "gpu_run_histogram";
    case TimingSource::kGpuGraphReplay: return "gpu_graph_replay";
    case TimingSource::kGpuUpperBound: return "gpu_upper_bound";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------
// Per-rank facts

uint64_t RankComm::completed_seq() const {
  uint64_t proven = std::max(timed_done_seq, snapshot_done_seq);
  uint64_t untimed = untimed_seq;
  // An op that only returned from the host call is done unless the watchdog said otherwise.
  if (stalled_unresolved && stalled_seq) untimed = std::min(untimed, stalled_seq - 1);
  return std::min(max_seq, std::max(proven, untimed));
}

const RankComm* ProcessOps::comm(uint64_t comm_id) const {
  for (const RankComm& c : comms)
    if (c.comm_id == comm_id) return &c;
  return nullptr;
}

int ProcessOps::world_rank() const {
  const RankComm* best = nullptr;
  for (const RankComm& c : comms)
    if (c.rank >= 0 && (!best || c.nranks > best->nranks)) best = &c;
  return best ? best->rank : -1;
}

bool JobAnalysis::read_again(size_t p, const RecordVisitor& visit) const {
  return sources && p < file_index.size() && sources->read_again(file_index[p], visit);
}

const CommOps* JobAnalysis::comm(uint64_t comm_id) const {
  auto it = std::lower_bound(comms.begin(), comms.end(), comm_id,
                             [](const CommOps& c, uint64_t id) { return c.comm_id < id; });
  return it != comms.end() && it->comm_id == comm_id ? &*it : nullptr;
}

std::vector<std::pair<OpSignature, std::vector<int32_t>>> JobAnalysis::signature_groups(const CommOps& c,
                                                                                         uint64_t seq) const {
  std::vector<std::pair<OpSignature, std::vector<int32_t>>> out;
  const SeqSlot* found = c.slot(seq);
  if (!found || found->issued == 0) return out;
  const SeqSlot& slot = *found;
  std::vector<SignatureGroup> groups;
  if (auto it = c.deviants.find(seq); it != c.deviants.end()) groups = it->second;
  // Ranks listed explicitly, per reader thread; every other rank of a thread passed that thread's
  // reference: an implicit group's signature, or the slot's when the thread agreed with it.
  std::map<uint8_t, std::set<int32_t>> listed;
  std::map<uint8_t, OpSignature> thread_ref;
  for (const SignatureGroup& g : groups) {
    if (g.implicit) thread_ref[g.origin] = g.sig;
    else listed[g.origin].insert(g.ranks.begin(), g.ranks.end());
  }
  groups.push_back(SignatureGroup{slot.ref, slot.ref_origin, true, {}});
  if (auto members_it = members.find(c.comm_id); members_it != members.end()) {
    for (const MemberRef& m : members_it->second) {
      const RankComm& rc = member(m);
      if (rc.max_seq < seq || listed[rc.thread].count(rc.rank)) continue;
      auto ref = thread_ref.find(rc.thread);
      groups.push_back(SignatureGroup{ref == thread_ref.end() ? slot.ref : ref->second, rc.thread, false, {rc.rank}});
    }
  }
  for (const SignatureGroup& g : groups) {
    if (g.implicit || g.ranks.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == g.sig; });
    if (it == out.end()) out.emplace_back(g.sig, g.ranks);
    else it->second.insert(it->second.end(), g.ranks.begin(), g.ranks.end());
  }
  for (auto& [sig, ranks] : out) {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  }
  // Majority first; on a tie the group holding the lowest rank (a stable, explainable choice).
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.second.size() != b.second.size()) return a.second.size() > b.second.size();
    return a.second.front() < b.second.front();
  });
  return out;
}

std::pair<uint32_t, uint64_t> CommOps::graph_replay(uint64_t seq) const {
  const SeqSlot* at = slot(seq);
  if (!at || !at->graph) return {0, 0};
  if (first_seq != 1) return {at->graph, 0};
  uint64_t replays = 0;
  for (uint64_t s = first_seq; s <= seq; ++s)
    if (const SeqSlot& other = slots[s - first_seq]; other.graph == at->graph && other.replay_start) ++replays;
  return {at->graph, replays};
}

}  // namespace ncclwatch::model
