// The op records of a whole job, folded in one streaming pass into what the latency, hang and
// summary reports need.
//
// Memory is bounded by the job's shape, not by its records: per process, one entry per
// communicator it used and per point-to-point peer; per communicator, one small slot per
// collective seq (shared by all of its ranks, so 256 ranks x 100,000 collectives keep 100,000
// slots, not 25.6 million records); per (communicator, op, size, timing) one log-linear histogram.
// Files are read by several threads; each thread folds into its own aggregates, which are merged at
// the end.
#pragma once

#include "model/clock_align.h"
#include "model/job_read.h"
#include "model/job_model.h"
#include "model/latency_histogram.h"
#include "model/nccl_facts.h"
#include "model/peer_links.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ncclwatch::model {

// What every rank must pass alike to the same collective.
struct OpSignature {
  uint64_t count = 0;
  int32_t redop = -1;
  int32_t peer = -1;  // root of rooted collectives
  uint16_t api = 0;
  uint8_t datatype = 0;
  bool operator==(const OpSignature&) const = default;
};

// Ranks that passed one signature at one seq. Within one reader thread, every rank is compared with
// the first signature that thread saw (its reference); only the ranks that differ are listed. The
// reference's own ranks are implicit: all ranks of that thread that issued the seq, less the listed.
struct SignatureGroup {
  OpSignature sig;
  uint8_t origin = 0;          // reader thread
  bool implicit = false;       // ranks not listed (see above)
  std::vector<int32_t> ranks;  // explicit ranks
};

// Who arrived last at one seq, and the arrival before: how late the last one was. The first
// arrival too: how late each rank was (the html lateness map). On the GPU, each of the two latest
// arrivals' own time on the GPU (-1 unknown) and whether the last one was held by its own rank's
// previous launch (LaunchTiming::began_at_previous_end): what its lateness cost the others.
struct LastArrivals {
  uint32_t ranks = 0;  // arrivals noted
  int32_t last_rank = -1;
  int64_t last = std::numeric_limits<int64_t>::min();
  int64_t second = std::numeric_limits<int64_t>::min();
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last_took_ns = -1, second_took_ns = -1;
  bool last_held = false;

  void note(int64_t begin, int32_t rank, int64_t took_ns = -1, bool held = false) {
    ++ranks;
    first = std::min(first, begin);
    if (begin > last) {
      second = last;
      second_took_ns = last_took_ns;
      last = begin;
      last_rank = rank;
      last_took_ns = took_ns;
      last_held = held;
    } else if (begin > second) {
      second = begin;
      second_took_ns = took_ns;
    }
  }
  void merge(const LastArrivals& o) {
    ranks += o.ranks;
    first = std::min(first, o.first);
    if (o.last > last) {
      if (o.second > last) {
        second = o.second;
        second_took_ns = o.second_took_ns;
      } else {
        second = last;
        second_took_ns = last_took_ns;
      }
      last = o.last;
      last_rank = o.last_rank;
      last_took_ns = o.last_took_ns;
      last_held = o.last_held;
    } else if (o.last > second) {
      second = o.last;
      second_took_ns = o.last_took_ns;
    }
  }
  // Whether `present` ranks all arrived, so that the last of them is known.
  bool complete(size_t present) const {
    return ranks >= present && last_rank >= 0 && second != std::numeric_limits<int64_t>::min();
  }
  // How long the others waited for the last one: its lead over the one before, but no more than
  // that one's own time says it waited (its time less the last one's: they end together), and
  // none where the last was held by its own previous launch.
  int64_t wait_caused() const {
    int64_t lead = last - second;
    if (last_held) return 0;
    if (last_took_ns >= 0 && second_took_ns >= 0) return std::clamp<int64_t>(second_took_ns - last_took_ns, 0, lead);
    return lead;
  }
};

// One collective seq of one communicator, shared by all its ranks.
struct SeqSlot {
  OpSignature ref;
  uint32_t issued = 0;         // ranks that issued it
  LastArrivals host;           // host enqueue times (host_begin on the aligned clock)
  // When each rank's launch started on its GPU (sampled launches only). A host returns from an
  // enqueue long before its GPU gets there, so lateness is judged from these where every rank
  // has one.
  LastArrivals gpu;
  uint8_t ref_origin = 0;
  // A CUDA graph launch ran it (trace::kOpReplayed): the graph's index in the issuing process, and
  // whether it is that replay's first op on this communicator (replays are counted by those).
  bool replay_start = false;
  uint16_t graph = 0;
};

inline constexpr size_t kMaxTrackedSeqs = size_t{1} << 24;       // slots per communicator (a span of seqs)
inline constexpr size_t kMaxMismatchedSeqs = 10000;              // seqs with details, per communicator

struct CommOps {
  uint64_t comm_id = 0;
  int32_t nranks = 0;
  // Seqs from first_seq on: a trace whose ring wrapped keeps only its newest ops, so a
  // communicator's seqs need not start at 1.
  uint64_t first_seq = 1;
  std::vector<SeqSlot> slots;                                  // index seq - first_seq
  std::map<uint64_t, std::vector<SignatureGroup>> deviants;    // seq -> differing groups
  uint64_t untracked_mismatches = 0;                           // beyond kMaxMismatchedSeqs
  uint64_t untracked_seqs = 0;                                 // ops beyond kMaxTrackedSeqs or with garbage seqs

  const SeqSlot* slot(uint64_t seq) const {
    return seq >= first_seq && seq - first_seq < slots.size() ? &slots[seq - first_seq] : nullptr;
  }
  SeqSlot* slot(uint64_t seq) { return const_cast<SeqSlot*>(std::as_const(*this).slot(seq)); }
  // Which replay of which CUDA graph ran `seq`: {graph, replay number from 1}, or {0, 0} for an op
  // no graph ran. The number is 0 when the ops kept begin past the communicator's first seq.
  std::pair<uint32_t, uint64_t> graph_replay(uint64_t seq) const;
  uint64_t seq_at(size_t index) const { return first_seq + index; }
};

// kGpuRunHistogram: no call of the row in the ring's window; its figures come from the whole run's
// GPU histogram (op totals, half-octave resolution). kGpuGraphReplay: GPU events around a CUDA
// graph launch, which time the whole replay: an upper bound of the op's own time when the graph
// holds other work too.
// kGpuUpperBound: GPU events whose start may have waited for the communicator's previous op on
// another stream, untimed (LaunchTiming::begin_upper_bound): an upper bound of the op's own time.
enum class TimingSource : uint8_t {
  kGpu = 0, kHost = 1, kHostToGpuEnd = 2, kGpuRunHistogram = 3, kGpuGraphReplay = 4, kGpuUpperBound = 5
};
const char* timing_name(TimingSource t);

struct LatencyKey {
  uint64_t comm_id = 0;
  uint64_t bytes = 0;   // nccl-tests' "size" (see bytes_of)
  int32_t nranks = 0;
  uint16_t api = 0;     // kGroupEnd: a launch that held several ops
  TimingSource timing = TimingSource::kGpu;
  bool operator==(const LatencyKey&) const = default;
  bool operator<(const LatencyKey& o) const {
    return std::tie(comm_id, api, bytes, nranks, timing) < std::tie(o.comm_id, o.api, o.bytes, o.nranks, o.timing);
  }
};

// A communicator's first call of each op and size on each rank: NCCL sets up that op's
// connections lazily, inside it (130-175 ms against 50 us after, on H200s), so these calls are
// kept apart from the steady state.
struct FirstCalls {
  uint64_t count = 0;
  double sum = 0;  // ns
  int64_t max = 0;
  void add(int64_t ns) {
    ++count;
    sum += static_cast<double>(ns);
    max = std::max(max, ns);
  }
  double mean() const { return count ? sum / static_cast<double>(count) : 0; }
  void merge(const FirstCalls& o) {
    count += o.count;
    sum += o.sum;
    max = std::max(max, o.max);
  }
};

struct LatencyBucket {
  LatencyKey key;
  LatencyHistogram hist;         // the steady state: every call but each rank's first
  FirstCalls first_calls;
  std::vector<int32_t> ranks;    // which ranks contributed, sorted (calls = samples / ranks)
  uint64_t samples() const { return hist.count() + first_calls.count; }
};

// What the op totals (format 4) say about one (communicator, op, size) over the whole run, the
// ring's window or not, summed over the ranks that counted it.
struct RunTotalsKey {
  uint64_t comm_id = 0;
  uint64_t bytes = 0;
  int32_t nranks = 0;
  uint16_t api = 0;
  auto operator<=>(const RunTotalsKey&) const = default;
};
struct RunTotals {
  uint64_t calls = 0;               // all ranks
  std::vector<int32_t> ranks;       // that counted it, sorted
  uint64_t gpu_timed = 0;           // launches of this op alone with a GPU timing
  uint64_t gpu_ns = 0;
  std::array<uint64_t, trace::kTotalsBuckets> gpu_histogram{};
  int64_t first_ns = 0, last_ns = 0;  // aligned; first and latest call seen on any rank
  uint64_t calls_per_rank() const { return ranks.empty() ? calls : (calls + ranks.size() - 1) / ranks.size(); }
  // The GPU time under which `pct` % of the timed calls fell, at the histogram's resolution (half
  // an octave: the middle of the bucket); none without GPU-timed calls.
  std::optional<double> gpu_percentile_ns(double pct) const;
  void merge(const RunTotals& o);
};

// How NCCL ran the ops of one (communicator, op, size), from OpPlan records (NCCLWATCH_PROFILER):
// each way it planned them and on how many ops, all ranks.
struct PlanChoice {
  std::string algo, proto;  // collectives; empty for send/recv
  uint32_t channels = 0;
  auto operator<=>(const PlanChoice&) const = default;
};
using PlanCounts = std::map<PlanChoice, uint64_t>;

// How long the kernels of one (communicator, op, size) ran by the GPU's own timer, from OpKernel
// records (NCCLWATCH_PROFILER): each op's channels' first start to their last stop, all ranks.
struct KernelTotals {
  uint64_t ops = 0;
  uint64_t sum_ns = 0, max_ns = 0;
  uint64_t min_ns = UINT64_MAX;
  void add(uint64_t span_ns) {
    ++ops;
    sum_ns += span_ns;
    max_ns = std::max(max_ns, span_ns);
    min_ns = std::min(min_ns, span_ns);
  }
  void merge(const KernelTotals& o) {
    ops += o.ops;
    sum_ns += o.sum_ns;
    max_ns = std::max(max_ns, o.max_ns);
    min_ns = std::min(min_ns, o.min_ns);
  }
};

// A name NCCL gave (OpPlanRecord.algo, .proto), to its field's end: letters, digits and '_' only
// (it comes through a trace).
template <size_t N> std::string plan_name(const char (&field)[N]) {
  std::string out;
  for (size_t i = 0; i < N && field[i]; ++i) {
    char c = field[i];
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    out.push_back(plain ? c : '?');
  }
  return out;
}

// Adds `rank` to a sorted list of distinct ranks: sized by the ranks seen, not by their values.
void note_rank(std::vector<int32_t>& ranks, int32_t rank);

// One communicator as one process used it.
struct CollectiveGpuTime {
  int64_t gpu_ns = 0;
  uint64_t launches = 0;
  void add(int64_t ns) { gpu_ns += ns, ++launches; }
};

struct RankComm {
  uint64_t comm_id = 0;
  int32_t rank = -1;
  int32_t nranks = -1;
  uint8_t thread = 0;               // reader thread that read this process (see SignatureGroup)
  uint32_t comm_index = 0;          // into that thread's CommOps
  uint64_t issued = 0;              // collectives issued
  uint64_t captured_ops = 0;        // ops captured into CUDA graphs (they run at replays)
  uint64_t max_seq = 0;             // highest collective seq issued
  uint64_t timed_done_seq = 0;      // highest seq a GPU timing showed complete
  uint64_t untimed_seq = 0;         // highest seq issued without GPU timing (done as far as known)
  uint64_t snapshot_done_seq = 0;   // from the latest stall record naming this communicator
  bool stalled_unresolved = false;  // the process's last word on this comm was "stalled"
  uint64_t stalled_seq = 0;
  uint16_t last_api = 0;
  uint64_t p2p_ops = 0;
  int64_t first_begin = 0;          // aligned
  int64_t last_begin = 0;           // aligned
  // The straggler series (metrics_text.h kCollectiveGpuSeconds): GPU time of the launches every rank
  // timed alike, and how many; from a trace older than that mark, every steady GPU-timed collective.
  CollectiveGpuTime alike_timed;
  CollectiveGpuTime steady_timed;
  uint64_t completed_seq() const;   // highest seq known complete on this rank
  // The series the metrics give: the alike launches where the shim marked them.
  const CollectiveGpuTime& straggler_series(bool marked) const { return marked ? alike_timed : steady_timed; }
};

struct P2PChannel {
  uint64_t comm_id = 0;
  int32_t rank = -1;
  int32_t peer = -1;
  bool send = false;
  uint64_t ops = 0;
  uint64_t max_seq = 0;
  uint64_t bytes = 0;
};

struct StallEvent {
  int64_t time = 0;       // aligned
  int64_t enqueued = 0;   // aligned
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  uint16_t api = 0;
  bool stalled = true;    // else resolved
};

inline constexpr size_t kMaxStallsPerProcess = 256;

// Everything the op records of one process said.
struct ProcessOps {
  std::vector<RankComm> comms;
  std::vector<P2PChannel> p2p;
  std::vector<StallEvent> stalls;
  uint64_t op_records = 0;
  uint64_t timing_records = 0;
  uint64_t total_calls = 0;      // ops the totals counted (0: the trace has none, format < 4)
  uint64_t orphan_timings = 0;   // timings of launches never seen
  bool alike_marked = false;     // a timing carried kTimingAlike: the shim marks its straggler series
  int64_t clock_offset = 0;      // aligned = monotonic + clock_offset

  const RankComm* comm(uint64_t comm_id) const;
  // The rank this process has in its largest communicator: how people name a process.
  int world_rank() const;
};

struct AnalysisOptions {
  bool align_clocks = true;   // needed for arrival order across hosts (hang, timeline)
  bool keep_for_later = false;  // a later pass reads the files again (the HTML): keep their images
  unsigned threads = 0;       // 0: reader_threads()
};

// Where one rank of a communicator is: ops[process].comms[comm].
struct MemberRef {
  size_t process = 0;
  size_t comm = 0;
};

struct JobAnalysis {
  Job job;                              // usable processes and every problem met
  std::vector<std::string> files;       // usable files, parallel to job.processes
  std::shared_ptr<JobFiles> sources;    // every file read, for a later pass (read_again)
  std::vector<size_t> file_index;       // parallel to job.processes: the file's index in sources
  ClockModel clock;
  std::vector<ProcessOps> ops;          // parallel to job.processes
  std::vector<CommOps> comms;           // merged over threads, by comm_id
  std::vector<LatencyBucket> latency;   // merged, sorted by key
  std::map<RunTotalsKey, RunTotals> run_totals;  // the whole run's op counts (format 4)
  std::map<RunTotalsKey, PlanCounts> plans;     // what NCCL planned for them (OpPlan records)
  std::map<RunTotalsKey, KernelTotals> kernels; // how long their kernels ran (OpKernel records)
  PeerLinks peers;                      // what NCCL's proxy moved to and from each peer (OpProxy records)
  std::map<uint64_t, std::vector<MemberRef>> members;  // comm_id -> its ranks' entries, by rank
  uint64_t records = 0;                 // records read in the main pass

  const CommOps* comm(uint64_t comm_id) const;
  // Usable process p's records once more, for a pass that needs the first's results.
  bool read_again(size_t p, const RecordVisitor& visit) const;
  const RankComm& member(const MemberRef& m) const { return ops[m.process].comms[m.comm]; }
  // The ranks (of comm) that issued `seq` and passed each signature, majority first.
  std::vector<std::pair<OpSignature, std::vector<int32_t>>> signature_groups(const CommOps& comm, uint64_t seq) const;
};

JobAnalysis analyze_job(const std::vector<std::string>& inputs, const AnalysisOptions& options);

}  // namespace ncclwatch::model
