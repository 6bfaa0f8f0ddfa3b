// Who a job is: its id, the NCCL versions it attached, its world ranks (report_metrics.cc,
// report_summary.cc).
#pragma once

#include "reports/options.h"

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

namespace ncclwatch::report {

// The job's id as its processes' environment named it (NCCLWATCH_JOB, else SLURM_JOB_ID, else
// TORCHELASTIC_RUN_ID: the traces record them), else as this tool's own environment does; "" when
// none (report_metrics.cc).
std::string job_id_of(const Job& job);
// The same from the traces alone ("" when none names it).
std::string job_id_in_traces(const Job& job);
// The NCCL versions the job's processes attached, "2.28.9,2.27.7"; "" when none is known.
std::string nccl_versions_of(const Job& job);
// The world ranks of process `process`: every rank it holds in the widest communicator it made or
// used, from its ops where it has them (one process may drive several GPUs).
std::set<int32_t> world_ranks_of(const JobAnalysis& analysis, size_t process);
// The job's ranks: its world ranks, or its processes holding ranks where more (no communicator
// spans the job).
size_t count_world_ranks(const JobAnalysis& analysis);

}  // namespace ncclwatch::report
