// ncclwatch-report: reads the trace files of a job and answers what leaked, how fast each
// collective was, who hung where and why, and draws a timeline.
#include "reports.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace ncclwatch::report;

namespace {

const std::vector<std::string> kReports = {"summary", "leaks", "latency", "hang", "timeline", "html", "metrics", "dump"};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A first argument that is neither an option, a report nor an existing path is a mistyped
// report: reading it as a folder would analyse whatever the default folder holds.
bool refuse_unknown_report(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  std::string word = argv[1];
  std::error_code ec;
  if (std::find(kReports.begin(), kReports.end(), word) != kReports.end() || std::filesystem::exists(word, ec))
    return false;
  std::string closest;
  size_t best = 3;  // suggest only near misses
  for (const std::string& r : kReports)
    if (size_t d = edit_distance(word, r); d < best) best = d, closest = r;
  std::fprintf(stderr, "ncclwatch-report: '%s' is neither a report nor an existing file or folder%s\n", word.c_str(),
               closest.empty() ? "" : (" (did you mean '" + closest + "'?)").c_str());
  std::fprintf(stderr, "reports: summary, leaks, latency, hang, timeline, html, metrics, dump; see ncclwatch-report --help\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (refuse_unknown_report(argc, argv)) return 2;
  // Named, not argv[0]: usage lines show the command, not where it was built.
  CLI::App app{"ncclwatch-report: leak, latency, hang and timeline reports from ncclwatch trace files", "ncclwatch-report"};
  app.footer(
      "PATHS are trace files or job folders (a folder's own *.nwt files; subfolders are not searched). A launcher\n"
      "folder (`ncclwatch run` writes ./ncclwatch/job-<id>) means its newest job, named on stderr; --all reads\n"
      "every job in it. Default: ./ncclwatch.\n"
      "Exit status: 0 nothing found, 1 findings (leaks, hang, mismatch), 2 bad usage or no usable trace.\n"
      "Examples:\n"
      "  ncclwatch-report                       summary of the newest job under ./ncclwatch\n"
      "  ncclwatch-report leaks ncclwatch/job-1234\n"
      "  ncclwatch-report latency --csv traces/ > latency.csv\n"
      "  ncclwatch-report hang --json traces/\n"
      "  ncclwatch-report html -o report.html traces/   one page to open in a browser (offline)\n"
      "  ncclwatch-report metrics -o /var/lib/prometheus/node-exporter/ncclwatch.prom ncclwatch/job-1234");
  app.set_version_flag("--version", std::string("ncclwatch-report ") + NCCLWATCH_VERSION + " (trace format " +
                                        std::to_string(ncclwatch::trace::kVersion) + ", reads formats " +
                                        std::to_string(ncclwatch::trace::kMinReadableVersion) + " to " +
                                        std::to_string(ncclwatch::trace::kVersion) + ")");
  app.require_subcommand(0, 1);
  Options options;

  auto add_common = [&](CLI::App* sub) {
    sub->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
    sub->add_flag("--json", options.json, "machine-readable output");
    sub->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  };
  add_common(&app);  // `ncclwatch-report DIR` is `ncclwatch-report summary DIR`
  CLI::App* summary = app.add_subcommand("summary", "one screen about the job (the default)");
  add_common(summary);
  CLI::App* leaks = app.add_subcommand("leaks", "communicators and resources never released");
  add_common(leaks);
  leaks->add_flag_callback("--no-symbols", [&] { options.symbolize = false; }, "skip symbolizing call sites");
  CLI::App* latency = app.add_subcommand("latency", "time and bandwidth per communicator, op and size");
  add_common(latency);
  latency->add_flag("--csv", options.csv, "comma-separated rows");
  CLI::App* hang = app.add_subcommand("hang", "who stopped where, mismatched arguments, stragglers, divergence");
  add_common(hang);
  CLI::App* timeline = app.add_subcommand("timeline", "Chrome trace-event JSON of the whole job (Perfetto)");
  timeline->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
  timeline->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  timeline->add_option("-o,--output", options.output, "the JSON file to write")->required();
  timeline->add_flag("--json", options.json, "accepted for symmetry: the timeline is JSON");
  CLI::App* html = app.add_subcommand("html", "one self-contained HTML page: verdict, bandwidth plots, lateness heatmap");
  html->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
  html->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  html->add_option("-o,--output", options.output, "the HTML file to write")->required();
  html->add_flag_callback("--no-symbols", [&] { options.symbolize = false; }, "skip symbolizing call sites");
  CLI::App* metrics = app.add_subcommand("metrics", "Prometheus text (node-exporter textfile format) of the job; exit 0 once written");
  metrics->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
  metrics->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  metrics->add_option("-o,--output", options.output, "the file to write, replaced in one step (default: standard output)");
  CLI::App* dump = app.add_subcommand("dump", "every record of trace files as JSON Lines (a file_header line first for each)");
  dump->add_option("paths", options.inputs, "trace files or a job folder")->required();
  dump->add_flag("--json", options.json, "accepted for symmetry: the output is JSON Lines");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (dump->parsed()) return run_dump_files(options);
  if (options.inputs.empty()) options.inputs.push_back("ncclwatch");
  std::vector<std::string> notes;
  options.inputs = resolve_job_folders(options.inputs, options.all_jobs, notes);
  for (const std::string& note : notes) std::fprintf(stderr, "ncclwatch-report: %s\n", note.c_str());
  (void)summary;

  if (leaks->parsed()) {
    Job job = load_job(options.inputs);
    print_problems(job.problems);
    return run_leaks(job, options);
  }
  if (latency->parsed()) return run_latency(options);
  if (hang->parsed()) return run_hang(options);
  if (timeline->parsed()) return run_timeline(options);
  if (html->parsed()) return run_html(options);
  if (metrics->parsed()) return run_metrics(options);
  return run_summary(options);
}
