// latency's analysis: per communicator x op x message size, how long the op took and the bandwidth
// that means, with nccl-tests' conventions, plus how long communicators took to create and destroy.
// report_latency.cc writes the result out, with the conventions in words.
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
#include "model/latency_analysis.h"
#include "model/wording.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

namespace ncclwatch::model {
namespace {

using trace::Api;

double percentile_ms(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::clamp(p / 100.0 * static_cast<double>(v.size() - 1), 0.0, static_cast<double>(v.size() - 1)));
  return v[i];
}

double us(double ns) { return ns / 1e3; }

LatencyKey untimed_twin(LatencyKey k) {
  k.timing = TimingSource::kHost;
  return k;
}

// With sampled GPU timing (NCCLWATCH_SAMPLE), calls of one size are partly GPU-timed, partly
// host-timed; host enqueue times say nothing about how long an asynchronous op ran, so such a
// size gets one row from its GPU samples, counting the untimed calls too. Returns the host-timed
// keys of such sizes (the rows folded away), each with its calls per rank.
std::map<LatencyKey, uint64_t> calls_folded_into_gpu_rows(const JobAnalysis& a) {
  std::map<LatencyKey, uint64_t> host_calls;
  std::set<LatencyKey> gpu_timed;
  for (const LatencyBucket& b : a.latency)
    if (b.key.timing != TimingSource::kHost && b.samples()) gpu_timed.insert(untimed_twin(b.key));
  for (const LatencyBucket& b : a.latency) {
    if (b.key.timing != TimingSource::kHost || !gpu_timed.count(b.key)) continue;
    size_t ranks = b.ranks.size();
    host_calls[b.key] += ranks ? (b.samples() + ranks - 1) / ranks : b.samples();
  }
  return host_calls;
}

// One row of the ops the traces kept: its percentiles from the steady state, its first calls apart.
LatencyRow window_row(const LatencyBucket& b, uint64_t folded_host_calls, const std::map<uint64_t, std::string>& names) {
  const LatencyHistogram& h = b.hist;
  LatencyRow row;
  row.comm_id = b.key.comm_id;
  if (auto n = names.find(b.key.comm_id); n != names.end()) row.name = n->second;
  row.api = static_cast<Api>(b.key.api);
  row.bytes = b.key.bytes;
  row.nranks = b.key.nranks;
  row.ranks_timed = b.ranks.size();
  row.timed_calls = row.ranks_timed ? (b.samples() + row.ranks_timed - 1) / row.ranks_timed : b.samples();
  row.calls = row.timed_calls + folded_host_calls;
  row.samples = h.count();
  row.timing = b.key.timing;
  if (h.count() > 0) {  // a steady state was seen
    row.p50_us = us(static_cast<double>(h.percentile(50)));
    row.p90_us = us(static_cast<double>(h.percentile(90)));
    row.p99_us = us(static_cast<double>(h.percentile(99)));
    row.max_us = us(static_cast<double>(h.max()));
    row.min_us = us(static_cast<double>(h.min()));
    row.mean_us = us(h.mean());
    bool gpu = b.key.timing == TimingSource::kGpu || b.key.timing == TimingSource::kGpuGraphReplay ||
               b.key.timing == TimingSource::kGpuUpperBound;
    if (gpu && h.percentile(50) > 0) {
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
  return row;
}

LatencyKey exact_twin(LatencyKey k) {
  k.timing = TimingSource::kGpu;
  return k;
}

// Calls timed only as upper bounds (TimingSource::kGpuUpperBound) of sizes that also have exact GPU
// samples: the exact ones give the row, counting these calls too. Each with its calls per rank.
std::map<LatencyKey, uint64_t> bounds_folded_into_exact_rows(const JobAnalysis& a) {
  std::set<LatencyKey> exact;
  for (const LatencyBucket& b : a.latency)
    if (b.key.timing == TimingSource::kGpu && b.hist.count()) exact.insert(b.key);
  std::map<LatencyKey, uint64_t> folded;
  for (const LatencyBucket& b : a.latency) {
    if (b.key.timing != TimingSource::kGpuUpperBound || !exact.count(exact_twin(b.key))) continue;
    size_t ranks = b.ranks.size();
    folded[b.key] += ranks ? (b.samples() + ranks - 1) / ranks : b.samples();
  }
  return folded;
}

// The rows of the ops the traces kept, one per communicator, op, size and timing.
std::vector<LatencyRow> window_rows(const JobAnalysis& a, const std::map<uint64_t, std::string>& names) {
  std::map<LatencyKey, uint64_t> host_calls = calls_folded_into_gpu_rows(a);
  std::map<LatencyKey, uint64_t> bounded_calls = bounds_folded_into_exact_rows(a);
  std::vector<LatencyRow> rows;
  for (const LatencyBucket& b : a.latency) {
    if (!b.samples()) continue;
    if (b.key.timing == TimingSource::kHost && host_calls.count(b.key)) continue;  // folded into the GPU row
    if (bounded_calls.count(b.key)) continue;  // folded into the exact row
    uint64_t folded = 0;
    if (b.key.timing != TimingSource::kHost)
      if (auto it = host_calls.find(untimed_twin(b.key)); it != host_calls.end()) folded = it->second;
    if (b.key.timing == TimingSource::kGpu) {
      LatencyKey bounded = b.key;
      bounded.timing = TimingSource::kGpuUpperBound;
      if (auto it = bounded_calls.find(bounded); it != bounded_calls.end()) folded += it->second;
    }
    rows.push_back(window_row(b, folded, names));
  }
  return rows;
}

// Calls over the whole run, from the op totals: a row's ring window may hold only the newest.
// Sizes the window holds no call of get rows of their own: their counts, and the run's GPU
// histogram where it has one.
void add_whole_run_calls(const JobAnalysis& a, const std::map<uint64_t, std::string>& names, std::vector<LatencyRow>& rows) {
  std::set<RunTotalsKey> counted;
  for (LatencyRow& row : rows) {
    RunTotalsKey key{row.comm_id, row.bytes, row.nranks, static_cast<uint16_t>(row.api)};
    auto it = a.run_totals.find(key);
    if (it == a.run_totals.end() || !counted.insert(key).second) continue;
    row.calls = std::max(row.window_calls, it->second.calls_per_rank());
  }
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
    rows.push_back(std::move(row));
  }
}

// Creation and destruction times per communicator, across its ranks.
std::vector<CommLifetimes> comm_lifetimes(const JobAnalysis& a, const std::map<uint64_t, std::string>& names) {
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
  std::vector<CommLifetimes> out;
  for (const auto& [id, t] : times) {
    CommLifetimes& c = out.emplace_back();
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
  return out;
}

}  // namespace

std::string plans_text(const PlanCounts& plans) {
  auto way = [](const PlanChoice& c) {
    std::string text = c.algo.empty() ? "" : c.algo + "/" + c.proto + " ";
    return text + std::to_string(c.channels) + "ch";
  };
  if (plans.size() == 1) return way(plans.begin()->first);
  std::vector<std::pair<PlanChoice, uint64_t>> ways(plans.begin(), plans.end());
  std::stable_sort(ways.begin(), ways.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  uint64_t all = 0;
  for (const auto& w : ways) all += w.second;
  std::string out;
  for (const auto& [choice, ops] : ways) {
    if (!out.empty()) out += ", ";
    out += way(choice) + " " + std::to_string((ops * 100 + all / 2) / all) + "%";
  }
  return out;
}

LatencyTable latency_table(const JobAnalysis& a) {
  std::map<uint64_t, std::string> names = comm_names(a.job);
  LatencyTable table;
  table.rows = window_rows(a, names);
  add_whole_run_calls(a, names, table.rows);
  for (LatencyRow& row : table.rows) {
    RunTotalsKey key{row.comm_id, row.bytes, row.nranks, static_cast<uint16_t>(row.api)};
    if (auto p = a.plans.find(key); p != a.plans.end()) row.plans = p->second;
    if (auto k = a.kernels.find(key); k != a.kernels.end() && k->second.ops) {
      row.kernel_ops = k->second.ops;
      row.kernel_mean_us = double(k->second.sum_ns) / double(k->second.ops) / 1e3;
      row.kernel_max_us = double(k->second.max_ns) / 1e3;
    }
  }
  std::stable_sort(table.rows.begin(), table.rows.end(), [](const LatencyRow& x, const LatencyRow& y) {
    return std::tie(x.comm_id, x.api, x.bytes) < std::tie(y.comm_id, y.api, y.bytes);
  });
  table.window = op_window(a);
  table.communicators = comm_lifetimes(a, names);
  return table;
}

}  // namespace ncclwatch::model
