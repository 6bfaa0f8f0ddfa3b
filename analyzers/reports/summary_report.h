// summary's result, typed (report_summary.cc): one screen about the whole job, gathered from the
// other reports' results; and the first thing to look at, which summary and html share.
#pragma once

#include "reports/leak_report.h"

#include <nlohmann/json.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ncclwatch::report {

// The first thing to look at in a job, in one sentence: summary's and html's.
std::string first_look_at(const LeakReport& leaks, const HangReport& hang);

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
  // The process whose NCCL communicators held the most GPU memory at once, where measured, and
  // the job's idle communicator ranks (memory_findings.h, default settings).
  std::optional<ProcessMemory> memory_peak;
  uint64_t idle_memory_bytes = 0;
  uint32_t idle_communicators = 0;
  LeakReport leaks;                     // call sites not symbolized: the summary names no native frame
  HangReport hang;
  std::vector<LatencyRow> slowest_ops;  // at most 5, by their worst steady-state time
  OpWindow window;
  std::string first_look;
  // The settings `advice` names ("NCCL_IB_DISABLE=1"): named, not findings (the exit status is
  // leaks' and hangs').
  std::vector<std::string> advised_settings;
  // Exit status 1: what leaks or hang counts as findings, or an NCCL copy not traced ("no leaks"
  // cannot be vouched for).
  bool findings = false;
};
SummaryReport summary_report(const JobAnalysis& analysis);
nlohmann::json to_json(const SummaryReport& report);  // `summary --json`

}  // namespace ncclwatch::report
