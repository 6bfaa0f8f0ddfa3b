// What the reports share: the subcommands (each returns the process exit code of the contract:
// 0 nothing found, 1 findings, 2 no usable input), the typed results the reports read from each
// other (LeakReport, SummaryReport) and their JSON and CSV writing.
#pragma once

#include "model/model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ncclwatch::report {

// The reports render the model: its names are theirs (model::Job, model::HangReport, ...).
using namespace ncclwatch::model;

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

// The exit status when no trace of the input could be used.
inline constexpr int kNoUsableInput = 2;

int run_leaks(const Options& options);
int run_leaks(const Job& job, const Options& options);  // a job as load_job_or_explain read it
int run_summary(const Options& options);
int run_dump(const std::string& path, const Options& options);
int run_dump_files(const Options& options);
int run_columns(const Options& options);  // the job as binary columns, for ncclwatch.load
// Where this installation's shim ("shim": NCCLWATCH_SHIM when set) or the folder holding its Python
// package ("package") is, from this program's own path; nullopt when not there (report_where.cc).
std::optional<std::string> installed_path(std::string_view what);
int run_where(const std::string& what);  // prints installed_path(what), or says where it looked
int run_latency(const Options& options);
int run_hang(const Options& options);
int run_timeline(const Options& options);
int run_html(const Options& options);  // one self-contained page to options.output
int run_metrics(const Options& options);
// The job's traces as Parquet tables under options.output (report_export.cc); `job` names the job
// ("": as its processes' environment named it, else the folder of its traces).
int run_export(const Options& options, const std::string& job);
// Watches the job's folders until `until_pid` exits (forever when 0), polling every `interval_s`:
// the hang verdict on stderr and in verdict.json within seconds of a stall or of a rank staying
// behind its peers' collectives for `lag_s` (0: never), and in
// `metrics_file` as ncclwatch_hang_suspected when one is given (report_watch.cc).
// The job's id as its processes' environment named it (NCCLWATCH_JOB, else SLURM_JOB_ID, else
// TORCHELASTIC_RUN_ID: the traces record them), else as this tool's own environment does; "" when
// none (report_metrics.cc).
std::string job_id_of(const Job& job);
// The same from the traces alone ("" when none names it).
std::string job_id_in_traces(const Job& job);
// The NCCL versions the job's processes attached, "2.28.9,2.27.7"; "" when none is known.
std::string nccl_versions_of(const Job& job);
int run_watch(const Options& options, double interval_s, pid_t until_pid, const std::string& metrics_file,
              double lag_s);

// An array of a JSON report, made entry by entry as it is written (see write_json_streamed).
struct StreamedArray {
  std::string key;
  size_t size = 0;
  std::function<nlohmann::json(size_t)> entry;  // entry i, made when written
};
// Writes `head` with `arrays` in it, exactly as dump_json(…, 2) writes the whole object, without the
// whole ever being held: a job's tens of thousands of communicators take gigabytes as one tree.
void write_json_streamed(std::ostream& out, nlohmann::json head, const std::vector<StreamedArray>& arrays);

// Text reports' lines on standard output: as fmt::print, every text argument made printable
// (printable_text: names, hosts, paths, call sites and notices come from traces, and a terminal
// would act on the escape sequences they may hold).
template <class... Args>
void print_text(fmt::format_string<printable_arg_t<Args>...> format, Args&&... args) {
  fmt::print(format, printable_arg(std::forward<Args>(args))...);
}

// "4 KiB", "1.5 MiB": bytes as people read them (binary units, one decimal unless whole).
std::string bytes_text(uint64_t bytes);

// Writes `text` to standard output (path "" or "-") or to `path`, through a temporary file
// renamed over it; false (named on stderr) when that fails.
bool write_output_atomically(const std::string& path, const std::string& text);
// For the files the watcher keeps in a job's folder, which others may be able to write (verdict.json,
// watching, dump-now): `path` is replaced only when it is a regular file of this user's or absent,
// never written through a link, through an exclusive temporary name. False: `why` says why not.
bool write_shared_folder_file(const std::string& path, std::string_view text, mode_t mode, std::string& why);
// Why write_shared_folder_file() would refuse `path` ("" when it would not).
std::string why_not_replaced_in_shared_folder(const std::string& path);

// CSV as RFC 4180 writes it, shared by every report that has a table. A field holding a comma, a
// quote, CR or LF is quoted and its quotes doubled; rows end in "\n" (readers take it as CRLF).
std::string csv_field(std::string_view text);
// One row of `fields` (each through csv_field) on standard output.
void write_csv_row(const std::vector<std::string>& fields);

// Reading a report's input --------------------------------------------------------------------

// The job of `inputs` read (load_job) or, given `analysis`, read and analysed (analyze_job), every
// problem met named on stderr. When no trace was usable it says so and returns nullopt: the report
// then exits kNoUsableInput.
std::optional<Job> load_job_or_explain(const std::vector<std::string>& inputs);
std::optional<JobAnalysis> load_job_or_explain(const std::vector<std::string>& inputs, const AnalysisOptions& analysis);
// Says on stderr that no trace was usable; returns kNoUsableInput. For a report that reads the
// traces itself (timeline).
int explain_nothing_usable();
// Names unusable or damaged inputs on stderr.
void print_problems(const std::vector<TraceProblem>& problems);

// Shared by the reports ------------------------------------------------------------------------

// [{"key", "values": [{"value", "ranks", "processes"}]}]
nlohmann::json to_json(const std::vector<EnvironmentDifference>& differences);
nlohmann::json to_json(const HangReport& report);   // `hang --json`
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
// A call site as the reports show it: the Python line leads where there is one; native frames
// named by `symbolizer` (nullptr: addresses, or what the shim read at the call, `recorded`).
SiteText describe_site(Symbolizer* symbolizer, const ProcessTrace& p, const std::vector<uint64_t>& frames,
                       const std::string& recorded, const std::vector<PythonFrame>& python = {});
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

// A teardown call (finalize, destroy, abort) entered on some ranks of a communicator and never
// returned: the job hung (or was killed) in its teardown.
struct TeardownHang {
  uint64_t comm_id = 0;
  std::string name;
  trace::Api api = trace::Api::kUnknown;
  std::set<int> ranks;
  double longest_inside_s = 0;  // from the call's entry to the end of that rank's trace
  std::string until;            // how that trace ended: "SIGTERM", "the process exited", ...
};
// "ncclCommFinalize entered on rank(s) 0,1 of comm 1a2b... and never returned (36.0 s until SIGTERM)"
std::string teardown_hang_text(const TeardownHang& hang);

struct LeakReport {
  std::vector<CommInstanceRow> communicators;  // every instance, in file order
  std::vector<TeardownHang> teardown_hangs;
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

// The world ranks of process `process`: every rank it holds in the widest communicator it made or
// used, from its ops where it has them (one process may drive several GPUs).
std::set<int32_t> world_ranks_of(const JobAnalysis& analysis, size_t process);
// The job's ranks: its world ranks, or its processes holding ranks where more (no communicator
// spans the job).
size_t count_world_ranks(const JobAnalysis& analysis);

// The first thing to look at in a job, in one sentence: summary's and html's.
std::string first_look_at(const LeakReport& leaks, const HangReport& hang);

// summary's result, typed: one screen about the whole job, gathered from the other reports'
// results; `summary` prints it as text or JSON.
struct SummaryReport {
  // One NCCL copy the traces name, across the processes that held it.
  struct LibraryUse {
    std::string version, status, how;
    int processes = 0;
  };
  size_t traces = 0;
  size_t ranks = 0;  // world ranks
  std::set<std::string> hosts;
  size_t communicators = 0;                    // identities, created or with ops
  size_t processes_without_final_record = 0;   // killed or crashed
  std::map<std::string, int> ended_by_signal;  // "SIGTERM" -> processes: ended by a signal the shim saw
  // Each process that did not end well (a status other than 0, an uncaught exception, a signal):
  // its world rank (-1 unknown), pid and how it ended (process_ending_text).
  struct Ending {
    int32_t rank = -1;
    int64_t pid = 0;
    std::string text;
    std::optional<trace::SignalRecord> signal;  // the watched signal that arrived, who sent it
  };
  std::vector<Ending> bad_endings;
  uint64_t lost_records = 0;
  std::map<std::string, LibraryUse> libraries;  // by path
  LeakReport leaks;                     // call sites not symbolized: the summary names no native frame
  HangReport hang;
  std::vector<LatencyRow> slowest_ops;  // at most 5, by their worst steady-state time
  OpWindow window;
  std::string first_look;
  // Exit status 1: what leaks or hang counts as findings, or an NCCL copy not traced ("no leaks"
  // cannot be vouched for).
  bool findings = false;
};
SummaryReport summary_report(const JobAnalysis& analysis);
nlohmann::json to_json(const SummaryReport& report);  // `summary --json`

}  // namespace ncclwatch::report
