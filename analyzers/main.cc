// ncclwatch-report: reads the trace files of a job and answers what leaked (and, as the
// analyzers grow, what was slow and who hung).
#include "reports.h"

#include <CLI/CLI.hpp>

#include <cstdio>

using namespace ncclwatch::report;

int main(int argc, char** argv) {
  CLI::App app{"ncclwatch-report: leak and lifecycle reports from ncclwatch trace files"};
  app.require_subcommand(0, 1);
  Options options;
  std::string dump_file;

  auto add_common = [&](CLI::App* sub) {
    sub->add_option("paths", options.inputs, "trace files or directories (default: ./ncclwatch)");
    sub->add_flag("--json", options.json, "machine-readable output");
    sub->add_flag("!--no-symbols", options.symbolize, "skip symbolizing call sites");
  };
  CLI::App* summary = app.add_subcommand("summary", "one screen about the job (the default)");
  add_common(summary);
  CLI::App* leaks = app.add_subcommand("leaks", "communicators and resources never released");
  add_common(leaks);
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

  Job job = load_job(options.inputs);
  print_problems(job.problems);
  if (leaks->parsed()) return run_leaks(job, options);
  return run_summary(job, options);
}
