// Arrival lateness, for the html report's heatmap: per (rank, seq), how late that rank's launch
// started against the earliest rank at that seq, on the busiest communicators.
//
// Each seq's earliest start is the op model's (its seq slots); one more pass over the files of the
// communicator's members keeps each (rank, bin)'s largest lateness. Memory: one cell per shown
// rank and bin; the records themselves are never kept.
#pragma once

#include "model/hang_analysis.h"
#include "model/op_model.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

namespace ncclwatch::model {

inline constexpr size_t kMaxHeatmapBins = 200;  // seq columns; more seqs are binned, each bin its worst
inline constexpr size_t kMaxHeatmapRows = 64;   // rank rows
inline constexpr size_t kMaxHeatmaps = 2;       // the busiest communicators get one

struct LatenessMap {
  uint64_t comm_id = 0;
  int32_t nranks = 0;
  size_t ranks_present = 0;
  uint64_t first_seq = 1;  // the seqs shown: first_seq on (a wrapped ring keeps the newest)
  uint64_t seqs = 0;
  size_t bins = 0;
  bool on_gpu = false;                 // GPU start times (else host enqueue times), aligned
  std::vector<int32_t> rows;           // ranks shown, sorted
  std::set<int32_t> flagged;           // stragglers the hang report named
  const CommOps* ops = nullptr;                // its seq slots: each seq's earliest start
  std::vector<std::atomic<int64_t>> late;      // rows x bins; -1: no sample

  int64_t earliest(uint64_t seq) const {
    const SeqSlot* slot = ops->slot(seq);
    return slot ? (on_gpu ? slot->gpu.first : slot->host.first) : std::numeric_limits<int64_t>::max();
  }

  bool shows(uint64_t seq) const { return seq >= first_seq && seq - first_seq < seqs; }
  size_t bin_of(uint64_t seq) const { return static_cast<size_t>((seq - first_seq) * bins / seqs); }
  uint64_t bin_first(size_t bin) const { return (bin * seqs + bins - 1) / bins + first_seq; }
  uint64_t bin_last(size_t bin) const { return ((bin + 1) * seqs + bins - 1) / bins + first_seq - 1; }
  int row_of(int32_t rank) const {
    auto it = std::lower_bound(rows.begin(), rows.end(), rank);
    return it != rows.end() && *it == rank ? static_cast<int>(it - rows.begin()) : -1;
  }
};

// The maps of the busiest communicators with two ranks or more; on the GPU where the hang report
// judged stragglers there (so both say the same), its stragglers and worst arrivals among the rows.
std::vector<LatenessMap> lateness_maps(const JobAnalysis& a, const HangReport& hang);

}  // namespace ncclwatch::model
