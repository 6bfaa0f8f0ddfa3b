// What a report is asked: the inputs and the options of the command line (main.cc). The reports
// render the model, so its names are theirs (model::Job, model::HangReport, ...).
#pragma once

#include "model/model.h"

#include <optional>
#include <string>
#include <vector>

namespace ncclwatch::report {

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

// `rules`: how long a suspected hang or a teardown call lasts before its alert fires.
struct RulesOptions {
  double hang_after_s = 300;
  double teardown_after_s = 300;
  double straggler_after_s = 600;  // the stretch whose typical (median) lateness NcclStraggler judges
  double scrape_interval_s = 30;   // Prometheus' scrape of the metrics: rates are taken over 4 of them
  double idle_after_s = 600;       // how long a communicator runs no op before NcclIdleCommunicatorMemory
  double idle_min_mib = 256;       // ... when it holds at least this much GPU memory
};

// The exit status when no trace of the input could be used.
inline constexpr int kNoUsableInput = 2;

}  // namespace ncclwatch::report
