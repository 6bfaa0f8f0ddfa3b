// Each op's kernel time by the GPU's own timer, from the OpKernel records of one file (one per
// channel of the op's kernel, NCCLWATCH_PROFILER): the channels' first start to their last stop,
// summed by (communicator, op, size) into KernelTotals. A channel record that cannot be true (no
// stop, a stop before its start, a span of hours) is named and left out.
#pragma once

#include "model/op_model.h"
#include "model/trace_reader.h"

#include <ncclwatch/trace_format.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace ncclwatch::model {

class KernelSpans {
 public:
  KernelSpans(std::map<RunTotalsKey, KernelTotals>& out, ImplausibleValues& implausible)
      : out_(out), implausible_(implausible) {}
  void add(const trace::OpKernelRecord& k, const RecordView& r);
  void finish();  // the file's end: ops still waiting for channels count with those they have

 private:
  // An op: its launch, seq, call and peer (as the op record it belongs to).
  using OpKey = std::tuple<uint64_t, uint64_t, uint16_t, int32_t>;
  struct Open {
    RunTotalsKey row;
    uint64_t first_start = UINT64_MAX, last_stop = 0;
    uint32_t channels_seen = 0, channels_planned = 0;
    uint64_t opened = 0;  // order of arrival, to close the oldest first
  };
  void close(std::map<OpKey, Open>::iterator it);

  std::map<RunTotalsKey, KernelTotals>& out_;
  ImplausibleValues& implausible_;
  std::map<OpKey, Open> open_;
  uint64_t arrivals_ = 0;
};

}  // namespace ncclwatch::model
