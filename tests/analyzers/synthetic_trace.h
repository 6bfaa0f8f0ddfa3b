// Synthetic ncclwatch traces for the analyzer tests and the benchmark: a small writer that lays out
// files exactly as trace_format.h says (FileHeader, then committed records), and a simulator that
// plays a job's per-rank programs of blocking collectives against each other, so that ranks which
// skip, stop or straggle produce the traces such a job would.
#pragma once

#include <ncclwatch/trace_format.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace ncclwatch::testing {

class TraceFileWriter {
 public:
  TraceFileWriter(const std::string& path, const std::string& host, uint32_t pid, int64_t start_wall_ns,
                  int64_t start_mono_ns);
  ~TraceFileWriter();
  TraceFileWriter(const TraceFileWriter&) = delete;
  TraceFileWriter& operator=(const TraceFileWriter&) = delete;

  void strings(trace::RecordType type, int64_t time_ns, const std::vector<std::string>& entries);
  void call(trace::RecordType type, trace::ApiEvent event, const std::string& name = "");
  void op(trace::OpRecord op);
  void timing(trace::GpuTimingRecord timing);
  void stall(trace::StallRecord stall, const std::vector<trace::StallComm>& comms);
  void exit(trace::RecordType type, trace::ExitRecord record);
  uint64_t records() const { return records_; }

 private:
  void put(trace::RecordType type, void* record, size_t size, const void* tail = nullptr, size_t tail_bytes = 0);
  std::FILE* f_ = nullptr;
  std::vector<char> buffer_;
  uint64_t records_ = 0;
};

// A job of blocking collectives: each rank runs its program; a call issues the op, and the rank
// waits until every member of the communicator issued the same seq.
struct SimCall {
  int comm = 0;                 // index into SimJob::comms
  trace::Api api = trace::Api::kAllReduce;
  uint64_t count = 1 << 20;
  uint8_t datatype = 7;         // float32
  int32_t redop = 0;            // sum
  int32_t peer = -1;
  int64_t delay_ns = 1000000;   // compute before the call
};

struct SimComm {
  uint64_t id = 0;
  std::string name;
  std::vector<int> members;  // global ranks, in communicator rank order
};

struct SimRank {
  std::string host = "node0";
  uint32_t pid = 0;
  std::vector<SimCall> program;
  bool exits = true;                              // finishing the program ends the process cleanly
  std::map<std::string, std::string> env{{"NCCL_DEBUG", "WARN"}};
  std::string nccl_version = "2.28.9";
  bool timed = true;                              // GPU timing records (else host timing only)
};

struct SimJob {
  std::vector<SimComm> comms;
  std::vector<SimRank> ranks;
  int64_t op_ns = 200000;                      // how long an op runs once every rank arrived
  std::map<std::string, int64_t> wall_skew_ns; // per host: its wall clock's error
  std::map<std::string, int64_t> mono_base_ns; // per host: its CLOCK_MONOTONIC at the job's start
  bool stalls = true;                          // hung ranks write a watchdog stall record
  int64_t jitter_ns = 20000;                   // arrival noise, deterministic
};

// Writes one trace per rank into `dir`; returns the files' paths (by rank).
std::vector<std::string> write_job(const SimJob& job, const std::string& dir);

// Job builders for the tests.
SimJob world_job(int nranks, int steps, uint64_t count = 1 << 20);  // one comm "world", `steps` all-reduces

}  // namespace ncclwatch::testing
