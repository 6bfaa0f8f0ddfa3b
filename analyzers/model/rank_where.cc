#include "model/rank_where.h"

#include "model/python_frames.h"
#include "model/symbolizer.h"

#include <optional>

namespace ncclwatch::model {

NativeStacks symbolize_native_stacks(const JobAnalysis& a) {
  NativeStacks out;
  std::optional<Symbolizer> symbolizer;  // only made where a stack is there: it opens debug information
  for (size_t i = 0; i < a.job.processes.size(); ++i) {
    const ProcessTrace& p = a.job.processes[i];
    if (!p.stacks || p.stacks->native_frames.empty()) continue;
    if (!symbolizer) symbolizer.emplace();
    std::vector<std::string>& frames = out[i];
    for (size_t k = 0; k < p.stacks->native_frames.size(); ++k) {
      // A return address points after its call: the call's own line is one byte before (the
      // innermost frame is a program counter: itself).
      uint64_t address = p.stacks->native_frames[k];
      frames.push_back(symbolizer->resolve(p, k == 0 ? address : address - 1).describe());
    }
  }
  return out;
}

// Where the process's main Python thread was, from its latest Stacks record (CPython lists the
// main thread last: the oldest).
void note_where(const ProcessTrace& p, const std::vector<std::string>* native, ThreadsWhere& at) {
  if (!p.stacks) return;
  at.native_tid = p.stacks->native_tid;
  at.native_unread = p.stacks->native_unread;
  if (native) at.native_stack = *native;
  if (at.native_tid) at.stacks_reason = p.stacks->reason;
  for (auto thread = p.stacks->threads.rbegin(); thread != p.stacks->threads.rend(); ++thread) {
    if (const PythonFrame* frame = program_frame(*thread)) {
      at.python_stack = *thread;
      at.where = frame->describe_short();
      at.stacks_reason = p.stacks->reason;
      return;
    }
  }
}

}  // namespace ncclwatch::model
