// The rows of the peers report (report_peers.cc), which the HTML's per-peer heatmap and the hang
// report read too.
#pragma once

#include "reports/input.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ncclwatch::report {

struct PeerRow {
  PeerLinkKey key;
  PeerLink link;
  std::string name;  // the communicator's, where the application named it
};

std::vector<PeerRow> peer_rows(const JobAnalysis& a);
nlohmann::json to_json(const SlowPeer& s);

}  // namespace ncclwatch::report
