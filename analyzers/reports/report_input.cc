// What every report does with its input before it reports: read the job (or read and analyse it),
// name each problem met, and say so in one place when nothing was usable.
#include "reports/input.h"

namespace ncclwatch::report {
namespace {

// Names the job's problems; false, once said, when no trace of it was usable.
bool usable_or_explained(const Job& job) {
  print_problems(job.problems);
  if (!job.processes.empty()) return true;
  explain_nothing_usable();
  return false;
}

}  // namespace

void print_problems(const std::vector<TraceProblem>& problems) {
  // As C strings: a NUL byte in a problem's text ends it there.
  for (const TraceProblem& p : problems) say("{}: {}{}", p.path.c_str(), p.what.c_str(), p.fatal ? " (skipped)" : "");
}

int explain_nothing_usable() {
  say("no usable trace files");
  return kNoUsableInput;
}

std::optional<Job> load_job_or_explain(const std::vector<std::string>& inputs) {
  Job job = load_job(inputs);
  if (!usable_or_explained(job)) return std::nullopt;
  return job;
}

std::optional<JobAnalysis> load_job_or_explain(const std::vector<std::string>& inputs, const AnalysisOptions& analysis) {
  JobAnalysis a = analyze_job(inputs, analysis);
  if (!usable_or_explained(a.job)) return std::nullopt;
  return a;
}

}  // namespace ncclwatch::report
