// hang's analysis, typed (hang_analysis.cc, straggler_analysis.cc): per communicator what each rank
// issued and completed, what the ranks disagreed about, who was late and where a rank departed from
// its peers' program; and the settings that differ across the job's processes. `hang` writes it as
// JSON, CSV and text; summary, html and metrics read it, so that every report says the same thing.
#pragma once

#include "model/divergence.h"
#include "model/job_model.h"
#include "model/op_model.h"
#include "model/op_window.h"
#include "model/peer_links.h"
#include "model/rank_where.h"
#include "model/wording.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ncclwatch::model {

// An NCCL_* variable, or the NCCL version ("nccl_version"), that differs across processes.
struct EnvironmentDifference {
  struct Value {
    std::string value;           // "(unset)" where a process has none
    std::vector<int32_t> ranks;  // the processes' world ranks, sorted, at most 64
    size_t processes = 0;
  };
  std::string key;
  std::vector<Value> values;
};
std::vector<EnvironmentDifference> environment_differences(const JobAnalysis& analysis);

// P(X >= k) for X ~ Binomial(n, p): how likely a rank is last at k of n seqs by chance.
double binomial_tail(uint64_t n, uint64_t k, double p);

struct RankProgress : ThreadsWhere {  // and where its threads were (rank_where.h)
  int32_t rank = -1;
  std::string host;
  int pid = 0;
  uint64_t last_seq = 0, completed_seq = 0;
  bool process_ended = false;
};
// " at train.py:88 (step)" for a rank whose stacks were written, else "".
std::string where_note(const RankProgress& r);
using MissingRank = RankProgress;  // a rank that never issued last_seq + 1, which a peer issued
struct GraphReplay {
  uint32_t graph = 0;   // graph_record::kIndex
  uint64_t replay = 0;  // from 1; 0 unknown (the ops kept begin past the communicator's first seq)
};
struct IncompleteRank {
  int32_t rank = -1;
  uint64_t from_seq = 0, to_seq = 0;  // issued, never completed
};
// One argument in which some ranks differ from the most common signature at a seq.
struct ArgumentMismatch {
  uint64_t seq = 0;
  std::string field;                        // "op", "count", "datatype", "redop", "root" or "peer"
  nlohmann::json expected, value;           // a number or a name
  std::vector<int32_t> ranks, expected_ranks;
};
struct StallSeen {  // a watchdog record
  int32_t rank = -1;
  uint64_t seq = 0;
  trace::Api op = trace::Api::kUnknown;
  bool stalled = true;  // false: resolved later
  double pending_s = 0;
  int64_t time_ns = 0;
};
struct UnmatchedP2P {
  int32_t src = -1, dst = -1;
  uint64_t sends = 0, recvs = 0;
};
struct StragglerRank {
  int32_t rank = -1;
  uint64_t times_last = 0;
  double expected_by_chance = 0, typical_late_ms = 0, mean_late_ms = 0;
  bool far_more_than_chance = false;
  bool finding = false;  // far above chance, large, and measured on the GPU
  // Withdrawn: a peer of it is a straggler on this communicator (straggler_analysis.cc)
  uint64_t offset_by_comm = 0;
  std::string text;      // the finding in one sentence (or why it was withdrawn)
};
struct LateArrival {
  uint64_t seq = 0;
  int32_t rank = -1;
  double late_ms = 0;
};
struct StragglerStats {
  std::vector<StragglerRank> ranks;  // every rank that was last at least once
  std::vector<LateArrival> worst;    // the 10 latest arrivals
  bool on_gpu = false;               // GPU start times (else host enqueue times)
  uint64_t seqs_judged = 0;
};
// Who made the others wait on each of `comm_ids` (straggler_analysis.cc): every rank last at least
// once, the findings among them, those that contradict one another across communicators withdrawn.
std::map<uint64_t, StragglerStats> judge_stragglers(const JobAnalysis& a, const std::set<uint64_t>& comm_ids,
                                                    const std::map<uint64_t, std::string>& names);
struct CommHang {
  uint64_t comm_id = 0;
  std::string name;  // the application's, where it gave one
  int32_t nranks = 0;
  std::vector<int32_t> ranks;        // present: with a trace
  std::vector<RankRange> absent;     // without one
  std::vector<int32_t> init_never_returned;
  uint64_t last_seq_issued = 0, last_seq_completed_by_all = 0;
  std::vector<RankProgress> per_rank;
  std::vector<MissingRank> missing;
  std::vector<IncompleteRank> incomplete;
  std::vector<ArgumentMismatch> mismatches;
  uint64_t mismatched_seqs = 0;          // including those not detailed
  uint64_t mismatches_not_detailed = 0;  // seqs past the op model's limit
  std::vector<StallSeen> stalls;         // the first kMaxStallsPerComm
  size_t stall_records = 0;
  std::vector<UnmatchedP2P> p2p_unmatched;
  StragglerStats stragglers;
  std::optional<SlowPeer> slow_peer;  // the rank its peers waited on, by NCCL's proxy steps (peer_links.h)
  std::string slow_peer_text;
  std::vector<Divergence> divergence;
  // The seqs named above (a missing rank's next, the first never completed, mismatches) that a CUDA
  // graph launch ran: which graph (its index in the trace of the rank that issued it) and replay.
  std::map<uint64_t, GraphReplay> graph_replays;
  std::string verdict;  // the most telling finding, in words
};
// " (replay N of CUDA graph G)" when a graph launch ran `seq`, else "".
std::string graph_replay_note(const CommHang& c, uint64_t seq);
struct HangReport {
  std::vector<CommHang> comms;
  size_t traces = 0;
  std::vector<EnvironmentDifference> environment;
  std::string clock_method;
  nlohmann::json clock_hosts;
  OpWindow window;  // seqs, arrivals and mismatches are judged on the ops kept
  // Exit status 1: mismatches, missing or absent ranks, creations that never returned, ops never
  // completed, divergence, unmatched point-to-point.
  bool findings = false;
  std::string verdict;                  // the most telling finding, in words
  std::vector<std::string> stragglers;  // one sentence per straggler finding
  std::vector<std::string> slow_peers;  // one sentence per slow peer
  size_t mismatched_seqs = 0, missing_ranks = 0, absent_ranks = 0, init_hung_ranks = 0, incomplete_ranks = 0,
         stall_records = 0, divergences = 0;
  bool hung() const { return missing_ranks || absent_ranks || init_hung_ranks || incomplete_ranks || divergences; }
  std::vector<std::string> environment_keys;  // NCCL_* settings (or "nccl_version") that differ across ranks
};
HangReport hang_report(const JobAnalysis& analysis);

}  // namespace ncclwatch::model
