// The op model's pass: the files read by reader threads, each folding its files into its own
// aggregates (op_scanner.h), which are merged at the end.
#include "model/op_model.h"
#include "model/op_scanner.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace ncclwatch::model {

using namespace trace;

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

}  // namespace ncclwatch::model
