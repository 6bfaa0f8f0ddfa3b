// Prometheus text exposition (format 0.0.4, what node-exporter's textfile collector reads): the
// metric families ncclwatch publishes, and a writer that keeps each family's samples together.
// One list serves both writers: `ncclwatch-report metrics` after a job and the shim's live file
// (NCCLWATCH_METRICS_FILE) while it runs, so a dashboard reads one set of names, with one set of
// labels per family: per process {host, pid}, per communicator rank {comm, rank}. A rank of a
// communicator lives in one process, so the live files of a job's processes never write the same
// series; a report of that job writes the series they wrote, so the two belong in different
// textfile folders (README: "Prometheus metrics").
#pragma once

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace ncclwatch::metrics {

struct Family {
  const char* name;
  const char* type;  // gauge | counter | summary
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
inline constexpr Family kOpsCompleted{
    "ncclwatch_ops_completed_total", "counter",
    "Collectives known complete on the GPU, per communicator and rank (GPU timing modes; host mode: as far as known)"};
inline constexpr Family kStalls{"ncclwatch_stalls_total", "counter",
                                "Stalls the watchdog reported (a stream without progress for NCCLWATCH_STALL_SEC)"};
inline constexpr Family kStalled{"ncclwatch_stalled", "gauge",
                                 "1 while a communicator rank's last stall is unresolved"};
inline constexpr Family kLostRecords{"ncclwatch_trace_lost_records_total", "counter",
                                     "Trace records lost (trace size limit or a write error)"};
// The report only: it needs every rank's records.
inline constexpr Family kProcesses{"ncclwatch_trace_processes", "gauge", "Process trace files read"};
inline constexpr Family kCommunicatorInfo{"ncclwatch_communicator_info", "gauge",
                                          "1 per communicator: its size and the name the application gave it"};
inline constexpr Family kOpLatency{
    "ncclwatch_op_latency_seconds", "summary",
    "Steady-state op time per communicator, op and size (each rank's first call left out); timing=gpu is GPU "
    "execution, timing=host is the enqueue time only"};
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
  // A sample of the current family; `suffix` is "" or a summary's "_sum"/"_count".
  void sample(Labels labels, double value, std::string_view suffix = {}) {
    text_ += family_;
    text_ += suffix;
    if (labels.size()) {
      text_ += '{';
      bool first = true;
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
    char number[32];
    auto [end, ec] = std::to_chars(number, number + sizeof number, value);
    text_.append(number, ec == std::errc() ? end : number);
    text_ += '\n';
  }
  void sample(double value) { sample({}, value); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string family_;
};

}  // namespace ncclwatch::metrics
