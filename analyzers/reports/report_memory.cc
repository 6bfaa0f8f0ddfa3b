// memory: where the GPU memory NCCL holds goes, from the communicators' figures the shim read (when
// made, after each set-up call, when released; gpu timing mode): per communicator rank, per
// process (its peak and when, what the unreleased ones held at the end) and per host, and the idle
// communicators: alive, holding at least --idle-min-mib, with no op for --idle-after until their
// release or the end of the trace. Exit 1 when one is idle.
#include "reports/column_table.h"
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/leak_report.h"
#include "reports/output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ncclwatch::report {
namespace {

using nlohmann::json;

struct MemoryRow {
  const ProcessMemory* process;
  const CommMemory* memory;
  std::string name;
  std::string made_at;  // "train.py:37 (build) via ...", as `leaks` says it
  const CommInstance& comm() const { return *memory->comm; }
};

Cell bytes_or_none(const CommMemoryFigure& m) { return m.known() ? Cell(m.bytes) : Cell(); }

const Column<MemoryRow> kMemoryColumns[] = {
    {.json = "host", .csv = "host", .value = [](const MemoryRow& r) -> Cell { return r.process->process->host(); }},
    {.json = "pid", .csv = "pid", .value = [](const MemoryRow& r) -> Cell { return int64_t{r.process->process->pid()}; }},
    {.json = "world_rank", .csv = "world_rank", .text = "rank", .width = 5,
     .value = [](const MemoryRow& r) -> Cell { return int64_t{r.process->rank}; }},
    {.json = "comm", .csv = "comm", .text = "comm", .width = -18,
     .value = [](const MemoryRow& r) -> Cell { return hex_id(r.comm().id); },
     .shown = [](const MemoryRow& r) -> Cell { return r.name.empty() ? hex_id(r.comm().id) : r.name; }},
    {.json = "name", .csv = "name", .value = [](const MemoryRow& r) -> Cell { return r.name; }, .json_if_empty = false},
    {.json = "rank", .csv = "comm_rank", .value = [](const MemoryRow& r) -> Cell { return int64_t{r.comm().rank}; }},
    {.json = "nranks", .csv = "nranks", .value = [](const MemoryRow& r) -> Cell { return int64_t{r.comm().nranks}; }},
    {.json = "api", .csv = "api", .value = [](const MemoryRow& r) -> Cell { return std::string(trace::api_name(r.comm().api)); }},
    {.json = "state", .csv = "state", .text = "state", .width = -17,
     .value = [](const MemoryRow& r) -> Cell { return std::string(state_name(r.comm().state)); }},
    {.json = "made_bytes", .csv = "made_bytes", .text = "made MiB", .width = 9,
     .value = [](const MemoryRow& r) { return bytes_or_none(r.comm().memory); },
     .shown = [](const MemoryRow& r) -> Cell { return r.comm().memory.known() ? Cell(r.comm().memory.bytes / 1048576.0) : Cell(); }},
    {.json = "set_up_calls", .csv = "set_up_calls", .text = "set-ups", .width = 8,
     .value = [](const MemoryRow& r) -> Cell { return uint64_t{r.comm().set_up_calls()}; }},
    {.json = "set_up_bytes", .csv = "set_up_bytes", .text = "+MiB", .width = 7,
     .value = [](const MemoryRow& r) -> Cell { return r.comm().set_up_bytes(); },
     .shown = [](const MemoryRow& r) -> Cell { return r.comm().set_up_bytes() / 1048576.0; }},
    {.json = "held_bytes", .csv = "held_bytes", .text = "held MiB", .width = 9,
     .value = [](const MemoryRow& r) -> Cell { return r.memory->held.bytes; },
     .shown = [](const MemoryRow& r) -> Cell { return r.memory->held.bytes / 1048576.0; }},
    {.json = "from", .csv = "from", .value = [](const MemoryRow& r) -> Cell { return std::string(r.memory->held.from); }},
    {.json = "shared_gpu", .csv = "shared_gpu",
     .value = [](const MemoryRow& r) -> Cell { return std::string(r.memory->held.shared_device ? "yes" : "no"); }},
    {.json = "freed_bytes", .csv = "freed_bytes", .value = [](const MemoryRow& r) { return bytes_or_none(r.comm().freed); }},
    {.json = "suspended", .csv = "suspended", .text = "susp", .width = -4,
     .value = [](const MemoryRow& r) -> Cell { return std::string(r.comm().suspended() ? "yes" : "no"); }},
    {.json = "idle_s", .csv = "idle_s", .text = "idle s", .width = 8, .value = [](const MemoryRow& r) -> Cell { return r.memory->idle_s(); }},
    {.json = "idle", .csv = "idle", .text = "idle", .width = -4,
     .value = [](const MemoryRow& r) -> Cell { return std::string(r.memory->idle ? "yes" : "no"); }},
    {.json = "created_at", .csv = "created_at", .text = "created at", .value = [](const MemoryRow& r) -> Cell { return r.made_at; }},
};

std::vector<MemoryRow> memory_rows(const std::vector<ProcessMemory>& memory, const std::map<uint64_t, std::string>& names,
                                   bool symbolize) {
  Symbolizer symbolizer;
  std::vector<MemoryRow> rows;
  for (const ProcessMemory& p : memory)
    for (const CommMemory& c : p.comms) {
      auto name = names.find(c.comm->id);
      SiteText site = describe_site(symbolize ? &symbolizer : nullptr, *p.process, c.comm->stack, c.comm->site, c.comm->python_site);
      rows.push_back({&p, &c, name == names.end() ? c.comm->known_name() : name->second, site.first});
    }
  return rows;
}

const char* point_name(const HeldPoint& point) {
  if (!point.after) return "made";
  if (point.after->suspends_or_resumes()) return point.after->suspends() ? "suspend" : "resume";
  return "set_up";
}

// Its memory over time: when made, then after each set-up call, suspend and resume (seconds after
// its process started), each with what it held from then on.
json readings_json(const ProcessMemory& p, const CommInstance& c) {
  auto after_start = [&](int64_t ns) { return static_cast<double>(wrap_sub(ns, p.process->header.start_mono_ns)) / 1e9; };
  json out = json::array();
  for (const HeldPoint& point : c.held_over_time()) {
    json& row = out.emplace_back(json{{"after_start_s", after_start(point.time_ns)}, {"point", point_name(point)},
                                      {"held_bytes", point.held_bytes}, {"from", point.from}});
    if (!point.after) continue;
    const MemoryReading& r = *point.after;
    if (!r.suspends_or_resumes()) row.update({{"op", trace::api_name(r.api)}, {"count", r.count}});
    row["nccl_count_bytes"] = r.held_bytes ? json(*r.held_bytes) : json(nullptr);
    row["taken_bytes"] = r.taken_bytes ? json(*r.taken_bytes) : json(nullptr);
    if (r.taken_bytes) row["taken_by"] = r.taken_by_process ? "process" : r.shared_device ? "shared_device" : "device";
  }
  return out;
}

json process_json(const ProcessMemory& p) {
  return {{"host", p.process->host()}, {"pid", p.process->pid()}, {"world_rank", p.rank}, {"peak_bytes", p.peak_bytes},
          {"peak_after_start_s", p.peak_after_start_s()}, {"held_at_end_bytes", p.held_at_end_bytes},
          {"unreleased_communicators", p.unreleased_comms}, {"idle_bytes", p.idle_bytes}, {"idle_communicators", p.idle_comms}};
}

// Per host: the sum of its processes' peaks (an upper bound of what NCCL held there at once) and of
// what they held at the end.
struct HostMemory {
  uint64_t peaks = 0, held_at_end = 0;
  size_t processes = 0;
};

std::map<std::string, HostMemory> by_host(const std::vector<ProcessMemory>& memory) {
  std::map<std::string, HostMemory> hosts;
  for (const ProcessMemory& p : memory) {
    HostMemory& h = hosts[p.process->host()];
    add_saturated(h.peaks, p.peak_bytes);
    add_saturated(h.held_at_end, p.held_at_end_bytes);
    ++h.processes;
  }
  return hosts;
}

void print_idle(const std::vector<MemoryRow>& rows, const IdleSettings& idle) {
  uint64_t bytes = 0;
  size_t count = 0;
  for (const MemoryRow& r : rows)
    if (r.memory->idle) add_saturated(bytes, r.memory->held.bytes), ++count;
  if (!count) {
    print_text("no idle communicator: none held {} or more with no op for {:.0f} s\n", bytes_text(idle.min_bytes), idle.idle_after_s);
    return;
  }
  print_text("IDLE: {} communicator rank(s) held {} with no op for {:.0f} s or more:\n", count, bytes_text(bytes), idle.idle_after_s);
  for (const MemoryRow& r : rows) {
    if (!r.memory->idle) continue;
    print_text("  comm {} rank {}/{} on rank {} (pid {}): {}, idle {:.1f} s {}; created at {}\n",
               r.name.empty() ? hex_id(r.comm().id) : fmt::format("\"{}\" ({})", r.name, hex_id(r.comm().id)), r.comm().rank,
               r.comm().nranks, r.process->rank, r.process->process->pid(), bytes_text(r.memory->held.bytes), r.memory->idle_s(),
               r.memory->released ? "until destroyed" : "until the end of the trace", r.made_at);
  }
  print_text("  remedy: {}\n", kIdleRemedy);
}

// Each suspend and resume: what it gave back or took again (the change in what the communicator holds).
void print_suspends(const std::vector<MemoryRow>& rows) {
  for (const MemoryRow& r : rows) {
    std::vector<HeldPoint> points = r.comm().held_over_time();
    for (size_t i = 1; i < points.size(); ++i) {
      const MemoryReading* reading = points[i].after;
      if (!reading || !reading->suspends_or_resumes()) continue;
      uint64_t before = points[i - 1].held_bytes, now = points[i].held_bytes;
      print_text("{} comm {} rank {}/{} on rank {} at {:.1f} s: {} {} (holding {} after)\n",
                 reading->suspends() ? "SUSPEND:" : "RESUME: ", r.name.empty() ? hex_id(r.comm().id) : r.name, r.comm().rank,
                 r.comm().nranks, r.process->rank,
                 static_cast<double>(wrap_sub(points[i].time_ns, r.process->process->header.start_mono_ns)) / 1e9,
                 reading->suspends() ? "gave back" : "took back", bytes_text(before > now ? before - now : now - before),
                 bytes_text(now));
    }
  }
}

// Figures by the device's free memory while other processes used the same GPU: theirs may count too.
void print_ambiguous(const std::vector<MemoryRow>& rows) {
  std::set<int> ranks;
  for (const MemoryRow& r : rows)
    if (r.memory->held.shared_device) ranks.insert(r.process->rank);
  if (ranks.empty()) return;
  print_text("AMBIGUOUS: on rank(s) {} other processes used the same GPU, and the shim could read only the device's free "
             "memory (NVML did not list this process): their allocations may count in what creation and release took "
             "and gave back, and set-up calls' changes are left out\n",
             fmt::join(ranks, ", "));
}

}  // namespace

int run_memory(const Options& options, const IdleSettings& idle) {
  AnalysisOptions ao;
  ao.align_clocks = false;  // each communicator's idle stretch is its own process's
  std::optional<JobAnalysis> analysis = load_job_or_explain(options.inputs, ao);
  if (!analysis) return kNoUsableInput;
  std::vector<ProcessMemory> memory = nccl_memory_by_process(analysis->job, analysis->ops, idle);
  std::vector<MemoryRow> rows = memory_rows(memory, comm_names(analysis->job), options.symbolize);
  bool any_idle = std::any_of(rows.begin(), rows.end(), [](const MemoryRow& r) { return r.memory->idle; });
  if (options.json) {
    json processes = json::array(), comms = json::array(), hosts = json::object();
    for (const ProcessMemory& p : memory) processes.push_back(process_json(p));
    for (const MemoryRow& r : rows) {
      comms.push_back(json_of<MemoryRow>(kMemoryColumns, r));
      comms.back()["idle"] = r.memory->idle;  // booleans in JSON ("yes"/"no" in text and CSV)
      comms.back()["shared_gpu"] = r.memory->held.shared_device;
      comms.back()["readings"] = readings_json(*r.process, r.comm());
    }
    for (const auto& [host, h] : by_host(memory))
      hosts[host] = {{"processes", h.processes}, {"peaks_bytes", h.peaks}, {"held_at_end_bytes", h.held_at_end}};
    std::cout << dump_json({{"processes", processes}, {"communicators", comms}, {"hosts", hosts},
                            {"idle_after_s", idle.idle_after_s}, {"idle_min_bytes", idle.min_bytes}},
                           2)
              << "\n";
    return any_idle ? 1 : 0;
  }
  if (options.csv) {
    write_csv<MemoryRow>(kMemoryColumns, rows);
    return any_idle ? 1 : 0;
  }
  if (memory.empty()) {
    print_text("no GPU memory figures in these traces (the shim reads them in gpu timing mode only)\n");
    return 0;
  }
  for (const ProcessMemory& p : memory)
    print_text("rank {} (pid {} on {}): NCCL held up to {} ({:.1f} s after it started){}\n", p.rank, p.process->pid(),
               p.process->host(), bytes_text(p.peak_bytes), p.peak_after_start_s(),
               p.unreleased_comms ? fmt::format("; {} at the end by {} communicator(s) never destroyed",
                                                bytes_text(p.held_at_end_bytes), p.unreleased_comms)
                                  : "; every communicator released");
  for (const auto& [host, h] : by_host(memory))
    print_text("host {}: {} process(es), peaks adding up to {}, {} held at the end\n", host, h.processes, bytes_text(h.peaks),
               bytes_text(h.held_at_end));
  fmt::print("\n{}\n", text_table<MemoryRow>(kMemoryColumns, rows));
  print_suspends(rows);
  print_ambiguous(rows);
  print_idle(rows, idle);
  return any_idle ? 1 : 0;
}

}  // namespace ncclwatch::report
