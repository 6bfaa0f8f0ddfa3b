// Where each rank's threads were when their stacks were written (a stall, a watcher's request):
// the main Python thread's program line and the native stack of the thread that issued the
// stalled op, symbolized. Read by the hang analysis.
#pragma once

#include "model/findings.h"
#include "model/op_model.h"

#include <map>
#include <string>
#include <vector>

namespace ncclwatch::model {

// Each process's native stack, symbolized, innermost first: by process index (only processes
// whose Stacks record holds one).
using NativeStacks = std::map<size_t, std::vector<std::string>>;
NativeStacks symbolize_native_stacks(const JobAnalysis& a);

// Fills `progress`'s where/python_stack/native fields from the process's latest Stacks record.
void note_where(const ProcessTrace& p, const std::vector<std::string>* native, RankProgress& progress);

}  // namespace ncclwatch::model
