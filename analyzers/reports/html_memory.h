// The html report's GPU-memory section: what NCCL's communicators held in each process over the
// run (a step line per rank, on the job's aligned clock), the peak, and the idle communicators
// named with their bytes, their line and the remedy (report_html_memory.cc).
#pragma once

#include "reports/options.h"

#include <cstdint>
#include <map>
#include <string>

namespace ncclwatch::report {

// "" when no process has a memory figure (the shim reads them in gpu timing mode only).
std::string memory_section_html(const JobAnalysis& a, const std::map<uint64_t, std::string>& names,
                                const IdleSettings& idle, bool symbolize);

}  // namespace ncclwatch::report
