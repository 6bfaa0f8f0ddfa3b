// hang: which rank stopped where, which ranks disagreed, who was late, and where a rank's program
// departed from its peers'. Ranks are matched by (communicator identity, seq).
#include "divergence.h"
#include "reports.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <set>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using trace::Api;

constexpr size_t kMaxStallsPerComm = 64;
constexpr size_t kMaxMismatchesShown = 20;  // in text output; JSON lists them all
constexpr size_t kMaxAbsentListed = 256;    // ranks in "absent_ranks"; "absent_ranges" holds them all

// Ranks first..last (inclusive) that left no trace file.
struct RankRange {
  int32_t first, last;
};

// The ranks of [0, nranks) missing from `present`, as ranges: as many as there are ranks present
// (plus one), however many ranks a record claims the communicator has.
std::vector<RankRange> absent_ranges(int32_t nranks, const std::map<int32_t, size_t>& present) {
  std::vector<RankRange> out;
  int32_t next = 0;
  for (const auto& [rank, process] : present) {
    if (rank >= nranks) break;
    if (rank > next) out.push_back({next, rank - 1});
    next = rank + 1;
  }
  if (next < nranks) out.push_back({next, nranks - 1});
  return out;
}

uint64_t rank_count(const std::vector<RankRange>& ranges) {
  uint64_t n = 0;
  for (const RankRange& r : ranges) n += static_cast<uint64_t>(r.last - r.first) + 1;
  return n;
}

// The first `limit` ranks the ranges hold.
std::vector<int32_t> first_ranks(const std::vector<RankRange>& ranges, size_t limit) {
  std::vector<int32_t> out;
  for (const RankRange& r : ranges)
    for (int32_t rank = r.first; rank <= r.last && out.size() < limit; ++rank) out.push_back(rank);
  return out;
}

std::vector<RankRange> ranges_of(const json& pairs) {
  std::vector<RankRange> out;
  for (const json& r : pairs) out.push_back({r[0].get<int32_t>(), r[1].get<int32_t>()});
  return out;
}

// "0,3-5,9": at most `limit` ranges, then how many ranks in all.
std::string ranges_text(const std::vector<RankRange>& ranges, size_t limit = 16) {
  std::string out;
  for (size_t i = 0; i < ranges.size() && i < limit; ++i) {
    const RankRange& r = ranges[i];
    if (i) out += ',';
    out += r.first == r.last ? std::to_string(r.first) : fmt::format("{}-{}", r.first, r.last);
  }
  if (ranges.size() > limit) out += fmt::format(",... ({} ranks)", rank_count(ranges));
  return out;
}

bool is_rooted(uint16_t api) {
  Api a = static_cast<Api>(api);
  return a == Api::kBroadcast || a == Api::kBcast || a == Api::kReduce || a == Api::kGather || a == Api::kScatter;
}

// One entry per field in which `got` differs from `expected`.
void compare_fields(uint64_t seq, const OpSignature& expected, const std::vector<int32_t>& expected_ranks,
                    const OpSignature& got, const std::vector<int32_t>& ranks, json& out) {
  auto add = [&](const char* field, json want, json value) {
    out.push_back({{"seq", seq},
                   {"field", field},
                   {"expected", want},
                   {"value", value},
                   {"ranks", ranks},
                   {"expected_ranks", expected_ranks.size() <= 64 ? json(expected_ranks) : json(expected_ranks.size())}});
  };
  if (got.api != expected.api)
    add("op", trace::api_name(static_cast<Api>(expected.api)), trace::api_name(static_cast<Api>(got.api)));
  if (got.count != expected.count) add("count", expected.count, got.count);
  if (got.datatype != expected.datatype) add("datatype", datatype_name(expected.datatype), datatype_name(got.datatype));
  if (got.redop != expected.redop) add("redop", redop_name(expected.redop), redop_name(got.redop));
  if (got.peer != expected.peer) add(is_rooted(expected.api) || is_rooted(got.api) ? "root" : "peer", expected.peer, got.peer);
}

// Severity of what a communicator shows, to pick what to look at first across communicators.
enum Severity {
  kNone = 0, kStraggler = 1, kIncomplete = 2, kMismatch = 3, kMissing = 4, kDivergence = 5, kInitHung = 6, kAbsent = 7
};

struct CommVerdict {
  Severity severity = kNone;
  std::string text;
  // Between equally severe findings: a departure on the comm where the rank issued fewer ops (it
  // skipped one there) explains the one where it issued more (it moved on to another comm).
  bool rank_also_missing = false;
  bool before(const CommVerdict& o) const {
    return severity != o.severity ? severity > o.severity : rank_also_missing && !o.rank_also_missing;
  }
};

}  // namespace

std::map<uint64_t, std::string> comm_names(const Job& job) {
  std::map<uint64_t, std::string> names;
  for (const ProcessTrace& p : job.processes)
    for (const CommInstance& c : p.comms)
      if (!c.name.empty()) names.emplace(c.id, c.name);
  return names;
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

std::string comm_label(uint64_t id, const std::map<uint64_t, std::string>& names) {
  auto it = names.find(id);
  if (it != names.end() && !it->second.empty()) return fmt::format("\"{}\" ({})", it->second, hex_id(id));
  return hex_id(id);
}

json environment_differences(const JobAnalysis& a) {
  std::map<std::string, std::map<std::string, std::vector<int>>> seen;  // key -> value -> process indexes
  std::set<std::string> keys;
  std::vector<std::map<std::string, std::string>> envs;
  for (size_t i = 0; i < a.job.processes.size(); ++i) {
    const ProcessTrace& p = a.job.processes[i];
    auto env = p.nccl_env();
    if (!p.nccl_version().empty()) env["nccl_version"] = p.nccl_version();
    for (const auto& [k, v] : env) keys.insert(k);
    envs.push_back(std::move(env));
  }
  json out = json::array();
  for (const std::string& key : keys) {
    std::map<std::string, std::vector<int32_t>> values;
    for (size_t i = 0; i < envs.size(); ++i) {
      auto it = envs[i].find(key);
      values[it == envs[i].end() ? "(unset)" : it->second].push_back(a.ops[i].world_rank());
    }
    if (values.size() < 2) continue;
    json entry = {{"key", key}, {"values", json::array()}};
    for (auto& [value, ranks] : values) {
      std::sort(ranks.begin(), ranks.end());
      size_t n = ranks.size();
      if (ranks.size() > 64) ranks.resize(64);
      entry["values"].push_back({{"value", value}, {"ranks", ranks}, {"processes", n}});
    }
    out.push_back(entry);
  }
  return out;
}

HangReport hang_report(const JobAnalysis& a) {
  HangReport report;
  bool& findings = report.findings;
  std::map<uint64_t, std::string> names = comm_names(a.job);
  std::map<uint64_t, std::vector<Divergence>> divergences = find_divergences(a, names);

  // Ranks that created a communicator (lifecycle records) count as present even without ops.
  // Ranks still in the creation call (it never returned) are present too, and named.
  struct Created {
    int32_t nranks = 0;
    std::map<int32_t, size_t> ranks;  // rank -> process
    std::map<int32_t, Api> hung;      // rank -> its creation call that never returned
  };
  std::map<uint64_t, Created> created;
  for (size_t i = 0; i < a.job.processes.size(); ++i)
    for (const CommInstance& c : a.job.processes[i].comms) {
      if (c.state == CommState::kInitFailed || !c.id) continue;
      Created& cr = created[c.id];
      cr.nranks = std::max(cr.nranks, c.nranks);
      if (c.rank < 0) continue;
      cr.ranks.emplace(c.rank, i);
      if (c.state == CommState::kInitHung) cr.hung.emplace(c.rank, c.api);
    }
  std::set<uint64_t> ids;
  for (const auto& [id, m] : a.members) ids.insert(id);
  for (const auto& [id, c] : created) ids.insert(id);

  json comms = json::array();
  std::vector<CommVerdict> verdicts;
  for (uint64_t id : ids) {
    if (!id) continue;
    const CommOps* ops = a.comm(id);
    static const std::vector<MemberRef> none;
    auto mit = a.members.find(id);
    const std::vector<MemberRef>& members = mit == a.members.end() ? none : mit->second;
    int32_t nranks = ops ? ops->nranks : 0;
    std::map<int32_t, size_t> present;  // rank -> process
    std::map<int32_t, const RankComm*> by_rank;
    for (const MemberRef& m : members) {
      const RankComm& rc = a.member(m);
      nranks = std::max(nranks, rc.nranks);
      if (rc.rank >= 0) {
        present.emplace(rc.rank, m.process);
        by_rank.emplace(rc.rank, &rc);
      }
    }
    std::vector<int32_t> hung_ranks;
    Api hung_api = Api::kUnknown;
    if (auto cit = created.find(id); cit != created.end()) {
      nranks = std::max(nranks, cit->second.nranks);
      for (const auto& [rank, process] : cit->second.ranks) present.emplace(rank, process);
      for (const auto& [rank, api] : cit->second.hung) hung_ranks.push_back(rank), hung_api = api;
    }
    uint64_t issued_max = 0, collective_ops = 0;
    for (const auto& [rank, rc] : by_rank) {
      issued_max = std::max(issued_max, rc->max_seq);
      collective_ops += rc->issued + rc->p2p_ops;
    }
    std::vector<RankRange> absent = absent_ranges(nranks, present);
    if (!collective_ops && absent.empty() && hung_ranks.empty()) continue;  // a comm that never ran ops: nothing to say

    std::vector<int32_t> ranks;
    for (const auto& [r, p] : present) ranks.push_back(r);
    json absent_json = json::array();
    for (const RankRange& r : absent) absent_json.push_back({r.first, r.last});
    json j = {{"comm", hex_id(id)},
              {"nranks", nranks},
              {"ranks", ranks},
              {"absent_ranks", first_ranks(absent, kMaxAbsentListed)},
              {"absent_count", rank_count(absent)},
              {"absent_ranges", absent_json}};
    if (auto n = names.find(id); n != names.end()) j["name"] = n->second;
    j["last_seq_issued"] = issued_max;
    j["init_never_returned"] = hung_ranks;

    // Completion and missing ops.
    uint64_t done_by_all = issued_max;
    json missing = json::array(), incomplete = json::array(), per_rank = json::array();
    std::vector<int32_t> missing_ranks;
    uint64_t lowest_issued = issued_max;
    for (const auto& [rank, process] : present) {
      auto it = by_rank.find(rank);
      const RankComm* rc = it == by_rank.end() ? nullptr : it->second;
      uint64_t last = rc ? rc->max_seq : 0, done = rc ? rc->completed_seq() : 0;
      done_by_all = std::min(done_by_all, done);
      const ProcessTrace& p = a.job.processes[process];
      json pr = {{"rank", rank}, {"host", p.host()}, {"pid", p.pid()}, {"last_seq", last}, {"completed_seq", done},
                 {"process_ended", p.process_end.has_value()}};
      per_rank.push_back(pr);
      if (last < issued_max) {
        missing.push_back({{"rank", rank}, {"first_missing_seq", last + 1}, {"last_seq", last}, {"host", p.host()},
                           {"pid", p.pid()}, {"process_ended", p.process_end.has_value()}});
        missing_ranks.push_back(rank);
        lowest_issued = std::min(lowest_issued, last);
      }
      if (done < last) incomplete.push_back({{"rank", rank}, {"from_seq", done + 1}, {"to_seq", last}});
    }
    j["last_seq_completed_by_all"] = present.empty() ? 0 : done_by_all;
    j["missing"] = missing;
    j["incomplete"] = incomplete;
    j["per_rank"] = per_rank;

    // Mismatches, every seq.
    json mismatches = json::array();
    size_t mismatched_seqs = 0;
    if (ops)
      for (const auto& [seq, groups] : ops->deviants) {
        auto sg = a.signature_groups(*ops, seq);
        if (sg.size() < 2) continue;
        ++mismatched_seqs;
        for (size_t g = 1; g < sg.size(); ++g) compare_fields(seq, sg[0].first, sg[0].second, sg[g].first, sg[g].second, mismatches);
      }
    j["mismatches"] = mismatches;
    j["mismatched_seqs"] = mismatched_seqs + (ops ? ops->untracked_mismatches : 0);
    if (ops && ops->untracked_mismatches) j["mismatches_not_detailed"] = ops->untracked_mismatches;

    // Stalls the shim's watchdog recorded.
    json stalls = json::array();
    size_t stall_count = 0;
    for (const MemberRef& m : members)
      for (const StallEvent& s : a.ops[m.process].stalls) {
        if (s.comm_id != id) continue;
        if (++stall_count > kMaxStallsPerComm) continue;
        stalls.push_back({{"rank", a.member(m).rank}, {"seq", s.seq}, {"op", trace::api_name(static_cast<Api>(s.api))},
                          {"state", s.stalled ? "stalled" : "resolved"}, {"pending_s", static_cast<double>(wrap_sub(s.time, s.enqueued)) / 1e9},
                          {"time_ns", s.time}});
      }
    j["stalls"] = stalls;
    j["stall_records"] = stall_count;

    // Point-to-point: sends with no matching receive (or the reverse).
    json p2p = json::array();
    for (const MemberRef& m : members)
      for (const P2PChannel& ch : a.ops[m.process].p2p) {
        if (ch.comm_id != id || !ch.send) continue;
        uint64_t recvs = 0;
        bool peer_traced = false;
        if (auto peer = by_rank.find(ch.peer); peer != by_rank.end()) {
          for (const MemberRef& pm : members)
            if (a.member(pm).rank == ch.peer)
              for (const P2PChannel& rc : a.ops[pm.process].p2p)
                if (rc.comm_id == id && !rc.send && rc.peer == ch.rank) recvs = rc.ops;
          peer_traced = true;
        }
        if (peer_traced && recvs != ch.ops)
          p2p.push_back({{"src", ch.rank}, {"dst", ch.peer}, {"sends", ch.ops}, {"recvs", recvs}});
      }
    j["p2p_unmatched"] = p2p;

    // Stragglers: who started last at each seq every present rank issued, and by how much. On the
    // GPU side where every rank's launch of the seq was timed: a host returns from an enqueue long
    // before its GPU runs the op, so host arrival gaps grow with every op a fast rank runs ahead.
    size_t n_present = by_rank.size();
    bool on_gpu = false;
    if (ops && n_present >= 2)
      on_gpu = std::any_of(ops->slots.begin(), ops->slots.end(), [&](const SeqSlot& s) { return s.gpu.complete(n_present); });
    struct Lateness {
      uint64_t times_last = 0;
      double total_ns = 0;
      LatencyHistogram hist;  // for the typical (median) lateness
    };
    std::map<int32_t, Lateness> lateness;
    std::vector<std::pair<int64_t, uint64_t>> worst;  // (lateness, seq)
    uint64_t judged = 0;
    if (ops && n_present >= 2)
      for (size_t i = 0; i < ops->slots.size(); ++i) {
        const SeqSlot& s = ops->slots[i];
        const LastArrivals& arrivals = on_gpu ? s.gpu : s.host;
        if (!arrivals.complete(n_present)) continue;
        int32_t last_rank = arrivals.last_rank;
        int64_t late = wrap_sub(arrivals.last, arrivals.second);
        ++judged;
        Lateness& l = lateness[last_rank];
        ++l.times_last;
        l.total_ns += static_cast<double>(late);
        l.hist.add(late);
        worst.emplace_back(late, ops->seq_at(i));
        if (worst.size() > 64) {
          std::nth_element(worst.begin(), worst.begin() + 9, worst.end(), std::greater<>());
          worst.resize(10);
        }
      }
    json stragglers = {{"ranks", json::array()}, {"worst", json::array()},
                       {"measured_on", on_gpu ? "gpu_start" : "host_enqueue"}};
    std::sort(worst.begin(), worst.end(), std::greater<>());
    if (worst.size() > 10) worst.resize(10);
    for (const auto& [late, seq] : worst) {
      const SeqSlot& s = *ops->slot(seq);
      stragglers["worst"].push_back({{"seq", seq}, {"rank", on_gpu ? s.gpu.last_rank : s.host.last_rank}, {"late_ms", late / 1e6}});
    }
    // The op's own time: the longest of the communicator's fastest GPU-timed calls (a call waits
    // for the last rank, so its fastest samples are the ones that waited for nobody).
    int64_t own_ns = 0;
    for (const LatencyBucket& b : a.latency)
      if (b.key.comm_id == id && b.key.timing == TimingSource::kGpu && b.hist.count()) own_ns = std::max(own_ns, b.hist.min());
    double p = n_present ? 1.0 / static_cast<double>(n_present) : 0;
    double expected = static_cast<double>(judged) * p;
    std::vector<std::string> straggler_texts;
    for (const auto& [rank, l] : lateness) {
      double mean_late = l.total_ns / static_cast<double>(l.times_last);
      double typical_late = static_cast<double>(l.hist.percentile(50));
      // Far above chance: being last this often, if every rank were equally likely to be, has a
      // probability under 1 %. (2 ranks: last at 7 of 7 judged seqs, or 10 of 11.)
      bool far = l.times_last >= 3 && binomial_tail(judged, l.times_last, p) < 0.01;
      // A finding only when it is far above chance, large (1 ms) and large against the op itself,
      // and measured where it happens: on the GPU.
      bool finding = far && on_gpu && typical_late >= std::max(1e6, 2.0 * static_cast<double>(own_ns));
      std::string text;
      if (finding) {
        text = fmt::format("comm {}: rank {} started last on the GPU at {} of {} collectives, typically {:.2f} ms after the "
                           "others (mean {:.2f} ms)",
                           comm_label(id, names), rank, l.times_last, judged, typical_late / 1e6, mean_late / 1e6);
        straggler_texts.push_back(text);
      }
      json entry = {{"rank", rank}, {"times_last", l.times_last}, {"expected_by_chance", expected},
                    {"typical_late_ms", typical_late / 1e6}, {"mean_late_ms", mean_late / 1e6},
                    {"far_more_than_chance", far}, {"finding", finding}};
      if (finding) entry["text"] = text;
      stragglers["ranks"].push_back(entry);
    }
    stragglers["seqs_judged"] = judged;
    if (!on_gpu && judged)
      stragglers["note"] = "no collective of this communicator was GPU-timed on every rank: host enqueue times cannot "
                           "say who was late (set NCCLWATCH_TIMING=gpu)";
    j["stragglers"] = stragglers;

    // Divergence.
    json div = json::array();
    std::vector<const Divergence*> departed;
    if (auto it = divergences.find(id); it != divergences.end())
      for (const Divergence& d : it->second) {
        json e = {{"rank", d.rank}, {"from_seq", d.from_seq}, {"to_seq", d.to_seq}, {"reason", d.reason},
                  {"reference_rank", d.reference_rank}, {"departed", d.departed}};
        if (d.likely_seq) e["likely_seq"] = d.likely_seq;
        if (d.other_comm) {
          e["other_comm"] = hex_id(d.other_comm);
          e["other_from_seq"] = d.other_from_seq;
          e["other_to_seq"] = d.other_to_seq;
        }
        div.push_back(e);
        departed.push_back(&d);
      }
    j["divergence"] = div;

    // The verdict: the most telling finding, in words.
    CommVerdict v;
    std::string label = comm_label(id, names);
    auto set = [&](Severity s, std::string text) {
      if (s > v.severity) {
        v.severity = s;
        v.text = std::move(text);
      }
    };
    if (!hung_ranks.empty()) {
      std::string stuck = fmt::format("comm {}: rank(s) {} entered {} and never returned", label, ranks_text(hung_ranks),
                                      trace::api_name(hung_api));
      std::vector<int32_t> made;
      for (const auto& [rank, process] : present)
        if (!std::binary_search(hung_ranks.begin(), hung_ranks.end(), rank)) made.push_back(rank);
      if (!absent.empty())
        set(kAbsent, fmt::format("{}, waiting for rank(s) {} of {}, which never called it (no trace shows them in it) — "
                                 "look at them first",
                                 stuck, ranges_text(absent), nranks));
      else if (!made.empty())
        set(kInitHung, fmt::format("{}, though rank(s) {} created it", stuck, ranks_text(made)));
      else
        set(kInitHung, fmt::format("{}: every rank is in it (a rank passed another unique id, size or rank?)", stuck));
    }
    if (!absent.empty())
      set(kAbsent, fmt::format("comm {}: rank(s) {} of {} left no trace file; their state is unknown — look at them first",
                               label, ranges_text(absent), nranks));
    if (!departed.empty()) {
      const Divergence& d = *departed.front();
      set(kDivergence, fmt::format("comm {}: rank {} departed from its peers' program within seqs {}..{}{}: {}", label, d.rank,
                                   d.from_seq, d.to_seq, d.likely_seq ? fmt::format(" (likely at seq {})", d.likely_seq) : "",
                                   d.reason));
      if (v.severity == kDivergence)
        v.rank_also_missing = std::find(missing_ranks.begin(), missing_ranks.end(), d.rank) != missing_ranks.end();
    }
    if (!missing_ranks.empty()) {
      std::vector<int32_t> lowest;
      for (const auto& m : missing)
        if (m["last_seq"].get<uint64_t>() == lowest_issued) lowest.push_back(m["rank"].get<int32_t>());
      std::string why;
      if (lowest.size() == 1) {
        const ProcessTrace& p = a.job.processes[present[lowest[0]]];
        why = p.process_end ? "; its process exited" : "; its trace ends without a final record (killed, crashed or still hung)";
        // Blocked elsewhere? An op of another communicator it issued but never completed.
        for (const RankComm& other : a.ops[present[lowest[0]]].comms)
          if (other.comm_id != id && other.completed_seq() < other.max_seq) {
            why += fmt::format("; it waits in comm {} seq {}", comm_label(other.comm_id, names), other.completed_seq() + 1);
            break;
          }
      }
      set(kMissing, fmt::format("comm {}: rank(s) {} never issued seq {} that {} peer(s) issued (they reached seq {}){}", label,
                                ranks_text(lowest), lowest_issued + 1, present.size() - missing_ranks.size(), issued_max, why));
    }
    if (!mismatches.empty()) {
      const json& m = mismatches.front();
      set(kMismatch, fmt::format("comm {}: rank(s) {} passed {} {} where the others passed {} at seq {}{}", label,
                                 ranks_text(m["ranks"].get<std::vector<int32_t>>()), m["field"].get<std::string>(),
                                 dump_json(m["value"]), dump_json(m["expected"]), m["seq"].get<uint64_t>(),
                                 mismatched_seqs > 1 ? fmt::format(" (and {} more mismatched seq(s))", mismatched_seqs - 1) : ""));
    }
    if (!incomplete.empty() && missing_ranks.empty())
      set(kIncomplete, fmt::format("comm {}: every rank issued seq {} but it never completed on rank(s) {}: look at the "
                                   "GPUs/network of those ranks",
                                   label, done_by_all + 1, ranks_text([&] {
                                     std::vector<int32_t> r;
                                     for (const auto& e : incomplete) r.push_back(e["rank"].get<int32_t>());
                                     return r;
                                   }())));
    for (const std::string& text : straggler_texts) set(kStraggler, text);
    bool bad = !absent.empty() || !hung_ranks.empty() || !departed.empty() || !missing_ranks.empty() || !mismatches.empty() || !incomplete.empty() ||
               !p2p.empty() || mismatched_seqs;
    findings |= bad;
    j["verdict"] = v.text.empty() ? "consistent: every rank issued and completed the same ops" : v.text;
    comms.push_back(j);
    verdicts.push_back(v);
    report.stragglers.insert(report.stragglers.end(), straggler_texts.begin(), straggler_texts.end());
    report.mismatched_seqs += mismatched_seqs + (ops ? ops->untracked_mismatches : 0);
    report.missing_ranks += missing.size();
    report.absent_ranks += rank_count(absent);
    report.init_hung_ranks += hung_ranks.size();
    report.incomplete_ranks += incomplete.size();
    report.stall_records += stall_count;
    report.divergences += div.size();
  }

  json out = {{"comms", comms}, {"traces", a.job.processes.size()}};
  out["environment"] = environment_differences(a);
  for (const auto& e : out["environment"]) report.environment_keys.push_back(e["key"].get<std::string>());
  out["clock"] = {{"method", a.clock.method}, {"hosts", a.clock.hosts}};
  size_t first = verdicts.size();
  for (size_t i = 0; i < verdicts.size(); ++i)
    if (verdicts[i].severity > kNone && (first == verdicts.size() || verdicts[i].before(verdicts[first]))) first = i;
  std::string verdict = first < verdicts.size() ? verdicts[first].text : "no hang or mismatch found";
  if (!report.environment_keys.empty())
    verdict += fmt::format(". Also: ranks run with different {}", fmt::join(report.environment_keys, ", "));
  out["verdict"] = verdict;
  // Seqs, arrivals and mismatches are judged on the ops kept: say which when a ring wrapped.
  out["window"] = op_window(a).to_json();
  report.verdict = verdict;
  report.detail = std::move(out);
  return report;
}

namespace {

// One row per finding, as hang_report's detail holds them, for a spreadsheet to filter and count. The seqs a
// finding concerns are two numeric columns (equal for one seq, empty where no seq applies) rather
// than one "6..10" text, so that they sort and filter as numbers; ranks are written in full
// ("0,4-63"), never cut short as on screen.
void write_hang_csv(const json& out) {
  constexpr size_t kAll = SIZE_MAX;
  write_csv_row({"comm", "name", "finding", "first_seq", "last_seq", "ranks", "detail"});
  for (const json& c : out["comms"]) {
    std::string comm = c["comm"].get<std::string>(), name = c.value("name", "");
    auto row = [&](const char* finding, const json& first_seq, const json& last_seq, const std::string& ranks,
                   const std::string& detail) {
      write_csv_row({comm, name, finding, csv_cell(first_seq), csv_cell(last_seq), ranks, detail});
    };
    if (uint64_t n = c["absent_count"].get<uint64_t>())
      row("absent_rank", nullptr, nullptr, ranges_text(ranges_of(c["absent_ranges"]), kAll),
          fmt::format("{} of {} rank(s) left no trace file; their state is unknown", n, c["nranks"].get<int>()));
    if (!c["init_never_returned"].empty()) {
      std::string ranks = ranks_text(c["init_never_returned"].get<std::vector<int32_t>>(), kAll);
      row("init_never_returned", nullptr, nullptr, ranks, fmt::format("rank(s) {} entered the creation call and never returned", ranks));
    }
    for (const json& m : c["missing"])
      row("missing_rank", m["first_missing_seq"], m["first_missing_seq"], std::to_string(m["rank"].get<int>()),
          fmt::format("rank {} never issued seq {} (last issued {}{})", m["rank"].get<int>(),
                      m["first_missing_seq"].get<uint64_t>(), m["last_seq"].get<uint64_t>(),
                      m["process_ended"].get<bool>() ? ", its process exited" : ""));
    for (const json& m : c["incomplete"])
      row("never_completed", m["from_seq"], m["to_seq"], std::to_string(m["rank"].get<int>()),
          fmt::format("rank {} issued seqs {}..{}, which never completed", m["rank"].get<int>(), m["from_seq"].get<uint64_t>(),
                      m["to_seq"].get<uint64_t>()));
    for (const json& m : c["mismatches"]) {
      std::string ranks = ranks_text(m["ranks"].get<std::vector<int32_t>>(), kAll);
      row("mismatch", m["seq"], m["seq"], ranks,
          fmt::format("rank(s) {} passed {} {} where the others passed {}", ranks, m["field"].get<std::string>(),
                      dump_json(m["value"]), dump_json(m["expected"])));
    }
    if (c.contains("mismatches_not_detailed"))
      row("mismatch_not_detailed", nullptr, nullptr, "",
          fmt::format("{} more mismatched seq(s), not detailed", c["mismatches_not_detailed"].get<uint64_t>()));
    for (const json& d : c["divergence"])
      row("divergence", d["from_seq"], d["to_seq"], std::to_string(d["rank"].get<int>()),
          fmt::format("rank {} departed from its peers' program{}: {}", d["rank"].get<int>(),
                      d.contains("likely_seq") ? fmt::format(" (likely at seq {})", d["likely_seq"].get<uint64_t>()) : "",
                      d["reason"].get<std::string>()));
    for (const json& st : c["stalls"])
      row("stall", st["seq"], st["seq"], std::to_string(st["rank"].get<int>()),
          fmt::format("{} {} after {:.1f} s", st["op"].get<std::string>(), st["state"].get<std::string>(),
                      st["pending_s"].get<double>()));
    for (const json& p : c["p2p_unmatched"]) {
      int src = p["src"].get<int>(), dst = p["dst"].get<int>();
      row("p2p_unmatched", nullptr, nullptr, ranks_text({std::min(src, dst), std::max(src, dst)}, kAll),
          fmt::format("rank {} sent {} time(s) to rank {}, which received {}", src, p["sends"].get<uint64_t>(), dst,
                      p["recvs"].get<uint64_t>()));
    }
    for (const json& r : c["stragglers"]["ranks"])
      if (r["finding"].get<bool>())
        row("straggler", nullptr, nullptr, std::to_string(r["rank"].get<int>()), r["text"].get<std::string>());
  }
  // Not a communicator's: a setting or NCCL version that differs across the job's processes.
  for (const json& e : out["environment"]) {
    std::string values;
    for (const json& v : e["values"])
      values += fmt::format("{}{} in {} process(es), rank(s) {}", values.empty() ? "" : "; ", v["value"].get<std::string>(),
                            v["processes"].get<size_t>(), ranks_text(v["ranks"].get<std::vector<int32_t>>(), kAll));
    write_csv_row({"", "", "environment", "", "", "", fmt::format("{} differs: {}", e["key"].get<std::string>(), values)});
  }
}

}  // namespace

int run_hang(const Options& options) {
  JobAnalysis a = analyze_job(options.inputs, {});
  print_problems(a.job.problems);
  if (a.job.processes.empty()) {
    std::fprintf(stderr, "ncclwatch-report: no usable trace files\n");
    return 2;
  }
  HangReport report = hang_report(a);
  const json& out = report.detail;
  bool findings = report.findings;
  if (options.json) {
    std::cout << dump_json(out, 2) << "\n";
    return findings ? 1 : 0;
  }
  if (options.csv) {
    write_hang_csv(out);
    return findings ? 1 : 0;
  }
  fmt::print("verdict: {}\n", out["verdict"].get<std::string>());
  if (!out["window"]["complete"].get<bool>())
    fmt::print("judged on the ops kept: {}\n", out["window"]["text"].get<std::string>());
  for (const json& c : out["comms"]) {
    fmt::print("\ncomm {}{} ({} ranks): last seq issued {}, completed by every rank {}\n", c["comm"].get<std::string>(),
               c.contains("name") ? " \"" + c["name"].get<std::string>() + "\"" : "", c["nranks"].get<int>(),
               c["last_seq_issued"].get<uint64_t>(), c["last_seq_completed_by_all"].get<uint64_t>());
    if (uint64_t n = c["absent_count"].get<uint64_t>())
      fmt::print("  absent (no trace): {} rank(s): {}\n", n, ranges_text(ranges_of(c["absent_ranges"])));
    if (!c["init_never_returned"].empty())
      fmt::print("  creation never returned: rank(s) {}\n", ranks_text(c["init_never_returned"].get<std::vector<int32_t>>()));
    for (const json& m : c["missing"])
      fmt::print("  missing: rank {} never issued seq {} (last issued {}{})\n", m["rank"].get<int>(),
                 m["first_missing_seq"].get<uint64_t>(), m["last_seq"].get<uint64_t>(),
                 m["process_ended"].get<bool>() ? ", process exited" : "");
    for (const json& m : c["incomplete"])
      fmt::print("  never completed: rank {} seqs {}..{}\n", m["rank"].get<int>(), m["from_seq"].get<uint64_t>(),
                 m["to_seq"].get<uint64_t>());
    size_t shown = 0;
    for (const json& m : c["mismatches"]) {
      if (shown++ == kMaxMismatchesShown) {
        fmt::print("  ... {} more mismatch(es) (see --json)\n", c["mismatches"].size() - kMaxMismatchesShown);
        break;
      }
      fmt::print("  mismatch at seq {}: {} {} on rank(s) {}, {} on the others\n", m["seq"].get<uint64_t>(),
                 m["field"].get<std::string>(), dump_json(m["value"]), dump_json(m["ranks"]), dump_json(m["expected"]));
    }
    for (const json& d : c["divergence"])
      fmt::print("  divergence: rank {} within seqs {}..{}: {}\n", d["rank"].get<int>(), d["from_seq"].get<uint64_t>(),
                 d["to_seq"].get<uint64_t>(), d["reason"].get<std::string>());
    for (const json& s : c["stalls"])
      fmt::print("  stall: rank {} {} seq {} {} after {:.1f} s\n", s["rank"].get<int>(), s["op"].get<std::string>(),
                 s["seq"].get<uint64_t>(), s["state"].get<std::string>(), s["pending_s"].get<double>());
    for (const json& p : c["p2p_unmatched"])
      fmt::print("  p2p: rank {} sent {} time(s) to rank {}, which received {}\n", p["src"].get<int>(), p["sends"].get<uint64_t>(),
                 p["dst"].get<int>(), p["recvs"].get<uint64_t>());
    for (const json& r : c["stragglers"]["ranks"])
      if (r["finding"].get<bool>())
        fmt::print("  straggler: rank {} started last on the GPU {} time(s) (chance: {:.0f}), typically {:.3f} ms late "
                   "(mean {:.3f} ms)\n",
                   r["rank"].get<int>(), r["times_last"].get<uint64_t>(), r["expected_by_chance"].get<double>(),
                   r["typical_late_ms"].get<double>(), r["mean_late_ms"].get<double>());
    fmt::print("  verdict: {}\n", c["verdict"].get<std::string>());
  }
  for (const json& e : out["environment"]) {
    fmt::print("\nenvironment differs: {}\n", e["key"].get<std::string>());
    for (const json& v : e["values"])
      fmt::print("  {} on {} process(es), ranks {}\n", v["value"].get<std::string>(), v["processes"].get<size_t>(),
                 dump_json(v["ranks"]));
  }
  return findings ? 1 : 0;
}

}  // namespace ncclwatch::report
