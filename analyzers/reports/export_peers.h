// The export's peers table (docs/schema.md): per trace, one row per communicator, rank, peer and
// direction of NCCL's proxy operations, the figures `ncclwatch-report peers` gives.
#pragma once

#include "model/model.h"
#include "parquet/parquet.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace ncclwatch::report {

extern const std::vector<parquet::ColumnSpec> kPeersSchema;

// One trace's OpProxy records, folded as it is read.
class TracePeers {
 public:
  void add(const model::RecordView& r) {
    if (const auto* p = r.as<trace::OpProxyRecord>()) model::add_proxy_operation(links_, *p, r, implausible_);
  }
  void end_of_records() { model::close_moving_stretches(links_); }
  // Its rows into `w` (a kPeersSchema table).
  void write(parquet::TableWriter& w, std::string_view trace, int32_t pid) const;

 private:
  model::PeerLinks links_;
  model::ImplausibleValues implausible_;  // the records left out; the reports name them
};

}  // namespace ncclwatch::report
