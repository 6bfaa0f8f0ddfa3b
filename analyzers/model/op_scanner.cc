#include "model/op_scanner.h"

#include "model/kernel_spans.h"
#include "model/timed_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <span>
#include <unordered_set>

namespace ncclwatch::model {

using namespace trace;

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

namespace {

// One op of a launch awaiting its timing: a grouped launch spans several ops.
struct LaunchOp {
  uint64_t seq = 0;         // collectives only (0: send/recv)
  uint64_t bytes = 0;
  uint32_t rank_comm = 0;   // into ProcessOps::comms
  int32_t rank = -1;
  bool first_call = false;  // the rank's first of this op and size on this communicator
  bool replayed = false;    // run by a CUDA graph launch (its timing covers the whole replay)
};

// The process's entries in ProcessOps::comms, one per (communicator, rank): a process that drives
// several GPUs (ncclCommInitAll, JAX, CuPy) holds several ranks of one communicator.
class RankComms {
 public:
  RankComms(ProcessOps& out, ThreadAggregate& agg) : out_(out), agg_(agg) {}

  // The entry of this rank of this communicator (made at its first op), by its index.
  uint32_t of(uint64_t comm_id, int32_t rank, int32_t nranks) {
    if (cached_ < out_.comms.size() && same_rank_comm(out_.comms[cached_], comm_id, rank)) [[likely]]
      return cached_;
    return find_rank_comm(comm_id, rank, nranks);
  }

 private:
  static bool same_rank_comm(const RankComm& rc, uint64_t comm_id, int32_t rank) {
    return rc.comm_id == comm_id && (rc.rank == rank || rank < 0 || rc.rank < 0);
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

  ProcessOps& out_;
  ThreadAggregate& agg_;
  uint32_t cached_ = 0;
  // comm_id -> its entries in out_.comms (one per rank the process holds), in the order made.
  std::unordered_map<uint64_t, std::vector<uint32_t>> rank_comms_of_;
};

// Each collective folded into its communicator's seq slot, where the ranks' arrivals and arguments
// meet (the hang analysis's cross-rank matching).
class SeqSlots {
 public:
  SeqSlots(ThreadAggregate& agg, ImplausibleValues& implausible) : agg_(agg), implausible_(implausible) {}

  void fold(const RankComm& rc, const OpRecord& o, int64_t begin, const RecordView& r) {
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
    }
    if (o.flags & kOpReplayed) {
      bool starts_replay = o.launch_id != last_replay_launch_;  // a replay's ops are recorded together
      last_replay_launch_ = o.launch_id;
      if (!slot.graph) {
        slot.graph = static_cast<uint16_t>(std::clamp<uint32_t>(o.graph, 1, UINT16_MAX));
        slot.replay_start = starts_replay;
      }
    } else if (!(slot.ref == sig)) {
      add_deviant(c, seq, sig, agg_.thread, false, {rc.rank});
    }
    ++slot.issued;
    slot.host.note(begin, rc.rank);
  }

 private:
  ThreadAggregate& agg_;
  ImplausibleValues& implausible_;
  uint64_t last_replay_launch_ = 0;  // the launch of the last replayed op folded
};

// The latency histograms of the thread, per (communicator, op, size, timing), and which calls are
// a rank's first of their kind (connection set-up, kept apart).
class Latencies {
 public:
  explicit Latencies(ThreadAggregate& agg) : agg_(agg) {}

  // Whether this is the first op of its kind and size this rank issued on this communicator. A
  // 64-bit hash stands for the key: a collision would only count one call as steady.
  bool is_first_call(uint64_t comm_id, int32_t rank, uint16_t api, uint64_t bytes) {
    uint64_t h = LatencyKeyHash{}({comm_id, bytes, rank, api, TimingSource::kGpu});
    uint64_t& recent = recent_kinds_[h % recent_kinds_.size()];
    if (recent == h) return false;
    recent = h;
    return seen_kinds_.insert(h).second;
  }

  void add(const LatencyKey& key, int32_t rank, int64_t ns, bool first_call) {
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

 private:
  ThreadAggregate& agg_;
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

class OpScanner::Fold {
 public:
  Fold(ProcessOps& out, ThreadAggregate& agg, ImplausibleValues& implausible)
      : out_(out), agg_(agg), implausible_(implausible), rank_comms_(out, agg), seq_slots_(agg, implausible), latencies_(agg) {}

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
      case RecordType::kOpPlan:
        if (const auto* p = r.as<OpPlanRecord>()) on_plan(*p, r);
        break;
      case RecordType::kOpKernel:
        if (const auto* k = r.as<OpKernelRecord>()) kernel_spans_.add(*k, r);
        break;
      case RecordType::kOpProxy:
        if (const auto* p = r.as<OpProxyRecord>()) add_proxy_operation(agg_.peers, *p, r, implausible_);
        break;
      default: break;
    }
  }

  void finish() {
    timed_ops_.finish();
    kernel_spans_.finish();
    close_moving_stretches(agg_.peers);
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
    uint32_t rc_index = rank_comms_.of(o.comm_id, o.rank, o.nranks);
    RankComm& rc = out_.comms[rc_index];
    if (rc.rank < 0) rc.rank = o.rank;
    rc.nranks = std::max(rc.nranks, o.nranks);
    int64_t begin = wrap_add(o.host_begin_ns, out_.clock_offset);
    if (!rc.first_begin) rc.first_begin = begin;
    rc.last_begin = begin;
    uint64_t bytes = bytes_of(api, o.count, o.datatype, o.nranks);
    bool first_call = latencies_.is_first_call(o.comm_id, rc.rank, o.api, bytes);
    if (o.flags & kOpCaptured) {
      // Captured into a CUDA graph: it runs at the graph's replays (recorded as ops of their own
      // from format 6), not now. It has no seq then; an older trace gave it one, with its replays
      // unseen: taken as done rather than as never completed.
      ++rc.captured_ops;
      if (!collective || o.seq == 0) return std::nullopt;
      ++rc.issued;
      rc.max_seq = std::max(rc.max_seq, o.seq);
      rc.untimed_seq = std::max(rc.untimed_seq, o.seq);
      seq_slots_.fold(rc, o, begin, r);
      return std::nullopt;
    }
    if (collective) {
      ++rc.issued;
      rc.max_seq = std::max(rc.max_seq, o.seq);
      rc.last_api = o.api;
      seq_slots_.fold(rc, o, begin, r);
    } else {
      ++rc.p2p_ops;
      P2PChannel& ch = channel(o.comm_id, rc.rank, o.peer, api == Api::kSend);
      ++ch.ops;
      ch.max_seq = std::max(ch.max_seq, o.seq);
      ch.bytes += bytes;
    }
    // A grouped op is launched by its group's end, whose timing (if the shim times it) names the
    // group's launch: keep it for that timing, but since nothing promises one, count it done once
    // it returned, as an untimed op (a stall record says otherwise).
    bool grouped = o.group_depth > 0 && !(o.flags & kOpTimed);
    // Returned as made, not through a local: built in the caller's place, it is not copied back
    // out of stores still in flight (that copy was a tenth of the op model's time).
    auto kept = [&]() -> std::optional<LaunchOp> {
      if (!awaits_timing) return std::nullopt;
      return LaunchOp{collective ? o.seq : 0, bytes, rc_index, rc.rank, first_call, (o.flags & kOpReplayed) != 0};
    };
    if (awaits_timing && !grouped) return kept();
    if (collective) rc.untimed_seq = std::max(rc.untimed_seq, o.seq);
    // Inside a group the call only queues the op: its host time says nothing; nor does a graph
    // launch's of the ops it replays.
    if (!grouped && o.group_depth == 0 && !(o.flags & kOpReplayed) && o.host_end_ns >= o.host_begin_ns)
      latencies_.add({o.comm_id, bytes, o.nranks, o.api, TimingSource::kHost}, rc.rank, wrap_sub(o.host_end_ns, o.host_begin_ns),
                  first_call);
    return kept();
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
        // A begin that is only a lower bound says nothing of when the rank got there.
        if (SeqSlot* slot = c.slot(op.seq); slot && t.gpu_begin && !t.begin_upper_bound)
          slot->gpu.note(wrap_add(t.begin_ns, out_.clock_offset), rc.rank, wrap_sub(t.end_ns, t.begin_ns),
                         t.began_at_previous_end);
      }
    }
    const LaunchOp& timed = ops.front();
    int64_t ns = wrap_sub(t.end_ns, t.begin_ns);
    if (ns >= 0 && timed.rank_comm < out_.comms.size()) {
      uint64_t comm_id = out_.comms[timed.rank_comm].comm_id;
      uint16_t api = t.launch_ops == 1 ? t.launch_api : static_cast<uint16_t>(Api::kGroupEnd);
      TimingSource source = !t.gpu_begin          ? TimingSource::kHostToGpuEnd
                            : timed.replayed      ? TimingSource::kGpuGraphReplay
                            : t.begin_upper_bound ? TimingSource::kGpuUpperBound
                                                  : TimingSource::kGpu;
      latencies_.add({comm_id, bytes, t.launch_nranks, api, source},
                  timed.rank, ns, first_call);
      RankComm& rc = out_.comms[timed.rank_comm];
      if (t.alike) {
        out_.alike_marked = true;
        rc.alike_timed.add(ns);
      } else if (source == TimingSource::kGpu && !first_call && timed.seq && t.stream_named) {
        rc.steady_timed.add(ns);
      }
    }
  }

  void on_no_timing(std::span<const LaunchOp>, bool, NoTiming) {}  // counted done as they returned, or pending

 private:
  P2PChannel& channel(uint64_t comm_id, int32_t rank, int32_t peer, bool send) {
    for (P2PChannel& ch : out_.p2p)
      if (ch.comm_id == comm_id && ch.peer == peer && ch.send == send) return ch;
    out_.p2p.push_back(P2PChannel{comm_id, rank, peer, send, 0, 0, 0});
    return out_.p2p.back();
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

  // Counted by the op's (communicator, op, size), as the op totals are: what `latency` rows name.
  void on_plan(const OpPlanRecord& p, const RecordView& r) {
    Api api = static_cast<Api>(p.api);
    if (!(is_collective(api) || is_point_to_point(api))) return;
    int32_t nranks = implausible_.nranks(p.nranks, r);
    PlanCounts& counts = agg_.plans[{p.comm_id, bytes_of(api, p.count, p.datatype, nranks), nranks, p.api}];
    PlanChoice choice{plan_name(p.algo), plan_name(p.proto), p.nchannels};
    // NCCL has a handful of algorithms and protocols: more ways than this is a damaged trace.
    constexpr size_t kMaxChoices = 64;
    if (counts.size() >= kMaxChoices && !counts.count(choice)) return;
    ++counts[choice];
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
      RankComm& rc = out_.comms[rank_comms_.of(sc.comm_id, implausible_.rank(sc.rank, r), implausible_.nranks(sc.nranks, r))];
      rc.snapshot_done_seq = sc.last_completed_seq;
    }
    RankComm& rc = out_.comms[rank_comms_.of(s.comm_id, -1, -1)];
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
  TimedOps<LaunchOp, Fold> timed_ops_{*this};
  KernelSpans kernel_spans_{agg_.kernels, implausible_};
  RankComms rank_comms_;
  SeqSlots seq_slots_;
  Latencies latencies_;
};


OpScanner::OpScanner(ProcessOps& out, ThreadAggregate& agg, ImplausibleValues& implausible)
    : fold_(std::make_unique<Fold>(out, agg, implausible)) {}
OpScanner::~OpScanner() = default;
void OpScanner::add(const RecordView& r) { fold_->add(r); }
void OpScanner::finish() { fold_->finish(); }

}  // namespace ncclwatch::model
