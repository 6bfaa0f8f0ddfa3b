// Where each rank's threads were when their stacks were written (a stall, a watcher's request):
// the main Python thread's program line and the native stack of the thread that issued the
// stalled op, symbolized. Read by the hang analysis.
#pragma once

#include "model/op_model.h"
#include "model/python_frames.h"

#include <map>
#include <string>
#include <vector>

namespace ncclwatch::model {

// Each process's native stack, symbolized, innermost first: by process index (only processes
// whose Stacks record holds one).
using NativeStacks = std::map<size_t, std::vector<std::string>>;
NativeStacks symbolize_native_stacks(const JobAnalysis& a);

// Where a rank's threads were when its stacks were last written (a stall, a watcher's request).
struct ThreadsWhere {
  // Its Python: the main thread's stack, innermost first, and its program line ("train.py:88
  // (step)"); empty without a Stacks record.
  std::vector<PythonFrame> python_stack;
  std::string where;
  std::string stacks_reason;  // why they were written: "stall" or "requested"
  // The native stack of the thread that issued the stalled op (or, on a request, the first thread
  // that launched NCCL work), symbolized, innermost first; or why it could not be read.
  int native_tid = 0;
  std::vector<std::string> native_stack;
  std::string native_unread;
};

// Fills `at` from the process's latest Stacks record.
void note_where(const ProcessTrace& p, const std::vector<std::string>* native, ThreadsWhere& at);

}  // namespace ncclwatch::model
