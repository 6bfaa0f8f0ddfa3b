// The html report's peers section: per communicator a rank x peer heatmap of how long receive
// steps waited on each peer (NCCL's proxy steps, NCCLWATCH_PROFILER=peers), the slow peer marked
// and named as `peers` and `hang` name it (report_html_peers.cc).
#pragma once

#include "reports/options.h"

#include <cstdint>
#include <map>
#include <string>

namespace ncclwatch::report {

// "" when the traces hold no proxy operations.
std::string peers_section_html(const JobAnalysis& a, const std::map<uint64_t, std::string>& names);

}  // namespace ncclwatch::report
