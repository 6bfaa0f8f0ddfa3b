// The analyses as their reports' JSON: `hang --json`, `latency --json` and the environment's
// differences, which the summary and the html reuse.
#pragma once

#include "reports/options.h"

#include <nlohmann/json.hpp>
#include <vector>

namespace ncclwatch::report {

// [{"key", "values": [{"value", "ranks", "processes"}]}]
nlohmann::json to_json(const std::vector<EnvironmentDifference>& differences);
nlohmann::json to_json(const HangReport& report);   // `hang --json`
nlohmann::json to_json(const LatencyRow& row);      // one row as `latency --json` writes it
nlohmann::json to_json(const LatencyTable& table);  // `latency --json`

}  // namespace ncclwatch::report
