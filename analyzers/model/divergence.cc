#include "divergence.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

namespace ncclwatch::report {
namespace {

using namespace trace;

constexpr size_t kMaxFilesReread = 16;
// Seqs of one communicator count up by one; one further than the ops seen plus this is damage, and
// must not size a table (see interleave).
constexpr uint64_t kSeqSlack = 1u << 16;

// A process's collectives in issue order (the order the shim recorded them).
struct CallOrder {
  std::vector<uint64_t> comm;
  std::vector<uint64_t> seq;
  std::vector<int64_t> gpu_begin;  // aligned; kUnknown where the launch was not timed
  std::vector<uint64_t> launch;
};

constexpr int64_t kUnknown = std::numeric_limits<int64_t>::min();

CallOrder read_call_order(const std::string& path, int64_t clock_offset) {
  CallOrder order;
  FileHeader header{};
  ReadStats stats;
  std::vector<TraceProblem> ignored;  // named by the main pass already
  std::unordered_map<uint64_t, std::vector<size_t>> awaiting_timing;  // launch id -> its ops
  read_trace(
      path,
      [&](const RecordView& r) {
        if (r.type == RecordType::kGpuTiming) {
          const auto* g = r.as<GpuTimingRecord>();
          if (!g) return;
          auto it = awaiting_timing.find(g->launch_id);
          if (it == awaiting_timing.end()) return;
          if (g->flags & kTimingHasBegin)
            for (size_t i : it->second) order.gpu_begin[i] = wrap_add(g->gpu_begin_ns, clock_offset);
          awaiting_timing.erase(it);
          return;
        }
        if (r.type != RecordType::kCollective) return;
        const auto* o = r.as<OpRecord>();
        if (!o) return;
        // A group's end carries the timing flag for the ops it launched.
        bool timed = o->flags & kOpTimed;
        if (static_cast<Api>(o->api) == Api::kGroupEnd && timed) {
          for (size_t i = order.comm.size(); i-- > 0 && order.gpu_begin[i] == kUnknown && order.launch[i] == o->launch_id;)
            awaiting_timing[o->launch_id].push_back(i);
          return;
        }
        if (!is_collective(static_cast<Api>(o->api))) return;
        order.comm.push_back(o->comm_id);
        order.seq.push_back(o->seq);
        order.gpu_begin.push_back(kUnknown);
        order.launch.push_back(o->launch_id);
        if (timed && awaiting_timing.size() < (1u << 16)) awaiting_timing[o->launch_id].push_back(order.comm.size() - 1);
      },
      header, stats, ignored);
  return order;
}

// How many ops of A a process had issued before each op of B.
struct Interleaving {
  std::vector<uint64_t> a_before;  // [k - 1]: before B's seq k
  uint64_t total_a = 0;
};

Interleaving interleave(const CallOrder& o, uint64_t a, uint64_t b) {
  Interleaving out;
  uint64_t b_ops = 0;
  for (size_t i = 0; i < o.comm.size(); ++i) {
    if (o.comm[i] == a) {
      ++out.total_a;
    } else if (o.comm[i] == b) {
      ++b_ops;
      if (o.seq[i] > out.a_before.size() && o.seq[i] <= b_ops + kSeqSlack) out.a_before.resize(o.seq[i], out.total_a);
    }
  }
  return out;
}

struct Difference {
  uint64_t k = 0;                   // B's seq before which the counts differ
  uint64_t agreed = 0;              // A ops both had issued before B's seq k-1
  uint64_t r_count = 0, q_count = 0;  // A ops before B's seq k (or in all, when the rank never issued it)
  bool r_known = false, q_known = false;
  int64_t period = -1;              // A ops in the stretch before (between B k-2 and k-1), -1 unknown
};

std::optional<Difference> first_difference(const Interleaving& r, const Interleaving& q) {
  size_t len = std::max(r.a_before.size(), q.a_before.size());
  for (size_t k = 1; k <= len; ++k) {
    bool rk = k <= r.a_before.size(), qk = k <= q.a_before.size();
    uint64_t vr = rk ? r.a_before[k - 1] : r.total_a;
    uint64_t vq = qk ? q.a_before[k - 1] : q.total_a;
    // A rank that never issued B's seq k only differs if it already issued more ops of A than the
    // other did before it.
    bool differ = (rk && qk && vr != vq) || (!rk && qk && vr > vq) || (rk && !qk && vq > vr);
    if (!differ) continue;
    Difference d{k, k > 1 ? r.a_before[k - 2] : 0, vr, vq, rk, qk, -1};
    if (k >= 2) d.period = static_cast<int64_t>(r.a_before[k - 2] - (k >= 3 ? r.a_before[k - 3] : 0));
    return d;
  }
  return std::nullopt;
}

std::string comm_label(uint64_t id, const std::map<uint64_t, std::string>& names) {
  auto it = names.find(id);
  if (it != names.end() && !it->second.empty()) return fmt::format("\"{}\"", it->second);
  return hex_id(id);
}

// The seq in [from, to] at which r departed, when the evidence singles one out: r's GPU start
// relative to q's (when each rank's launch of the seq began on its GPU) jumps there, and only
// there, far beyond its jumps elsewhere. Collectives keep GPUs in step, so an op one rank skipped
// (its work for that step still done) shows as one jump, and the ranks fall back into step with
// an opposite jump after it. Host enqueue times cannot do this: a host runs ahead of its GPU by
// an amount that grows with every op. Every seq of the stretch must be timed on both ranks, or an
// untimed seq could hide the real jump; 0 when anything is missing. (Seqs that one of the two
// never issued, at the end of a hung job, hold no jump.)
uint64_t gpu_skew_jump(const CallOrder& r, const CallOrder& q, uint64_t comm, uint64_t from, uint64_t to, int64_t* jump_ns) {
  std::unordered_map<uint64_t, int64_t> begin_r, begin_q;  // seq -> GPU start, kUnknown if untimed
  for (size_t i = 0; i < r.comm.size(); ++i)
    if (r.comm[i] == comm) begin_r[r.seq[i]] = r.gpu_begin[i];
  for (size_t i = 0; i < q.comm.size(); ++i)
    if (q.comm[i] == comm) begin_q[q.seq[i]] = q.gpu_begin[i];
  auto issued_by_both = [&](uint64_t s) { return begin_r.count(s) && begin_q.count(s); };
  auto lag = [&](uint64_t s) -> std::optional<int64_t> {
    auto a = begin_r.find(s), b = begin_q.find(s);
    if (a == begin_r.end() || b == begin_q.end() || a->second == kUnknown || b->second == kUnknown) return std::nullopt;
    return wrap_sub(a->second, b->second);
  };
  auto jump_at = [&](uint64_t s) -> std::optional<int64_t> {
    auto now = lag(s), before = s >= 2 ? lag(s - 1) : std::nullopt;
    if (!now || !before) return std::nullopt;
    return wrap_sub(*now, *before);
  };
  // (magnitudes are kept halved so that no value overflows)
  auto size_of = [](int64_t jump) { return static_cast<int64_t>(magnitude(jump) >> 1); };
  std::vector<std::pair<uint64_t, int64_t>> inside;  // (seq, jump)
  for (uint64_t s = std::max<uint64_t>(from, 2); s <= to && issued_by_both(s); ++s) {
    auto j = jump_at(s);
    if (!j) return 0;
    inside.emplace_back(s, *j);
  }
  if (inside.empty()) return 0;
  std::vector<int64_t> elsewhere;
  uint64_t last = std::max<uint64_t>(begin_r.size(), begin_q.size());
  for (uint64_t s = 2; s <= last + 1 && elsewhere.size() < (1u << 20); ++s)
    if (s < from || s > to + 1)  // to + 1: the ranks falling back into step
      if (auto j = jump_at(s)) elsewhere.push_back(size_of(*j));
  if (elsewhere.size() < 3) return 0;  // no baseline to stand out from
  std::nth_element(elsewhere.begin(), elsewhere.begin() + static_cast<std::ptrdiff_t>(elsewhere.size() / 2), elsewhere.end());
  int64_t typical = elsewhere[elsewhere.size() / 2];
  int64_t threshold = std::max(4 * typical, int64_t{25000});
  // The first jump past the threshold is the departure; any other inside must be its rebound
  // (opposite sign, right after it) or it is not singled out.
  for (size_t i = 0; i < inside.size(); ++i) {
    if (size_of(inside[i].second) < threshold) continue;
    for (size_t k = i + 1; k < inside.size(); ++k) {
      bool rebound = k == i + 1 && (inside[k].second < 0) != (inside[i].second < 0);
      if (size_of(inside[k].second) >= threshold && !rebound) return 0;
    }
    *jump_ns = inside[i].second;
    return inside[i].first;
  }
  return 0;
}

}  // namespace

std::map<uint64_t, std::vector<Divergence>> find_divergences(const JobAnalysis& a,
                                                             const std::map<uint64_t, std::string>& names) {
  // Per communicator: the ranks whose op count differs from the majority's, each with a peer to
  // compare with.
  struct Pair {
    uint64_t comm;
    MemberRef r, q;
    bool majority;  // q's count is held by a strict majority
  };
  std::vector<Pair> pairs;
  for (const auto& [comm_id, members] : a.members) {
    std::map<uint64_t, std::vector<MemberRef>> by_count;
    for (const MemberRef& m : members)
      if (a.member(m).issued || a.member(m).max_seq) by_count[a.member(m).max_seq].push_back(m);
    if (by_count.size() < 2) continue;
    size_t largest = 0;
    for (const auto& [count, list] : by_count) largest = std::max(largest, list.size());
    size_t holders = 0;
    for (const auto& [count, list] : by_count) holders += list.size() == largest;
    bool majority = holders == 1;
    for (const auto& [count, list] : by_count) {
      if (majority && list.size() == largest) continue;
      for (const MemberRef& r : list) {
        // The reference: a rank of the majority (or of another count) sharing another communicator.
        std::optional<MemberRef> ref;
        for (const auto& [other_count, others] : by_count) {
          if (other_count == count || (majority && others.size() != largest)) continue;
          for (const MemberRef& q : others) {
            bool shares = false;
            for (const RankComm& c : a.ops[r.process].comms)
              if (c.comm_id != comm_id && c.issued && a.ops[q.process].comm(c.comm_id)) shares = true;
            if (shares) {
              ref = q;
              break;
            }
          }
          if (ref) break;
        }
        if (ref) pairs.push_back({comm_id, r, *ref, majority});
      }
    }
  }
  std::set<size_t> needed;
  std::vector<Pair> kept;
  for (const Pair& p : pairs) {
    std::set<size_t> more = needed;
    more.insert(p.r.process);
    more.insert(p.q.process);
    if (more.size() > kMaxFilesReread) continue;
    needed = std::move(more);
    kept.push_back(p);
  }
  std::vector<size_t> files(needed.begin(), needed.end());
  std::vector<CallOrder> orders(files.size());
  parallel_for(files.size(), reader_threads(files.size()), [&](size_t i, unsigned) {
    orders[i] = read_call_order(a.files[files[i]], a.ops[files[i]].clock_offset);
  });
  auto order_of = [&](size_t process) -> const CallOrder& {
    return orders[static_cast<size_t>(std::find(files.begin(), files.end(), process) - files.begin())];
  };

  std::map<uint64_t, std::vector<Divergence>> out;
  for (const Pair& p : kept) {
    const RankComm& r = a.member(p.r);
    const RankComm& q = a.member(p.q);
    const CallOrder& ro = order_of(p.r.process);
    const CallOrder& qo = order_of(p.q.process);
    std::optional<Divergence> best;
    for (const RankComm& b : a.ops[p.r.process].comms) {
      if (b.comm_id == p.comm || !b.issued || !a.ops[p.q.process].comm(b.comm_id)) continue;
      auto d = first_difference(interleave(ro, p.comm, b.comm_id), interleave(qo, p.comm, b.comm_id));
      if (!d) continue;
      Divergence div;
      div.rank = r.rank;
      div.reference_rank = q.rank;
      div.other_comm = b.comm_id;
      div.from_seq = d->agreed + 1;
      div.to_seq = std::max({d->r_count, d->q_count, div.from_seq});
      div.other_from_seq = d->k - 1;
      div.other_to_seq = d->k;
      uint64_t r_len = d->r_count - d->agreed, q_len = d->q_count - d->agreed;
      // Which of the two left the pattern: the majority says so; between two ranks, the one whose
      // stretch differs from the stretch before it.
      bool r_regular = d->period >= 0 && (d->r_known ? r_len == uint64_t(d->period) : r_len <= uint64_t(d->period));
      bool q_regular = d->period >= 0 && (d->q_known ? q_len == uint64_t(d->period) : q_len <= uint64_t(d->period));
      div.departed = p.majority || (!r_regular && q_regular);
      if (!p.majority && r_regular && !q_regular) continue;  // the peer departed: its own entry says so
      std::string a_name = comm_label(p.comm, names), b_name = comm_label(b.comm_id, names);
      std::string where = d->k == 1 ? fmt::format("before {} seq 1", b_name)
                                    : fmt::format("between {} seq {} and {}", b_name, d->k - 1, d->k);
      div.reason = fmt::format("rank {} issued {}{} op(s) on {} {}, rank {} issued {}{}", r.rank, d->r_known ? "" : "at least ",
                               r_len, a_name, where, q.rank, d->q_known ? "" : "at least ", q_len);
      if (!d->r_known) div.reason += fmt::format(" (rank {} never issued {} seq {})", r.rank, b_name, d->k);
      if (!d->q_known) div.reason += fmt::format(" (rank {} never issued {} seq {})", q.rank, b_name, d->k);
      if (d->period >= 0) div.reason += fmt::format("; the stretch before held {}", d->period);
      if (!div.departed) div.reason += "; which of the two departed cannot be told from these traces";
      int64_t jump = 0;
      if (div.from_seq == div.to_seq) {
        div.likely_seq = div.from_seq;  // the stretch is one seq: nothing more to single out
      } else if ((div.likely_seq = gpu_skew_jump(ro, qo, p.comm, div.from_seq, div.to_seq, &jump))) {
        div.reason += fmt::format("; likely at seq {}: there, and only there in the stretch, its GPU start relative to "
                                  "rank {} jumped by {:+.3f} ms",
                                  div.likely_seq, q.rank, jump / 1e6);
      }
      if (!best || div.to_seq - div.from_seq < best->to_seq - best->from_seq) best = div;
    }
    if (best) out[p.comm].push_back(*best);
  }
  return out;
}

}  // namespace ncclwatch::report
