// Reading a report's input: the job read (and analysed), every problem named on stderr.
#pragma once

#include "reports/options.h"

#include <optional>
#include <string>
#include <vector>

namespace ncclwatch::report {

// The job of `inputs` read (load_job) or, given `analysis`, read and analysed (analyze_job), every
// problem met named on stderr. When no trace was usable it says so and returns nullopt: the report
// then exits kNoUsableInput.
std::optional<Job> load_job_or_explain(const std::vector<std::string>& inputs);
std::optional<JobAnalysis> load_job_or_explain(const std::vector<std::string>& inputs, const AnalysisOptions& analysis);
// Says on stderr that no trace was usable; returns kNoUsableInput. For a report that reads the
// traces itself (timeline).
int explain_nothing_usable();
// Names unusable or damaged inputs on stderr.
void print_problems(const std::vector<TraceProblem>& problems);

}  // namespace ncclwatch::report
