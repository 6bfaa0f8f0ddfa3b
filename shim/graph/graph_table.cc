#include "graph/graph_table.h"

#include "comms/comms.h"
#include "process/process.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <algorithm>
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

// Executable graphs holding NCCL ops, for the launch path: an open-addressing table read without a
// lock. Writers (instantiate, update, destroy) hold g_mutex. A slot's exec is 0 (never used),
// kRemoved, or an exec handle; its ops are published before the handle and withdrawn before it.
constexpr size_t kExecSlots = 4096;  // execs with NCCL ops alive at once; more are not followed
constexpr uint64_t kRemoved = ~uint64_t{0};
struct ExecSlot {
  std::atomic<uint64_t> exec{0};
  std::atomic<const GraphOps*> ops{nullptr};
};
ExecSlot g_exec_slots[kExecSlots];

size_t exec_home(uint64_t exec) { return static_cast<size_t>((exec >> 4) * 0x9e3779b97f4a7c15ull >> 52) % kExecSlots; }

// Captures, graphs and execs change at set-up time, not per op: one mutex guards the writers.
std::mutex g_mutex;
struct Tables {
  std::unordered_map<uint64_t, std::shared_ptr<GraphOps>> open_captures;  // by capture id
  std::unordered_map<uint64_t, std::shared_ptr<GraphOps>> graphs;         // by CUgraph
  // Every graph an exec was made from, kept for the life of the process: the launch path holds
  // plain pointers to them (a few hundred bytes a graph). Each distinct list of NCCL ops is kept
  // once (by_content): a capture of the same ops again becomes the one kept before.
  std::vector<std::shared_ptr<GraphOps>> kept;
  std::unordered_multimap<uint64_t, std::shared_ptr<GraphOps>> by_content;
  uint32_t next_index = 1;
};

// At most this many distinct graphs are kept (a few MB); past it, new ones are not followed.
constexpr size_t kMaxKeptGraphs = 16384;

// Records for a repeated capture or update: the first ones, then at each power of two, so a loop
// that re-captures every step writes a few dozen records in a million steps, each with its count.
bool worth_a_record(uint64_t repeats) { return repeats <= 2 || (repeats & (repeats - 1)) == 0; }

uint64_t content_hash(const std::vector<CapturedOp>& ops) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over each field: the struct has padding
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  };
  for (const CapturedOp& op : ops) {
    mix(reinterpret_cast<uintptr_t>(op.track));
    mix(op.comm);
    mix(static_cast<uint64_t>(op.api));
    mix(op.count);
    mix(op.datatype | (uint64_t{op.flags} << 8));
    mix(static_cast<uint32_t>(op.redop) | (uint64_t{static_cast<uint32_t>(op.peer)} << 32));
  }
  return h;
}

bool same_ops(const std::vector<CapturedOp>& a, const std::vector<CapturedOp>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const CapturedOp& x, const CapturedOp& y) {
    return x.track == y.track && x.comm == y.comm && x.api == y.api && x.count == y.count &&
           x.datatype == y.datatype && x.redop == y.redop && x.peer == y.peer && x.flags == y.flags;
  });
}
Tables* g_tables = nullptr;  // made at the first capture of an NCCL op; never freed (exit path)

// Under g_mutex: `graph` stays alive for the launch path's plain pointers. False when no more
// graphs can be kept.
bool keep(Tables& t, const std::shared_ptr<GraphOps>& graph) {
  if (graph->kept) return true;
  if (t.kept.size() >= kMaxKeptGraphs) return false;
  graph->kept = true;
  t.kept.push_back(graph);
  t.by_content.emplace(content_hash(graph->ops), graph);
  return true;
}

// Under g_mutex: the graph kept before with exactly these ops, if any.
std::shared_ptr<GraphOps> kept_with_same_ops(Tables& t, const GraphOps& g) {
  auto [first, last] = t.by_content.equal_range(content_hash(g.ops));
  for (auto it = first; it != last; ++it)
    if (same_ops(it->second->ops, g.ops)) return it->second;
  return nullptr;
}

// Under g_mutex. The slot holding `exec`, or nullptr.
ExecSlot* find_exec_slot(uint64_t exec) {
  for (size_t i = 0, at = exec_home(exec); i < kExecSlots; ++i, at = (at + 1) % kExecSlots) {
    uint64_t held = g_exec_slots[at].exec.load(std::memory_order_relaxed);
    if (held == exec) return &g_exec_slots[at];
    if (held == 0) return nullptr;
  }
  return nullptr;
}

// Under g_mutex: `exec` now runs `ops` (replacing what it ran). False when the table is full.
bool set_exec(uint64_t exec, const GraphOps* ops) {
  if (ExecSlot* slot = find_exec_slot(exec)) {
    slot->ops.store(ops, std::memory_order_release);
    return true;
  }
  for (size_t i = 0, at = exec_home(exec); i < kExecSlots; ++i, at = (at + 1) % kExecSlots) {
    uint64_t held = g_exec_slots[at].exec.load(std::memory_order_relaxed);
    if (held != 0 && held != kRemoved) continue;
    g_exec_slots[at].ops.store(ops, std::memory_order_relaxed);
    // Release pairs with the acquire in graph_ops_of_exec(): the ops are visible with the handle.
    g_exec_slots[at].exec.store(exec, std::memory_order_release);
    g_nccl_execs.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

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

constexpr const char* kTooManyGraphs =
    "more distinct CUDA graphs holding NCCL ops were made than the shim keeps (16384); this one's launches are not recorded";

void say_graphs_lost() noexcept {
  notice_once(Notice::kGraphsLost,
              "ncclwatch: an internal error while following CUDA graphs; some graph replays go unrecorded");
}

// Under g_mutex.
void forget_exec(uint64_t exec) {
  ExecSlot* slot = find_exec_slot(exec);
  if (!slot) return;
  slot->ops.store(nullptr, std::memory_order_release);  // a launch racing this finds no ops
  slot->exec.store(kRemoved, std::memory_order_release);
  g_nccl_execs.fetch_sub(1, std::memory_order_relaxed);
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
    if (std::shared_ptr<GraphOps> same = kept_with_same_ops(*g_tables, *g)) {
      // The same NCCL ops again (a loop that re-captures each step): the graph is the one kept.
      g_tables->graphs[graph] = same;
      if (worth_a_record(++same->recaptures))
        write_graph_record(keys::kCaptured, *same, graph, 0,
                           "the same NCCL ops captured again (" + std::to_string(same->recaptures) +
                               " time(s) so far, capture " + std::to_string(capture_id) + "; recorded at powers of two)");
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
    if (!keep(*g_tables, it->second)) {
      write_graph_record(keys::kNotFollowed, *it->second, graph, exec, kTooManyGraphs);
      return;
    }
    if (!set_exec(exec, it->second.get())) {
      write_graph_record(keys::kNotFollowed, *it->second, graph, exec,
                         "more executable graphs holding NCCL ops are alive than the shim follows (4096)");
      return;
    }
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
    ExecSlot* was = find_exec_slot(exec);
    if (from != g_tables->graphs.end() && !keep(*g_tables, from->second)) {
      write_graph_record(keys::kNotFollowed, *from->second, graph, exec, kTooManyGraphs);
      if (was) forget_exec(exec);
    } else if (from != g_tables->graphs.end()) {
      GraphOps& to = *from->second;
      bool same_as_before = was && was->ops.load(std::memory_order_relaxed) == &to;
      if (set_exec(exec, &to) && (!same_as_before || worth_a_record(++to.updates)))
        write_graph_record(keys::kUpdated, to, graph, exec,
                           same_as_before ? "updated to the same NCCL ops again (" + std::to_string(to.updates) +
                                                " time(s) so far; recorded at powers of two)"
                                          : std::string());
    } else if (was) {
      // A graph none of whose ops the shim saw captured: it may hold NCCL ops all the same.
      if (const GraphOps* ops = was->ops.load(std::memory_order_relaxed))
        write_graph_record(keys::kNotFollowed, *ops, graph, exec,
                           "cuGraphExecUpdate gave the exec a graph without NCCL ops the shim saw captured; its "
                           "launches are no longer recorded");
      forget_exec(exec);
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
  forget_exec(exec);
}

const GraphOps* graph_ops_of_exec(uint64_t exec) noexcept {
  if (exec == 0 || exec == kRemoved) return nullptr;
  for (size_t i = 0, at = exec_home(exec); i < kExecSlots; ++i, at = (at + 1) % kExecSlots) {
    // Acquire pairs with the release in set_exec(): the ops stored before the handle are seen.
    uint64_t held = g_exec_slots[at].exec.load(std::memory_order_acquire);
    if (held == exec) return g_exec_slots[at].ops.load(std::memory_order_acquire);
    if (held == 0) return nullptr;
  }
  return nullptr;
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
  for (ExecSlot& slot : g_exec_slots) {
    slot.exec.store(0, std::memory_order_relaxed);
    slot.ops.store(nullptr, std::memory_order_relaxed);
  }
  g_open_captures.store(0, std::memory_order_relaxed);
  g_nccl_execs.store(0, std::memory_order_relaxed);
}

}  // namespace ncclwatch
