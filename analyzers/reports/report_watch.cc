// ncclwatch-report watch: the job-wide hang verdict while the job still runs.
//
// The shim keeps a file `<trace>.stalled` beside a trace while its watchdog sees an op stalled
// (gpu/gpu_watchdog.cc). The watcher lists the job's folders a few times a second (nothing else
// while the job is well: no trace is read). When a stall appears it asks every process for its
// Python stacks (a `dump-now` file in each folder, answered within a second), reads the traces,
// prints the verdict on stderr with where each rank's Python is, and writes it to
// `verdict.json` beside the traces (hang --json's shape, plus "live"). It says it again only when
// the verdict changes, and once when every stall resolved.
#include "reports/shared.h"

#include <ncclwatch/trace_format.h>
#include <ncclwatch/trace_strings.h>

#include <fmt/format.h>

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

namespace ncclwatch::report {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kStalledSuffix = ".stalled";

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

int run_watch(const Options& options, double interval_s, pid_t until_pid, const std::string& metrics_file) {
  std::vector<std::string> folders = folders_of(options.inputs);
  auto interval = std::chrono::duration<double>(std::max(0.05, interval_s));
  std::map<std::string, std::string> seen;  // the markers of the last verdict
  std::string said;                         // the verdict last printed
  write_metrics(metrics_file, nullptr);
  while (alive(until_pid)) {
    std::map<std::string, std::string> stalled = stall_markers(folders);
    if (stalled != seen) {
      bool new_stall = std::any_of(stalled.begin(), stalled.end(), [&](const auto& m) { return !seen.count(m.first); });
      if (stalled.empty()) {
        say_line("ncclwatch: every stall resolved; the job goes on");
        write_metrics(metrics_file, nullptr);
        said.clear();
      } else {
        if (new_stall) {
          for (const std::string& folder : folders) ask_for_stacks(folder);
          // Each process answers within a second of the request; the stalled ones wrote theirs.
          std::this_thread::sleep_for(std::chrono::milliseconds(1200));
        }
        if (std::optional<LiveVerdict> v = read_verdict(options.inputs); v && v->text != said) {
          say_line(fmt::format("ncclwatch: HANG SUSPECTED ({} process(es) stalled: {})\n{}", stalled.size(),
                               stalled.begin()->second, v->text));
          write_verdict(folders, v->json);
          write_metrics(metrics_file, &v->json);
          said = v->text;
        }
      }
      seen = std::move(stalled);
    }
    std::this_thread::sleep_for(interval);
  }
  return 0;
}

}  // namespace ncclwatch::report
