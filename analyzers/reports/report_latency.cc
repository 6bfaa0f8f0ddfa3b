// latency: per communicator x op x message size, how long the op took and the bandwidth that
// means, with nccl-tests' conventions, plus how long communicators took to create and destroy.
//
// Size ("bytes") follows nccl-tests: the larger buffer of the op. AllReduce, Broadcast, Reduce,
// Send, Recv: count x element size. AllGather: sendcount x nranks x element size (the receive
// buffer). ReduceScatter: recvcount x nranks x element size (the send buffer). AlltoAll, Gather,
// Scatter: count x nranks x element size. algbw = bytes / median GPU time (nccl-tests reports a
// typical iteration too); busbw = algbw x factor with the factors of nccl-tests: AllReduce
// 2(n-1)/n; AllGather, ReduceScatter, AlltoAll (n-1)/n; Broadcast, Reduce, Send/Recv 1. A launch
// that held several grouped ops is one row with op "ncclGroupEnd" and the sum of their sizes
// (factor 1).
//
// The figures describe the steady state: each rank's first call of an op and size on a
// communicator (NCCL's lazy connection set-up, ~150 ms) is shown apart as `first_calls`. Only
// GPU-timed rows get a bandwidth: host times are enqueue times (NCCL returns before the op runs).
#include "reports.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using trace::Api;

constexpr const char* kSizeConvention =
    "nccl-tests: bytes is the larger buffer (allgather/reducescatter/alltoall: count x nranks x element size); algbw = "
    "bytes / median GPU time; busbw = algbw x nccl-tests factor";
constexpr const char* kSteadyState =
    "percentiles and bandwidths leave out each rank's first call of an op and size on a communicator (NCCL's connection "
    "set-up), shown as first_calls; host-timed rows are enqueue times and have no bandwidth";

double percentile_ms(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::clamp(p / 100.0 * static_cast<double>(v.size() - 1), 0.0, static_cast<double>(v.size() - 1)));
  return v[i];
}

}  // namespace

LatencyTable latency_table(const JobAnalysis& a) {
  std::map<uint64_t, std::string> names = comm_names(a.job);
  LatencyTable table;
  // With sampled GPU timing (NCCLWATCH_SAMPLE), calls of one size are partly GPU-timed, partly
  // host-timed; host enqueue times say nothing about how long an asynchronous op ran, so such a
  // size gets one row from its GPU samples, counting the untimed calls too.
  auto untimed_twin = [](LatencyKey k) {
    k.timing = TimingSource::kHost;
    return k;
  };
  std::map<LatencyKey, uint64_t> host_calls;  // host-timed calls of sizes that also have GPU samples
  std::set<LatencyKey> gpu_timed;
  for (const LatencyBucket& b : a.latency)
    if (b.key.timing != TimingSource::kHost && b.samples()) gpu_timed.insert(untimed_twin(b.key));
  for (const LatencyBucket& b : a.latency) {
    if (b.key.timing != TimingSource::kHost || !gpu_timed.count(b.key)) continue;
    size_t ranks = b.ranks.size();
    host_calls[b.key] += ranks ? (b.samples() + ranks - 1) / ranks : b.samples();
  }
  auto us = [](double ns) { return ns / 1e3; };
  for (const LatencyBucket& b : a.latency) {
    const LatencyHistogram& h = b.hist;
    if (!b.samples()) continue;
    if (b.key.timing == TimingSource::kHost && gpu_timed.count(b.key)) continue;  // folded into the GPU row
    LatencyRow row;
    row.comm_id = b.key.comm_id;
    if (auto n = names.find(b.key.comm_id); n != names.end()) row.name = n->second;
    row.api = static_cast<Api>(b.key.api);
    row.bytes = b.key.bytes;
    row.nranks = b.key.nranks;
    row.ranks_timed = b.ranks.size();
    row.timed_calls = row.ranks_timed ? (b.samples() + row.ranks_timed - 1) / row.ranks_timed : b.samples();
    row.calls = row.timed_calls + (b.key.timing == TimingSource::kHost ? 0 : host_calls[untimed_twin(b.key)]);
    row.samples = h.count();
    row.timing = b.key.timing;
    if (h.count() > 0) {  // a steady state was seen
      row.p50_us = us(static_cast<double>(h.percentile(50)));
      row.p90_us = us(static_cast<double>(h.percentile(90)));
      row.p99_us = us(static_cast<double>(h.percentile(99)));
      row.max_us = us(static_cast<double>(h.max()));
      row.min_us = us(static_cast<double>(h.min()));
      row.mean_us = us(h.mean());
      if (b.key.timing == TimingSource::kGpu && h.percentile(50) > 0) {
        double gbps = static_cast<double>(b.key.bytes) / (static_cast<double>(h.percentile(50)) / 1e9) / 1e9;
        row.algbw_gbps = gbps;
        row.busbw_gbps = gbps * busbw_factor(row.api, b.key.nranks);
      }
    }
    row.first_call_samples = b.first_calls.count;
    if (b.first_calls.count > 0) {
      row.first_call_max_us = us(static_cast<double>(b.first_calls.max));
      row.first_call_mean_us = us(b.first_calls.mean());
    }
    row.window_calls = row.calls;
    table.rows.push_back(std::move(row));
  }

  // Calls over the whole run, from the op totals: a row's ring window may hold only the newest.
  std::set<RunTotalsKey> counted;
  for (LatencyRow& row : table.rows) {
    RunTotalsKey key{row.comm_id, row.bytes, row.nranks, static_cast<uint16_t>(row.api)};
    auto it = a.run_totals.find(key);
    if (it == a.run_totals.end() || !counted.insert(key).second) continue;
    row.calls = std::max(row.window_calls, it->second.calls_per_rank());
  }
  // Sizes the window holds no call of: their counts, and the run's GPU histogram where it has one.
  for (const auto& [key, run] : a.run_totals) {
    if (counted.count(key)) continue;
    LatencyRow row;
    row.comm_id = key.comm_id;
    if (auto n = names.find(key.comm_id); n != names.end()) row.name = n->second;
    row.api = static_cast<Api>(key.api);
    row.bytes = key.bytes;
    row.nranks = key.nranks;
    row.calls = run.calls_per_rank();
    row.timing = TimingSource::kHost;
    if (run.gpu_timed) {
      row.timing = TimingSource::kGpuRunHistogram;
      row.ranks_timed = run.ranks.size();
      row.timed_calls = row.ranks_timed ? (run.gpu_timed + row.ranks_timed - 1) / row.ranks_timed : run.gpu_timed;
      row.p50_us = us(*run.gpu_percentile_ns(50));
      row.p90_us = us(*run.gpu_percentile_ns(90));
      row.p99_us = us(*run.gpu_percentile_ns(99));
      row.mean_us = us(static_cast<double>(run.gpu_ns) / static_cast<double>(run.gpu_timed));
    }
    table.rows.push_back(std::move(row));
  }
  std::stable_sort(table.rows.begin(), table.rows.end(), [](const LatencyRow& x, const LatencyRow& y) {
    return std::tie(x.comm_id, x.api, x.bytes) < std::tie(y.comm_id, y.api, y.bytes);
  });
  table.window = op_window(a);

  // Creation and destruction times per communicator, across its ranks.
  struct Times {
    int32_t nranks = 0;
    std::vector<double> init_ms, destroy_ms;
    std::string api;
  };
  std::map<uint64_t, Times> times;
  for (const ProcessTrace& p : a.job.processes)
    for (const CommInstance& c : p.comms) {
      if (!c.id) continue;
      Times& t = times[c.id];
      t.nranks = std::max(t.nranks, c.nranks);
      t.api = trace::api_name(c.api);
      if (c.created_ns && c.begin_ns) t.init_ms.push_back(static_cast<double>(wrap_sub(c.created_ns, c.begin_ns)) / 1e6);
      if (c.release_end_ns && c.release_begin_ns) t.destroy_ms.push_back(static_cast<double>(wrap_sub(c.release_end_ns, c.release_begin_ns)) / 1e6);
    }
  for (const auto& [id, t] : times) {
    CommLifetimes& c = table.communicators.emplace_back();
    c.comm_id = id;
    if (auto n = names.find(id); n != names.end()) c.name = n->second;
    c.api = t.api;
    c.nranks = t.nranks;
    c.ranks_traced = t.init_ms.size();
    c.init_ms_p50 = percentile_ms(t.init_ms, 50);
    c.init_ms_max = t.init_ms.empty() ? 0.0 : *std::max_element(t.init_ms.begin(), t.init_ms.end());
    if (!t.destroy_ms.empty()) {
      c.destroy_ms_p50 = percentile_ms(t.destroy_ms, 50);
      c.destroy_ms_max = *std::max_element(t.destroy_ms.begin(), t.destroy_ms.end());
    }
  }
  return table;
}

namespace {
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
  JobAnalysis a = analyze_job(options.inputs, ao);
  print_problems(a.job.problems);
  if (a.job.processes.empty()) {
    std::fprintf(stderr, "ncclwatch-report: no usable trace files\n");
    return 2;
  }
  LatencyTable table = latency_table(a);
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
  fmt::print("{:<16} {:<18} {:>12} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {}\n", "comm", "op", "bytes",
             "ranks", "calls", "p50 us", "p90 us", "p99 us", "max us", "algbw", "busbw", "1st max us", "timing");
  for (const LatencyRow& r : table.rows)
    fmt::print("{:<16} {:<18} {:>12} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {}\n", label(r.name, r.comm_id),
               trace::api_name(r.api), r.bytes, r.nranks, r.calls, shown(r.p50_us, 1), shown(r.p90_us, 1),
               shown(r.p99_us, 1), shown(r.max_us, 1), shown(r.algbw_gbps, 2), shown(r.busbw_gbps, 2),
               shown(r.first_call_max_us, 1), r.timing == TimingSource::kHost ? "host (enqueue time)" : timing_name(r.timing));
  if (table.rows.empty()) fmt::print("(no timed collectives in these traces)\n");
  if (table.window.partial())
    fmt::print("{}: calls count the whole run; percentiles come from the ops kept (gpu_run_histogram rows: from the "
               "whole run's GPU histogram, to half an octave)\n",
               table.window.text());
  fmt::print("bandwidths in GB/s, GPU-timed rows only; {}\n{}\n", kSizeConvention, kSteadyState);
  if (!table.communicators.empty()) {
    fmt::print("\n{:<16} {:>6} {:>12} {:>12} {:>14}\n", "comm", "ranks", "init p50 ms", "init max ms", "destroy max ms");
    for (const CommLifetimes& c : table.communicators)
      fmt::print("{:<16} {:>6} {:>12.1f} {:>12.1f} {:>14}\n", label(c.name, c.comm_id), c.nranks, c.init_ms_p50, c.init_ms_max,
                 shown(c.destroy_ms_max, 1));
  }
  return 0;
}

}  // namespace ncclwatch::report
