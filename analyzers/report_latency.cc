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
#include <vector>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using trace::Api;

double percentile_ms(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::clamp(p / 100.0 * static_cast<double>(v.size() - 1), 0.0, static_cast<double>(v.size() - 1)));
  return v[i];
}

}  // namespace

json latency_json(const JobAnalysis& a) {
  std::map<uint64_t, std::string> names = comm_names(a.job);
  json rows = json::array();
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
  auto us_or_null = [](bool known, double ns) { return known ? json(ns / 1e3) : json(nullptr); };
  for (const LatencyBucket& b : a.latency) {
    const LatencyHistogram& h = b.hist;
    if (!b.samples()) continue;
    if (b.key.timing == TimingSource::kHost && gpu_timed.count(b.key)) continue;  // folded into the GPU row
    Api api = static_cast<Api>(b.key.api);
    size_t ranks = b.ranks.size();
    bool steady = h.count() > 0;
    json algbw = nullptr, busbw = nullptr;
    if (steady && b.key.timing == TimingSource::kGpu && h.percentile(50) > 0) {
      double gbps = static_cast<double>(b.key.bytes) / (static_cast<double>(h.percentile(50)) / 1e9) / 1e9;
      algbw = gbps;
      busbw = gbps * busbw_factor(api, b.key.nranks);
    }
    uint64_t timed_calls = ranks ? (b.samples() + ranks - 1) / ranks : b.samples();
    json row = {{"comm", hex_id(b.key.comm_id)},
                {"op", trace::api_name(api)},
                {"bytes", b.key.bytes},
                {"nranks", b.key.nranks},
                {"calls", timed_calls + (b.key.timing == TimingSource::kHost ? 0 : host_calls[untimed_twin(b.key)])},
                {"timed_calls", timed_calls},
                {"samples", h.count()},
                {"ranks_timed", ranks},
                {"p50_us", us_or_null(steady, static_cast<double>(h.percentile(50)))},
                {"p90_us", us_or_null(steady, static_cast<double>(h.percentile(90)))},
                {"p99_us", us_or_null(steady, static_cast<double>(h.percentile(99)))},
                {"max_us", us_or_null(steady, static_cast<double>(h.max()))},
                {"min_us", us_or_null(steady, static_cast<double>(h.min()))},
                {"mean_us", us_or_null(steady, h.mean())},
                {"algbw_gbps", algbw},
                {"busbw_gbps", busbw},
                {"first_calls", {{"samples", b.first_calls.count},
                                 {"max_us", us_or_null(b.first_calls.count > 0, static_cast<double>(b.first_calls.max))},
                                 {"mean_us", us_or_null(b.first_calls.count > 0, b.first_calls.mean())}}},
                {"timing", timing_name(b.key.timing)}};
    if (auto n = names.find(b.key.comm_id); n != names.end()) row["name"] = n->second;
    rows.push_back(row);
  }

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
  json comms = json::array();
  for (const auto& [id, t] : times) {
    json c = {{"comm", hex_id(id)}, {"nranks", t.nranks}, {"api", t.api}, {"ranks_traced", t.init_ms.size()}};
    if (auto n = names.find(id); n != names.end()) c["name"] = n->second;
    c["init_ms_p50"] = percentile_ms(t.init_ms, 50);
    c["init_ms_max"] = t.init_ms.empty() ? 0.0 : *std::max_element(t.init_ms.begin(), t.init_ms.end());
    c["destroy_ms_p50"] = t.destroy_ms.empty() ? json(nullptr) : json(percentile_ms(t.destroy_ms, 50));
    c["destroy_ms_max"] = t.destroy_ms.empty() ? json(nullptr) : json(*std::max_element(t.destroy_ms.begin(), t.destroy_ms.end()));
    comms.push_back(c);
  }
  return {{"rows", rows},
          {"communicators", comms},
          {"size_convention", "nccl-tests: bytes is the larger buffer (allgather/reducescatter/alltoall: count x nranks "
                              "x element size); algbw = bytes / median GPU time; busbw = algbw x nccl-tests factor"},
          {"steady_state", "percentiles and bandwidths leave out each rank's first call of an op and size on a "
                           "communicator (NCCL's connection set-up), shown as first_calls; host-timed rows are enqueue "
                           "times and have no bandwidth"}};
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
  json out = latency_json(a);
  if (options.json) {
    std::cout << dump_json(out, 2) << "\n";
    return 0;
  }
  static const char* columns[] = {"comm", "op", "bytes", "nranks", "calls", "p50_us", "p90_us", "p99_us",
                                  "max_us", "algbw_gbps", "busbw_gbps", "first_call_max_us", "timing"};
  if (options.csv) {
    write_csv_row(std::vector<std::string>(std::begin(columns), std::end(columns)));
    for (const json& r : out["rows"]) {
      std::vector<std::string> cells;
      for (const char* c : columns)
        cells.push_back(csv_cell(std::string_view(c) == "first_call_max_us" ? r["first_calls"]["max_us"] : r[c]));
      write_csv_row(cells);
    }
    return 0;
  }
  auto cell = [](const json& v, int precision) {
    return v.is_null() ? std::string("-") : fmt::format("{:.{}f}", v.get<double>(), precision);
  };
  fmt::print("{:<16} {:<18} {:>12} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {}\n", "comm", "op", "bytes",
             "ranks", "calls", "p50 us", "p90 us", "p99 us", "max us", "algbw", "busbw", "1st max us", "timing");
  for (const json& r : out["rows"]) {
    std::string timing = r["timing"].get<std::string>();
    if (timing == "host") timing = "host (enqueue time)";
    fmt::print("{:<16} {:<18} {:>12} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {}\n",
               r["comm"].get<std::string>(), r["op"].get<std::string>(), r["bytes"].get<uint64_t>(), r["nranks"].get<int>(),
               r["calls"].get<uint64_t>(), cell(r["p50_us"], 1), cell(r["p90_us"], 1), cell(r["p99_us"], 1),
               cell(r["max_us"], 1), cell(r["algbw_gbps"], 2), cell(r["busbw_gbps"], 2), cell(r["first_calls"]["max_us"], 1),
               timing);
  }
  if (out["rows"].empty()) fmt::print("(no timed collectives in these traces)\n");
  fmt::print("bandwidths in GB/s, GPU-timed rows only; {}\n{}\n", out["size_convention"].get<std::string>(),
             out["steady_state"].get<std::string>());
  if (!out["communicators"].empty()) {
    fmt::print("\n{:<16} {:>6} {:>12} {:>12} {:>14}\n", "comm", "ranks", "init p50 ms", "init max ms", "destroy max ms");
    for (const json& c : out["communicators"])
      fmt::print("{:<16} {:>6} {:>12.1f} {:>12.1f} {:>14}\n", c["comm"].get<std::string>(), c["nranks"].get<int>(),
                 c["init_ms_p50"].get<double>(), c["init_ms_max"].get<double>(),
                 c["destroy_ms_max"].is_null() ? std::string("-") : fmt::format("{:.1f}", c["destroy_ms_max"].get<double>()));
  }
  return 0;
}

}  // namespace ncclwatch::report
