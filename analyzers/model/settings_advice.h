// Advice on the job's NCCL settings that holds up: settings known to cost (a transport turned off,
// a tiny buffer, a log of every call), settings NCCL no longer reads, PyTorch's watchdog turned off,
// and a forced NCCL_ALGO / NCCL_PROTO, with what it cost where the traces hold the same op and size
// run with NCCL's own choice too (another communicator, another job's traces given alongside).
#pragma once

#include "model/latency_analysis.h"
#include "model/op_model.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ncclwatch::model {

// What a forced choice cost on one op and size: its rows' mean against the rows of the same op,
// size and communicator size that NCCL chose for itself.
struct ForcedChoiceCost {
  trace::Api api = trace::Api::kUnknown;
  uint64_t bytes = 0;
  int32_t nranks = 0;
  std::string forced_plan, own_plan;  // plans_text of each side ("" where NCCL did not say)
  double forced_us = 0, own_us = 0;   // mean per call
  std::string clock;                  // "events" (CUDA events) or, where a side has none, "kernel" (NCCL's GPU timer)
  std::optional<double> kernel_added_us;  // beside the events: the same by NCCL's kernel timer, where both sides have it
  // NCCL ran the forced side as it chose for itself (both plans known and equal): the difference is
  // the runs' (their load, their machines), not the setting's.
  bool same_plan() const { return !forced_plan.empty() && forced_plan == own_plan; }
  uint64_t forced_calls = 0;          // per rank, on the forced side
  double added_us() const { return forced_us - own_us; }
};

struct SettingAdvice {
  std::string setting, value;        // as the processes had it ("NCCL_ALGO", "Ring")
  std::vector<std::string> hosts;    // where, sorted
  size_t processes = 0;
  std::string why;                   // what it does to the job, in a sentence
  std::vector<ForcedChoiceCost> costs;  // NCCL_ALGO / NCCL_PROTO: measured ones
  bool cost_unmeasured = false;      // forced, but no op of its sizes ran with NCCL's own choice here
};

// Every setting of the job worth a look, in the order of the rules (settings_advice.cc).
std::vector<SettingAdvice> settings_advice(const JobAnalysis& analysis, const LatencyTable& latency);

}  // namespace ncclwatch::model
