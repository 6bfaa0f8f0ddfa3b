// ncclwatch-report watch: the job-wide hang verdict while the job still runs.
//
// The shim keeps a file `<trace>.stalled` beside a trace while its watchdog sees an op stalled
// (gpu/gpu_watchdog.cc), and, while this watcher's `watching` file is in the folder,
// `<trace>.progress`: the collectives it issued on each communicator (gpu/progress_file.h). The
// watcher lists the job's folders a few times a second and reads the progress files once a second
// (nothing else while the job is well: no trace is read). It suspects a hang when a stall appears,
// or when a rank has issued fewer collectives on a communicator than a peer for longer than the
// lag threshold (a job-level rule, which fires before any rank's watchdog). Then it asks every
// process for its stacks (a `dump-now` file in each folder, answered within a second), reads the
// traces, prints the verdict on stderr with where each rank's Python is, and writes it to
// `verdict.json` beside the traces (hang --json's shape, plus "live"). It says it again only when
// the verdict changes, and once when the suspicion is gone.
#include "reports/shared.h"

#include <ncclwatch/trace_format.h>
#include <ncclwatch/trace_strings.h>

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>
#include <sys/types.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <tuple>

namespace ncclwatch::report {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kStalledSuffix = trace::progress_file::kStalledSuffix;

// The stall markers in the folders (names relative to nothing: each marker's path), and their lines.
std::map<std::string, std::string> stall_markers(const std::vector<std::string>& folders) {
  std::map<std::string, std::string> out;
  for (const std::string& folder : folders) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
      std::string name = e.path().filename().string();
      if (name.size() <= kStalledSuffix.size() || !name.ends_with(kStalledSuffix)) continue;
      std::ifstream in(e.path());
      std::string line;
      std::getline(in, line);
      out[e.path().string()] = line;
    }
  }
  return out;
}

// One line of a progress file: a rank's collectives issued on a communicator.
struct RankIssued {
  std::string comm;
  int rank = -1;
  uint64_t issued = 0;
};

// The progress files in the folders; a file that is not one (or half-written) is skipped.
std::vector<RankIssued> read_progress(const std::vector<std::string>& folders) {
  std::vector<RankIssued> out;
  for (const std::string& folder : folders) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
      if (!e.path().filename().string().ends_with(trace::progress_file::kSuffix)) continue;
      std::ifstream in(e.path());
      std::string line;
      if (!std::getline(in, line) || line != trace::progress_file::kHeader) continue;
      while (std::getline(in, line)) {
        char comm[24] = {};
        int rank = -1, nranks = 0;
        unsigned long long issued = 0;
        if (std::sscanf(line.c_str(), "comm %16s %d %d %llu", comm, &rank, &nranks, &issued) == 4 && rank >= 0)
          out.push_back({comm, rank, issued});
      }
    }
  }
  return out;
}

// The job-level rule: a rank that issued fewer collectives on a communicator than a peer did, and
// stayed there for longer than `lag_s` (as seen by this watcher). `behind_since` remembers when
// each (comm, rank, count) was first seen behind.
using BehindKey = std::tuple<std::string, int, uint64_t>;
std::map<BehindKey, std::string> lagging_ranks(const std::vector<RankIssued>& ranks, double lag_s,
                                               std::map<BehindKey, std::chrono::steady_clock::time_point>& behind_since) {
  auto now = std::chrono::steady_clock::now();
  std::map<std::string, uint64_t> most;  // comm -> the most any rank issued
  for (const RankIssued& r : ranks) most[r.comm] = std::max(most[r.comm], r.issued);
  std::map<BehindKey, std::chrono::steady_clock::time_point> still_behind;
  std::map<BehindKey, std::string> out;
  for (const RankIssued& r : ranks) {
    if (r.issued >= most[r.comm]) continue;
    BehindKey key{r.comm, r.rank, r.issued};
    auto seen = behind_since.find(key);
    auto since = seen == behind_since.end() ? now : seen->second;
    still_behind[key] = since;
    double behind_s = std::chrono::duration<double>(now - since).count();
    if (lag_s > 0 && behind_s >= lag_s)
      out[key] = fmt::format("rank {} of comm {} has not issued collective {} for {:.0f} s while a peer issued {}",
                             r.rank, r.comm, r.issued + 1, behind_s, most[r.comm]);
  }
  behind_since = std::move(still_behind);
  return out;
}

// Set by SIGTERM/SIGINT: the watcher stops at its next look and takes its `watching` mark away.
volatile sig_atomic_t g_stop_watching = 0;
void stop_watching(int) { g_stop_watching = 1; }

// The watcher's presence, for the shim to write progress files (none while nobody watches).
struct WatchingMark {
  explicit WatchingMark(const std::vector<std::string>& folders) : folders(folders) {
    for (const std::string& folder : folders) std::ofstream(path(folder)) << getpid() << "\n";
  }
  ~WatchingMark() {
    std::error_code ec;
    for (const std::string& folder : folders) fs::remove(path(folder), ec);
  }
  static fs::path path(const std::string& folder) { return fs::path(folder) / std::string(trace::progress_file::kWatchingFile); }
  std::vector<std::string> folders;
};

// Every process tracing into `folder` writes its Python stacks within a second (stack_requests.h).
void ask_for_stacks(const std::string& folder) {
  std::ofstream(fs::path(folder) / std::string(trace::stacks_record::kRequestFile)) << std::time(nullptr) << "\n";
}

bool alive(pid_t pid) { return pid <= 0 || kill(pid, 0) == 0 || errno == EPERM; }

// The folders the inputs name (a trace file's folder for a file).
std::vector<std::string> folders_of(const std::vector<std::string>& inputs) {
  std::set<std::string> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    out.insert(fs::is_directory(input, ec) ? input : fs::path(input).parent_path().string());
  }
  return {out.begin(), out.end()};
}

// The verdict of the traces now, and its JSON; nullopt when no trace could be read.
struct LiveVerdict {
  std::string text;
  nlohmann::json json;
};
std::optional<LiveVerdict> read_verdict(const std::vector<std::string>& inputs) {
  std::optional<JobAnalysis> analysis = load_job_or_explain(inputs, AnalysisOptions{});
  if (!analysis) return std::nullopt;
  HangReport report = hang_report(*analysis);
  LiveVerdict v;
  v.text = "verdict: " + report.verdict;
  for (const CommHang& c : report.comms)
    for (const RankProgress& r : c.per_rank)
      if (!r.where.empty()) v.text += fmt::format("\n  comm {} rank {}: Python at {}", hex_id(c.comm_id), r.rank, r.where);
  v.json = to_json(report);
  v.json["live"] = true;
  return v;
}

void write_verdict(const std::vector<std::string>& folders, const nlohmann::json& verdict) {
  for (const std::string& folder : folders)
    write_output_atomically((fs::path(folder) / "verdict.json").string(), verdict.dump(2) + "\n");
}

// The verdict as Prometheus series (node-exporter's textfile format), for an alert rule: one
// ncclwatch_hang_suspected per communicator with a rank that stopped short (1), or none (0) once
// every stall resolved.
void write_metrics(const std::string& path, const nlohmann::json* verdict) {
  if (path.empty()) return;
  std::string text =
      "# HELP ncclwatch_hang_suspected 1 while ncclwatch-report watch sees a stall: the communicator, the first "
      "rank that stopped short and the seq it never issued\n# TYPE ncclwatch_hang_suspected gauge\n";
  bool any = false;
  for (const nlohmann::json& c : verdict ? (*verdict)["comms"] : nlohmann::json::array()) {
    if (c["missing"].empty()) continue;
    const nlohmann::json& m = c["missing"][0];
    text += fmt::format("ncclwatch_hang_suspected{{comm=\"{}\",rank=\"{}\",seq=\"{}\"}} 1\n", c["comm"].get<std::string>(),
                        m["rank"].get<int>(), m["first_missing_seq"].get<uint64_t>());
    any = true;
  }
  if (!any) text += "ncclwatch_hang_suspected 0\n";
  write_output_atomically(path, text);
}

}  // namespace

int run_watch(const Options& options, double interval_s, pid_t until_pid, const std::string& metrics_file,
              double lag_s) {
  std::vector<std::string> folders = folders_of(options.inputs);
  WatchingMark mark(folders);
  struct sigaction stop {};
  stop.sa_handler = stop_watching;
  sigaction(SIGTERM, &stop, nullptr);
  sigaction(SIGINT, &stop, nullptr);
  auto interval = std::chrono::duration<double>(std::max(0.05, interval_s));
  std::map<std::string, std::string> seen;  // what the last verdict answered: stall markers and lagging ranks
  std::string said;                         // the verdict last printed
  std::map<BehindKey, std::chrono::steady_clock::time_point> behind_since;
  std::map<BehindKey, std::string> lagging;
  auto next_progress = std::chrono::steady_clock::now();
  write_metrics(metrics_file, nullptr);
  while (!g_stop_watching && alive(until_pid)) {
    std::map<std::string, std::string> suspected = stall_markers(folders);
    size_t stalls = suspected.size();
    if (lag_s > 0 && std::chrono::steady_clock::now() >= next_progress) {
      lagging = lagging_ranks(read_progress(folders), lag_s, behind_since);
      next_progress = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    for (const auto& [key, line] : lagging) suspected[fmt::format("lag {} {}", std::get<0>(key), std::get<1>(key))] = line;
    if (suspected != seen) {
      bool new_suspicion = std::any_of(suspected.begin(), suspected.end(), [&](const auto& m) { return !seen.count(m.first); });
      if (suspected.empty()) {
        if (!said.empty()) say_line("ncclwatch: every stall resolved; the job goes on");
        write_metrics(metrics_file, nullptr);
        said.clear();
      } else {
        if (new_suspicion) {
          for (const std::string& folder : folders) ask_for_stacks(folder);
          // Each process answers within a second of the request; the stalled ones wrote theirs.
          std::this_thread::sleep_for(std::chrono::milliseconds(1200));
        }
        if (std::optional<LiveVerdict> v = read_verdict(options.inputs); v && v->text != said) {
          std::string why = stalls ? fmt::format("{} process(es) stalled: {}", stalls, suspected.begin()->second)
                                   : lagging.begin()->second;
          say_line(fmt::format("ncclwatch: HANG SUSPECTED ({})\n{}", why, v->text));
          write_verdict(folders, v->json);
          write_metrics(metrics_file, &v->json);
          said = v->text;
        }
      }
      seen = std::move(suspected);
    }
    std::this_thread::sleep_for(interval);
  }
  return 0;
}

}  // namespace ncclwatch::report
