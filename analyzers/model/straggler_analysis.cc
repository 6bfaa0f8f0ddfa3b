// Who made the others wait: per communicator, the rank that started last on the GPU at each seq
// and how long its peers waited for it (op_model.h LastArrivals::wait_caused), judged against
// chance and against the op's own time; then, across communicators, findings that contradict each
// other withdrawn (the program's shape). hang_analysis.cc puts them into each communicator's verdict.
#include "model/hang_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>

namespace ncclwatch::model {
namespace {

// Who started last at each seq every present rank issued, and by how much. On the GPU side where
// every rank's launch of the seq was timed: a host returns from an enqueue long before its GPU
// runs the op, so host arrival gaps grow with every op a fast rank runs ahead.
// How much later than the op's own time a rank must typically start to be a straggler from few
// seqs (straggler_stats).
constexpr double kFarLaterThanTheOp = 10.0;

StragglerStats straggler_stats(const JobAnalysis& a, uint64_t id, const CommOps* ops, size_t n_present,
                               const std::map<uint64_t, std::string>& names) {
  StragglerStats out;
  if (!ops || n_present < 2) return out;
  out.on_gpu = std::any_of(ops->slots.begin(), ops->slots.end(), [&](const SeqSlot& s) { return s.gpu.complete(n_present); });
  struct Lateness {
    uint64_t times_last = 0;
    double total_ns = 0;
    LatencyHistogram hist;  // for the typical (median) lateness
  };
  std::map<int32_t, Lateness> lateness;
  std::vector<std::pair<int64_t, uint64_t>> worst;  // (lateness, seq)
  for (size_t i = 0; i < ops->slots.size(); ++i) {
    const SeqSlot& s = ops->slots[i];
    const LastArrivals& arrivals = out.on_gpu ? s.gpu : s.host;
    if (!arrivals.complete(n_present)) continue;
    // What the others lost to the last one (op_model.h), not the gap between start events alone.
    int64_t late = arrivals.wait_caused();
    ++out.seqs_judged;
    Lateness& l = lateness[arrivals.last_rank];
    ++l.times_last;
    l.total_ns += static_cast<double>(late);
    l.hist.add(late);
    worst.emplace_back(late, ops->seq_at(i));
    if (worst.size() > 64) {
      std::nth_element(worst.begin(), worst.begin() + 9, worst.end(), std::greater<>());
      worst.resize(10);
    }
  }
  std::sort(worst.begin(), worst.end(), std::greater<>());
  if (worst.size() > 10) worst.resize(10);
  for (const auto& [late, seq] : worst) {
    const SeqSlot& s = *ops->slot(seq);
    out.worst.push_back({seq, out.on_gpu ? s.gpu.last_rank : s.host.last_rank, static_cast<double>(late) / 1e6});
  }
  // The op's own time: the longest of the communicator's fastest GPU-timed calls (a call waits
  // for the last rank, so its fastest samples are the ones that waited for nobody).
  int64_t own_ns = 0;
  auto first = std::lower_bound(a.latency.begin(), a.latency.end(), id,
                                [](const LatencyBucket& b, uint64_t comm_id) { return b.key.comm_id < comm_id; });
  for (auto b = first; b != a.latency.end() && b->key.comm_id == id; ++b)  // sorted by key, comm_id first
    if (b->key.timing == TimingSource::kGpu && b->hist.count()) own_ns = std::max(own_ns, b->hist.min());
  double p = 1.0 / static_cast<double>(n_present);
  double expected = static_cast<double>(out.seqs_judged) * p;
  for (const auto& [rank, l] : lateness) {
    StragglerRank r;
    r.rank = rank;
    r.times_last = l.times_last;
    r.expected_by_chance = expected;
    double mean_late_ns = l.total_ns / static_cast<double>(l.times_last);
    double typical_late_ns = static_cast<double>(l.hist.percentile(50));
    r.mean_late_ms = mean_late_ns / 1e6;
    r.typical_late_ms = typical_late_ns / 1e6;
    // Far above chance: being last this often, if every rank were equally likely to be, has a
    // probability under 1 %. (2 ranks: last at 7 of 7 judged seqs, or 10 of 11.) Or, where few seqs
    // were judged (a short job), last at three in four or more of them and each time by far more
    // than the op takes: chance spreads who comes last by about the op's own time, not by tens of it.
    bool by_count = binomial_tail(out.seqs_judged, l.times_last, p) < 0.01;
    bool by_size = 4 * l.times_last >= 3 * out.seqs_judged && own_ns > 0 &&
                   static_cast<double>(l.hist.percentile(10)) >= kFarLaterThanTheOp * static_cast<double>(own_ns);
    r.far_more_than_chance = l.times_last >= 3 && (by_count || by_size);
    // A finding only when it is far above chance, large (1 ms) and large against the op itself,
    // and measured where it happens: on the GPU.
    r.finding = r.far_more_than_chance && out.on_gpu &&
                typical_late_ns >= std::max(1e6, 2.0 * static_cast<double>(own_ns));
    if (r.finding)
      r.text = fmt::format("comm {}: rank {} started last on the GPU at {} of {} collectives, typically {:.2f} ms after the "
                           "others (mean {:.2f} ms)",
                           comm_label(id, names), rank, l.times_last, out.seqs_judged, r.typical_late_ms, r.mean_late_ms);
    out.ranks.push_back(std::move(r));
  }
  return out;
}

// The process of rank `rank` of communicator `id`, if it left a trace.
std::optional<size_t> process_of(const JobAnalysis& a, uint64_t id, int32_t rank) {
  auto it = a.members.find(id);
  if (it == a.members.end()) return std::nullopt;
  for (const MemberRef& m : it->second)
    if (a.member(m).rank == rank) return m.process;
  return std::nullopt;
}

bool is_member(const JobAnalysis& a, uint64_t id, size_t process) {
  auto it = a.members.find(id);
  return it != a.members.end() &&
         std::any_of(it->second.begin(), it->second.end(), [&](const MemberRef& m) { return m.process == process; });
}

// How many ranks of communicator `id` have ops in the traces (Membership::by_rank's size).
size_t ranks_with_ops(const JobAnalysis& a, uint64_t id) {
  std::set<int32_t> ranks;
  if (auto it = a.members.find(id); it != a.members.end())
    for (const MemberRef& m : it->second)
      if (a.member(m).rank >= 0) ranks.insert(a.member(m).rank);
  return ranks.size();
}

// A rank that makes its peers wait on one communicator while one of those peers makes it wait on
// another is the program's shape (each waits for the other in turn: roots, senders before
// receivers, ops in different orders), not a slow rank: a straggler is late wherever it goes.
// Both findings are withdrawn, each naming the other communicator.
void withdraw_contradicted_stragglers(const JobAnalysis& a, std::map<uint64_t, StragglerStats>& stats,
                                      const std::map<uint64_t, std::string>& names) {
  struct Found {
    uint64_t comm;
    size_t process;
    StragglerRank* rank;
  };
  std::vector<Found> found;
  constexpr size_t kMaxCompared = 4096;  // findings are few; past this many, none is withdrawn
  for (auto& [id, st] : stats)
    for (StragglerRank& r : st.ranks)
      if (r.finding)
        if (auto process = process_of(a, id, r.rank)) found.push_back({id, *process, &r});
  if (found.size() > kMaxCompared) return;
  std::vector<uint64_t> offset_by(found.size(), 0);
  for (size_t i = 0; i < found.size(); ++i)
    for (size_t j = 0; j < found.size(); ++j)
      if (found[i].comm != found[j].comm && found[i].process != found[j].process &&
          is_member(a, found[i].comm, found[j].process) && is_member(a, found[j].comm, found[i].process))
        offset_by[i] = found[j].comm;
  for (size_t i = 0; i < found.size(); ++i) {
    if (!offset_by[i]) continue;
    StragglerRank& r = *found[i].rank;
    r.finding = false;
    r.offset_by_comm = offset_by[i];
    r.text = fmt::format("comm {}: rank {} started last, but a peer of it starts last on comm {}: the program's shape, "
                         "not a slow rank",
                         comm_label(found[i].comm, names), r.rank, comm_label(offset_by[i], names));
  }
}

}  // namespace

std::map<uint64_t, StragglerStats> judge_stragglers(const JobAnalysis& a, const std::set<uint64_t>& comm_ids,
                                                    const std::map<uint64_t, std::string>& names) {
  std::map<uint64_t, StragglerStats> stats;
  for (uint64_t id : comm_ids) stats[id] = straggler_stats(a, id, a.comm(id), ranks_with_ops(a, id), names);
  withdraw_contradicted_stragglers(a, stats, names);
  return stats;
}

// P(X >= k) for X ~ Binomial(n, p). The first term comes from lgamma (no overflow for large n);
// each next one from the one before, P(i+1) / P(i) = (n-i)/(i+1) * p/(1-p), kept relative to the
// first (rescaled as it grows) so that neither underflow nor overflow loses it. Past the mode the
// terms fall geometrically: the sum stops when they no longer change a double.
double binomial_tail(uint64_t n, uint64_t k, double p) {
  if (k == 0) return 1.0;
  if (k > n || p <= 0) return 0.0;
  if (p >= 1) return 1.0;
  const double dn = static_cast<double>(n), dk = static_cast<double>(k);
  double log_first = std::lgamma(dn + 1) - std::lgamma(dk + 1) - std::lgamma(dn - dk + 1) + dk * std::log(p) +
                     (dn - dk) * std::log1p(-p);
  const double odds = p / (1 - p), mode = dn * p;
  double term = 1, sum = 0, log_scale = 0;  // the tail is exp(log_first + log_scale) * sum
  for (uint64_t i = k; i <= n; ++i) {
    sum += term;
    if (static_cast<double>(i) > mode && term < sum * 1e-17) break;
    term *= static_cast<double>(n - i) / static_cast<double>(i + 1) * odds;
    if (sum > 1e280) {
      sum *= 1e-280, term *= 1e-280;
      log_scale += 280 * std::log(10.0);
    }
  }
  return std::min(std::exp(log_first + log_scale + std::log(sum)), 1.0);
}

}  // namespace ncclwatch::model
