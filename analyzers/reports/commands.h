// The subcommands of ncclwatch-report, one file each. Each returns the exit status of the
// contract: 0 nothing found, 1 findings, 2 no usable input (kNoUsableInput).
#pragma once

#include "reports/options.h"

#include <sys/types.h>
#include <optional>
#include <string>
#include <string_view>

namespace ncclwatch::report {

int run_leaks(const Options& options);
int run_leaks(const Job& job, const Options& options);  // a job as load_job_or_explain read it
int run_summary(const Options& options);
// Where NCCL's GPU memory goes, and the idle communicators (report_memory.cc).
int run_memory(const Options& options, const IdleSettings& idle);
int run_dump(const std::string& path, const Options& options);
int run_dump_files(const Options& options);
int run_columns(const Options& options);  // the job as binary columns, for ncclwatch.load
// Where this installation's shim ("shim": NCCLWATCH_SHIM when set) or the folder holding its Python
// package ("package") is, from this program's own path; nullopt when not there (report_where.cc).
std::optional<std::string> installed_path(std::string_view what);
int run_where(const std::string& what);  // prints installed_path(what), or says where it looked
int run_latency(const Options& options);
// The NCCL settings worth a look, with what a forced algorithm or protocol cost (report_advice.cc).
int run_advice(const Options& options);
// What NCCL's proxy moved to and from each peer, and the peer the others waited on (report_peers.cc).
int run_peers(const Options& options);
int run_hang(const Options& options);
int run_timeline(const Options& options);
// One self-contained page to options.output; `idle` names the idle communicators in its memory section.
int run_html(const Options& options, const IdleSettings& idle);
int run_metrics(const Options& options);
int run_rules(const RulesOptions& rules);  // Prometheus rules over the metrics' series (report_rules.cc)
// The job's traces as Parquet tables under options.output (report_export.cc); `job` names the job
// ("": as its processes' environment named it, else the folder of its traces).
int run_export(const Options& options, const std::string& job);
// Watches the job's folders until `until_pid` exits (forever when 0), polling every `interval_s`:
// the hang verdict on stderr and in verdict.json within seconds of a stall or of a rank staying
// behind its peers' collectives for `lag_s` (0: never), and in
// `metrics_file` as ncclwatch_hang_suspected when one is given (report_watch.cc).
int run_watch(const Options& options, double interval_s, pid_t until_pid, const std::string& metrics_file,
              double lag_s);

}  // namespace ncclwatch::report
