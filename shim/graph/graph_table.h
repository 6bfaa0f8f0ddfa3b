// What the shim knows of CUDA graphs that hold NCCL ops: the ops each capture recorded, the graph
// each capture became, the executable graphs instantiated from it. Updated by the driver entry
// points the shim interposes (wrap/cuda_graphs.cc) and by the collective path (a captured op);
// read at every graph launch. Graphs without NCCL ops are never entered: a launch of one costs a
// relaxed load (no NCCL exec alive) or one lock-free lookup.
#pragma once

#include <ncclwatch/trace_format.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace ncclwatch {

struct CommTrack;

// One NCCL op a capture recorded: what each replay runs again.
struct CapturedOp {
  CommTrack* track = nullptr;  // nullptr: a communicator the shim never saw made (no seq)
  uint64_t comm = 0;
  trace::Api api = trace::Api::kUnknown;
  uint64_t count = 0;
  uint8_t datatype = 0;
  int32_t redop = -1;
  int32_t peer = -1;
  uint16_t flags = 0;  // trace::kOpInPlace, kOpCollConfig
};

// A graph's NCCL ops in capture order, shared by the graph and every exec made from it.
struct GraphOps {
  uint32_t index = 0;       // graph_record::kIndex: what its ops' `graph` field names
  uint64_t capture_id = 0;
  std::vector<CapturedOp> ops;
  mutable std::atomic<bool> said_not_followed{false};  // graph_replay_not_followed() wrote its record
  bool kept = false;  // held for the life of the process (graph_table.cc, under its mutex)
  // Later captures of the very same NCCL ops, and updates of an exec to them, folded into this one
  // (graph_table.cc, under its mutex): a loop that re-captures every step keeps no more state.
  uint64_t recaptures = 0;
  uint64_t updates = 0;
};

// Captures begun and not yet ended in this process, as far as the shim saw them begin. While it is
// 0 no op can be captured, and the collective path asks the driver nothing.
inline std::atomic<int> g_open_captures{0};
inline bool captures_may_be_open() noexcept { return g_open_captures.load(std::memory_order_relaxed) > 0; }
void capture_begun() noexcept;

// Executable graphs alive that hold NCCL ops: while 0, a graph launch looks nothing up.
inline std::atomic<int> g_nccl_execs{0};

// The collective path: `op`, issued on a stream capturing `capture_id`, joins that capture; its
// graph's index (for the op record) is returned.
uint32_t note_captured_op(uint64_t capture_id, const CapturedOp& op) noexcept;

// cuStreamEndCapture on a stream that was capturing `capture_id`: `graph` is what it made (0 when
// the capture failed with `result`).
void capture_ended(uint64_t capture_id, uint64_t graph, int result) noexcept;

// An executable graph `exec` was made from `graph`.
void graph_instantiated(uint64_t graph, uint64_t exec) noexcept;
// cuGraphExecUpdate gave `exec` the contents of `graph` (`updated`: it succeeded).
void graph_exec_updated(uint64_t exec, uint64_t graph, bool updated) noexcept;
void graph_destroyed(uint64_t graph) noexcept;
void graph_exec_destroyed(uint64_t exec) noexcept;

// At a launch of `exec`: its NCCL ops, or nullptr when it holds none (or is not followed). Lock-free
// (a probe of a fixed table); what it returns stays valid for the life of the process.
const GraphOps* graph_ops_of_exec(uint64_t exec) noexcept;

// A launch of `exec` whose replay the shim cannot follow (`why`): said once per graph, in the trace.
void graph_replay_not_followed(const GraphOps& graph, uint64_t exec, const char* why) noexcept;

void graph_table_after_fork_in_child() noexcept;

}  // namespace ncclwatch
