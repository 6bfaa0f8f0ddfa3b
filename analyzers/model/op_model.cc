#include "op_model.h"

#include "timed_ops.h"

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
namespace {

using namespace trace;

struct LatencyKeyHash {
  size_t operator()(const LatencyKey& k) const {
    uint64_t h = k.comm_id ^ (k.bytes * 0x9E3779B97F4A7C15ull) ^ (uint64_t{k.api} << 48) ^
                 (uint64_t(static_cast<uint32_t>(k.nranks)) << 16) ^ static_cast<uint64_t>(k.timing);
    // murmur3's finalizer: every input bit reaches the low bits the cache indexes with
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return static_cast<size_t>(h);
  }
};

// Seq slots a thread may add beyond one per op it folded. Seqs count up by one per communicator,
// so a legitimate file needs no more slots than ops; a damaged one may skip a stretch. Without this
// bound a few records with leaping seqs would size gigabytes of slots.
constexpr uint64_t kSlotSlack = 1u << 16;

// What one reader thread folds the files it read into.
struct ThreadAggregate {
  uint8_t thread = 0;
  uint64_t slot_budget = kSlotSlack;  // slots it may still add (see kSlotSlack)
  std::unordered_map<uint64_t, uint32_t> comm_index;
  std::vector<CommOps> comms;
  std::unordered_map<LatencyKey, uint32_t, LatencyKeyHash> latency_index;
  std::vector<LatencyBucket> latency;
  std::map<RunTotalsKey, RunTotals> run_totals;

  uint32_t comm(uint64_t id) {
    auto [it, inserted] = comm_index.try_emplace(id, static_cast<uint32_t>(comms.size()));
    if (inserted) {
      comms.emplace_back();
      comms.back().comm_id = id;
    }
    return it->second;
  }

  LatencyBucket& bucket(const LatencyKey& key) {
    auto [it, inserted] = latency_index.try_emplace(key, static_cast<uint32_t>(latency.size()));
    if (inserted) {
      latency.emplace_back();
      latency.back().key = key;
    }
    return latency[it->second];
  }
};

void add_deviant(CommOps& c, uint64_t seq, const OpSignature& sig, uint8_t origin, bool implicit,
                 const std::vector<int32_t>& ranks) {
  auto it = c.deviants.find(seq);
  if (it == c.deviants.end()) {
    if (c.deviants.size() >= kMaxMismatchedSeqs) {
      ++c.untracked_mismatches;
      return;
    }
    it = c.deviants.emplace(seq, std::vector<SignatureGroup>{}).first;
  }
  for (SignatureGroup& g : it->second)
    if (g.origin == origin && g.implicit == implicit && g.sig == sig) {
      g.ranks.insert(g.ranks.end(), ranks.begin(), ranks.end());
      return;
    }
  it->second.push_back(SignatureGroup{sig, origin, implicit, ranks});
}

// One op of a launch awaiting its timing: a grouped launch spans several ops.
struct LaunchOp {
  uint64_t seq = 0;         // collectives only (0: send/recv)
  uint64_t bytes = 0;
  uint32_t rank_comm = 0;   // into ProcessOps::comms
  int32_t rank = -1;
  bool first_call = false;  // the rank's first of this op and size on this communicator
};

// Streams one file's records into its ProcessOps and the thread's aggregates.
class OpScanner {
 public:
  OpScanner(ProcessOps& out, ThreadAggregate& agg, ImplausibleValues& implausible)
      : out_(out), agg_(agg), implausible_(implausible) {}

  void add(const RecordView& r) {
    switch (r.type) {
      case RecordType::kCollective:
        if (r.as<OpRecord>()) ++out_.op_records;
        timed_ops_.add(r);
        break;
      case RecordType::kGpuTiming:
        timed_ops_.add(r);
        break;
      case RecordType::kStall:
        if (const auto* s = r.as<StallRecord>()) on_stall(r, *s);
        break;
      case RecordType::kOpTotals:
        if (const auto* t = r.as<OpTotalsRow>()) on_totals(*t, r);
        break;
      default: break;
    }
  }

  void finish() {
    timed_ops_.finish();
    out_.timing_records = timed_ops_.timing_records();
    out_.orphan_timings = timed_ops_.orphan_timings();
  }

  // TimedOps' sink ------------------------------------------------------------------------------

  std::optional<LaunchOp> on_op(OpRecord& o, const RecordView& r, bool awaits_timing) {
    // A rank and size no job has are taken as unknown (and named once per file).
    o.nranks = implausible_.nranks(o.nranks, r);
    o.rank = implausible_.rank(o.rank, r);
    Api api = static_cast<Api>(o.api);
    bool collective = is_collective(api);
    uint32_t rc_index = rank_comm(o.comm_id, o.rank, o.nranks);
    RankComm& rc = out_.comms[rc_index];
    if (rc.rank < 0) rc.rank = o.rank;
    rc.nranks = std::max(rc.nranks, o.nranks);
    int64_t begin = wrap_add(o.host_begin_ns, out_.clock_offset);
    if (!rc.first_begin) rc.first_begin = begin;
    rc.last_begin = begin;
    uint64_t bytes = bytes_of(api, o.count, o.datatype, o.nranks);
    bool first_call = is_first_call(o.comm_id, rc.rank, o.api, bytes);
    if (collective) {
      ++rc.issued;
      rc.max_seq = std::max(rc.max_seq, o.seq);
      rc.last_api = o.api;
      fold_into_slot(rc, o, begin, r);
    } else {
      ++rc.p2p_ops;
      P2PChannel& ch = channel(o.comm_id, rc.rank, o.peer, api == Api::kSend);
      ++ch.ops;
      ch.max_seq = std::max(ch.max_seq, o.seq);
      ch.bytes += bytes;
    }
    if (o.flags & kOpCaptured) return std::nullopt;  // runs at graph replay: no timing of its own
    // A grouped op is launched by its group's end, whose timing (if the shim times it) names the
    // group's launch: keep it for that timing, but since nothing promises one, count it done once
    // it returned, as an untimed op (a stall record says otherwise).
    bool grouped = o.group_depth > 0 && !(o.flags & kOpTimed);
    std::optional<LaunchOp> kept;
    if (awaits_timing) {
      kept = LaunchOp{collective ? o.seq : 0, bytes, rc_index, rc.rank, first_call};
      if (!grouped) return kept;
    }
    if (collective) rc.untimed_seq = std::max(rc.untimed_seq, o.seq);
    // Inside a group the call only queues the op: its host time says nothing.
    if (!grouped && o.group_depth == 0 && o.host_end_ns >= o.host_begin_ns)
      add_latency({o.comm_id, bytes, o.nranks, o.api, TimingSource::kHost}, rc.rank, wrap_sub(o.host_end_ns, o.host_begin_ns),
                  first_call);
    return kept;
  }

  // Work on one stream completes in order: a finished launch finishes every earlier op of that
  // stream too. The timing is the rank's whose op ran on the stream.
  void on_timed(std::span<const LaunchOp> ops, const LaunchTiming& t) {
    uint64_t bytes = 0;  // of the ops on this stream
    bool first_call = false;
    for (const LaunchOp& op : ops) {
      bytes += op.bytes;
      if (!t.stream_named) continue;  // a stream none of its ops named: the launch's first op, all its bytes
      first_call |= op.first_call;
      if (op.seq && op.rank_comm < out_.comms.size()) {
        RankComm& rc = out_.comms[op.rank_comm];
        rc.timed_done_seq = std::max(rc.timed_done_seq, op.seq);
        CommOps& c = agg_.comms[rc.comm_index];
        if (SeqSlot* slot = c.slot(op.seq); slot && t.gpu_begin) slot->gpu.note(wrap_add(t.begin_ns, out_.clock_offset), rc.rank);
      }
    }
    const LaunchOp& timed = ops.front();
    int64_t ns = wrap_sub(t.end_ns, t.begin_ns);
    if (ns >= 0 && timed.rank_comm < out_.comms.size()) {
      uint64_t comm_id = out_.comms[timed.rank_comm].comm_id;
      uint16_t api = t.launch_ops == 1 ? t.launch_api : static_cast<uint16_t>(Api::kGroupEnd);
      add_latency({comm_id, bytes, t.launch_nranks, api, t.gpu_begin ? TimingSource::kGpu : TimingSource::kHostToGpuEnd},
                  timed.rank, ns, first_call);
    }
  }

  void on_no_timing(std::span<const LaunchOp>, bool, NoTiming) {}  // counted done as they returned, or pending

 private:
  // One entry per (communicator, rank): a process that drives several GPUs (ncclCommInitAll,
  // JAX, CuPy) holds several ranks of one communicator.
  static bool same_rank_comm(const RankComm& rc, uint64_t comm_id, int32_t rank) {
    return rc.comm_id == comm_id && (rc.rank == rank || rank < 0 || rc.rank < 0);
  }
  uint32_t rank_comm(uint64_t comm_id, int32_t rank, int32_t nranks) {
    if (cached_ < out_.comms.size() && same_rank_comm(out_.comms[cached_], comm_id, rank)) [[likely]]
      return cached_;
    return find_rank_comm(comm_id, rank, nranks);
  }
  uint32_t find_rank_comm(uint64_t comm_id, int32_t rank, int32_t nranks) {
    std::vector<uint32_t>& entries = rank_comms_of_[comm_id];
    for (uint32_t i : entries)
      if (same_rank_comm(out_.comms[i], comm_id, rank)) return cached_ = i;
    entries.push_back(static_cast<uint32_t>(out_.comms.size()));
    RankComm rc;
    rc.comm_id = comm_id;
    rc.rank = rank;
    rc.nranks = nranks;
    rc.thread = agg_.thread;
    rc.comm_index = agg_.comm(comm_id);
    out_.comms.push_back(rc);
    return cached_ = static_cast<uint32_t>(out_.comms.size() - 1);
  }

  // Whether this is the first op of its kind and size this rank issued on this communicator. A
  // 64-bit hash stands for the key: a collision would only count one call as steady.
  bool is_first_call(uint64_t comm_id, int32_t rank, uint16_t api, uint64_t bytes) {
    uint64_t h = LatencyKeyHash{}({comm_id, bytes, rank, api, TimingSource::kGpu});
    uint64_t& recent = recent_kinds_[h % recent_kinds_.size()];
    if (recent == h) return false;
    recent = h;
    return seen_kinds_.insert(h).second;
  }

  void fold_into_slot(const RankComm& rc, const OpRecord& o, int64_t begin, const RecordView& r) {
    CommOps& c = agg_.comms[rc.comm_index];
    c.nranks = std::max(c.nranks, o.nranks);
    uint64_t seq = o.seq;
    ++agg_.slot_budget;  // this op may take a slot of its own
    if (seq == 0) {
      ++c.untracked_seqs;
      return;
    }
    if (c.slots.empty()) c.first_seq = seq;
    uint64_t end = c.first_seq + c.slots.size();  // one past the last slot
    if (seq < c.first_seq || seq >= end) {
      // Seqs grow by one: a jump past the slack, or past what the ops folded so far justify, is
      // garbage. (Before the first slot: another rank's window reaching further back.)
      uint64_t growth = seq < c.first_seq ? c.first_seq - seq : seq - end + 1;
      if (c.slots.size() + growth > kMaxTrackedSeqs || growth > kSlotSlack || growth > agg_.slot_budget) {
        ++c.untracked_seqs;
        implausible_.note(fmt::format("seq {} on comm {:016x}, {} away from the seqs seen ({} to {}), left out of the "
                                      "cross-rank matching",
                                      seq, o.comm_id, growth, c.first_seq, end - 1),
                          r);
        return;
      }
      agg_.slot_budget -= growth;
      if (seq < c.first_seq) {
        c.slots.insert(c.slots.begin(), growth, SeqSlot{});
        c.first_seq = seq;
      } else {
        c.slots.resize(c.slots.size() + growth);
      }
    }
    SeqSlot& slot = *c.slot(seq);
    OpSignature sig{o.count, o.redop, o.peer, o.api, o.datatype};
    if (slot.issued == 0) {
      slot.ref = sig;
      slot.ref_origin = agg_.thread;
    } else if (!(slot.ref == sig)) {
      add_deviant(c, seq, sig, agg_.thread, false, {rc.rank});
    }
    ++slot.issued;
    slot.host.note(begin, rc.rank);
  }

  P2PChannel& channel(uint64_t comm_id, int32_t rank, int32_t peer, bool send) {
    for (P2PChannel& ch : out_.p2p)
      if (ch.comm_id == comm_id && ch.peer == peer && ch.send == send) return ch;
    out_.p2p.push_back(P2PChannel{comm_id, rank, peer, send, 0, 0, 0});
    return out_.p2p.back();
  }

  void add_latency(const LatencyKey& key, int32_t rank, int64_t ns, bool first_call) {
    // Jobs cycle through a few (comm, op, size) keys: a small direct-mapped cache of bucket indexes
    // (indexes: the thread's bucket vector grows) spares the hash map on almost every op.
    CachedBucket& slot = bucket_cache_[LatencyKeyHash{}(key) % bucket_cache_.size()];
    if (!slot.valid || !(slot.key == key)) {
      agg_.bucket(key);
      slot = {key, agg_.latency_index.at(key), true};
    }
    LatencyBucket& bucket = agg_.latency[slot.index];
    if (first_call) bucket.first_calls.add(ns);
    else bucket.hist.add(ns);
    if (rank >= 0) note_rank(bucket.ranks, rank);
  }

  void on_totals(const OpTotalsRow& t, const RecordView& r) {
    out_.total_calls += t.calls;
    Api api = static_cast<Api>(t.api);
    if (t.overflow || !(is_collective(api) || is_point_to_point(api))) return;
    int32_t nranks = implausible_.nranks(t.nranks, r);
    RunTotals& run = agg_.run_totals[{t.comm_id, bytes_of(api, t.count, t.datatype, nranks), nranks, t.api}];
    run.calls += t.calls;
    int32_t rank = implausible_.rank(t.rank, r);
    if (rank >= 0) note_rank(run.ranks, rank);
    run.gpu_timed += t.gpu_timed;
    run.gpu_ns += t.gpu_ns;
    for (int b = 0; b < kTotalsBuckets; ++b) run.gpu_histogram[b] += t.gpu_histogram[b];
    int64_t first = wrap_add(t.first_ns, out_.clock_offset), last = wrap_add(t.last_ns, out_.clock_offset);
    if (t.first_ns && (!run.first_ns || first < run.first_ns)) run.first_ns = first;
    if (t.last_ns) run.last_ns = std::max(run.last_ns, last);
  }

  void on_stall(const RecordView& r, const StallRecord& s) {
    bool stalled = s.state == static_cast<uint32_t>(StallState::kStalled);
    if (out_.stalls.size() < kMaxStallsPerProcess)
      out_.stalls.push_back(StallEvent{wrap_add(s.time_ns, out_.clock_offset), wrap_add(s.enqueued_ns, out_.clock_offset), s.comm_id, s.seq,
                                       s.api, stalled});
    uint64_t fits = (r.size - sizeof(StallRecord)) / sizeof(StallComm);
    for (uint64_t i = 0; i < std::min<uint64_t>(s.ncomms, fits); ++i) {
      StallComm sc;
      std::memcpy(&sc, r.data + sizeof(StallRecord) + i * sizeof(StallComm), sizeof(sc));
      RankComm& rc = out_.comms[rank_comm(sc.comm_id, implausible_.rank(sc.rank, r), implausible_.nranks(sc.nranks, r))];
      rc.snapshot_done_seq = sc.last_completed_seq;
    }
    RankComm& rc = out_.comms[rank_comm(s.comm_id, -1, -1)];
    if (stalled) {
      rc.stalled_unresolved = true;
      rc.stalled_seq = s.seq;
    } else {
      if (rc.stalled_seq == s.seq) rc.stalled_unresolved = false;
      if (is_collective(static_cast<Api>(s.api))) rc.snapshot_done_seq = std::max(rc.snapshot_done_seq, s.seq);
    }
  }

  ProcessOps& out_;
  ThreadAggregate& agg_;
  ImplausibleValues& implausible_;
  TimedOps<LaunchOp, OpScanner> timed_ops_{*this};
  uint32_t cached_ = 0;
  // comm_id -> its entries in out_.comms (one per rank the process holds), in the order made.
  std::unordered_map<uint64_t, std::vector<uint32_t>> rank_comms_of_;
  struct CachedBucket {
    LatencyKey key{};
    uint32_t index = 0;
    bool valid = false;
  };
  std::array<CachedBucket, 16> bucket_cache_{};
  std::unordered_set<uint64_t> seen_kinds_;    // see is_first_call
  std::array<uint64_t, 16> recent_kinds_{};
};

}  // namespace

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
