// latency: the latency table (latency_analysis.cc, which states the size and bandwidth conventions)
// as JSON, CSV and text.
#include "reports/shared.h"

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

json or_null(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

json to_json(const LatencyRow& r) {
  json row = {{"comm", hex_id(r.comm_id)},
              {"op", trace::api_name(r.api)},
              {"bytes", r.bytes},
              {"nranks", r.nranks},
              {"calls", r.calls},
              {"calls_in_window", r.window_calls},
              {"timed_calls", r.timed_calls},
              {"samples", r.samples},
              {"ranks_timed", r.ranks_timed},
              {"p50_us", or_null(r.p50_us)},
              {"p90_us", or_null(r.p90_us)},
              {"p99_us", or_null(r.p99_us)},
              {"max_us", or_null(r.max_us)},
              {"min_us", or_null(r.min_us)},
              {"mean_us", or_null(r.mean_us)},
              {"algbw_gbps", or_null(r.algbw_gbps)},
              {"busbw_gbps", or_null(r.busbw_gbps)},
              {"first_calls", {{"samples", r.first_call_samples}, {"max_us", or_null(r.first_call_max_us)},
                               {"mean_us", or_null(r.first_call_mean_us)}}},
              {"timing", timing_name(r.timing)}};
  if (!r.name.empty()) row["name"] = r.name;
  return row;
}

json to_json(const LatencyTable& table) {
  json rows = json::array(), comms = json::array();
  for (const LatencyRow& r : table.rows) rows.push_back(to_json(r));
  for (const CommLifetimes& t : table.communicators) {
    json c = {{"comm", hex_id(t.comm_id)}, {"nranks", t.nranks}, {"api", t.api}, {"ranks_traced", t.ranks_traced}};
    if (!t.name.empty()) c["name"] = t.name;
    c["init_ms_p50"] = t.init_ms_p50;
    c["init_ms_max"] = t.init_ms_max;
    c["destroy_ms_p50"] = or_null(t.destroy_ms_p50);
    c["destroy_ms_max"] = or_null(t.destroy_ms_max);
    comms.push_back(c);
  }
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
  auto cell = [](const std::optional<double>& v, int precision) {
    return v ? fmt::format("{:.{}f}", *v, precision) : std::string();
  };
  if (options.csv) {
    write_csv_row({"comm", "op", "bytes", "nranks", "calls", "p50_us", "p90_us", "p99_us", "max_us", "algbw_gbps",
                   "busbw_gbps", "first_call_max_us", "timing"});
    for (const LatencyRow& r : table.rows)
      write_csv_row({hex_id(r.comm_id), trace::api_name(r.api), std::to_string(r.bytes), std::to_string(r.nranks),
                     std::to_string(r.calls), cell(r.p50_us, 3), cell(r.p90_us, 3), cell(r.p99_us, 3), cell(r.max_us, 3),
                     cell(r.algbw_gbps, 3), cell(r.busbw_gbps, 3), cell(r.first_call_max_us, 3), timing_name(r.timing)});
    return 0;
  }
  auto shown = [&](const std::optional<double>& v, int precision) { return v ? cell(v, precision) : std::string("-"); };
  // A communicator by the name the application gave it, else by its id.
  auto label = [](const std::string& name, uint64_t id) { return name.empty() ? hex_id(id) : name; };
  print_text("{:<16} {:<18} {:>12} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {}\n", "comm", "op", "bytes",
             "ranks", "calls", "p50 us", "p90 us", "p99 us", "max us", "algbw", "busbw", "1st max us", "timing");
  for (const LatencyRow& r : table.rows)
    print_text("{:<16} {:<18} {:>12} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {}\n", label(r.name, r.comm_id),
               trace::api_name(r.api), r.bytes, r.nranks, r.calls, shown(r.p50_us, 1), shown(r.p90_us, 1),
               shown(r.p99_us, 1), shown(r.max_us, 1), shown(r.algbw_gbps, 2), shown(r.busbw_gbps, 2),
               shown(r.first_call_max_us, 1), r.timing == TimingSource::kHost ? "host (enqueue time)" : timing_name(r.timing));
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
  if (!table.communicators.empty()) {
    print_text("\n{:<16} {:>6} {:>12} {:>12} {:>14}\n", "comm", "ranks", "init p50 ms", "init max ms", "destroy max ms");
    for (const CommLifetimes& c : table.communicators)
      print_text("{:<16} {:>6} {:>12.1f} {:>12.1f} {:>14}\n", label(c.name, c.comm_id), c.nranks, c.init_ms_p50, c.init_ms_max,
                 shown(c.destroy_ms_max, 1));
  }
  return 0;
}

}  // namespace ncclwatch::report
