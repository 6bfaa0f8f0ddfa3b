// ncclwatch-report: reads the trace files of a job and answers what leaked, how fast each
// collective was, who hung where and why, and draws a timeline.
#include "reports.h"

#include <CLI/CLI.hpp>

#include <cstdio>

using namespace ncclwatch::report;

int main(int argc, char** argv) {
  CLI::App app{"ncclwatch-report: leak, latency, hang and timeline reports from ncclwatch trace files"};
  app.require_subcommand(0, 1);
  Options options;
  std::string dump_file;

  auto add_common = [&](CLI::App* sub) {
    sub->add_option("paths", options.inputs, "trace files or directories (default: ./ncclwatch)");
    sub->add_flag("--json", options.json, "machine-readable output");
  };
  add_common(&app);  // `ncclwatch-report DIR` is `ncclwatch-report summary DIR`
  CLI::App* summary = app.add_subcommand("summary", "one screen about the job (the default)");
  add_common(summary);
  CLI::App* leaks = app.add_subcommand("leaks", "communicators and resources never released");
  add_common(leaks);
  leaks->add_flag("!--no-symbols", options.symbolize, "skip symbolizing call sites");
  CLI::App* latency = app.add_subcommand("latency", "time and bandwidth per communicator, op and size");
  add_common(latency);
  latency->add_flag("--csv", options.csv, "comma-separated rows");
  CLI::App* hang = app.add_subcommand("hang", "who stopped where, mismatched arguments, stragglers, divergence");
  add_common(hang);
  CLI::App* timeline = app.add_subcommand("timeline", "Chrome trace-event JSON of the whole job (Perfetto)");
  timeline->add_option("paths", options.inputs, "trace files or directories (default: ./ncclwatch)");
  timeline->add_option("-o,--output", options.output, "the JSON file to write")->required();
  CLI::App* dump = app.add_subcommand("dump", "every record of one file as JSON Lines");
  dump->add_option("file", dump_file, "a trace file")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (dump->parsed()) return run_dump(dump_file, options);
  if (options.inputs.empty()) options.inputs.push_back("ncclwatch");
  (void)summary;

  if (leaks->parsed()) {
    Job job = load_job(options.inputs);
    print_problems(job.problems);
    return run_leaks(job, options);
  }
  if (latency->parsed()) return run_latency(options);
  if (hang->parsed()) return run_hang(options);
  if (timeline->parsed()) return run_timeline(options);
  return run_summary(options);
}
