#include "reports/commands.h"
#include "reports/input.h"
#include "reports/leak_report.h"
#include "reports/output.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <set>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using trace::Api;

int64_t end_of(const ProcessTrace& p) { return p.process_end ? p.process_end->time_ns : p.last_time_ns; }

// Seconds from `from` to `to`, timestamps of a file that may be damaged (see wrap_sub).
double seconds_between(int64_t from, int64_t to) { return static_cast<double>(wrap_sub(to, from)) / 1e9; }

// `recorded` is what the shim read at the call; it stands in when the module's file (and so its
// debug information) is not on this machine.
SiteText describe_native_site(Symbolizer* symbolizer, const ProcessTrace& p, const std::vector<uint64_t>& frames,
                              const std::string& recorded) {
  SiteText site;
  bool first_has_function = false;
  for (uint64_t address : frames) {
    std::string text = fmt::format("0x{:x}", address);
    if (symbolizer) {
      Frame frame = symbolizer->resolve(p, address);
      if (site.stack.empty()) first_has_function = !frame.function.empty();
      text = frame.describe();
    }
    if (site.first.empty()) site.first = text;
    site.stack.push_back(std::move(text));
  }
  if (!first_has_function && !recorded.empty() && recorded.find(" (") != std::string::npos) site.first = recorded;
  return site;
}

}  // namespace

// The Python line, where there is one, leads: it is the line the user wrote.
SiteText describe_site(Symbolizer* symbolizer, const ProcessTrace& p, const std::vector<uint64_t>& frames,
                       const std::string& recorded, const std::vector<PythonFrame>& python) {
  SiteText site = describe_native_site(symbolizer, p, frames, recorded);
  site.python = python;
  if (!python.empty())
    site.first = valid_utf8(python.front().describe_short()) + (site.first.empty() ? "" : " via " + site.first);
  return site;
}

namespace {

// "/jobs/train.py:43 in make_groups, called from /jobs/train.py:90 in main": the full Python
// lines, for when the short one leaves the path or its callers in doubt.
std::string python_stack_text(const std::vector<PythonFrame>& frames) {
  std::string text;
  for (size_t i = 0; i < frames.size(); ++i) text += (i == 0 ? "" : i == 1 ? ", called from " : ", ") + valid_utf8(frames[i].describe());
  return text;
}

json python_json(const std::vector<PythonFrame>& frames) {
  json out = json::array();
  for (const PythonFrame& f : frames)
    out.push_back({{"file", valid_utf8(f.file)}, {"line", f.line}, {"function", valid_utf8(f.function)}});
  return out;
}

json memory_json(const CommMemoryFigure& m) {
  return m.known() ? json{{"bytes", m.bytes}, {"from", m.from}} : json(nullptr);
}

// "96 MiB of GPU memory when made (free memory change during the call)", or with set-up calls
// after: "128 MiB of GPU memory: 96 MiB when made, 32 MiB more at 4 set-up calls (ncclCommMemStats)"
std::string memory_text(const CommInstance& c) {
  auto source = [](const CommMemoryFigure& m, const char* calls = "the call") {
    std::string_view from = m.from;
    if (from == "ncclCommMemStats") return std::string("ncclCommMemStats");
    return fmt::format("{} during {}{}", from == "process_memory" ? "this process's GPU memory change" : "free memory change",
                       calls, m.shared_device ? ", ambiguous: other processes used the GPU" : "");
  };
  CommMemoryFigure held = c.held();
  if (!held.known() || (!held.bytes && !c.suspended())) return "";
  if (c.suspended())
    return fmt::format("{} of GPU memory while suspended ({}; ncclCommResume takes back what the suspend gave)",
                       bytes_text(held.bytes), source(held));
  if (!c.set_up_bytes() || !c.memory.known())
    return fmt::format("{} of GPU memory when made ({})", bytes_text(held.bytes), source(held));
  return fmt::format("{} of GPU memory: {} when made, {} more at {} set-up call(s) ({})", bytes_text(held.bytes),
                     bytes_text(c.memory.bytes), bytes_text(c.set_up_bytes()), c.set_up_calls(),
                     source(held, "the calls"));
}

json set_up_json(const CommInstance& c) {
  json calls = json::array();
  for (const MemoryReading& r : c.readings)
    if (!r.suspends_or_resumes())
      calls.push_back({{"op", trace::api_name(r.api)}, {"count", r.count}, {"peer", r.peer},
                       {"held_bytes", r.held_bytes ? json(*r.held_bytes) : json(nullptr)},
                       {"taken_bytes", r.taken_bytes ? json(*r.taken_bytes) : json(nullptr)}});
  return calls;
}

std::string describe_how_ended(const CommInstance& c, const ProcessTrace& p) {
  if (c.state == CommState::kEndedInTeardown)  // no final record: the time inside is only "at least"
    return fmt::format("{} ({} during {}: {}{:.1f} s inside, under the {:.0f} s a hang takes)", state_name(c.state),
                       ended_by_kill(p) ? "killed" : "ended", trace::api_name(c.teardown_api()), p.process_end ? "" : "at least ",
                       static_cast<double>(c.teardown_inside_ns) / 1e9, static_cast<double>(lifecycle::kTeardownHangNs) / 1e9);
  if (lifecycle::is_teardown_hang(c.state))
    return fmt::format("{} ({} entered, never returned: {:.1f} s inside until {})", state_name(c.state),
                       trace::api_name(c.teardown_api()), static_cast<double>(c.teardown_inside_ns) / 1e9, trace_end_text(p));
  switch (c.state) {
    case CommState::kReleasedAtExit:
      return fmt::format("released_at_exit ({} only after the program began exiting)", trace::api_name(c.release_api));
    case CommState::kLeaked: return "leaked (alive at exit)";
    default: return state_name(c.state);
  }
}

std::string ranks_list(const std::set<int>& ranks) { return ranks_text(std::vector<int32_t>(ranks.begin(), ranks.end())); }

}  // namespace

namespace {

json comm_json(const CommInstanceRow& row) {
  const CommInstance& c = *row.comm;
  const ProcessTrace& p = *row.process;
  json entry = {{"comm", hex_id(c.id)},
                {"rank", c.rank},
                {"world_rank", row.world_rank},
                {"nranks", c.nranks},
                {"api", trace::api_name(c.api)},
                {"state", state_name(c.state)},
                {"host", p.host()},
                {"pid", p.pid()},
                {"handle", fmt::format("0x{:x}", c.handle)},
                {"device", c.device},
                {"name", c.known_name()},
                {"process_group", c.process_group.empty() ? json(nullptr)
                                                          : json{{"name", c.process_group.name}, {"desc", c.process_group.desc}}},
                {"parent", c.parent_id ? json(hex_id(c.parent_id)) : json(nullptr)},
                {"init_ms", c.created_ns && c.begin_ns ? seconds_between(c.begin_ns, c.created_ns) * 1e3 : 0.0},
                {"age_s", seconds_between(c.created_ns, end_of(p))},
                {"created_at", row.site.first},
                {"stack", row.site.stack},
                {"python_site", python_json(row.site.python)},
                {"gpu_memory", memory_json(c.memory)},
                {"gpu_memory_freed", memory_json(c.freed)},
                {"gpu_memory_held", memory_json(c.held())},
                {"set_up_calls", set_up_json(c)},
                {"suspended", c.suspended()},
                {"made_by_nvshmem", c.nvshmem},
                {"library", p.library_path(c)},
                {"creation_unrecorded", c.creation_unrecorded},
                {"trace", p.path}};
  if (lifecycle::ended_inside_teardown(c.state)) {
    entry["teardown_call"] = trace::api_name(c.teardown_api());
    entry["teardown_inside_s"] = static_cast<double>(c.teardown_inside_ns) / 1e9;
    entry["teardown_until"] = trace_end_text(p);
  }
  if (c.release_begin_ns) {
    entry["released_by"] = trace::api_name(c.release_api);
    entry["release_ms"] = c.release_end_ns ? json(seconds_between(c.release_begin_ns, c.release_end_ns) * 1e3) : json(nullptr);
  }
  return entry;
}

json resource_json(const OpenResourceRow& row) {
  const ResourceInstance& r = *row.resource;
  const ProcessTrace& p = *row.process;
  return {{"kind", trace::resource_kind(r.api)},
          {"comm", r.comm_id ? json(hex_id(r.comm_id)) : json(nullptr)},
          {"rank", r.rank},
          {"nranks", nullptr},
          {"api", trace::api_name(r.api)},
          {"host", p.host()},
          {"pid", p.pid()},
          {"handle", fmt::format("0x{:x}", r.handle)},
          {"bytes", r.bytes},
          {"age_s", seconds_between(r.created_ns, end_of(p))},
          {"created_at", row.site.first},
          {"stack", row.site.stack},
          {"python_site", python_json(row.site.python)},
          {"trace", p.path}};
}

// What leaked, in file order: each process's communicator instances, then its resources (both
// lists are in file order, and processes lie in one vector).
template <typename OnComm, typename OnResource>
void for_each_leak(const LeakReport& report, OnComm on_comm, OnResource on_resource) {
  size_t c = 0, r = 0;
  while (c < report.leaked_instances.size() || r < report.open_resources.size()) {
    const CommInstanceRow* comm =
        c < report.leaked_instances.size() ? &report.communicators[report.leaked_instances[c]] : nullptr;
    const OpenResourceRow* resource = r < report.open_resources.size() ? &report.open_resources[r] : nullptr;
    if (comm && (!resource || comm->process <= resource->process)) {
      on_comm(*comm);
      ++c;
    } else {
      on_resource(*resource);
      ++r;
    }
  }
}

// The remedies for a set of leaked communicators, by the rule the exit alert follows.
std::vector<std::string> remedies(const std::vector<LeakedComm>& leaked) {
  lifecycle::LeakMakers makers;
  for (const LeakedComm& l : leaked) makers.add(l.first->nvshmem, l.first->torch, l.first->state);
  lifecycle::Remedies chosen = lifecycle::remedies_for(makers);
  return {chosen.begin(), chosen.end()};
}

// One more rank inside a teardown that never returned, with its communicator and call.
void note_teardown_hang(std::vector<TeardownHang>& hangs, const CommInstance& c, const ProcessTrace& p) {
  auto it = std::find_if(hangs.begin(), hangs.end(),
                         [&](const TeardownHang& h) { return h.comm_id == c.id && h.api == c.teardown_api(); });
  if (it == hangs.end()) it = hangs.insert(hangs.end(), TeardownHang{c.id, c.known_name(), c.teardown_api(), {}, 0, {}});
  it->ranks.insert(c.rank);
  double inside_s = static_cast<double>(c.teardown_inside_ns) / 1e9;
  if (inside_s >= it->longest_inside_s) {
    it->longest_inside_s = inside_s;
    it->until = trace_end_text(p);
  }
}

std::string pile_up_text(const PileUpFinding& f) {
  const CommPileUp& pile = f.pile;
  std::string kept = pile.not_destroyed
                         ? fmt::format("{} of them never destroyed before exit", pile.not_destroyed)
                         : std::string("each burst made while the earlier ones were alive (all destroyed only at the end)");
  return fmt::format(
      "{} communicators made at {} (rank(s) {}, each), in {} bursts from {:.1f} s to {:.1f} s; {}, at most {} alive at once{}",
      pile.made, f.site.first, ranks_text(pile.ranks), pile.bursts, pile.first_s, pile.last_s, kept, pile.peak_alive,
      pile.memory_bytes ? fmt::format(", together holding {} of GPU memory", bytes_text(pile.memory_bytes)) : "");
}

// "window 0x... of buffer 0x... on comm ... rank 0 (pid 12)"
std::string order_subject(const OrderFinding& f) {
  const ResourceInstance& r = *f.order.resource;
  return fmt::format("{} 0x{:x}{} on comm {} rank {} (pid {})", trace::resource_kind(r.api), r.handle,
                     r.buffer ? fmt::format(" of buffer 0x{:x}", r.buffer) : "", hex_id(r.comm_id), r.rank,
                     f.order.process->pid());
}

json order_json(const OrderFinding& f) {
  const ResourceInstance& r = *f.order.resource;
  const ProcessTrace& p = *f.order.process;
  bool outlived = f.order.kind == ResourceOrder::Kind::kOutlivedComm;
  json entry = {{"kind", outlived ? "outlived_communicator" : "registered_twice"},
                {"resource", trace::resource_kind(r.api)},
                {"handle", fmt::format("0x{:x}", r.handle)},
                {"buffer", r.buffer ? json(fmt::format("0x{:x}", r.buffer)) : json(nullptr)},
                {"bytes", r.bytes},
                {"comm", r.comm_id ? json(hex_id(r.comm_id)) : json(nullptr)},
                {"rank", r.rank},
                {"host", p.host()},
                {"pid", p.pid()},
                {"created_at", f.made.first},
                {"python_site", python_json(f.made.python)}};
  if (outlived) {
    entry["comm_released_at"] = f.comm_released_at;
  } else {
    entry["earlier_handle"] = fmt::format("0x{:x}", f.order.earlier->handle);
    entry["earlier_created_at"] = f.earlier.first;
  }
  return entry;
}

// One row per leaked communicator rank instance and per unreleased resource, as `leaks --json`
// lists them. kind says which; resource_kind the resource's own kind (registration, window, ...).
// A resource row is named after the communicator it belongs to, so rows group by name.
void write_leaks_csv(const Job& job, const LeakReport& report) {
  std::map<uint64_t, std::string> name_of = comm_names(job);
  write_csv_row({"kind", "comm", "name", "rank", "nranks", "state", "api", "host", "pid", "trace", "created_at", "bytes",
                 "resource_kind"});
  for_each_leak(
      report,
      [](const CommInstanceRow& row) {
        const CommInstance& c = *row.comm;
        write_csv_row({"communicator", hex_id(c.id), c.known_name(), std::to_string(c.rank), std::to_string(c.nranks),
                       state_name(c.state), trace::api_name(c.api), row.process->host(),
                       std::to_string(row.process->pid()), row.process->path, row.site.first, "", ""});
      },
      [&](const OpenResourceRow& row) {
        const ResourceInstance& r = *row.resource;
        auto name = r.comm_id ? name_of.find(r.comm_id) : name_of.end();
        write_csv_row({"resource", r.comm_id ? hex_id(r.comm_id) : "", name == name_of.end() ? "" : name->second,
                       std::to_string(r.rank), "", "", trace::api_name(r.api), row.process->host(),
                       std::to_string(row.process->pid()), row.process->path, row.site.first, std::to_string(r.bytes),
                       trace::resource_kind(r.api)});
      });
}

void print_leaks_text(const LeakReport& report) {
  if (!report.leaks()) {
    print_text("No leaks: {} communicator instance(s) in {} trace file(s), all released.\n", report.communicators.size(),
               report.traces);
  } else {
    print_text("{} communicator(s) never destroyed ({} rank instance(s)), {} NCCL resource(s) never released\n",
               report.leaked.size(), report.leaked_instances.size(), report.open_resources.size());
    for (const LeakedComm& l : report.leaked) {
      const CommInstance& c = *l.first;
      std::string states;
      for (const std::string& s : l.states) states += (states.empty() ? "" : "; ") + s;
      // A communicator narrower than the world (a new_group, a split) is known by its world ranks.
      std::string world = l.world_ranks.empty() || l.world_ranks == std::set<int32_t>(l.ranks.begin(), l.ranks.end())
                              ? ""
                              : " (world rank(s) " + ranks_list(l.world_ranks) + ")";
      std::string group = c.process_group.empty() ? "" : ", " + c.process_group.describe();
      print_text("  comm {}{} ({}, {} ranks{}): {} on rank(s) {}{}\n", hex_id(l.id), c.name.empty() ? "" : " \"" + c.name + "\"",
                 trace::api_name(c.api), c.nranks, group, states, ranks_list(l.ranks), world);
      if (!l.site.first.empty())
        print_text("      created at {}{}\n", l.site.first, c.nvshmem ? lifecycle::kNvshmemMadeNote : "");
      if (c.creation_unrecorded)
        print_text("      created at: unknown (its records were lost to a full trace; the shim's list of communicators "
                   "alive at exit names it)\n");
      if (c.python_site.size() > 1) print_text("      python: {}\n", python_stack_text(c.python_site));
      if (std::string memory = memory_text(c); !memory.empty()) print_text("      held {}\n", memory);
      if (l.process->has_several_libraries()) print_text("      by NCCL {}\n", l.process->library_path(c));
    }
    for (const OpenResourceRow& row : report.open_resources) {
      const ResourceInstance& r = *row.resource;
      print_text("  {} 0x{:x}{} ({}) on {} pid {}{}: never released{}\n", trace::resource_kind(r.api), r.handle,
                 r.bytes ? fmt::format(", {} bytes", r.bytes) : "", trace::api_name(r.api), row.process->host(),
                 row.process->pid(), r.comm_id ? fmt::format(", comm {} rank {}", hex_id(r.comm_id), r.rank) : "",
                 row.site.first.empty() ? "" : "; made at " + row.site.first);
    }
    for (const std::string& remedy : report.remedies) print_text("{}{}\n", lifecycle::kRemedyLead, remedy);
  }
  for (const TeardownHang& h : report.teardown_hangs) print_text("  TEARDOWN HUNG: {}\n", teardown_hang_text(h));
  for (const std::string& line : lifecycle_lines(report)) print_text("{}\n", line);
  for (const auto& [id, ranks] : report.finalized_only)
    print_text("  note: comm {} on rank(s) {} was {}\n", hex_id(id), ranks_list(ranks), lifecycle::kFinalizedNote);
  for (const UntracedCopy& u : report.untraced)
    print_text("  NOT TRACED in {} process(es): {}: {} (its communicators are not counted here)\n", u.processes, u.path,
               u.reason);
  for (const std::string& line : lost_history_lines(report)) print_text("{}\n", line);
}

}  // namespace

LeakReport leak_report(const Job& job, bool symbolize) {
  Symbolizer symbolizer;
  Symbolizer* sym = symbolize ? &symbolizer : nullptr;
  LeakReport report;
  report.traces = job.processes.size();
  std::map<uint64_t, LeakedComm> leaked;
  for (const ProcessTrace& p : job.processes) {
    int32_t process_rank = world_rank(p);  // a look at all of its communicators: once per process
    for (const CommInstance& c : p.comms) {
      ++report.state_counts[state_name(c.state)];
      const CommInstanceRow& row = report.communicators.emplace_back(
          CommInstanceRow{&p, &c, describe_site(sym, p, c.stack, c.site, c.python_site), process_rank});
      if (c.state == CommState::kFinalized) report.finalized_only[c.id].insert(c.rank);
      if (!is_leak(c.state)) continue;
      report.leaked_instances.push_back(report.communicators.size() - 1);
      add_saturated(report.leaked_memory_bytes, c.held().bytes);
      auto [it, inserted] = leaked.try_emplace(c.id, LeakedComm{c.id, &c, &p, {}, {}, {}, {}, row.site});
      it->second.ranks.insert(c.rank);
      if (row.world_rank >= 0) it->second.world_ranks.insert(row.world_rank);
      it->second.states.insert(describe_how_ended(c, p));
      if (lifecycle::is_teardown_hang(c.state)) note_teardown_hang(report.teardown_hangs, c, p);
      it->second.hosts.insert(p.host());
    }
    for (const ResourceInstance& r : p.resources)
      if (!r.released) report.open_resources.push_back({&p, &r, describe_site(sym, p, r.stack, r.site, r.python_site)});
    if (p.lost_records)
      report.lost_histories.push_back({&p, p.lost_records, p.live_at_exit && p.live_at_exit->complete});
  }
  for (auto& [id, l] : leaked) {
    report.torch |= l.first->torch;
    report.leaked.push_back(std::move(l));
  }
  report.remedies = remedies(report.leaked);

  LifecycleFindings f = lifecycle_findings(job);
  for (const CommPileUp& pile : f.pile_ups) {
    PileUpFinding& finding = report.pile_ups.emplace_back(PileUpFinding{
        pile, describe_site(sym, *pile.process, pile.example->stack, pile.example->site, pile.example->python_site), ""});
    finding.text = pile_up_text(finding);
  }
  report.peak = f.peak;
  for (const ResourceOrder& o : f.order) {
    const ResourceInstance& r = *o.resource;
    const ProcessTrace& p = *o.process;
    OrderFinding& finding = report.order.emplace_back(OrderFinding{o, describe_site(sym, p, r.stack, r.site, r.python_site), "", {}});
    if (o.kind == ResourceOrder::Kind::kOutlivedComm && o.comm)
      finding.comm_released_at = describe_site(sym, p, o.comm->release_stack, o.comm->release_site, o.comm->release_python_site).first;
    if (o.kind == ResourceOrder::Kind::kRegisteredTwice)
      finding.earlier = describe_site(sym, p, o.earlier->stack, o.earlier->site, o.earlier->python_site);
  }
  report.untraced = untraced_copies(job);
  report.other_builds = symbolizer.other_builds();
  return report;
}

std::string teardown_hang_text(const TeardownHang& h) {
  std::vector<int32_t> ranks(h.ranks.begin(), h.ranks.end());
  return fmt::format("{} entered on rank(s) {} of comm {}{} and never returned ({:.1f} s until {})", trace::api_name(h.api),
                     ranks_text(ranks), hex_id(h.comm_id), h.name.empty() ? "" : " \"" + h.name + "\"", h.longest_inside_s,
                     h.until);
}

std::vector<std::string> lost_history_lines(const LeakReport& report) {
  std::vector<std::string> lines;
  for (const LostHistory& lost : report.lost_histories)
    lines.push_back(fmt::format(
        "  note: the trace of pid {} on {} lost {} record(s) (it reached NCCLWATCH_MAX_MB, or the disk was full): {}",
        lost.process->pid(), lost.process->host(), lost.records,
        lost.ends_from_exit_list
            ? "its communicators' end states come from the shim's list of those alive at exit"
            : "communicators it shows alive may have been released in records that were lost"));
  return lines;
}

std::vector<std::string> lifecycle_lines(const LeakReport& report) {
  std::vector<std::string> lines;
  for (const PileUpFinding& f : report.pile_ups)
    lines.push_back("  PILING UP: " + f.text + "; destroy each group you replace (ncclCommDestroy, or "
                    "torch.distributed.destroy_process_group(group))");
  for (const OrderFinding& f : report.order) {
    if (f.order.kind == ResourceOrder::Kind::kOutlivedComm)
      lines.push_back(fmt::format("  ORDER: {} was still held when its communicator was destroyed; made at {}{} — "
                                  "release it first ({})",
                                  order_subject(f), f.made.first,
                                  f.comm_released_at.empty() ? "" : ", communicator destroyed at " + f.comm_released_at,
                                  trace::api_name(trace::releasing_api(f.order.resource->api))));
    else
      lines.push_back(fmt::format("  ORDER: {} registers a buffer already registered on it (as 0x{:x}, made at {}); "
                                  "made at {} — NCCL does not count registrations: each takes memory of its own",
                                  order_subject(f), f.order.earlier->handle, f.earlier.first, f.made.first));
  }
  return lines;
}

namespace {

// `leaks --json` but its two long lists, "leaks" and "communicators" (see leak_rows).
json head_json(const LeakReport& report) {
  json not_traced = json::array(), pile_ups = json::array(), order = json::array(), lost = json::array(),
       teardown_hangs = json::array();
  for (const TeardownHang& h : report.teardown_hangs)
    teardown_hangs.push_back({{"comm", hex_id(h.comm_id)}, {"name", h.name}, {"call", trace::api_name(h.api)},
                              {"ranks", std::vector<int>(h.ranks.begin(), h.ranks.end())},
                              {"longest_inside_s", h.longest_inside_s}, {"until", h.until}, {"text", teardown_hang_text(h)}});
  for (const LostHistory& l : report.lost_histories)
    lost.push_back({{"host", l.process->host()}, {"pid", l.process->pid()}, {"records", l.records},
                    {"ends_from_exit_list", l.ends_from_exit_list}, {"trace", l.process->path}});
  for (const UntracedCopy& u : report.untraced)
    not_traced.push_back({{"path", u.path}, {"reason", u.reason}, {"processes", u.processes}});
  for (const PileUpFinding& f : report.pile_ups) {
    const CommPileUp& pile = f.pile;
    pile_ups.push_back({{"created_at", f.site.first}, {"stack", f.site.stack}, {"python_site", python_json(f.site.python)},
                        {"made", pile.made}, {"gpu_memory_bytes", pile.memory_bytes}, {"not_destroyed", pile.not_destroyed},
                        {"bursts", pile.bursts}, {"peak_alive", pile.peak_alive}, {"first_s", pile.first_s},
                        {"last_s", pile.last_s}, {"ranks", pile.ranks}, {"text", f.text}});
  }
  for (const OrderFinding& f : report.order) order.push_back(order_json(f));
  json peak_alive;
  if (report.peak.process)
    peak_alive = {{"count", report.peak.count}, {"rank", world_rank(*report.peak.process)},
                  {"host", report.peak.process->host()}, {"pid", report.peak.process->pid()}, {"at_s", report.peak.at_s}};
  return {{"traces", report.traces}, {"not_traced", not_traced}, {"pile_ups", pile_ups}, {"order", order},
          {"peak_alive", peak_alive}, {"remedies", report.remedies}, {"lost_records", lost},
          {"teardown_hangs", teardown_hangs}};
}

// The entries of "leaks", in file order (see for_each_leak).
std::vector<std::function<json()>> leak_rows(const LeakReport& report) {
  std::vector<std::function<json()>> rows;
  for_each_leak(
      report,
      [&](const CommInstanceRow& row) {
        rows.emplace_back([&row] {
          json leak = comm_json(row);
          leak["kind"] = "communicator";
          return leak;
        });
      },
      [&](const OpenResourceRow& row) { rows.emplace_back([&row] { return resource_json(row); }); });
  return rows;
}

// `leaks --json`, written one entry of its long lists at a time: as one tree, a job's hundred
// thousand communicators take gigabytes.
void write_leaks_json(const LeakReport& report) {
  std::vector<std::function<json()>> leaks = leak_rows(report);
  write_json_streamed(std::cout, head_json(report),
                      {{"leaks", leaks.size(), [&](size_t i) { return leaks[i](); }},
                       {"communicators", report.communicators.size(),
                        [&](size_t i) { return comm_json(report.communicators[i]); }}});
  std::cout << "\n";
}

}  // namespace

json to_json(const LeakReport& report) {
  json leaks = json::array(), communicators = json::array();
  for (const auto& row : leak_rows(report)) leaks.push_back(row());
  for (const CommInstanceRow& row : report.communicators) communicators.push_back(comm_json(row));
  json out = head_json(report);
  // Moved in, not listed in a braced list: that would copy every communicator's entry once more.
  out["leaks"] = std::move(leaks);
  out["communicators"] = std::move(communicators);
  return out;
}

void say_other_builds(const LeakReport& report) {
  for (const std::string& path : report.other_builds)
    say("{} here is another build than the traced process loaded (their build IDs differ): its frames are shown as "
        "module+offset, or as the shim read them at the call",
        valid_utf8(path));
}

int run_leaks(const Options& options) {
  std::optional<Job> job = load_job_or_explain(options.inputs);
  return job ? run_leaks(*job, options) : kNoUsableInput;
}

int run_leaks(const Job& job, const Options& options) {
  LeakReport report = leak_report(job, options.symbolize);
  if (options.csv) {
    say_other_builds(report);
    write_leaks_csv(job, report);
    // Standard output holds the table only: what would make "no leaks" untrue goes to stderr.
    for (const UntracedCopy& u : report.untraced)
      say("NOT TRACED in {} process(es): {}: {} (its communicators are not counted here)", u.processes, u.path, u.reason);
  } else if (options.json) {
    say_other_builds(report);
    write_leaks_json(report);
  } else {
    print_leaks_text(report);
    say_other_builds(report);
    std::string counts;
    for (const auto& [state, n] : report.state_counts) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, state);
    if (!counts.empty()) print_text("Communicator instances by end state: {}\n", counts);
    for (const CommInstanceRow& row : report.communicators)
      if (row.comm->state == CommState::kEndedInTeardown)
        print_text("  note: comm {} rank {}: {}\n", hex_id(row.comm->id), row.comm->rank, describe_how_ended(*row.comm, *row.process));
    if (report.peak.process && report.peak.count > 1)
      print_text("Communicators alive at once: at most {} (rank {}, {:.1f} s after it started)\n", report.peak.count,
                 world_rank(*report.peak.process), report.peak.at_s);
  }
  return report.findings() ? 1 : 0;
}

}  // namespace ncclwatch::report
