#include "model/divergence.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ncclwatch::model {
namespace {

using namespace trace;

constexpr size_t kMaxFilesReread = 16;
// Seqs of one communicator count up by one; one further than the ops seen plus this is damage, and
// must not size a table (see Interleavings).
constexpr uint64_t kSeqSlack = 1u << 16;

// Each compared pair of ranks costs a pass over both ranks' calls and the first one's
// communicators. All comparisons together may take this many passes over the calls and
// communicators of the files read again (the first pair is compared whatever it costs), so that
// time follows the job's size however many communicators' counts differ; the communicators past it
// are left without a stretch (their missing ops are reported all the same).
constexpr uint64_t kComparisonPasses = 32;

// A process's collectives in issue order (the order the shim recorded them).
struct CallOrder {
  std::vector<uint64_t> comm;
  std::vector<uint64_t> seq;
  std::vector<int64_t> gpu_begin;  // aligned; kUnknown where the launch was not timed
  std::vector<uint64_t> launch;
  // Its communicators numbered in the order of their first op, for tables by communicator.
  std::vector<uint32_t> number;                       // of each op's communicator
  std::unordered_map<uint64_t, uint32_t> number_of;   // comm_id -> number

  void number_comms() {
    number.reserve(comm.size());
    for (uint64_t id : comm) number.push_back(number_of.try_emplace(id, static_cast<uint32_t>(number_of.size())).first->second);
  }
};

constexpr uint32_t kNoNumber = std::numeric_limits<uint32_t>::max();

constexpr int64_t kUnknown = std::numeric_limits<int64_t>::min();

CallOrder read_call_order(const JobAnalysis& a, size_t process) {
  CallOrder order;
  int64_t clock_offset = a.ops[process].clock_offset;
  std::unordered_map<uint64_t, std::vector<size_t>> awaiting_timing;  // launch id -> its ops
  a.read_again(
      process,
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
      });
  order.number_comms();
  return order;
}

// How many ops of A a process had issued before each op of B: a step function of B's seq k, kept
// as its steps (the seqs the process issued), so that memory follows the ops, however far seqs leap.
struct Interleaving {
  const std::pair<uint64_t, uint64_t>* steps = nullptr;  // (B's seq, A ops before it), seqs increasing
  size_t n = 0;
  uint64_t total_a = 0;

  uint64_t size() const { return n ? steps[n - 1].first : 0; }  // B's seqs 1..size() covered
  // A ops before B's seq k, 1 <= k <= size(): a seq the process did not issue takes the next one's.
  uint64_t a_before(uint64_t k) const {
    return std::lower_bound(steps, steps + n, std::pair<uint64_t, uint64_t>(k, 0))->second;
  }
};

// The interleavings of A with every other communicator B of a process, from one pass over its calls
// (the steps of all B in one array, grouped by B's number).
class Interleavings {
 public:
  Interleavings(const CallOrder& o, uint64_t a) {
    auto a_it = o.number_of.find(a);
    uint32_t a_number = a_it == o.number_of.end() ? kNoNumber : a_it->second;
    size_t comms = o.number_of.size();
    std::vector<uint64_t> last_seq(comms, 0), issued(comms, 0);
    std::vector<std::pair<size_t, uint64_t>> kept;  // (op, A ops before it): the ops that make a step
    first_.assign(comms + 1, 0);
    for (size_t i = 0; i < o.comm.size(); ++i) {
      uint32_t b = o.number[i];
      if (b == a_number) {
        ++total_a_;
        continue;
      }
      uint64_t b_ops = ++issued[b];
      if (o.seq[i] > last_seq[b] && o.seq[i] <= b_ops + kSeqSlack) {
        last_seq[b] = o.seq[i];
        kept.emplace_back(i, total_a_);
        ++first_[b + 1];
      }
    }
    for (size_t b = 0; b < comms; ++b) first_[b + 1] += first_[b];
    steps_.resize(kept.size());
    std::vector<size_t> next(first_.begin(), first_.end() - 1);
    for (const auto& [i, a_before] : kept) steps_[next[o.number[i]]++] = {o.seq[i], a_before};
  }

  // B by its number in the call order (kNoNumber: a communicator the process issued no op on).
  Interleaving with(uint32_t b) const {
    if (b == kNoNumber || b + 1 >= first_.size()) return {nullptr, 0, total_a_};
    return {steps_.data() + first_[b], first_[b + 1] - first_[b], total_a_};
  }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> steps_;
  std::vector<size_t> first_;  // B's steps are [first_[B], first_[B + 1])
  uint64_t total_a_ = 0;
};

struct Difference {
  uint64_t k = 0;                   // B's seq before which the counts differ
  uint64_t agreed = 0;              // A ops both had issued before B's seq k-1
  uint64_t r_count = 0, q_count = 0;  // A ops before B's seq k (or in all, when the rank never issued it)
  bool r_known = false, q_known = false;
  int64_t period = -1;              // A ops in the stretch before (between B k-2 and k-1), -1 unknown
};

std::optional<Difference> first_difference(const Interleaving& r, const Interleaving& q) {
  uint64_t len = std::max(r.size(), q.size());
  auto r_before = [&](uint64_t k) { return k <= r.size() ? r.a_before(k) : r.total_a; };
  size_t ri = 0, qi = 0;  // the first step of each at or after k (steps[n - 1] is the last)
  // Both counts hold still from k up to the nearer of their next steps: only the k just past a step
  // (and k = 1) can be the first to differ.
  for (uint64_t k = 1; k <= len;) {
    while (ri < r.n && r.steps[ri].first < k) ++ri;
    while (qi < q.n && q.steps[qi].first < k) ++qi;
    bool rk = k <= r.size(), qk = k <= q.size();
    uint64_t vr = rk ? r.steps[ri].second : r.total_a;
    uint64_t vq = qk ? q.steps[qi].second : q.total_a;
    // A rank that never issued B's seq k only differs if it already issued more ops of A than the
    // other did before it.
    bool differ = (rk && qk && vr != vq) || (!rk && qk && vr > vq) || (rk && !qk && vq > vr);
    if (differ) {
      Difference d{k, k > 1 ? r_before(k - 1) : 0, vr, vq, rk, qk, -1};
      if (k >= 2) d.period = static_cast<int64_t>(r_before(k - 1) - (k >= 3 ? r_before(k - 2) : 0));
      return d;
    }
    uint64_t next = len + 1;
    if (rk) next = std::min(next, r.steps[ri].first + 1);
    if (qk) next = std::min(next, q.steps[qi].first + 1);
    k = next;
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
// never issued, at the end of a hung job, hold no jump; nor does a seq the watchdog saw stalled on
// either rank: its start there waited on the hang itself, which may come seqs after the departure.)
uint64_t gpu_skew_jump(const CallOrder& r, const CallOrder& q, uint64_t comm, uint64_t from, uint64_t to,
                       const std::set<uint64_t>& stalled, int64_t* jump_ns) {
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
    if (stalled.count(inside[i].first)) return 0;
    *jump_ns = inside[i].second;
    return inside[i].first;
  }
  return 0;
}

// A rank whose op count on a communicator differs from the majority's, and the peer it is compared with.
struct Pair {
  uint64_t comm;
  MemberRef r, q;
  bool majority;  // q's count is held by a strict majority
};

// The communicators each process holds, and per pair of processes (r, q) two that r issued ops on
// and q holds (two suffice to know whether one other than a given one is shared): each worked out
// once, when first asked, not per communicator that differs.
class SharedComms {
 public:
  explicit SharedComms(const JobAnalysis& a) : a_(a) {}

  const std::unordered_set<uint64_t>& held_by(size_t process) {
    auto [it, inserted] = held_.try_emplace(process);
    if (inserted)
      for (const RankComm& c : a_.ops[process].comms) it->second.insert(c.comm_id);
    return it->second;
  }

  // Whether r issued ops on a communicator but `comm_id` that q holds too.
  bool shares_another(size_t r_process, size_t q_process, uint64_t comm_id) {
    auto [it, inserted] = shared_.try_emplace({r_process, q_process});
    if (inserted) {
      const std::unordered_set<uint64_t>& of_q = held_by(q_process);
      for (const RankComm& c : a_.ops[r_process].comms) {
        if (it->second.size() == 2) break;
        if (c.issued && of_q.count(c.comm_id) && std::find(it->second.begin(), it->second.end(), c.comm_id) == it->second.end())
          it->second.push_back(c.comm_id);
      }
    }
    return std::any_of(it->second.begin(), it->second.end(), [&](uint64_t id) { return id != comm_id; });
  }

 private:
  const JobAnalysis& a_;
  std::map<size_t, std::unordered_set<uint64_t>> held_;
  std::map<std::pair<size_t, size_t>, std::vector<uint64_t>> shared_;
};

// Per communicator: the ranks whose op count differs from the majority's, each with a peer to
// compare with (a rank of the majority, or of another count, sharing another communicator).
std::vector<Pair> pairs_to_compare(const JobAnalysis& a, SharedComms& shared) {
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
        std::optional<MemberRef> ref;
        for (const auto& [other_count, others] : by_count) {
          if (other_count == count || (majority && others.size() != largest)) continue;
          for (const MemberRef& q : others) {
            if (shared.shares_another(r.process, q.process, comm_id)) {
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
  return pairs;
}

// The pairs whose files, all together, are at most kMaxFilesReread; `files` gets those files.
std::vector<Pair> within_reread_limit(const std::vector<Pair>& pairs, std::vector<size_t>& files) {
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
  files.assign(needed.begin(), needed.end());
  return kept;
}

// The call orders of the files read again, and, per pair of processes (r, q), for each of r's
// communicators (a.ops[r].comms, in order) whether q holds it too and its numbers in r's and q's
// call orders: worked out once per pair.
class CallOrders {
 public:
  struct Numbers {
    bool held_by_q;
    uint32_t in_r, in_q;
  };

  CallOrders(const JobAnalysis& a, std::vector<size_t> files, SharedComms& shared)
      : a_(a), files_(std::move(files)), orders_(files_.size()), shared_(shared) {
    parallel_for(files_.size(), reader_threads(files_.size()), [&](size_t i, unsigned) {
      orders_[i] = read_call_order(a, files_[i]);
    });
  }

  const CallOrder& of(size_t process) const {
    return orders_[static_cast<size_t>(std::find(files_.begin(), files_.end(), process) - files_.begin())];
  }

  const std::vector<Numbers>& numbers(size_t r_process, size_t q_process) {
    auto [it, inserted] = numbers_.try_emplace({r_process, q_process});
    if (inserted) {
      const CallOrder& ro = of(r_process);
      const CallOrder& qo = of(q_process);
      const std::unordered_set<uint64_t>& of_q = shared_.held_by(q_process);
      auto number = [](const CallOrder& o, uint64_t id) {
        auto found = o.number_of.find(id);
        return found == o.number_of.end() ? kNoNumber : found->second;
      };
      for (const RankComm& b : a_.ops[r_process].comms)
        it->second.push_back({of_q.count(b.comm_id) > 0, number(ro, b.comm_id), number(qo, b.comm_id)});
    }
    return it->second;
  }

  // All comparisons together may take kComparisonPasses passes over the calls and communicators
  // of the files read again.
  uint64_t budget() const {
    uint64_t budget = 0;
    for (size_t i = 0; i < files_.size(); ++i) budget += orders_[i].comm.size() + a_.ops[files_[i]].comms.size();
    return budget * kComparisonPasses;
  }

 private:
  const JobAnalysis& a_;
  std::vector<size_t> files_;
  std::vector<CallOrder> orders_;
  SharedComms& shared_;
  std::map<std::pair<size_t, size_t>, std::vector<Numbers>> numbers_;
};

// A divergence found, with the difference in counts that bounds it.
struct Found {
  Divergence divergence;
  Difference difference;
};

// The narrowest stretch within which r departed on communicator p.comm, bounded by the ops of
// another communicator r issued on and q holds (one candidate per such communicator); nullopt when
// no other communicator tells, or when q is the one that departed (its own entry says so).
std::optional<Found> narrowest_stretch(const JobAnalysis& a, const Pair& p, CallOrders& orders) {
  const std::vector<RankComm>& r_comms = a.ops[p.r.process].comms;
  Interleavings r_with(orders.of(p.r.process), p.comm), q_with(orders.of(p.q.process), p.comm);
  const std::vector<CallOrders::Numbers>& number = orders.numbers(p.r.process, p.q.process);
  std::optional<Found> best;
  for (size_t i = 0; i < r_comms.size(); ++i) {
    const RankComm& b = r_comms[i];
    if (b.comm_id == p.comm || !b.issued || !number[i].held_by_q) continue;
    auto d = first_difference(r_with.with(number[i].in_r), q_with.with(number[i].in_q));
    if (!d) continue;
    Divergence div;
    div.rank = a.member(p.r).rank;
    div.reference_rank = a.member(p.q).rank;
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
    if (!best || div.to_seq - div.from_seq < best->divergence.to_seq - best->divergence.from_seq) best = Found{div, *d};
  }
  return best;
}

// The stretch in words: how many ops each rank issued on the communicator between which two ops of
// the other one.
std::string stretch_reason(const Found& found, uint64_t comm, const std::map<uint64_t, std::string>& names) {
  const Divergence& div = found.divergence;
  const Difference& d = found.difference;
  uint64_t r_len = d.r_count - d.agreed, q_len = d.q_count - d.agreed;
  std::string a_name = comm_label(comm, names), b_name = comm_label(div.other_comm, names);
  std::string where = d.k == 1 ? fmt::format("before {} seq 1", b_name)
                               : fmt::format("between {} seq {} and {}", b_name, d.k - 1, d.k);
  std::string reason = fmt::format("rank {} issued {}{} op(s) on {} {}, rank {} issued {}{}", div.rank, d.r_known ? "" : "at least ",
                                   r_len, a_name, where, div.reference_rank, d.q_known ? "" : "at least ", q_len);
  if (!d.r_known) reason += fmt::format(" (rank {} never issued {} seq {})", div.rank, b_name, d.k);
  if (!d.q_known) reason += fmt::format(" (rank {} never issued {} seq {})", div.reference_rank, b_name, d.k);
  if (d.period >= 0) reason += fmt::format("; the stretch before held {}", d.period);
  if (!div.departed) reason += "; which of the two departed cannot be told from these traces";
  return reason;
}

// The seq itself, where the stretch is one seq or a GPU start jump singles one out (a pass over
// both ranks' ops of the communicator).
void single_out_seq(const CallOrder& ro, const CallOrder& qo, uint64_t comm, const std::set<uint64_t>& stalled,
                    Divergence& div) {
  int64_t jump = 0;
  if (div.from_seq == div.to_seq) {
    div.likely_seq = div.from_seq;  // the stretch is one seq: nothing more to single out
  } else if ((div.likely_seq = gpu_skew_jump(ro, qo, comm, div.from_seq, div.to_seq, stalled, &jump))) {
    div.reason += fmt::format("; likely at seq {}: there, and only there in the stretch, its GPU start relative to "
                              "rank {} jumped by {:+.3f} ms",
                              div.likely_seq, div.reference_rank, jump / 1e6);
  }
}

// The seqs of the pair's communicator that the watchdog saw stalled on either of the two ranks.
std::set<uint64_t> stalled_seqs(const JobAnalysis& a, const Pair& p) {
  std::set<uint64_t> seqs;
  for (size_t process : {p.r.process, p.q.process})
    for (const StallEvent& stall : a.ops[process].stalls)
      if (stall.stalled && stall.comm_id == p.comm) seqs.insert(stall.seq);
  return seqs;
}

}  // namespace

std::map<uint64_t, std::vector<Divergence>> find_divergences(const JobAnalysis& a,
                                                             const std::map<uint64_t, std::string>& names) {
  SharedComms shared(a);
  std::vector<Pair> pairs = pairs_to_compare(a, shared);
  std::vector<size_t> files;
  std::vector<Pair> kept = within_reread_limit(pairs, files);
  CallOrders orders(a, std::move(files), shared);
  uint64_t work = 0, budget = orders.budget();
  std::map<uint64_t, std::vector<Divergence>> out;
  for (const Pair& p : kept) {
    const CallOrder& ro = orders.of(p.r.process);
    const CallOrder& qo = orders.of(p.q.process);
    uint64_t cost = ro.comm.size() + qo.comm.size() + a.ops[p.r.process].comms.size();
    if (work && work + cost > budget) break;
    work += cost;
    std::optional<Found> found = narrowest_stretch(a, p, orders);
    if (!found) continue;
    Divergence& div = found->divergence;
    div.reason = stretch_reason(*found, p.comm, names);
    single_out_seq(ro, qo, p.comm, stalled_seqs(a, p), div);
    out[p.comm].push_back(div);
  }
  return out;
}

}  // namespace ncclwatch::model
