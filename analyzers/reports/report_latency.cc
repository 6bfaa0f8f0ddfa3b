// latency: the latency table (latency_analysis.cc, which states the size and bandwidth conventions)
// as JSON, CSV and text.
#include "reports/analysis_json.h"
#include "reports/column_table.h"
#include "reports/commands.h"
#include "reports/input.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <string_view>
#include <vector>

namespace ncclwatch::report {
namespace {

using nlohmann::json;

constexpr const char* kSizeConvention =
    "nccl-tests: bytes is the larger buffer (allgather/reducescatter/alltoall: count x nranks x element size); algbw = "
    "bytes / median GPU time; busbw = algbw x nccl-tests factor";
constexpr const char* kSteadyState =
    "percentiles and bandwidths leave out each rank's first call of an op and size on a communicator (NCCL's connection "
    "set-up), shown as first_calls; host-timed rows are enqueue times and have no bandwidth";

using Row = LatencyRow;
Cell count(uint64_t v) { return v; }
std::string comm_label(const std::string& name, uint64_t id) { return name.empty() ? hex_id(id) : name; }

// The latency table, once: `latency --json` rows (and the summary's slowest ops), --csv and text.
const Column<Row> kLatencyColumns[] = {
    {.json = "comm", .csv = "comm", .text = "comm", .width = -16, .value = [](const Row& r) -> Cell { return hex_id(r.comm_id); },
     .shown = [](const Row& r) -> Cell { return comm_label(r.name, r.comm_id); }},
    {.json = "name", .value = [](const Row& r) -> Cell { return r.name; }, .json_if_empty = false},
    {.json = "op", .csv = "op", .text = "op", .width = -18,
     .value = [](const Row& r) -> Cell { return std::string(trace::api_name(r.api)); }},
    {.json = "bytes", .csv = "bytes", .text = "bytes", .width = 12, .value = [](const Row& r) { return count(r.bytes); }},
    {.json = "nranks", .csv = "nranks", .text = "ranks", .width = 6, .value = [](const Row& r) -> Cell { return int64_t{r.nranks}; }},
    {.json = "calls", .csv = "calls", .text = "calls", .width = 8, .value = [](const Row& r) { return count(r.calls); }},
    {.json = "calls_in_window", .value = [](const Row& r) { return count(r.window_calls); }},
    {.json = "timed_calls", .value = [](const Row& r) { return count(r.timed_calls); }},
    {.json = "samples", .value = [](const Row& r) { return count(r.samples); }},
    {.json = "ranks_timed", .value = [](const Row& r) { return count(r.ranks_timed); }},
    {.json = "p50_us", .csv = "p50_us", .text = "p50 us", .width = 10, .value = [](const Row& r) { return maybe(r.p50_us); }},
    {.json = "p90_us", .csv = "p90_us", .text = "p90 us", .width = 10, .value = [](const Row& r) { return maybe(r.p90_us); }},
    {.json = "p99_us", .csv = "p99_us", .text = "p99 us", .width = 10, .value = [](const Row& r) { return maybe(r.p99_us); }},
    {.json = "max_us", .csv = "max_us", .text = "max us", .width = 10, .value = [](const Row& r) { return maybe(r.max_us); }},
    {.json = "min_us", .value = [](const Row& r) { return maybe(r.min_us); }},
    {.json = "mean_us", .value = [](const Row& r) { return maybe(r.mean_us); }},
    {.json = "algbw_gbps", .csv = "algbw_gbps", .text = "algbw", .width = 9, .text_decimals = 2,
     .value = [](const Row& r) { return maybe(r.algbw_gbps); }},
    {.json = "busbw_gbps", .csv = "busbw_gbps", .text = "busbw", .width = 9, .text_decimals = 2,
     .value = [](const Row& r) { return maybe(r.busbw_gbps); }},
    {.json = "first_calls.samples", .value = [](const Row& r) { return count(r.first_call_samples); }},
    {.json = "first_calls.max_us", .csv = "first_call_max_us", .text = "1st max us", .width = 10,
     .value = [](const Row& r) { return maybe(r.first_call_max_us); }},
    {.json = "first_calls.mean_us", .value = [](const Row& r) { return maybe(r.first_call_mean_us); }},
    {.json = "timing", .csv = "timing", .text = "timing", .value = [](const Row& r) -> Cell { return std::string(timing_name(r.timing)); },
     .shown = [](const Row& r) -> Cell {
       return std::string(r.timing == TimingSource::kHost ? "host (enqueue time)" : timing_name(r.timing));
     }},
};

// NCCL's plans and kernel times (NCCLWATCH_PROFILER), before `timing`: in text and CSV where any
// row has them, so that traces without them keep their tables as they were; in JSON on the rows
// that have them.
const Column<Row> kPlanColumn = {.json = "nccl_plan", .csv = "nccl_plan", .text = "nccl plan", .width = -16,
                                 .value = [](const Row& r) -> Cell { return plans_text(r.plans); },
                                 .json_if_empty = false};
const Column<Row> kKernelColumns[] = {
    {.json = "nccl_kernel.mean_us", .csv = "kernel_mean_us", .text = "kernel us", .width = 10,
     .value = [](const Row& r) { return maybe(r.kernel_mean_us); }, .json_if_empty = false},
    {.json = "nccl_kernel.max_us", .csv = "kernel_max_us", .value = [](const Row& r) { return maybe(r.kernel_max_us); },
     .json_if_empty = false},
    {.json = "nccl_kernel.ops", .csv = "kernel_ops",
     .value = [](const Row& r) -> Cell { return r.kernel_ops ? Cell{r.kernel_ops} : Cell{}; }, .json_if_empty = false},
};

bool any_plans(const std::vector<Row>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const Row& r) { return !r.plans.empty(); });
}
bool any_kernel_times(const std::vector<Row>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.kernel_ops > 0; });
}

std::vector<Column<Row>> latency_columns(bool with_plans, bool with_kernels) {
  std::vector<Column<Row>> columns(std::begin(kLatencyColumns), std::end(kLatencyColumns));
  if (with_plans) columns.insert(columns.end() - 1, kPlanColumn);
  if (with_kernels) columns.insert(columns.end() - 1, std::begin(kKernelColumns), std::end(kKernelColumns));
  return columns;
}
std::vector<Column<Row>> latency_columns(const std::vector<Row>& rows) {
  return latency_columns(any_plans(rows), any_kernel_times(rows));
}

// How long each communicator took to create and destroy: JSON and text.
const Column<CommLifetimes> kLifetimeColumns[] = {
    {.json = "comm", .text = "comm", .width = -16, .value = [](const CommLifetimes& c) -> Cell { return hex_id(c.comm_id); },
     .shown = [](const CommLifetimes& c) -> Cell { return comm_label(c.name, c.comm_id); }},
    {.json = "name", .value = [](const CommLifetimes& c) -> Cell { return c.name; }, .json_if_empty = false},
    {.json = "nranks", .text = "ranks", .width = 6, .value = [](const CommLifetimes& c) -> Cell { return int64_t{c.nranks}; }},
    {.json = "api", .value = [](const CommLifetimes& c) -> Cell { return c.api; }},
    {.json = "ranks_traced", .value = [](const CommLifetimes& c) { return count(c.ranks_traced); }},
    {.json = "init_ms_p50", .text = "init p50 ms", .width = 12, .value = [](const CommLifetimes& c) -> Cell { return c.init_ms_p50; }},
    {.json = "init_ms_max", .text = "init max ms", .width = 12, .value = [](const CommLifetimes& c) -> Cell { return c.init_ms_max; }},
    {.json = "destroy_ms_p50", .value = [](const CommLifetimes& c) { return maybe(c.destroy_ms_p50); }},
    {.json = "destroy_ms_max", .text = "destroy max ms", .width = 14,
     .value = [](const CommLifetimes& c) { return maybe(c.destroy_ms_max); }},
};

}  // namespace

json to_json(const LatencyRow& r) {
  static const std::vector<Column<Row>> columns = latency_columns(true, true);
  return json_of<LatencyRow>(columns, r);
}

json to_json(const LatencyTable& table) {
  json rows = json::array(), comms = json::array();
  for (const LatencyRow& r : table.rows) rows.push_back(to_json(r));
  for (const CommLifetimes& c : table.communicators) comms.push_back(json_of<CommLifetimes>(kLifetimeColumns, c));
  return {{"rows", rows},
          {"communicators", comms},
          {"window", table.window.to_json()},
          {"size_convention", kSizeConvention},
          {"steady_state", kSteadyState}};
}

int run_latency(const Options& options) {
  AnalysisOptions ao;
  ao.align_clocks = false;  // durations are per process: no need to put hosts on one clock
  std::optional<JobAnalysis> analysis = load_job_or_explain(options.inputs, ao);
  if (!analysis) return kNoUsableInput;
  LatencyTable table = latency_table(*analysis);
  if (options.json) {
    std::cout << dump_json(to_json(table), 2) << "\n";
    return 0;
  }
  if (options.csv) {
    write_csv<LatencyRow>(latency_columns(table.rows), table.rows);
    return 0;
  }
  fmt::print("{}", text_table<LatencyRow>(latency_columns(table.rows), table.rows));
  if (table.rows.empty()) print_text("(no timed collectives in these traces)\n");
  if (table.window.partial())
    print_text("{}: calls count the whole run; percentiles come from the ops kept (gpu_run_histogram rows: from the "
               "whole run's GPU histogram, to half an octave)\n",
               table.window.text());
  print_text("bandwidths in GB/s, GPU-timed rows only; {}\n{}\n", kSizeConvention, kSteadyState);
  if (std::any_of(table.rows.begin(), table.rows.end(), [](const LatencyRow& r) { return r.timing == TimingSource::kGpuGraphReplay; }))
    print_text("gpu_graph_replay rows: ops run by CUDA graph launches, timed by GPU events around each launch: the whole "
               "replay's time, an upper bound of the op's own (and its bandwidth a lower bound) when the graph holds "
               "other work too\n");
  if (std::any_of(table.rows.begin(), table.rows.end(), [](const LatencyRow& r) { return r.timing == TimingSource::kGpuUpperBound; }))
    print_text("gpu_upper_bound rows: ops of a communicator driven from several streams whose previous op's end was not "
               "timed: NCCL runs its ops one after another, so the time may include waiting for that op (an upper "
               "bound, and the bandwidth a lower bound)\n");
  if (any_kernel_times(table.rows))
    print_text("kernel us: the mean kernel time by the GPU's own timer (NCCL's profiler interface: each op's channels, "
               "first start to last end), every op and rank; the percentiles beside it are by CUDA events around the "
               "launch, which count waiting on the stream too\n");
  if (!table.communicators.empty()) {
    fmt::print("\n{}", text_table<CommLifetimes>(kLifetimeColumns, table.communicators));
  }
  return 0;
}

}  // namespace ncclwatch::report
