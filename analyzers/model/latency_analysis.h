// latency's analysis, typed (latency_analysis.cc, which states the size and bandwidth conventions):
// what `latency` prints and what the other reports read (the summary's slowest ops, the html
// plots, the metrics).
#pragma once

#include "model/job_model.h"
#include "model/op_model.h"
#include "model/op_window.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ncclwatch::model {

// latency's result, typed: what `latency` prints and what the other reports read (summary's
// slowest ops, the html plots, the metrics). Durations in µs. A steady-state figure is empty where
// only first calls were seen; bandwidths exist on GPU-timed rows only.
struct LatencyRow {
  uint64_t comm_id = 0;
  std::string name;  // the communicator's, where the application gave one
  trace::Api api = trace::Api::kUnknown;
  uint64_t bytes = 0;  // nccl-tests' size (bytes_of)
  int32_t nranks = 0;
  uint64_t calls = 0;        // per rank, GPU-timed or not; over the whole run where op totals say
  uint64_t window_calls = 0; // per rank, in the traces' op records (fewer once a ring wrapped)
  uint64_t timed_calls = 0;  // per rank, with this row's timing
  uint64_t samples = 0;      // steady-state samples, all ranks
  size_t ranks_timed = 0;
  std::optional<double> p50_us, p90_us, p99_us, max_us, min_us, mean_us, algbw_gbps, busbw_gbps;
  uint64_t first_call_samples = 0;  // each rank's first call of this op and size (connection set-up)
  std::optional<double> first_call_max_us, first_call_mean_us;
  TimingSource timing = TimingSource::kHost;
  PlanCounts plans;  // how NCCL ran these ops, where its profiler interface told (NCCLWATCH_PROFILER)
  // Their kernels by the GPU's own timer (NCCL's KernelCh events, NCCLWATCH_PROFILER), all ranks: a
  // second clock beside the CUDA events above, which also count the stream's wait before the kernel.
  uint64_t kernel_ops = 0;
  std::optional<double> kernel_mean_us, kernel_max_us;
};

// A row's plans in words: "RING/SIMPLE 4ch" where NCCL ran them one way, else each way with its
// share of the ops, most used first ("RING/SIMPLE 4ch 90%, TREE/LL 1ch 10%"); "" without plans.
std::string plans_text(const PlanCounts& plans);
// How long a communicator took to create and to destroy, across its ranks.
struct CommLifetimes {
  uint64_t comm_id = 0;
  std::string name, api;
  int32_t nranks = 0;
  size_t ranks_traced = 0;
  double init_ms_p50 = 0, init_ms_max = 0;
  std::optional<double> destroy_ms_p50, destroy_ms_max;
};
struct LatencyTable {
  OpWindow window;
  std::vector<LatencyRow> rows;
  std::vector<CommLifetimes> communicators;
};
LatencyTable latency_table(const JobAnalysis& analysis);

}  // namespace ncclwatch::model
