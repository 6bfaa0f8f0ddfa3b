// The op model's pass: the files read by reader threads, each folding its files into its own
// aggregates (op_scanner.h), which are merged at the end.
#include "model/job_read.h"
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

// The op model's sink of the job's pass: one file's ops folded by its reader thread.
class OpSink : public FileSink {
 public:
  OpSink(ProcessOps& out, ThreadAggregate& agg, ProcessTrace& p) : out_(out), scanner_(out, agg, p.implausible) {}
  void start(const Start& s) override { out_.clock_offset = s.clock_offset; }
  void add(const RecordView& r) override { scanner_.add(r); }
  void end_of_records() override { scanner_.finish(); }

 private:
  ProcessOps& out_;
  OpScanner scanner_;
};

// The op model's part: each file's ops folded by its reader thread into that thread's aggregates.
class OpModelSink : public JobSink {
 public:
  std::vector<ProcessOps> ops;  // per file
  std::vector<ThreadAggregate> aggregates;

  void prepare(const JobRead& job) override {
    ops.resize(job.files->size());
    aggregates.resize(job.threads);
    for (unsigned t = 0; t < job.threads; ++t) aggregates[t].thread = static_cast<uint8_t>(t);
  }
  std::unique_ptr<FileSink> open(size_t file, unsigned thread, ProcessTrace& p) override {
    return std::make_unique<OpSink>(ops[file], aggregates[thread], p);
  }
};

}  // namespace

JobAnalysis analyze_job(const std::vector<std::string>& inputs, const AnalysisOptions& options) {
  JobAnalysis a;
  ReadOptions read;
  read.align_clocks = options.align_clocks;
  read.keep_for_later = options.keep_for_later;
  read.threads = options.threads;
  OpModelSink model;
  JobRead job = read_job(inputs, read, {&model});
  std::vector<ProcessOps>& ops = model.ops;
  std::vector<ThreadAggregate>& aggregates = model.aggregates;
  a.clock = std::move(job.clock);
  a.sources = job.files;
  a.job.problems = std::move(job.problems);
  a.records = job.records;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    if (!job.usable[i]) continue;
    a.files.push_back(job.files->path(i));
    a.file_index.push_back(i);
    a.job.processes.push_back(std::move(job.processes[i]));
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

  for (ThreadAggregate& agg : aggregates)
    for (auto& [key, counts] : agg.plans)
      for (auto& [choice, ops] : counts) a.plans[key][choice] += ops;
  for (ThreadAggregate& agg : aggregates) {
    for (auto& [key, totals] : agg.kernels) a.kernels[key].merge(totals);
    for (auto& [key, link] : agg.peers) a.peers[key].merge(link);
  }

  for (size_t p = 0; p < a.ops.size(); ++p)
    for (size_t c = 0; c < a.ops[p].comms.size(); ++c) a.members[a.ops[p].comms[c].comm_id].push_back({p, c});
  for (auto& [id, list] : a.members)
    std::sort(list.begin(), list.end(),
              [&](const MemberRef& x, const MemberRef& y) { return a.member(x).rank < a.member(y).rank; });
  return a;
}

}  // namespace ncclwatch::model
