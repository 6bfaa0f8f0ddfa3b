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
void note_where(const ProcessTrace& p, const std::vector<std::string>* native, RankProgress& progress) {
  if (!p.stacks) return;
  progress.native_tid = p.stacks->native_tid;
  progress.native_unread = p.stacks->native_unread;
  if (native) progress.native_stack = *native;
  if (progress.native_tid) progress.stacks_reason = p.stacks->reason;
  for (auto thread = p.stacks->threads.rbegin(); thread != p.stacks->threads.rend(); ++thread) {
    if (const PythonFrame* frame = program_frame(*thread)) {
      progress.python_stack = *thread;
      progress.where = frame->describe_short();
      progress.stacks_reason = p.stacks->reason;
      return;
    }
  }
}

}  // namespace ncclwatch::model
