// Which files a report reads: the trace files, job folders and launcher folders the user names.
#pragma once

#include "model/trace_reader.h"

#include <string>
#include <vector>

namespace ncclwatch::model {

// Expands directories into the trace files they hold themselves (*.nwt, whatever they are: one that
// is no regular file is named when read), sorted; files are kept as given. Subfolders are never
// searched: a tree of unrelated traces must not read as one job.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, std::vector<TraceProblem>& problems);

// The job folders the user means. A folder holding trace files is a job. A launcher folder (one
// whose subfolders are `ncclwatch run`'s job-*) means its newest job, or all of them with
// `all_jobs`; `notes` says which was read, so a report never merges jobs silently.
std::vector<std::string> resolve_job_folders(const std::vector<std::string>& inputs, bool all_jobs,
                                             std::vector<std::string>& notes);

}  // namespace ncclwatch::model
