// Prometheus text exposition (format 0.0.4, what node-exporter's textfile collector reads): the
// metric families ncclwatch publishes, and a writer that keeps each family's samples together.
// One list serves both writers: `ncclwatch-report metrics` after a job and the shim's live file
// (NCCLWATCH_METRICS_FILE) while it runs, so a dashboard reads one set of names, with one set of
// labels per family: per process {host, pid}, per communicator rank {comm, rank}. A rank of a
// communicator lives in one process, so the live files of a job's processes never write the same
// series; a report of that job writes the series they wrote, so the two belong in different
// textfile folders (README: "Prometheus metrics"). Every sample of both also carries the job's id
// as `job_id` when one is known (job_id_from_env): Prometheus' own `job` label names the scrape.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace ncclwatch::metrics {

struct Family {
  const char* name;
  const char* type;  // gauge | counter | histogram
  const char* help;
};

// Both writers.
inline constexpr Family kCommunicators{
    "ncclwatch_communicators", "gauge",
    "Communicator ranks by state: while the job runs alive, finalized, destroying, aborting and those destroyed or "
    "aborted so far; at its end the end states (destroyed, leaked, released_at_exit, ...)"};
inline constexpr Family kCommunicatorsCreated{"ncclwatch_communicators_created_total", "counter",
                                              "Communicator ranks created (one per rank of each communicator)"};
inline constexpr Family kResourcesHeld{
    "ncclwatch_resources_held", "gauge",
    "NCCL resources (registrations, windows, allocations) not released: now, or at the end of a finished job"};
inline constexpr Family kOpsIssued{"ncclwatch_ops_issued_total", "counter",
                                   "Collectives issued, per communicator and rank"};
inline constexpr Family kP2pIssued{"ncclwatch_p2p_ops_issued_total", "counter",
                                    "Sends and receives issued, per communicator and rank"};
inline constexpr Family kCommunicatorMemory{
    "ncclwatch_communicator_gpu_memory_bytes", "gauge",
    "GPU memory a communicator rank holds as last read (when made, then after each of its set-up calls; GPU timing "
    "mode), while its process runs (a finished one's file and report have none: its memory went with it)"};
inline constexpr Family kProcessMemory{
    "ncclwatch_process_nccl_gpu_memory_bytes", "gauge",
    "GPU memory a process's alive communicators hold together as last read (GPU timing mode), while it runs"};
inline constexpr Family kOpsCompleted{
    "ncclwatch_ops_completed_total", "counter",
    "Collectives known complete on the GPU, per communicator and rank (GPU timing modes; host mode: as far as known)"};
// A rank its peers wait for spends the least GPU time in their common collectives (the others' time
// includes the wait): the straggler rule (`ncclwatch-report rules`) compares the ranks' means.
inline constexpr Family kCollectiveGpuSeconds{
    "ncclwatch_collective_gpu_seconds_total", "counter",
    "GPU time of the collective launches every rank of a communicator times alike (each op shape's launches 2 to 16, "
    "then one in NCCLWATCH_SAMPLE; CUDA-graph replays and point-to-point left out), each from its own start to its end"};
inline constexpr Family kCollectivesTimed{"ncclwatch_collectives_timed_total", "counter",
                                          "Collective launches counted in ncclwatch_collective_gpu_seconds_total"};
inline constexpr Family kStalls{"ncclwatch_stalls_total", "counter",
                                "Stalls the watchdog reported (a stream without progress for NCCLWATCH_STALL_SEC)"};
inline constexpr Family kStalled{"ncclwatch_stalled", "gauge",
                                 "1 while a communicator rank's last stall is unresolved"};
inline constexpr Family kLostRecords{"ncclwatch_trace_lost_records_total", "counter",
                                     "Trace records lost (trace size limit or a write error)"};
inline constexpr Family kBuildInfo{"ncclwatch_build_info", "gauge",
                                   "1: the ncclwatch version and trace format that wrote these series, and the NCCL "
                                   "version(s) traced"};
// The report only: it needs every rank's records.
inline constexpr Family kProcesses{"ncclwatch_trace_processes", "gauge", "Process trace files read"};
inline constexpr Family kProcessMemoryPeak{
    "ncclwatch_process_nccl_gpu_memory_peak_bytes", "gauge",
    "The most GPU memory a process's communicators held at once over its run (GPU timing mode)"};
inline constexpr Family kCommunicatorInfo{"ncclwatch_communicator_info", "gauge",
                                          "1 per communicator: its size and the name the application gave it"};
inline constexpr Family kOpLatency{
    "ncclwatch_op_latency_seconds", "histogram",
    "Steady-state op time per communicator, op and size, every rank's calls counted (each rank's first call left "
    "out), in half-octave buckets; timing=gpu is GPU execution, timing=host is the enqueue time only"};
inline constexpr Family kOpBusBandwidth{
    "ncclwatch_op_bus_bandwidth_bytes_per_second", "gauge",
    "nccl-tests' bus bandwidth from the median GPU time, per communicator, op and size (GPU-timed rows only)"};
inline constexpr Family kFirstCallMax{"ncclwatch_op_first_call_max_seconds", "gauge",
                                      "Longest first call of an op and size on a communicator (NCCL's connection set-up)"};

// A label value as the text format wants it: backslash, double quote and line feed escaped.
inline std::string escape_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

// The job's id as the environment names it: NCCLWATCH_JOB, else SLURM_JOB_ID, else
// TORCHELASTIC_RUN_ID; "" when none is set. `get` looks a name up (getenv, or a trace's record).
template <class Get> std::string job_id_from_env(Get&& get) {
  for (const char* name : {"NCCLWATCH_JOB", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"})
    if (const char* value = get(name); value && *value) return value;
  return {};
}

// A value as the text format wants it, rounded: integers whole (counters up to 2^53 exact), other
// values to 9 significant digits (0.039274696, not 0.039274696000000005).
inline void append_value(std::string& text, double value) {
  char number[32];
  std::to_chars_result r;
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 9.007199254740992e15)
    r = std::to_chars(number, number + sizeof number, static_cast<long long>(value));
  else
    r = std::to_chars(number, number + sizeof number, value, std::chars_format::general, 9);
  text.append(number, r.ec == std::errc() ? r.ptr : number);
}

class TextWriter {
 public:
  // Starts a family: its HELP and TYPE lines. Every sample of it must follow before the next.
  void family(const Family& f) {
    family_ = f.name;
    text_ += "# HELP ";
    text_ += f.name;
    text_ += ' ';
    for (const char* h = f.help; *h; ++h) text_ += *h == '\n' ? std::string_view("\\n") : std::string_view(h, 1);
    text_ += "\n# TYPE ";
    text_ += f.name;
    text_ += ' ';
    text_ += f.type;
    text_ += '\n';
  }
  // Labels every sample gets first (the job's id), "" values left out.
  void set_job_id(std::string job_id) { job_id_ = std::move(job_id); }
  // A sample of the current family; `suffix` is "" or a histogram's "_bucket"/"_sum"/"_count".
  void sample(Labels labels, double value, std::string_view suffix = {}) {
    text_ += family_;
    text_ += suffix;
    if (labels.size() || !job_id_.empty()) {
      text_ += '{';
      bool first = true;
      if (!job_id_.empty()) {
        text_ += "job_id=\"";
        text_ += escape_label(job_id_);
        text_ += '"';
        first = false;
      }
      for (const auto& [key, label_value] : labels) {
        if (!first) text_ += ',';
        first = false;
        text_ += key;
        text_ += "=\"";
        text_ += escape_label(label_value);
        text_ += '"';
      }
      text_ += '}';
    }
    text_ += ' ';
    append_value(text_, value);
    text_ += '\n';
  }
  void sample(double value) { sample({}, value); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string family_;
  std::string job_id_;
};

}  // namespace ncclwatch::metrics
