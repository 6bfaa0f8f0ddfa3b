// Which part of the run the ops in a job's traces cover. A trace keeps its newest ops in a ring
// (format 4): once the ring wraps, older ops survive only as counts in the op totals, and every
// report that reads ops says so, with the window it saw.
#pragma once

#include "model/op_model.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace ncclwatch::model {

struct OpWindow {
  size_t processes = 0;         // processes whose trace has a ring
  size_t wrapped = 0;           // ... that wrapped: their oldest ops were overwritten
  uint64_t ring_written = 0;    // ring records (ops and GPU timings) written, all processes
  uint64_t ring_kept = 0;       // ... still in the traces
  uint64_t total_calls = 0;     // ops the totals counted over the whole run, all processes
  uint64_t kept_ops = 0;        // op records read, all processes
  int64_t run_begin_ns = 0;     // aligned: the earliest process start
  int64_t run_end_ns = 0;       // ... the latest op or exit seen
  int64_t window_begin_ns = 0;  // the latest first kept op among the wrapped processes

  bool partial() const { return wrapped > 0; }
  // One sentence, e.g. "ops kept from 02:13:05.2 to 02:18:05.9 UTC of a 51.0 h run (the newest of each
  // process); 412,003,118 earlier ops are counted in the totals only"; "" when nothing was
  // overwritten.
  std::string text() const;
  nlohmann::json to_json() const;
};

OpWindow op_window(const JobAnalysis& analysis);

}  // namespace ncclwatch::model
