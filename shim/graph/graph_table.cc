#include "graph/graph_table.h"

#include "comms/comms.h"
#include "process/process.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <cstdio>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace ncclwatch {
namespace {

namespace keys = trace::graph_record;

std::string hex(uint64_t value, bool padded = false) {
  char text[20];
  std::snprintf(text, sizeof text, padded ? "%016llx" : "%llx", static_cast<unsigned long long>(value));
  return text;
}

// Captures, graphs and execs change at set-up time, not per op: one mutex guards them all.
std::mutex g_mutex;
struct Tables {
  std::unordered_map<uint64_t, std::shared_ptr<GraphOps>> open_captures;  // by capture id
  std::unordered_map<uint64_t, std::shared_ptr<GraphOps>> graphs;         // by CUgraph
  std::unordered_map<uint64_t, std::shared_ptr<GraphOps>> execs;          // by CUgraphExec
  uint32_t next_index = 1;
};
Tables* g_tables = nullptr;  // made at the first capture of an NCCL op; never freed (exit path)

Tables& tables() {
  if (!g_tables) g_tables = new Tables();
  return *g_tables;
}

std::string comm_list(const GraphOps& g) {
  std::unordered_set<uint64_t> seen;
  std::string out;
  for (const CapturedOp& op : g.ops) {
    uint64_t id = op.track ? op.track->id : 0;
    if (!seen.insert(id).second) continue;
    if (!out.empty()) out += ',';
    out += hex(id, true);
  }
  return out;
}

void write_graph_record(std::string_view event, const GraphOps& g, uint64_t graph, uint64_t exec,
                        std::string_view detail = {}) {
  std::string blob;
  trace::append_string(blob, keys::kIndex, std::to_string(g.index));
  trace::append_string(blob, keys::kEvent, event);
  trace::append_string(blob, keys::kCapture, std::to_string(g.capture_id));
  if (graph) trace::append_string(blob, keys::kGraph, hex(graph));
  if (exec) trace::append_string(blob, keys::kExec, hex(exec));
  trace::append_string(blob, keys::kOps, std::to_string(g.ops.size()));
  trace::append_string(blob, keys::kComms, comm_list(g));
  if (!detail.empty()) trace::append_string(blob, keys::kDetail, detail);
  write_strings_record(trace::RecordType::kGraph, blob);
}

void say_graphs_lost() noexcept {
  notice_once(Notice::kGraphsLost,
              "ncclwatch: an internal error while following CUDA graphs; some graph replays go unrecorded");
}

void forget_exec(Tables& t, uint64_t exec) {
  if (t.execs.erase(exec)) g_nccl_execs.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace

void capture_begun() noexcept { g_open_captures.fetch_add(1, std::memory_order_relaxed); }

uint32_t note_captured_op(uint64_t capture_id, const CapturedOp& op) noexcept {
  try {
    std::lock_guard lock(g_mutex);
    Tables& t = tables();
    std::shared_ptr<GraphOps>& g = t.open_captures[capture_id];
    if (!g) {
      g = std::make_shared<GraphOps>();
      g->index = t.next_index++;
      g->capture_id = capture_id;
    }
    g->ops.push_back(op);
    return g->index;
  } catch (...) {
    say_graphs_lost();
    return 0;
  }
}

void capture_ended(uint64_t capture_id, uint64_t graph, int result) noexcept {
  // The capture is over whatever the outcome; never below 0 (a begin the shim did not see).
  int open = g_open_captures.load(std::memory_order_relaxed);
  while (open > 0 && !g_open_captures.compare_exchange_weak(open, open - 1, std::memory_order_relaxed)) {
  }
  try {
    std::lock_guard lock(g_mutex);
    if (!g_tables) return;
    auto it = g_tables->open_captures.find(capture_id);
    if (it == g_tables->open_captures.end()) return;
    std::shared_ptr<GraphOps> g = std::move(it->second);
    g_tables->open_captures.erase(it);
    if (!graph) {
      write_graph_record(keys::kCaptureFailed, *g, 0, 0,
                         "cuStreamEndCapture returned " + std::to_string(result) +
                             ": the captured NCCL ops will never run");
      return;
    }
    g_tables->graphs[graph] = g;
    write_graph_record(keys::kCaptured, *g, graph, 0);
  } catch (...) {
    say_graphs_lost();
  }
}

void graph_instantiated(uint64_t graph, uint64_t exec) noexcept {
  try {
    std::lock_guard lock(g_mutex);
    if (!g_tables) return;
    auto it = g_tables->graphs.find(graph);
    if (it == g_tables->graphs.end()) return;
    auto [slot, added] = g_tables->execs.insert_or_assign(exec, it->second);
    if (added) g_nccl_execs.fetch_add(1, std::memory_order_relaxed);
    write_graph_record(keys::kInstantiated, *it->second, graph, exec);
  } catch (...) {
    say_graphs_lost();
  }
}

void graph_exec_updated(uint64_t exec, uint64_t graph, bool updated) noexcept {
  if (!updated) return;  // the exec keeps what it had
  try {
    std::lock_guard lock(g_mutex);
    if (!g_tables) return;
    auto from = g_tables->graphs.find(graph);
    auto was = g_tables->execs.find(exec);
    if (from != g_tables->graphs.end()) {
      if (was == g_tables->execs.end()) g_nccl_execs.fetch_add(1, std::memory_order_relaxed);
      g_tables->execs[exec] = from->second;
      write_graph_record(keys::kUpdated, *from->second, graph, exec);
    } else if (was != g_tables->execs.end()) {
      // A graph none of whose ops the shim saw captured: it may hold NCCL ops all the same.
      write_graph_record(keys::kNotFollowed, *was->second, graph, exec,
                         "cuGraphExecUpdate gave the exec a graph without NCCL ops the shim saw captured; its "
                         "launches are no longer recorded");
      forget_exec(*g_tables, exec);
    }
  } catch (...) {
    say_graphs_lost();
  }
}

void graph_destroyed(uint64_t graph) noexcept {
  std::lock_guard lock(g_mutex);
  if (g_tables) g_tables->graphs.erase(graph);  // its execs keep their ops
}

void graph_exec_destroyed(uint64_t exec) noexcept {
  std::lock_guard lock(g_mutex);
  if (g_tables) forget_exec(*g_tables, exec);
}

std::shared_ptr<const GraphOps> graph_ops_of_exec(uint64_t exec) noexcept {
  std::lock_guard lock(g_mutex);
  if (!g_tables) return nullptr;
  auto it = g_tables->execs.find(exec);
  return it == g_tables->execs.end() ? nullptr : it->second;
}

void graph_replay_not_followed(const GraphOps& graph, uint64_t exec, const char* why) noexcept {
  if (graph.said_not_followed.exchange(true, std::memory_order_relaxed)) return;
  try {
    write_graph_record(keys::kNotFollowed, graph, 0, exec, why);
  } catch (...) {
    say_graphs_lost();
  }
}

void graph_table_after_fork_in_child() noexcept {
  // A child has the parent's graphs (CUDA does not work across fork anyway) but none of its traces.
  new (&g_mutex) std::mutex();
  g_tables = nullptr;
  g_open_captures.store(0, std::memory_order_relaxed);
  g_nccl_execs.store(0, std::memory_order_relaxed);
}

}  // namespace ncclwatch
