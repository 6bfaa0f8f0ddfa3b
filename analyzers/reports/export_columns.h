// What every table of the export shares (report_export.cc, export_peers.cc): its first columns,
// and how a trace's unsigned counts go into BIGINT columns.
#pragma once

#include "parquet/parquet.h"

#include <cstdint>
#include <vector>

namespace ncclwatch::report {

// Columns every table starts with: which trace (file name) and process a row comes from.
inline std::vector<parquet::ColumnSpec> with_process(std::vector<parquet::ColumnSpec> rest) {
  std::vector<parquet::ColumnSpec> all = {{"trace", parquet::Kind::kString}, {"pid", parquet::Kind::kInt32}};
  all.insert(all.end(), rest.begin(), rest.end());
  return all;
}

// A count or size (unsigned in the trace) into a BIGINT column: one past its range (2^63 - 1: no
// buffer is that large, a damaged or hostile trace's is) is null, never a negative number; so is one not `present`.
inline void add_unsigned(parquet::ColumnData& column, uint64_t value, bool present = true) {
  column.add_optional(present && value <= static_cast<uint64_t>(INT64_MAX), static_cast<int64_t>(value));
}

}  // namespace ncclwatch::report
