#include "op_model.h"

#include "op_scanner.h"

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

namespace ncclwatch::report {

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

namespace {

void merge_slots(CommOps& into, CommOps& from) {
  into.nranks = std::max(into.nranks, from.nranks);
  into.untracked_mismatches += from.untracked_mismatches;
  into.untracked_seqs += from.untracked_seqs;
  if (from.slots.empty()) return;
  if (into.slots.empty()) into.first_seq = from.first_seq;
  // Both spans in one: the earlier start, the later end.
  if (from.first_seq < into.first_seq) {
    into.slots.insert(into.slots.begin(), into.first_seq - from.first_seq, SeqSlot{});
    into.first_seq = from.first_seq;
  }
  uint64_t end = std::max(into.first_seq + into.slots.size(), from.first_seq + from.slots.size());
  into.slots.resize(end - into.first_seq);
  for (size_t i = 0; i < from.slots.size(); ++i) {
    const SeqSlot& b = from.slots[i];
    if (b.issued == 0) continue;
    uint64_t seq = from.seq_at(i);
    SeqSlot& a = *into.slot(seq);
    if (a.issued == 0) {
      a = b;
      continue;
    }
    // The other thread's reference ranks differ from ours: they become a group of their own.
    if (!(a.ref == b.ref)) add_deviant(into, seq, b.ref, b.ref_origin, true, {});
    a.issued += b.issued;
    a.host.merge(b.host);
    a.gpu.merge(b.gpu);
  }
  for (auto& [seq, groups] : from.deviants)
    for (SignatureGroup& g : groups) add_deviant(into, seq, g.sig, g.origin, g.implicit, g.ranks);
}

}  // namespace

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

// ---------------------------------------------------------------------------------------------
// The pass

JobAnalysis analyze_job(const std::vector<std::string>& inputs, const AnalysisOptions& options) {
  JobAnalysis a;
  std::vector<std::string> files = expand_inputs(inputs, a.job.problems);
  unsigned threads = options.threads ? options.threads : reader_threads(files.size());
  threads = std::max(1u, std::min<unsigned>(threads, 255));
  if (options.align_clocks) a.clock = align_clocks(files, threads);

  size_t n = files.size();
  std::vector<ProcessTrace> processes(n);
  std::vector<ProcessOps> ops(n);
  std::vector<std::vector<TraceProblem>> problems(n);
  std::vector<char> usable(n, 0);
  std::vector<ThreadAggregate> aggregates(threads);
  for (unsigned t = 0; t < threads; ++t) aggregates[t].thread = static_cast<uint8_t>(t);

  parallel_for(n, threads, [&](size_t i, unsigned t) {
    ProcessTrace& p = processes[i];
    p.path = valid_utf8(files[i]);
    LifecycleFolder lifecycle(p);
    OpScanner scanner(ops[i], aggregates[t], p.implausible);
    bool offset_set = false;
    usable[i] = read_trace(
        files[i],
        [&](const RecordView& r) {
          if (!offset_set) {  // the header is read before the first record
            ops[i].clock_offset = i < a.clock.known.size() && a.clock.known[i]
                                      ? a.clock.offset_ns[i]
                                      : wrap_sub(p.header.start_wall_ns, p.header.start_mono_ns);
            offset_set = true;
          }
          lifecycle.add(r);
          scanner.add(r);
        },
        p.header, p.stats, problems[i]);
    scanner.finish();
    if (usable[i]) lifecycle.finish(problems[i]);
  });

  for (size_t i = 0; i < n; ++i) {
    a.job.problems.insert(a.job.problems.end(), problems[i].begin(), problems[i].end());
    if (!usable[i]) continue;
    a.records += processes[i].stats.records;
    a.files.push_back(files[i]);
    a.job.processes.push_back(std::move(processes[i]));
    a.ops.push_back(std::move(ops[i]));
  }

  // Merge the threads' aggregates. Rank entries keep pointing at their thread's CommOps only
  // through comm_id from here on.
  std::map<uint64_t, CommOps> merged;
  for (ThreadAggregate& agg : aggregates)
    for (CommOps& c : agg.comms) {
      auto [it, inserted] = merged.try_emplace(c.comm_id);
      if (inserted) it->second = std::move(c);
      else merge_slots(it->second, c);
    }
  for (auto& [id, c] : merged) a.comms.push_back(std::move(c));
  std::map<LatencyKey, LatencyBucket> buckets;
  for (ThreadAggregate& agg : aggregates)
    for (LatencyBucket& b : agg.latency) {
      auto [it, inserted] = buckets.try_emplace(b.key);
      if (inserted) {
        it->second = std::move(b);
        continue;
      }
      it->second.hist.merge(b.hist);
      it->second.first_calls.merge(b.first_calls);
      std::vector<int32_t> both;
      std::set_union(it->second.ranks.begin(), it->second.ranks.end(), b.ranks.begin(), b.ranks.end(),
                     std::back_inserter(both));
      it->second.ranks = std::move(both);
    }
  for (auto& [key, b] : buckets) a.latency.push_back(std::move(b));
  for (ThreadAggregate& agg : aggregates)
    for (auto& [key, run] : agg.run_totals) {
      auto [it, inserted] = a.run_totals.try_emplace(key);
      if (inserted) it->second = std::move(run);
      else it->second.merge(run);
    }

  for (size_t p = 0; p < a.ops.size(); ++p)
    for (size_t c = 0; c < a.ops[p].comms.size(); ++c) a.members[a.ops[p].comms[c].comm_id].push_back({p, c});
  for (auto& [id, list] : a.members)
    std::sort(list.begin(), list.end(),
              [&](const MemberRef& x, const MemberRef& y) { return a.member(x).rank < a.member(y).rank; });
  return a;
}

}  // namespace ncclwatch::report
