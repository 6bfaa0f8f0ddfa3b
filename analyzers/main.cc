// ncclwatch-report: reads the trace files of a job and answers what leaked, how fast each
// collective was, who hung where and why, and draws a timeline.
#include <ncclwatch_version.h>
#include "reports/reports.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

using namespace ncclwatch::report;

namespace {

const std::vector<std::string> kReports = {"summary", "leaks", "memory", "latency", "advice", "peers", "hang", "timeline", "html", "metrics", "dump", "columns", "watch", "export", "sql", "where", "rules"};

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
  say("'{}' is neither a report nor an existing file or folder{}", word,
      closest.empty() ? "" : " (did you mean '" + closest + "'?)");
  say_line("reports: summary, leaks, memory, latency, advice, peers, hang, timeline, html, metrics, dump, watch, export, sql; see ncclwatch-report --help");
  return true;
}

// `ncclwatch-report sql EXPORT ...`: the queries run in DuckDB, which lives in Python, so the
// Python package answers (ncclwatch._sql): the copy installed with this program first (where
// `where package` finds it), else whatever python3 imports.
int hand_sql_to_python(int argc, char** argv) {
  if (std::optional<std::string> python_path = installed_path("package")) {
    const char* old = getenv("PYTHONPATH");
    setenv("PYTHONPATH", (*python_path + (old && *old ? ":" + std::string(old) : "")).c_str(), 1);
  }
  static const char* kRunSql =
      "import sys\n"
      "try:\n"
      "    from ncclwatch._sql import main\n"
      "except ImportError as e:\n"
      "    sys.exit(f'ncclwatch-report sql: needs the ncclwatch Python package ({e}): pip install ncclwatch[sql]')\n"
      "sys.exit(main(sys.argv[1:], prog='ncclwatch-report sql'))\n";
  std::vector<char*> args = {const_cast<char*>("python3"), const_cast<char*>("-c"), const_cast<char*>(kRunSql)};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execvp("python3", args.data());
  say("sql runs in Python (DuckDB), and python3 could not be started: {}", std::strerror(errno));
  return 2;
}

// The commands that read no trace: where this installation's files are, and the Prometheus rules.
CLI::App* add_where_command(CLI::App& app, std::string& what) {
  CLI::App* where = app.add_subcommand("where", "where the shim or the Python package installed with this program is");
  where->add_option("what", what, "shim (libncclwatch.so; NCCLWATCH_SHIM when set) or package (the folder to put on PYTHONPATH)")
      ->required()
      ->check(CLI::IsMember({"shim", "package"}));
  return where;
}

CLI::App* add_advice_command(CLI::App& app, Options& options) {
  CLI::App* advice = app.add_subcommand("advice", "NCCL settings worth a look, and what a forced algorithm or protocol cost");
  advice->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
  advice->add_flag("--json", options.json, "machine-readable output (the same as --format json)");
  advice->add_option("--format", options.format, "text (default) or json")->check(CLI::IsMember({"text", "json"}));
  advice->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  return advice;
}

CLI::App* add_timeline_command(CLI::App& app, Options& options) {
  CLI::App* timeline = app.add_subcommand("timeline", "Chrome trace-event JSON of the whole job (Perfetto)");
  timeline->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
  timeline->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  timeline->add_option("-o,--output", options.output, "the JSON file to write; gzip-compressed when it ends in .gz (Perfetto opens it as it is)")->required();
  timeline->add_flag("--json", options.json, "accepted for symmetry: the timeline is JSON");
  timeline->add_option("--ranks", options.timeline_ranks, "only these ranks, e.g. 0-3,8");
  timeline->add_option("--comm", options.timeline_comm, "only this communicator (its id or name)");
  timeline->add_option("--from", options.timeline_from_s, "only from this many seconds after the first process started");
  timeline->add_option("--to", options.timeline_to_s, "only up to this many seconds after the first process started");
  timeline->add_flag("--no-flows", options.timeline_no_flows, "no arrows between ranks' launches of one collective");
  return timeline;
}

// What makes a communicator idle, for the reports that name idle ones (memory, html).
void add_idle_options(CLI::App* command, IdleSettings& idle, double& idle_min_mib) {
  command->add_option("--idle-after", idle.idle_after_s, "seconds without an op that make a communicator idle")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  command->add_option("--idle-min-mib", idle_min_mib, "GPU memory (MiB) an idle communicator must hold to be named")
      ->capture_default_str()
      ->check(CLI::Range(0.0, double(1 << 30)));
}

CLI::App* add_rules_command(CLI::App& app, RulesOptions& rules_options) {
  CLI::App* rules = app.add_subcommand("rules", "Prometheus recording and alerting rules over the metrics' series");
  rules->add_option("--hang-after", rules_options.hang_after_s,
                    "seconds a rank stays behind its peers without progress (NcclHangSuspected), or a communicator "
                    "stalled (NcclCommunicatorStalled), before the alert fires")
      ->capture_default_str();
  rules->add_option("--teardown-after", rules_options.teardown_after_s,
                    "seconds a finalize, destroy or abort stays inside before NcclTeardownHung fires")
      ->capture_default_str();
  rules->add_option("--straggler-after", rules_options.straggler_after_s,
                    "seconds over which a rank must typically make its peers wait before NcclStraggler fires")
      ->capture_default_str();
  rules->add_option("--scrape-interval", rules_options.scrape_interval_s,
                    "seconds between Prometheus' scrapes of the metrics (rates are taken over four)")
      ->capture_default_str();
  rules->add_option("--idle-after", rules_options.idle_after_s,
                    "seconds a communicator rank runs no collective or point-to-point op before "
                    "NcclIdleCommunicatorMemory fires, if it holds --idle-min-mib")
      ->capture_default_str();
  rules->add_option("--idle-min-mib", rules_options.idle_min_mib,
                    "GPU memory (MiB) an idle communicator rank must hold for NcclIdleCommunicatorMemory")
      ->capture_default_str();
  return rules;
}

}  // namespace

// --json and latency's --csv are older spellings of --format json|csv. Two that disagree are
// refused: honouring either would silently ignore what the other asked for.
bool settle_output_format(Options& options) {
  std::vector<std::string> asked;
  std::set<std::string> formats;
  auto ask = [&](bool given, const std::string& spelling, const std::string& format) {
    if (!given) return;
    asked.push_back(spelling);
    formats.insert(format);
  };
  ask(options.json, "--json", "json");
  ask(options.csv, "--csv", "csv");
  ask(!options.format.empty(), "--format " + options.format, options.format);
  if (formats.size() > 1) {
    std::string list;
    for (size_t i = 0; i < asked.size(); ++i) list += (i == 0 ? "" : i + 1 == asked.size() ? " and " : ", ") + asked[i];
    say("{} ask for different output formats; give one", list);
    return false;
  }
  options.json = formats.count("json") > 0;
  options.csv = formats.count("csv") > 0;
  return true;
}

// The --help footer (paths, exit status, examples) and the --version line.
void describe_tool(CLI::App& app) {
  app.footer(
      "PATHS are trace files or job folders (a folder's own *.nwt files; subfolders are not searched). A launcher\n"
      "folder (`ncclwatch run` writes ./ncclwatch/job-<id>) means its newest job, named on stderr; --all reads\n"
      "every job in it. Default: ./ncclwatch.\n"
      "Exit status: 0 nothing found, 1 findings (leaks, hang, mismatch), 2 bad usage or no usable trace.\n"
      "--format text|json|csv on summary, leaks, memory, latency and hang (default text): --json is --format json,\n"
      "latency's --csv is --format csv; the summary has no table, so no CSV.\n"
      "Examples:\n"
      "  ncclwatch-report                       summary of the newest job under ./ncclwatch\n"
      "  ncclwatch-report leaks ncclwatch/job-1234\n"
      "  ncclwatch-report memory --idle-after 120 ncclwatch/job-1234   where NCCL's GPU memory goes, idle communicators\n"
      "  ncclwatch-report latency --format csv traces/ > latency.csv\n"
      "  ncclwatch-report hang --format csv traces/ > hang.csv   one row per finding, for a spreadsheet\n"
      "  ncclwatch-report hang --json traces/\n"
      "  ncclwatch-report html -o report.html traces/   one page to open in a browser (offline)\n"
      "  ncclwatch-report metrics -o /var/lib/prometheus/node-exporter/ncclwatch.prom ncclwatch/job-1234\n"
      "  ncclwatch-report export -o fleet/ ncclwatch/job-1234 && ncclwatch-report sql fleet/ --query late_hosts");
  app.set_version_flag("--version", std::string("ncclwatch-report ") + NCCLWATCH_VERSION + " (trace format " +
                                        std::to_string(ncclwatch::trace::kVersion) + ", reads formats " +
                                        std::to_string(ncclwatch::trace::kOldestReadableFormat) + " to " +
                                        std::to_string(ncclwatch::trace::kVersion) + ")");
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "sql") == 0) return hand_sql_to_python(argc, argv);
  if (refuse_unknown_report(argc, argv)) return 2;
  // Named, not argv[0]: usage lines show the command, not where it was built.
  CLI::App app{"ncclwatch-report: leak, latency, hang and timeline reports from ncclwatch trace files", "ncclwatch-report"};
  describe_tool(app);
  app.require_subcommand(0, 1);
  Options options;

  auto add_common = [&](CLI::App* sub) {
    sub->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
    sub->add_flag("--json", options.json, "machine-readable output (the same as --format json)");
    sub->add_option("--format", options.format, "text (default), json or csv (a table; the summary has none)")
        ->check(CLI::IsMember({"text", "json", "csv"}));
    sub->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  };
  add_common(&app);  // `ncclwatch-report DIR` is `ncclwatch-report summary DIR`
  CLI::App* summary = app.add_subcommand("summary", "one screen about the job (the default)");
  add_common(summary);
  CLI::App* leaks = app.add_subcommand("leaks", "communicators and resources never released");
  add_common(leaks);
  leaks->add_flag_callback("--no-symbols", [&] { options.symbolize = false; }, "skip symbolizing call sites");
  IdleSettings idle;
  double idle_min_mib = static_cast<double>(idle.min_bytes >> 20);
  CLI::App* memory = app.add_subcommand("memory", "GPU memory NCCL holds: per communicator, process and host; idle communicators");
  add_idle_options(memory, idle, idle_min_mib);
  add_common(memory);
  memory->add_flag_callback("--no-symbols", [&] { options.symbolize = false; }, "skip symbolizing call sites");
  CLI::App* latency = app.add_subcommand("latency", "time and bandwidth per communicator, op and size");
  CLI::App* advice = add_advice_command(app, options);
  CLI::App* peers = app.add_subcommand("peers", "what NCCL's proxy moved to and from each peer, and the peer the others waited on");
  for (CLI::App* table : {latency, peers}) add_common(table), table->add_flag("--csv", options.csv, "comma-separated rows (the same as --format csv)");
  CLI::App* hang = app.add_subcommand("hang", "who stopped where, mismatched arguments, stragglers, divergence");
  add_common(hang);
  CLI::App* timeline = add_timeline_command(app, options);
  CLI::App* html = app.add_subcommand("html", "one self-contained HTML page: verdict, bandwidth plots, lateness heatmap, GPU memory over time");
  html->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
  html->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  html->add_option("-o,--output", options.output, "the HTML file to write")->required();
  html->add_flag_callback("--no-symbols", [&] { options.symbolize = false; }, "skip symbolizing call sites");
  add_idle_options(html, idle, idle_min_mib);
  CLI::App* metrics = app.add_subcommand("metrics", "Prometheus text (node-exporter textfile format) of the job; exit 0 once written");
  metrics->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
  metrics->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  metrics->add_option("-o,--output", options.output, "the file to write, replaced in one step (default: standard output)");
  CLI::App* watch = app.add_subcommand("watch", "while the job runs: the hang verdict within seconds of a stall, on stderr and in verdict.json");
  watch->add_option("paths", options.inputs, "the job's trace folders (default: ./ncclwatch)");
  double watch_interval_s = 0.5;
  double watch_lag_s = 20;
  int watch_pid = 0;
  watch->add_option("--interval", watch_interval_s, "seconds between looks at the folders (default 0.5)")->check(CLI::Range(0.05, 60.0));
  watch->add_option("--pid", watch_pid, "stop when this process exits (default: run until interrupted)");
  std::string watch_metrics;
  watch->add_option("--lag", watch_lag_s,
                    "seconds a rank may stay behind a peer in collectives issued (its host stuck: a data loader, a "
                    "deadlock) before a hang is suspected, ahead of any watchdog; 0: off (default 20, or "
                    "NCCLWATCH_LAG_SEC)")
      ->envname("NCCLWATCH_LAG_SEC")
      ->check(CLI::Range(0.0, 86400.0));
  watch->add_option("--metrics-file", watch_metrics, "also write the verdict there as ncclwatch_hang_suspected (Prometheus textfile)");
  CLI::App* export_tables = app.add_subcommand("export", "Parquet tables of the job (ops, comms, processes, ...) for SQL engines: DuckDB, Spark");
  export_tables->add_option("paths", options.inputs, "trace files or job folders (default: ./ncclwatch)");
  export_tables->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  export_tables->add_option("-o,--output", options.output, "the folder to write the tables into (made if missing)")->required();
  std::string export_job;
  export_tables->add_option("--job", export_job, "the job's name in the tables (default: NCCLWATCH_JOB, SLURM_JOB_ID or TORCHELASTIC_RUN_ID as the traces recorded it, else the traces' folder)");
  export_tables->add_flag_callback("--no-symbols", [&] { options.symbolize = false; }, "skip symbolizing call sites");
  // Listed for --help and completion; main() hands `sql` to Python before parsing.
  app.add_subcommand("sql", "SQL over an export with DuckDB: sql EXPORT \"SELECT ...\" | sql EXPORT --query NAME | sql --list")
      ->prefix_command();
  CLI::App* dump = app.add_subcommand("dump", "every record of trace files as JSON Lines (a file_header line first for each)");
  dump->add_option("paths", options.inputs, "trace files or a job folder")->required();
  dump->add_flag("--json", options.json, "accepted for symmetry: the output is JSON Lines");
  CLI::App* columns = app.add_subcommand("columns", "the job's tables as binary columns on standard output (what ncclwatch.load reads)");
  columns->add_option("paths", options.inputs, "trace files or job folders")->required();
  columns->add_flag("--all", options.all_jobs, "a launcher folder: read every job in it, not only the newest");
  columns->add_flag_callback("--no-symbols", [&] { options.symbolize = false; }, "skip symbolizing call sites");
  std::string where_what;
  CLI::App* where = add_where_command(app, where_what);
  RulesOptions rules_options;
  CLI::App* rules = add_rules_command(app, rules_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (!settle_output_format(options)) return 2;
  // The summary is one screen of counts, lists and sentences, not a table: a key,value flattening of
  // its nested parts would be a format of our own for scripts to parse, and --json already serves
  // them. Its tables are the other reports'.
  if (options.csv && (summary->parsed() || app.get_subcommands().empty())) {
    say("the summary has no table to write as CSV; use leaks, latency or hang with --format csv (one row per leak, op "
        "size or finding), or summary --format json");
    return 2;
  }
  if (where->parsed()) return run_where(where_what);
  if (rules->parsed()) return run_rules(rules_options);
  if (dump->parsed()) return run_dump_files(options);
  if (options.inputs.empty()) options.inputs.push_back("ncclwatch");
  std::vector<std::string> notes;
  options.inputs = resolve_job_folders(options.inputs, options.all_jobs, notes);
  for (const std::string& note : notes) say("{}", note);

  if (export_tables->parsed()) return run_export(options, export_job);
  if (columns->parsed()) return run_columns(options);
  if (watch->parsed()) return run_watch(options, watch_interval_s, watch_pid, watch_metrics, watch_lag_s);
  if (leaks->parsed()) return run_leaks(options);
  idle.min_bytes = static_cast<uint64_t>(idle_min_mib * 1048576);
  if (memory->parsed()) return run_memory(options, idle);
  if (latency->parsed()) return run_latency(options);
  if (advice->parsed()) return run_advice(options);
  if (peers->parsed()) return run_peers(options);
  if (hang->parsed()) return run_hang(options);
  if (timeline->parsed()) return run_timeline(options);
  if (html->parsed()) return run_html(options, idle);
  if (metrics->parsed()) return run_metrics(options);
  return run_summary(options);
}
