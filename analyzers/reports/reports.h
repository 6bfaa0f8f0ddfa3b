// The report subcommands. Each returns the process exit code of the contract:
// 0 nothing found, 1 findings, 2 no usable input.
#pragma once

#include "divergence.h"
#include "job_model.h"
#include "lifecycle_findings.h"
#include "op_model.h"
#include "op_window.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ncclwatch::report {

struct Options {
  std::vector<std::string> inputs;
  // The output format, from --format text|json|csv or its older spellings --json and --csv (main
  // refuses two that disagree, so at most one of these is set).
  bool json = false;
  bool csv = false;           // summary, leaks, latency, hang (summary refuses it)
  std::string format;         // --format as given ("" when not)
  bool symbolize = true;
  std::string output;         // timeline, html, metrics ("" or "-": standard output where allowed)
  bool all_jobs = false;      // a launcher folder: every job in it, not the newest
  // timeline filters
  std::string timeline_ranks;               // "0-3,8"
  std::string timeline_comm;                // id or name
  std::optional<double> timeline_from_s;    // seconds from the timeline's origin
  std::optional<double> timeline_to_s;
  bool timeline_no_flows = false;
};

int run_leaks(const Job& job, const Options& options);
int run_summary(const Options& options);
int run_dump(const std::string& path, const Options& options);
int run_dump_files(const Options& options);  // every file of options.inputs, in order
int run_latency(const Options& options);
int run_hang(const Options& options);
int run_timeline(const Options& options);
int run_html(const Options& options);  // one self-contained page to options.output
int run_metrics(const Options& options);

// The JSON text of `j` (indent < 0: one line). Strings are valid UTF-8 from the reader on; should
// one not be, it shows U+FFFD rather than aborting the report (nlohmann::json throws otherwise).
std::string dump_json(const nlohmann::json& j, int indent = -1);

// An array of a JSON report, made entry by entry as it is written (see write_json_streamed).
struct StreamedArray {
  std::string key;
  size_t size = 0;
  std::function<nlohmann::json(size_t)> entry;  // entry i, made when written
};
// Writes `head` with `arrays` in it, exactly as dump_json(…, 2) writes the whole object, without the
// whole ever being held: a job's tens of thousands of communicators take gigabytes as one tree.
void write_json_streamed(std::ostream& out, nlohmann::json head, const std::vector<StreamedArray>& arrays);

// Ranks as people read them: "0,1,4-63" (three or more in a row become a range), at most `limit`
// pieces, then how many ranks in all. `ranks` is sorted.
std::string ranks_text(const std::vector<int32_t>& ranks, size_t limit = 16);

// "4 KiB", "1.5 MiB": bytes as people read them (binary units, one decimal unless whole).
std::string bytes_text(uint64_t bytes);

// Writes `text` to standard output (path "" or "-") or to `path`, through a temporary file
// renamed over it; false (named on stderr) when that fails.
bool write_output_atomically(const std::string& path, const std::string& text);

// CSV as RFC 4180 writes it, shared by every report that has a table. A field holding a comma, a
// quote, CR or LF is quoted and its quotes doubled; rows end in "\n" (readers take it as CRLF).
std::string csv_field(std::string_view text);
// A JSON value as a cell: a string as it is, a float with 3 decimals, null empty, else its JSON text.
std::string csv_cell(const nlohmann::json& value);
// One row of `fields` (each through csv_field) on standard output.
void write_csv_row(const std::vector<std::string>& fields);

// P(X >= k) for X ~ Binomial(n, p): how likely a rank is last at k of n seqs by chance.
double binomial_tail(uint64_t n, uint64_t k, double p);

// Names unusable or damaged inputs on stderr.
void print_problems(const std::vector<TraceProblem>& problems);

// Shared by the reports ------------------------------------------------------------------------

// Communicator identity -> the name the application gave it (config->commName), where it did.
std::map<uint64_t, std::string> comm_names(const Job& job);
// "\"name\" (id)" or the id.
std::string comm_label(uint64_t id, const std::map<uint64_t, std::string>& names);

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
// [{"key", "values": [{"value", "ranks", "processes"}]}]
nlohmann::json to_json(const std::vector<EnvironmentDifference>& differences);

// hang's result, typed: per communicator what each rank issued and completed, what the ranks
// disagreed about, who was late and where a rank departed from its peers' program. `hang` writes
// it as JSON, CSV and text; summary and html read it, so that they say the same thing.
struct RankRange {
  int32_t first = 0, last = 0;  // inclusive
};
uint64_t rank_count(const std::vector<RankRange>& ranges);
// "0,3-5,9": at most `limit` ranges, then how many ranks in all.
std::string ranges_text(const std::vector<RankRange>& ranges, size_t limit = 16);
struct RankProgress {
  int32_t rank = -1;
  std::string host;
  int pid = 0;
  uint64_t last_seq = 0, completed_seq = 0;
  bool process_ended = false;
};
using MissingRank = RankProgress;  // a rank that never issued last_seq + 1, which a peer issued
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
  std::string text;      // the finding in one sentence
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
  std::vector<Divergence> divergence;
  std::string verdict;  // the most telling finding, in words
};
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
  size_t mismatched_seqs = 0, missing_ranks = 0, absent_ranks = 0, init_hung_ranks = 0, incomplete_ranks = 0,
         stall_records = 0, divergences = 0;
  bool hung() const { return missing_ranks || absent_ranks || init_hung_ranks || incomplete_ranks || divergences; }
  std::vector<std::string> environment_keys;  // NCCL_* settings (or "nccl_version") that differ across ranks
};
HangReport hang_report(const JobAnalysis& analysis);
nlohmann::json to_json(const HangReport& report);  // `hang --json`

// latency's result, typed: what `latency` prints and what the other reports read (summary's
// slowest ops, the html plots, the metrics). Durations in µs. A steady-state figure is empty where
// only first calls were seen; bandwidths exist on GPU-timed rows only.
struct LatencyRow {
  uint64_t comm_id = 0;
  std::string name;  // the communicator's, where the application gave one
  trace::Api api = trace::Api::kUnknown;
  uint64_t bytes = 0;  // nccl-tests' size (bytes_of)
  int32_t nranks = 0;
  uint64_t calls = 0;        // per rank, GPU-timed or not; over the whole run where op totals say
  uint64_t window_calls = 0; // per rank, in the traces' op records (fewer once a ring wrapped)
  uint64_t timed_calls = 0;  // per rank, with this row's timing
  uint64_t samples = 0;      // steady-state samples, all ranks
  size_t ranks_timed = 0;
  std::optional<double> p50_us, p90_us, p99_us, max_us, min_us, mean_us, algbw_gbps, busbw_gbps;
  uint64_t first_call_samples = 0;  // each rank's first call of this op and size (connection set-up)
  std::optional<double> first_call_max_us, first_call_mean_us;
  TimingSource timing = TimingSource::kHost;
};
// How long a communicator took to create and to destroy, across its ranks.
struct CommLifetimes {
  uint64_t comm_id = 0;
  std::string name, api;
  int32_t nranks = 0;
  size_t ranks_traced = 0;
  double init_ms_p50 = 0, init_ms_max = 0;
  std::optional<double> destroy_ms_p50, destroy_ms_max;
};
struct LatencyTable {
  OpWindow window;
  std::vector<LatencyRow> rows;
  std::vector<CommLifetimes> communicators;
};
LatencyTable latency_table(const JobAnalysis& analysis);
nlohmann::json to_json(const LatencyRow& row);      // one row as `latency --json` writes it
nlohmann::json to_json(const LatencyTable& table);  // `latency --json`

// leaks' result, typed: what `leaks` prints in each form, and what summary and html read, so that
// they say the same thing.

// A call site as the reports show it.
struct SiteText {
  std::string first;                // "train.py:43 (main) via c10d::NCCLComm::create (libtorch_cuda.so)"
  std::vector<std::string> stack;   // native frames, innermost first
  std::vector<PythonFrame> python;  // innermost first
};
// One communicator instance (a rank of it in one process), or a resource never released.
struct CommInstanceRow {
  const ProcessTrace* process = nullptr;
  const CommInstance* comm = nullptr;
  SiteText site;
  int32_t world_rank = -1;  // the process's rank in the widest communicator it made
};
struct OpenResourceRow {
  const ProcessTrace* process = nullptr;
  const ResourceInstance* resource = nullptr;
  SiteText site;
};
// A leaked communicator identity across the ranks where it leaked.
struct LeakedComm {
  uint64_t id = 0;
  const CommInstance* first = nullptr;  // the instance of its lowest-numbered process
  const ProcessTrace* process = nullptr;
  std::set<int> ranks;
  std::set<int32_t> world_ranks;  // of the processes where it leaked: how people name a new_group
  std::set<std::string> states;  // how it ended, in words
  std::set<std::string> hosts;
  SiteText site;
};
struct PileUpFinding {
  CommPileUp pile;
  SiteText site;
  std::string text;  // the finding in one sentence, without the remedy
};
struct OrderFinding {
  ResourceOrder order;
  SiteText made;                 // the resource's creation site
  std::string comm_released_at;  // kOutlivedComm: where its communicator was destroyed ("" unknown)
  SiteText earlier;              // kRegisteredTwice: the registration still held
};
// A trace that lost records (NCCLWATCH_MAX_MB, a full disk): end states may rest on what the
// exit record's list said rather than on the history itself.
struct LostHistory {
  const ProcessTrace* process = nullptr;
  uint64_t records = 0;
  bool ends_from_exit_list = false;  // the shim's complete list of live ones at exit decided them
};

struct LeakReport {
  std::vector<CommInstanceRow> communicators;  // every instance, in file order
  std::vector<LostHistory> lost_histories;
  std::vector<size_t> leaked_instances;  // indices into communicators
  size_t traces = 0;                     // trace files read
  std::vector<OpenResourceRow> open_resources;
  std::vector<LeakedComm> leaked;  // by identity
  std::map<std::string, int> state_counts;
  std::map<uint64_t, std::set<int>> finalized_only;  // finalized, never destroyed: not a leak by contract
  uint64_t leaked_memory_bytes = 0;  // GPU memory the leaked instances held when made, where measured
  bool torch = false;                // PyTorch made a leaked communicator
  std::vector<std::string> remedies; // NVSHMEM's, PyTorch's or NCCL's, for what leaked
  std::vector<PileUpFinding> pile_ups;
  PeakAlive peak;
  std::vector<OrderFinding> order;
  std::vector<UntracedCopy> untraced;
  std::set<std::string> other_builds;     // module files of another build than traced: not symbolized

  bool leaks() const { return !leaked_instances.empty() || !open_resources.empty(); }
  // Exit status 1: leaks, pile-ups, resources out of order.
  bool findings() const { return leaks() || !pile_ups.empty() || !order.empty(); }
};
// `symbolize`: native frames named from the modules' debug information (else addresses, or what
// the shim read at the call).
LeakReport leak_report(const Job& job, bool symbolize);
nlohmann::json to_json(const LeakReport& report);  // `leaks --json`
// The lines naming pile-ups and resources out of order, as `leaks` and html word them.
std::vector<std::string> lifecycle_lines(const LeakReport& report);
// The notes on traces that lost records, as `leaks` words them.
std::vector<std::string> lost_history_lines(const LeakReport& report);
// Names the module files that were not used to symbolize, once, on stderr.
void say_other_builds(const LeakReport& report);

// The world ranks of process `process`: every rank it holds in its widest communicator with ops
// (one process may drive several GPUs), else its rank in the widest communicator it made.
std::set<int32_t> world_ranks_of(const JobAnalysis& analysis, size_t process);

// The first thing to look at in a job, in one sentence: summary's and html's.
std::string first_look_at(const LeakReport& leaks, const HangReport& hang);

}  // namespace ncclwatch::report
