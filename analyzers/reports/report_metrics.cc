// metrics: the job as Prometheus text (node-exporter's textfile collector format), for Grafana and
// alerting: communicators by end state, resources still held, ops issued and completed, stalls,
// and per communicator, op and size the steady-state latency quantiles and bus bandwidth. The
// families are those of common/ncclwatch/metrics_text.h, which the shim's live file shares.
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/job_identity.h"
#include "reports/output.h"

#include <ncclwatch_version.h>

#include <ncclwatch/metrics_text.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
namespace m = ncclwatch::metrics;

// One (communicator, rank) as the op records saw it: ops and stalls.
struct RankCounts {
  uint64_t issued = 0;
  uint64_t p2p = 0;
  uint64_t completed = 0;
  uint64_t stalls = 0;
  bool stalled = false;
  CollectiveGpuTime straggler_series;
};

// Per process, labelled {host, pid} as the shim's live file labels its own.
void write_lifecycles(const Job& job, m::TextWriter& out) {
  struct Process {
    std::string host, pid;
    std::map<std::string, uint64_t> states;
    std::map<std::string, uint64_t> held;  // resource kind -> unreleased
    uint64_t created = 0, lost = 0;
  };
  std::vector<Process> processes;
  for (const ProcessTrace& p : job.processes) {
    Process& q = processes.emplace_back();
    q.host = p.host();
    q.pid = std::to_string(p.pid());
    q.lost = p.lost_records;
    for (const CommInstance& c : p.comms) {
      ++q.states[state_name(c.state)];
      // As the shim counts: once the init call returned a communicator (pending counts too).
      q.created += c.state != CommState::kInitFailed && c.state != CommState::kInitHung;
    }
    for (const ResourceInstance& r : p.resources)
      if (!r.released) ++q.held[trace::resource_kind(r.api)];
  }
  out.family(m::kProcesses);
  out.sample(static_cast<double>(job.processes.size()));
  out.family(m::kCommunicators);
  for (const Process& q : processes)
    for (const auto& [state, n] : q.states)
      out.sample({{"host", q.host}, {"pid", q.pid}, {"state", state}}, static_cast<double>(n));
  out.family(m::kCommunicatorsCreated);
  for (const Process& q : processes) out.sample({{"host", q.host}, {"pid", q.pid}}, static_cast<double>(q.created));
  out.family(m::kResourcesHeld);
  for (const Process& q : processes)
    for (const auto& [kind, n] : q.held) out.sample({{"host", q.host}, {"pid", q.pid}, {"kind", kind}}, static_cast<double>(n));
  out.family(m::kLostRecords);
  for (const Process& q : processes) out.sample({{"host", q.host}, {"pid", q.pid}}, static_cast<double>(q.lost));
}

// Per process the most its communicators held at once (memory_findings.h), where the shim read any.
void write_memory_peaks(const JobAnalysis& a, m::TextWriter& out) {
  std::vector<ProcessMemory> memory = nccl_memory_by_process(a.job, a.ops);
  if (memory.empty()) return;
  out.family(m::kProcessMemoryPeak);
  for (const ProcessMemory& p : memory)
    out.sample({{"host", p.process->host()}, {"pid", std::to_string(p.process->pid())}}, static_cast<double>(p.peak_bytes));
}

void write_communicators(const JobAnalysis& a, m::TextWriter& out) {
  std::map<uint64_t, std::string> names = comm_names(a.job);
  std::map<uint64_t, int32_t> sizes;
  for (const ProcessTrace& p : a.job.processes)
    for (const CommInstance& c : p.comms)
      if (c.id) sizes[c.id] = std::max(sizes[c.id], c.nranks);
  for (const CommOps& c : a.comms)
    if (c.comm_id) sizes[c.comm_id] = std::max(sizes[c.comm_id], c.nranks);
  out.family(m::kCommunicatorInfo);
  for (const auto& [id, nranks] : sizes) {
    auto name = names.find(id);
    out.sample({{"comm", hex_id(id)}, {"name", name == names.end() ? std::string() : name->second},
                {"nranks", std::to_string(nranks)}},
               1);
  }

  std::map<std::pair<uint64_t, int32_t>, RankCounts> ranks;
  for (const ProcessOps& p : a.ops) {
    for (const RankComm& c : p.comms) {
      RankCounts& r = ranks[{c.comm_id, c.rank}];
      // Summed, as issued is and as the shim's live file sums its communicators' counts.
      r.issued += c.issued;
      r.p2p += c.p2p_ops;
      r.completed += c.completed_seq();
      r.stalled = r.stalled || c.stalled_unresolved;
      const CollectiveGpuTime& t = c.straggler_series(p.alike_marked);
      r.straggler_series.gpu_ns += t.gpu_ns;
      r.straggler_series.launches += t.launches;
    }
    for (const StallEvent& s : p.stalls) {
      const RankComm* c = p.comm(s.comm_id);
      if (s.stalled) ++ranks[{s.comm_id, c ? c->rank : -1}].stalls;
    }
  }
  auto each_rank = [&](const m::Family& family, auto value) {
    out.family(family);
    for (const auto& [key, r] : ranks)
      out.sample({{"comm", hex_id(key.first)}, {"rank", std::to_string(key.second)}}, static_cast<double>(value(r)));
  };
  each_rank(m::kOpsIssued, [](const RankCounts& r) { return r.issued; });
  each_rank(m::kP2pIssued, [](const RankCounts& r) { return r.p2p; });
  each_rank(m::kOpsCompleted, [](const RankCounts& r) { return r.completed; });
  // As the shim's live file: where the GPU timed ops.
  if (std::any_of(ranks.begin(), ranks.end(), [](const auto& r) { return r.second.straggler_series.launches > 0; })) {
    each_rank(m::kCollectiveGpuSeconds, [](const RankCounts& r) { return static_cast<double>(r.straggler_series.gpu_ns) / 1e9; });
    each_rank(m::kCollectivesTimed, [](const RankCounts& r) { return r.straggler_series.launches; });
  }
  each_rank(m::kStalls, [](const RankCounts& r) { return r.stalls; });
  each_rank(m::kStalled, [](const RankCounts& r) { return r.stalled ? 1 : 0; });
}

// The steady state of each (communicator, op, size) as a histogram, in the half-octave buckets of
// the trace's op totals (trace::totals_bucket): every rank's calls add up, so series can be summed
// and histogram_quantile() taken over any of them. A bucket of the analysis' finer histogram
// (1.6 %) counts under the half-octave edge its lower end falls under. Buckets are written from
// the first that holds a call to the first that holds them all, then +Inf.
void write_latency_histograms(const JobAnalysis& a, m::TextWriter& out) {
  out.family(m::kOpLatency);
  for (const LatencyBucket& row : a.latency) {
    const LatencyHistogram& h = row.hist;
    if (!h.count()) continue;
    std::array<uint64_t, trace::kTotalsBuckets> counts{};
    h.for_each_bucket([&](size_t bucket, uint64_t n) {
      counts[static_cast<size_t>(trace::totals_bucket(LatencyHistogram::bucket_low(bucket)))] += n;
    });
    std::string comm = hex_id(row.key.comm_id), op(trace::api_name(static_cast<trace::Api>(row.key.api))), bytes = std::to_string(row.key.bytes);
    std::string timing(timing_name(row.key.timing));
    uint64_t below = 0;
    char le[32];
    for (int b = 0; b + 1 < trace::kTotalsBuckets && below < h.count(); ++b) {
      below += counts[static_cast<size_t>(b)];
      if (!below) continue;
      std::snprintf(le, sizeof le, "%.9g", trace::totals_bucket_floor_ns(b + 1) / 1e9);
      out.sample({{"comm", comm}, {"op", op}, {"bytes", bytes}, {"timing", timing}, {"le", le}}, static_cast<double>(below),
                 "_bucket");
    }
    out.sample({{"comm", comm}, {"op", op}, {"bytes", bytes}, {"timing", timing}, {"le", "+Inf"}},
               static_cast<double>(h.count()), "_bucket");
    out.sample({{"comm", comm}, {"op", op}, {"bytes", bytes}, {"timing", timing}}, h.mean() * static_cast<double>(h.count()) / 1e9,
               "_sum");
    out.sample({{"comm", comm}, {"op", op}, {"bytes", bytes}, {"timing", timing}}, static_cast<double>(h.count()), "_count");
  }
}

void write_latency(const JobAnalysis& a, m::TextWriter& out) {
  LatencyTable table = latency_table(a);
  auto labels_of = [](const LatencyRow& r) {
    return std::tuple{hex_id(r.comm_id), std::string(trace::api_name(r.api)), std::to_string(r.bytes),
                      std::string(timing_name(r.timing))};
  };
  write_latency_histograms(a, out);
  out.family(m::kOpBusBandwidth);
  for (const LatencyRow& r : table.rows) {
    if (!r.busbw_gbps) continue;
    auto [comm, op, bytes, timing] = labels_of(r);
    out.sample({{"comm", comm}, {"op", op}, {"bytes", bytes}}, *r.busbw_gbps * 1e9);
  }
  out.family(m::kFirstCallMax);
  for (const LatencyRow& r : table.rows) {
    if (!r.first_call_max_us) continue;
    auto [comm, op, bytes, timing] = labels_of(r);
    out.sample({{"comm", comm}, {"op", op}, {"bytes", bytes}, {"timing", timing}}, *r.first_call_max_us / 1e6);
  }
}

}  // namespace

std::string job_id_of(const Job& job) {
  if (std::string id = job_id_in_traces(job); !id.empty()) return id;
  return m::job_id_from_env([](const char* name) { return std::getenv(name); });
}

std::string job_id_in_traces(const Job& job) {
  for (const ProcessTrace& p : job.processes) {
    std::string id = m::job_id_from_env([&](const char* name) -> const char* {
      auto it = p.strings.find(std::string(trace::process_record::kEnvPrefix) + name);
      return it == p.strings.end() ? nullptr : it->second.c_str();
    });
    if (!id.empty()) return id;
  }
  return {};
}

std::string nccl_versions_of(const Job& job) {
  std::set<std::string> versions;
  for (const ProcessTrace& p : job.processes)
    if (std::string v = p.nccl_version(); !v.empty()) versions.insert(nccl_version_text(v));
  std::string text;
  for (const std::string& v : versions) text += (text.empty() ? "" : ",") + v;
  return text;
}

namespace {

void write_build_info(const Job& job, m::TextWriter& out) {
  out.family(m::kBuildInfo);
  out.sample({{"version", NCCLWATCH_VERSION}, {"trace_format", std::to_string(trace::kVersion)}, {"nccl", nccl_versions_of(job)}},
             1);
}

}  // namespace

int run_metrics(const Options& options) {
  AnalysisOptions ao;
  ao.align_clocks = false;  // counts and durations only
  std::optional<JobAnalysis> analysis = load_job_or_explain(options.inputs, ao);
  if (!analysis) return kNoUsableInput;
  m::TextWriter out;
  out.set_job_id(job_id_of(analysis->job));
  write_build_info(analysis->job, out);
  write_lifecycles(analysis->job, out);
  write_memory_peaks(*analysis, out);
  write_communicators(*analysis, out);
  write_latency(*analysis, out);
  return write_output_atomically(options.output, out.text()) ? 0 : 2;
}

}  // namespace ncclwatch::report
