// hang's analysis: which rank stopped where, which ranks disagreed, who was late, and where a
// rank's program departed from its peers'. Ranks are matched by (communicator identity, seq):
// each communicator is analysed on its own, then the job's verdict picks the most telling finding.
// report_hang.cc writes the result out.
#include "model/divergence.h"
#include "model/hang_analysis.h"
#include "model/rank_where.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>

namespace ncclwatch::model {
namespace {

using nlohmann::json;
using trace::Api;

constexpr size_t kMaxStallsPerComm = 64;

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

bool is_rooted(uint16_t api) {
  Api a = static_cast<Api>(api);
  return a == Api::kBroadcast || a == Api::kBcast || a == Api::kReduce || a == Api::kGather || a == Api::kScatter;
}

// One entry per field in which `got` differs from `expected`.
void compare_fields(uint64_t seq, const OpSignature& expected, const std::vector<int32_t>& expected_ranks,
                    const OpSignature& got, const std::vector<int32_t>& ranks, std::vector<ArgumentMismatch>& out) {
  auto add = [&](const char* field, json want, json value) {
    out.push_back({seq, field, std::move(want), std::move(value), ranks, expected_ranks});
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
  kNone = 0, kStraggler = 1, kSlowPeer = 2, kIncomplete = 3, kMismatch = 4, kMissing = 5, kDivergence = 6, kInitHung = 7,
  kAbsent = 8
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

// What the per-communicator pass asks of all of a process's communicators, worked out once per
// process: asked afresh for each communicator, it would cost their number squared.
class ProcessIndex {
 public:
  explicit ProcessIndex(const JobAnalysis& a) : p2p_(a.ops.size()), unfinished_(a.ops.size()) {
    for (size_t process = 0; process < a.ops.size(); ++process) {
      for (const P2PChannel& ch : a.ops[process].p2p) p2p_[process][ch.comm_id].push_back(&ch);
      // The first communicator with an op issued and never completed, and the first on another one.
      std::vector<const RankComm*>& unfinished = unfinished_[process];
      for (const RankComm& rc : a.ops[process].comms)
        if (rc.completed_seq() < rc.max_seq && (unfinished.empty() || rc.comm_id != unfinished[0]->comm_id)) {
          unfinished.push_back(&rc);
          if (unfinished.size() == 2) break;
        }
    }
  }
  // The process's point-to-point channels on `comm_id`, in its order.
  const std::vector<const P2PChannel*>& p2p(size_t process, uint64_t comm_id) const {
    static const std::vector<const P2PChannel*> none;
    auto it = p2p_[process].find(comm_id);
    return it == p2p_[process].end() ? none : it->second;
  }
  // Its first communicator but `comm_id` (in its order) with an op issued and never completed.
  const RankComm* waits_in(size_t process, uint64_t comm_id) const {
    for (const RankComm* rc : unfinished_[process])
      if (rc->comm_id != comm_id) return rc;
    return nullptr;
  }

 private:
  std::vector<std::unordered_map<uint64_t, std::vector<const P2PChannel*>>> p2p_;
  std::vector<std::vector<const RankComm*>> unfinished_;
};

// "; its Python is at loader.py:212 (load); rank(s) 0,2 wait at train.py:88 (step)": where the ranks
// that stopped short and the ranks waiting for them were, as far as their stacks say.
std::string python_lines_note(const CommHang& c, const std::vector<int32_t>& short_ranks) {
  std::string stopped, waiting;
  std::map<std::string, std::vector<int32_t>> waiting_at;
  for (const RankProgress& r : c.per_rank) {
    if (r.where.empty()) continue;
    bool is_short = std::find(short_ranks.begin(), short_ranks.end(), r.rank) != short_ranks.end();
    if (is_short && stopped.empty()) stopped = fmt::format("; rank {}'s Python is at {}", r.rank, r.where);
    if (!is_short) waiting_at[r.where].push_back(r.rank);
  }
  for (const auto& [where, ranks] : waiting_at)
    waiting += fmt::format("; rank(s) {} wait at {}", ranks_text(ranks), where);
  return stopped + waiting;
}

// The most telling finding about communicator `c`, in words. `present`: rank -> process;
// `lowest_issued`: the last seq of the rank that issued fewest.
CommVerdict comm_verdict(const JobAnalysis& a, const ProcessIndex& index, const CommHang& c,
                         const std::map<int32_t, size_t>& present, Api hung_api, uint64_t lowest_issued,
                         const std::map<uint64_t, std::string>& names) {
  CommVerdict v;
  std::string label = comm_label(c.comm_id, names);
  auto set = [&](Severity s, std::string text) {
    if (s > v.severity) {
      v.severity = s;
      v.text = std::move(text);
    }
  };
  const std::vector<int32_t>& hung_ranks = c.init_never_returned;
  if (!hung_ranks.empty()) {
    std::string stuck = fmt::format("comm {}: rank(s) {} entered {} and never returned", label, ranks_text(hung_ranks),
                                    trace::api_name(hung_api));
    std::vector<int32_t> made;
    for (const auto& [rank, process] : present)
      if (!std::binary_search(hung_ranks.begin(), hung_ranks.end(), rank)) made.push_back(rank);
    if (!c.absent.empty())
      set(kAbsent, fmt::format("{}, waiting for rank(s) {} of {}, which never called it (no trace shows them in it) — "
                               "look at them first",
                               stuck, ranges_text(c.absent), c.nranks));
    else if (!made.empty())
      set(kInitHung, fmt::format("{}, though rank(s) {} created it", stuck, ranks_text(made)));
    else
      set(kInitHung, fmt::format("{}: every rank is in it (a rank passed another unique id, size or rank?)", stuck));
  }
  if (!c.absent.empty())
    set(kAbsent, fmt::format("comm {}: rank(s) {} of {} left no trace file; their state is unknown — look at them first",
                             label, ranges_text(c.absent), c.nranks));
  if (!c.divergence.empty()) {
    const Divergence& d = c.divergence.front();
    set(kDivergence, fmt::format("comm {}: rank {} departed from its peers' program within seqs {}..{}{}: {}", label, d.rank,
                                 d.from_seq, d.to_seq, d.likely_seq ? fmt::format(" (likely at seq {})", d.likely_seq) : "",
                                 d.reason));
    if (v.severity == kDivergence)
      v.rank_also_missing =
          std::any_of(c.missing.begin(), c.missing.end(), [&](const MissingRank& m) { return m.rank == d.rank; });
  }
  if (!c.missing.empty()) {
    std::vector<int32_t> lowest;
    for (const MissingRank& m : c.missing)
      if (m.last_seq == lowest_issued) lowest.push_back(m.rank);
    std::string why;
    if (lowest.size() == 1) {
      size_t process = present.at(lowest[0]);
      const ProcessTrace& trace = a.job.processes[process];
      why = trace.process_end ? "; its process " + process_ending_text(trace)
                              : "; its trace ends without a final record (killed, crashed or still hung)";
      // Blocked elsewhere? An op of another communicator it issued but never completed.
      if (const RankComm* other = index.waits_in(process, c.comm_id))
        why += fmt::format("; it waits in comm {} seq {}", comm_label(other->comm_id, names), other->completed_seq() + 1);
    }
    why += python_lines_note(c, lowest);
    set(kMissing, fmt::format("comm {}: rank(s) {} never issued seq {}{} that {} peer(s) issued (they reached seq {}){}",
                              label, ranks_text(lowest), lowest_issued + 1, graph_replay_note(c, lowest_issued + 1),
                              present.size() - c.missing.size(), c.last_seq_issued, why));
  }
  if (!c.mismatches.empty()) {
    const ArgumentMismatch& m = c.mismatches.front();
    set(kMismatch, fmt::format("comm {}: rank(s) {} passed {} {} where the others passed {} at seq {}{}", label,
                               ranks_text(m.ranks), m.field, dump_json(m.value), dump_json(m.expected), m.seq,
                               c.mismatched_seqs > 1 ? fmt::format(" (and {} more mismatched seq(s))", c.mismatched_seqs - 1)
                                                     : ""));
  }
  if (!c.incomplete.empty() && c.missing.empty()) {
    std::vector<int32_t> ranks;
    for (const IncompleteRank& r : c.incomplete) ranks.push_back(r.rank);
    set(kIncomplete, fmt::format("comm {}: every rank issued seq {} but it never completed on rank(s) {}: look at the "
                                 "GPUs/network of those ranks",
                                 label, c.last_seq_completed_by_all + 1, ranks_text(ranks)));
  }
  for (const StragglerRank& r : c.stragglers.ranks)
    if (r.finding) set(kStraggler, r.text);
  if (c.slow_peer) set(kSlowPeer, c.slow_peer_text);
  return v;
}

// Ranks that created a communicator (lifecycle records) count as present even without ops.
// Ranks still in the creation call (it never returned) are present too, and named.
struct Created {
  int32_t nranks = 0;
  std::map<int32_t, size_t> ranks;  // rank -> process
  std::map<int32_t, Api> hung;      // rank -> its creation call that never returned
};

std::map<uint64_t, Created> creations(const JobAnalysis& a) {
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
  return created;
}

// What the analysis of every communicator reads, worked out once for the job.
struct JobFacts {
  explicit JobFacts(const JobAnalysis& analysis)
      : a(analysis), names(comm_names(a.job)), divergences(find_divergences(a, names)), index(a), created(creations(a)),
        native(symbolize_native_stacks(a)) {}

  const JobAnalysis& a;
  std::map<uint64_t, std::string> names;
  std::map<uint64_t, std::vector<Divergence>> divergences;
  ProcessIndex index;
  std::map<uint64_t, Created> created;
  NativeStacks native;

  // Every communicator that ran ops or was created, by identity.
  std::set<uint64_t> comm_ids() const {
    std::set<uint64_t> ids;
    for (const auto& [id, m] : a.members) ids.insert(id);
    for (const auto& [id, c] : created) ids.insert(id);
    ids.erase(0);
    return ids;
  }
};

// Who takes part in one communicator.
struct Membership {
  const std::vector<MemberRef>* members = nullptr;  // the ranks with ops
  std::map<int32_t, size_t> present;                 // rank -> process: with ops, or that created it
  std::map<int32_t, const RankComm*> by_rank;        // the ranks with ops
  Api hung_api = Api::kUnknown;                      // a creation call that never returned
  uint64_t collective_ops = 0;                       // issued, all ranks
};

// The membership of communicator `c.comm_id` (`ops`: its ops, if any); sets its size, its ranks whose creation never
// returned, the last seq any rank issued and the ranks absent (without a trace).
Membership membership(const JobFacts& job, const CommOps* ops, CommHang& c) {
  const JobAnalysis& a = job.a;
  Membership m;
  static const std::vector<MemberRef> none;
  auto mit = a.members.find(c.comm_id);
  m.members = mit == a.members.end() ? &none : &mit->second;
  c.nranks = ops ? ops->nranks : 0;
  for (const MemberRef& ref : *m.members) {
    const RankComm& rc = a.member(ref);
    c.nranks = std::max(c.nranks, rc.nranks);
    if (rc.rank >= 0) {
      m.present.emplace(rc.rank, ref.process);
      m.by_rank.emplace(rc.rank, &rc);
    }
  }
  if (auto cit = job.created.find(c.comm_id); cit != job.created.end()) {
    c.nranks = std::max(c.nranks, cit->second.nranks);
    for (const auto& [rank, process] : cit->second.ranks) m.present.emplace(rank, process);
    for (const auto& [rank, api] : cit->second.hung) c.init_never_returned.push_back(rank), m.hung_api = api;
  }
  for (const auto& [rank, rc] : m.by_rank) {
    c.last_seq_issued = std::max(c.last_seq_issued, rc->max_seq);
    m.collective_ops += rc->issued + rc->p2p_ops;
  }
  c.absent = absent_ranges(c.nranks, m.present);
  return m;
}

// How far each present rank issued and completed, the ranks that stopped short and the ops never
// completed. Returns the last seq of the rank that issued fewest.
uint64_t note_progress(const JobAnalysis& a, const NativeStacks& native, const Membership& m, CommHang& c) {
  uint64_t done_by_all = c.last_seq_issued, lowest_issued = c.last_seq_issued;
  for (const auto& [rank, process] : m.present) {
    auto it = m.by_rank.find(rank);
    const RankComm* rc = it == m.by_rank.end() ? nullptr : it->second;
    uint64_t last = rc ? rc->max_seq : 0, done = rc ? rc->completed_seq() : 0;
    done_by_all = std::min(done_by_all, done);
    const ProcessTrace& p = a.job.processes[process];
    RankProgress progress;
    progress.rank = rank;
    progress.host = p.host();
    progress.pid = p.pid();
    progress.last_seq = last;
    progress.completed_seq = done;
    progress.process_ended = p.process_end.has_value();
    auto stack = native.find(process);
    note_where(p, stack == native.end() ? nullptr : &stack->second, progress);
    c.per_rank.push_back(progress);
    if (last < c.last_seq_issued) {
      c.missing.push_back(progress);
      lowest_issued = std::min(lowest_issued, last);
    }
    if (done < last) c.incomplete.push_back({rank, done + 1, last});
  }
  c.last_seq_completed_by_all = m.present.empty() ? 0 : done_by_all;
  return lowest_issued;
}

// The arguments ranks disagreed about, every seq.
void note_mismatches(const JobAnalysis& a, const CommOps* ops, CommHang& c) {
  size_t detailed_seqs = 0;
  if (ops)
    for (const auto& [seq, groups] : ops->deviants) {
      auto sg = a.signature_groups(*ops, seq);
      if (sg.size() < 2) continue;
      ++detailed_seqs;
      for (size_t g = 1; g < sg.size(); ++g) compare_fields(seq, sg[0].first, sg[0].second, sg[g].first, sg[g].second, c.mismatches);
    }
  c.mismatches_not_detailed = ops ? ops->untracked_mismatches : 0;
  c.mismatched_seqs = detailed_seqs + c.mismatches_not_detailed;
}

// Stalls the shim's watchdog recorded.
void note_stalls(const JobAnalysis& a, const Membership& m, CommHang& c) {
  for (const MemberRef& ref : *m.members)
    for (const StallEvent& s : a.ops[ref.process].stalls) {
      if (s.comm_id != c.comm_id) continue;
      if (++c.stall_records > kMaxStallsPerComm) continue;
      c.stalls.push_back({a.member(ref).rank, s.seq, static_cast<Api>(s.api), s.stalled,
                          static_cast<double>(wrap_sub(s.time, s.enqueued)) / 1e9, s.time});
    }
}

// Point-to-point: sends with no matching receive (or the reverse).
void note_unmatched_p2p(const JobFacts& job, const Membership& m, CommHang& c) {
  const JobAnalysis& a = job.a;
  for (const MemberRef& ref : *m.members)
    for (const P2PChannel* ch : job.index.p2p(ref.process, c.comm_id)) {
      if (!ch->send) continue;
      uint64_t recvs = 0;
      bool peer_traced = false;
      if (auto peer = m.by_rank.find(ch->peer); peer != m.by_rank.end()) {
        for (const MemberRef& pm : *m.members)
          if (a.member(pm).rank == ch->peer)
            for (const P2PChannel* rc : job.index.p2p(pm.process, c.comm_id))
              if (!rc->send && rc->peer == ch->rank) recvs = rc->ops;
        peer_traced = true;
      }
      if (peer_traced && recvs != ch->ops) c.p2p_unmatched.push_back({ch->rank, ch->peer, ch->ops, recvs});
    }
}

// Which graph replay ran each seq the findings name.
void note_graph_replays(const CommOps* ops, CommHang& c) {
  if (!ops) return;
  auto note = [&](uint64_t seq) {
    if (auto [graph, replay] = ops->graph_replay(seq); graph) c.graph_replays[seq] = {graph, replay};
  };
  for (const MissingRank& m : c.missing) note(m.last_seq + 1);
  for (const IncompleteRank& r : c.incomplete) note(r.from_seq);
  for (const ArgumentMismatch& m : c.mismatches) note(m.seq);
  for (const StallSeen& s : c.stalls) note(s.seq);
}

// Communicator `id` analysed, its most telling finding in `verdict`; nullopt when it ran no op and
// no rank is absent from it or stuck creating it: nothing to say.
std::optional<CommHang> analyze_comm(const JobFacts& job, uint64_t id, StragglerStats&& stragglers,
                                     std::optional<SlowPeer>&& slow_peer, CommVerdict& verdict) {
  const JobAnalysis& a = job.a;
  const CommOps* ops = a.comm(id);
  CommHang c;
  c.comm_id = id;
  Membership m = membership(job, ops, c);
  if (!m.collective_ops && c.absent.empty() && c.init_never_returned.empty()) return std::nullopt;
  for (const auto& [r, p] : m.present) c.ranks.push_back(r);
  if (auto n = job.names.find(id); n != job.names.end()) c.name = n->second;
  uint64_t lowest_issued = note_progress(a, job.native, m, c);
  note_mismatches(a, ops, c);
  note_stalls(a, m, c);
  note_graph_replays(ops, c);
  note_unmatched_p2p(job, m, c);
  c.stragglers = std::move(stragglers);
  if (slow_peer) {
    c.slow_peer = std::move(slow_peer);
    c.slow_peer_text = slow_peer_text(*c.slow_peer, comm_label(id, job.names)) + " — run `ncclwatch-report peers`";
  }
  if (auto it = job.divergences.find(id); it != job.divergences.end()) c.divergence = it->second;
  verdict = comm_verdict(a, job.index, c, m.present, m.hung_api, lowest_issued, job.names);
  c.verdict = verdict.text.empty() ? "consistent: every rank issued and completed the same ops" : verdict.text;
  return c;
}

// Adds a communicator's findings to the job's counts.
void count_findings(const CommHang& c, HangReport& report) {
  report.findings |= !c.absent.empty() || !c.init_never_returned.empty() || !c.divergence.empty() || !c.missing.empty() ||
                     !c.mismatches.empty() || !c.incomplete.empty() || !c.p2p_unmatched.empty() || c.mismatched_seqs;
  for (const StragglerRank& r : c.stragglers.ranks)
    if (r.finding) report.stragglers.push_back(r.text);
  if (c.slow_peer) report.slow_peers.push_back(c.slow_peer_text);
  report.mismatched_seqs += c.mismatched_seqs;
  report.missing_ranks += c.missing.size();
  report.absent_ranks += rank_count(c.absent);
  report.init_hung_ranks += c.init_never_returned.size();
  report.incomplete_ranks += c.incomplete.size();
  report.stall_records += c.stall_records;
  report.divergences += c.divergence.size();
}

// The job's verdict: the most telling of the communicators' findings, then the settings that
// differ across ranks.
std::string job_verdict(const std::vector<CommVerdict>& verdicts, const std::vector<std::string>& environment_keys) {
  size_t first = verdicts.size();
  for (size_t i = 0; i < verdicts.size(); ++i)
    if (verdicts[i].severity > kNone && (first == verdicts.size() || verdicts[i].before(verdicts[first]))) first = i;
  std::string verdict = first < verdicts.size() ? verdicts[first].text : "no hang or mismatch found";
  if (!environment_keys.empty())
    verdict += fmt::format(". Also: ranks run with different {}", fmt::join(environment_keys, ", "));
  return verdict;
}

// Settings whose values differ across processes by design: NCCL_HOSTID names the host.
bool differs_by_design(const std::string& key) { return key == "NCCL_HOSTID"; }

}  // namespace

std::vector<EnvironmentDifference> environment_differences(const JobAnalysis& a) {
  std::set<std::string> keys;
  std::vector<std::map<std::string, std::string>> envs;
  for (size_t i = 0; i < a.job.processes.size(); ++i) {
    const ProcessTrace& p = a.job.processes[i];
    auto env = p.nccl_env();
    if (!p.nccl_version().empty()) env["nccl_version"] = p.nccl_version();
    for (const auto& [k, v] : env)
      if (!differs_by_design(k)) keys.insert(k);
    envs.push_back(std::move(env));
  }
  std::vector<EnvironmentDifference> out;
  for (const std::string& key : keys) {
    std::map<std::string, std::vector<int32_t>> values;
    for (size_t i = 0; i < envs.size(); ++i) {
      auto it = envs[i].find(key);
      values[it == envs[i].end() ? "(unset)" : it->second].push_back(a.ops[i].world_rank());
    }
    if (values.size() < 2) continue;
    EnvironmentDifference& d = out.emplace_back(EnvironmentDifference{key, {}});
    for (auto& [value, ranks] : values) {
      std::sort(ranks.begin(), ranks.end());
      size_t n = ranks.size();
      if (ranks.size() > 64) ranks.resize(64);
      d.values.push_back({value, std::move(ranks), n});
    }
  }
  return out;
}

HangReport hang_report(const JobAnalysis& a) {
  JobFacts job(a);
  HangReport report;
  std::vector<CommVerdict> verdicts;
  // Stragglers first, over every communicator: one is judged against the others (above).
  std::map<uint64_t, StragglerStats> stragglers = judge_stragglers(a, job.comm_ids(), job.names);
  std::map<uint64_t, SlowPeer> slow;
  for (SlowPeer& s : slow_peers(a.peers)) slow.emplace(s.comm_id, std::move(s));
  for (uint64_t id : job.comm_ids()) {
    CommVerdict verdict;
    std::optional<SlowPeer> slow_peer;
    if (auto it = slow.find(id); it != slow.end()) slow_peer = std::move(it->second);
    std::optional<CommHang> c = analyze_comm(job, id, std::move(stragglers[id]), std::move(slow_peer), verdict);
    if (!c) continue;
    verdicts.push_back(std::move(verdict));
    count_findings(*c, report);
    report.comms.push_back(std::move(*c));
  }
  report.traces = a.job.processes.size();
  report.environment = environment_differences(a);
  for (const EnvironmentDifference& e : report.environment) report.environment_keys.push_back(e.key);
  report.clock_method = a.clock.method;
  report.clock_hosts = a.clock.hosts;
  report.verdict = job_verdict(verdicts, report.environment_keys);
  report.window = op_window(a);
  return report;
}

std::string graph_replay_note(const CommHang& c, uint64_t seq) {
  auto it = c.graph_replays.find(seq);
  if (it == c.graph_replays.end()) return "";
  const GraphReplay& g = it->second;
  return g.replay ? fmt::format(" (replay {} of CUDA graph {})", g.replay, g.graph)
                  : fmt::format(" (a replay of CUDA graph {})", g.graph);
}

std::string where_note(const RankProgress& r) { return r.where.empty() ? "" : " at " + r.where; }

}  // namespace ncclwatch::model
