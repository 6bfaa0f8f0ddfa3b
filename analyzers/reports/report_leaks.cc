#include "lifecycle_findings.h"
#include "reports.h"
#include "symbolizer.h"

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

// The first frame of a call site worth showing, and the whole stack.
struct Site {
  std::string first;                  // "train.py:43 (main) via c10d::NCCLComm::create (...)"
  std::vector<std::string> stack;     // native frames
  json python = json::array();        // [{"file", "line", "function"}], innermost first
};

// `recorded` is what the shim read at the call; it stands in when the module's file (and so its
// debug information) is not on this machine.
Site describe_native_site(Symbolizer* symbolizer, const ProcessTrace& p, const std::vector<uint64_t>& frames,
                          const std::string& recorded) {
  Site site;
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

// The Python line, where there is one, leads: it is the line the user wrote.
Site describe_site(Symbolizer* symbolizer, const ProcessTrace& p, const std::vector<uint64_t>& frames,
                   const std::string& recorded, const std::vector<PythonFrame>& python = {}) {
  Site site = describe_native_site(symbolizer, p, frames, recorded);
  for (const PythonFrame& f : python)
    site.python.push_back({{"file", valid_utf8(f.file)}, {"line", f.line}, {"function", valid_utf8(f.function)}});
  if (!python.empty())
    site.first = valid_utf8(python.front().describe_short()) + (site.first.empty() ? "" : " via " + site.first);
  return site;
}

// "/jobs/train.py:43 in make_groups, called from /jobs/train.py:90 in main": the full Python
// lines, for when the short one leaves the path or its callers in doubt.
std::string python_stack_text(const std::vector<PythonFrame>& frames) {
  std::string text;
  for (size_t i = 0; i < frames.size(); ++i) text += (i == 0 ? "" : i == 1 ? ", called from " : ", ") + valid_utf8(frames[i].describe());
  return text;
}

json memory_json(const CommMemoryFigure& m) {
  return m.known() ? json{{"bytes", m.bytes}, {"from", m.from}} : json(nullptr);
}

// ", 96 MiB of GPU memory when made (free memory change during the call)"
std::string memory_text(const CommMemoryFigure& m) {
  if (!m.known() || !m.bytes) return "";
  return fmt::format("{} of GPU memory when made ({})", bytes_text(m.bytes),
                     std::string_view(m.from) == "ncclCommMemStats" ? "ncclCommMemStats" : "free memory change during the call");
}

// The remedies for a set of leaked communicators: NVSHMEM's for those NVSHMEM made, PyTorch's
// when PyTorch made one of the others, else NCCL's.
std::vector<std::string> remedies(const std::vector<const CommInstance*>& leaked) {
  bool nvshmem = false, torch = false, plain = false;
  for (const CommInstance* c : leaked) {
    nvshmem |= c->nvshmem;
    torch |= c->torch && !c->nvshmem;
    plain |= !c->nvshmem;
  }
  std::vector<std::string> out;
  if (nvshmem) out.emplace_back(lifecycle::kNvshmemRemedy);
  if (torch) out.emplace_back(lifecycle::kTorchRemedy);
  else if (plain) out.emplace_back(lifecycle::kNcclRemedy);
  return out;
}

std::string describe_how_ended(const CommInstance& c) {
  switch (c.state) {
    case CommState::kReleasedAtExit:
      return fmt::format("released_at_exit ({} only after the program began exiting)", trace::api_name(c.release_api));
    case CommState::kDestroyHung: return fmt::format("destroy_hung ({} entered, never returned)", trace::api_name(c.release_api));
    case CommState::kLeaked: return "leaked (alive at exit)";
    default: return state_name(c.state);
  }
}

std::string ranks_list(const std::set<int>& ranks) { return ranks_text(std::vector<int32_t>(ranks.begin(), ranks.end())); }

}  // namespace

std::string ranks_text(const std::vector<int32_t>& ranks, size_t limit) {
  std::string out;
  size_t pieces = 0;
  for (size_t i = 0; i < ranks.size(); ++pieces) {
    size_t end = i + 1;  // one past the run of consecutive ranks starting at i
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (pieces == limit) {
      out += fmt::format(",... ({} ranks)", ranks.size());
      break;
    }
    if (end - i >= 3) {
      out += fmt::format("{}{}-{}", out.empty() ? "" : ",", ranks[i], ranks[end - 1]);
      i = end;
    } else {
      out += fmt::format("{}{}", out.empty() ? "" : ",", ranks[i]);
      ++i;
    }
  }
  return out;
}

std::string dump_json(const json& j, int indent) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }

void print_problems(const std::vector<TraceProblem>& problems) {
  for (const TraceProblem& p : problems)
    std::fprintf(stderr, "ncclwatch-report: %s: %s%s\n", p.path.c_str(), p.what.c_str(), p.fatal ? " (skipped)" : "");
}

namespace {

// What the leaks report finds, shared by its text and JSON forms and by the html report.
struct LeakScan {
  json leaks = json::array();
  json communicators = json::array();
  size_t leaked_comm_ranks = 0, leaked_resources = 0;
  // Text output groups one leaked identity across its ranks.
  struct Group {
    const CommInstance* first;
    const ProcessTrace* process;
    std::set<int> ranks;
    std::set<std::string> states;
    std::set<std::string> hosts;
  };
  std::map<uint64_t, Group> groups;
  std::vector<std::string> resource_lines;
  std::map<std::string, int> state_counts;
  std::map<uint64_t, std::set<int>> finalized_only;  // finalized, never destroyed: not a leak by contract

  // One communicator of each leaked identity.
  std::vector<const CommInstance*> leaked_identities() const {
    std::vector<const CommInstance*> out;
    for (const auto& [id, g] : groups) out.push_back(g.first);
    return out;
  }
};

LeakScan scan_leaks(const Job& job, Symbolizer* sym) {
  LeakScan scan;
  json& leaks = scan.leaks;
  json& communicators = scan.communicators;
  size_t& leaked_comm_ranks = scan.leaked_comm_ranks;
  size_t& leaked_resources = scan.leaked_resources;
  auto& groups = scan.groups;
  auto& resource_lines = scan.resource_lines;
  auto& state_counts = scan.state_counts;
  auto& finalized_only = scan.finalized_only;
  using Group = LeakScan::Group;

  for (const ProcessTrace& p : job.processes) {
    for (const CommInstance& c : p.comms) {
      ++state_counts[state_name(c.state)];
      Site site = describe_site(sym, p, c.stack, c.site, c.python_site);
      json entry = {{"comm", hex_id(c.id)},
                    {"rank", c.rank},
                    {"nranks", c.nranks},
                    {"api", trace::api_name(c.api)},
                    {"state", state_name(c.state)},
                    {"host", p.host()},
                    {"pid", p.pid()},
                    {"handle", fmt::format("0x{:x}", c.handle)},
                    {"device", c.device},
                    {"name", c.name},
                    {"parent", c.parent_id ? json(hex_id(c.parent_id)) : json(nullptr)},
                    {"init_ms", c.created_ns && c.begin_ns ? seconds_between(c.begin_ns, c.created_ns) * 1e3 : 0.0},
                    {"age_s", seconds_between(c.created_ns, end_of(p))},
                    {"created_at", site.first},
                    {"stack", site.stack},
                    {"python_site", site.python},
                    {"gpu_memory", memory_json(c.memory)},
                    {"gpu_memory_freed", memory_json(c.freed)},
                    {"made_by_nvshmem", c.nvshmem},
                    {"library", p.library_path(c)},
                    {"trace", p.path}};
      if (c.release_begin_ns) {
        entry["released_by"] = trace::api_name(c.release_api);
        entry["release_ms"] = c.release_end_ns ? json(seconds_between(c.release_begin_ns, c.release_end_ns) * 1e3) : json(nullptr);
      }
      communicators.push_back(entry);
      if (c.state == CommState::kFinalized) finalized_only[c.id].insert(c.rank);
      if (!is_leak(c.state)) continue;
      ++leaked_comm_ranks;
      json leak = entry;
      leak["kind"] = "communicator";
      leaks.push_back(leak);
      auto [it, inserted] = groups.try_emplace(c.id, Group{&c, &p, {}, {}, {}});
      it->second.ranks.insert(c.rank);
      it->second.states.insert(describe_how_ended(c));
      it->second.hosts.insert(p.host());
    }
    for (const ResourceInstance& r : p.resources) {
      if (r.released) continue;
      ++leaked_resources;
      Site site = describe_site(sym, p, r.stack, r.site, r.python_site);
      leaks.push_back({{"kind", trace::resource_kind(r.api)},
                       {"comm", r.comm_id ? json(hex_id(r.comm_id)) : json(nullptr)},
                       {"rank", r.rank},
                       {"nranks", nullptr},
                       {"api", trace::api_name(r.api)},
                       {"host", p.host()},
                       {"pid", p.pid()},
                       {"handle", fmt::format("0x{:x}", r.handle)},
                       {"bytes", r.bytes},
                       {"age_s", seconds_between(r.created_ns, end_of(p))},
                       {"created_at", site.first},
                       {"stack", site.stack},
                       {"python_site", site.python},
                       {"trace", p.path}});
      resource_lines.push_back(fmt::format("  {} 0x{:x}{} ({}) on {} pid {}{}: never released{}", trace::resource_kind(r.api),
                                           r.handle, r.bytes ? fmt::format(", {} bytes", r.bytes) : "",
                                           trace::api_name(r.api), p.host(), p.pid(),
                                           r.comm_id ? fmt::format(", comm {} rank {}", hex_id(r.comm_id), r.rank) : "",
                                           site.first.empty() ? "" : "; made at " + site.first));
    }
  }

  return scan;
}

// Communicators piling up and resources out of order (lifecycle_findings.h), as JSON and as the
// lines of the text report.
struct LifecycleReport {
  json pile_ups = json::array();
  json order = json::array();
  json peak_alive;
  std::vector<std::string> lines;
  bool findings() const { return !pile_ups.empty() || !order.empty(); }
};

// Module files of another build than the traced process loaded: said once, on stderr.
void say_other_builds(const Symbolizer& symbolizer) {
  for (const std::string& path : symbolizer.other_builds())
    fmt::print(stderr,
               "ncclwatch-report: {} here is another build than the traced process loaded (their build IDs differ): its "
               "frames are shown as module+offset, or as the shim read them at the call\n",
               valid_utf8(path));
}

LifecycleReport lifecycle_report(const Job& job, Symbolizer* sym) {
  LifecycleReport out;
  LifecycleFindings f = lifecycle_findings(job);
  for (const CommPileUp& pile : f.pile_ups) {
    Site site = describe_site(sym, *pile.process, pile.example->stack, pile.example->site, pile.example->python_site);
    std::string kept = pile.not_destroyed
                           ? fmt::format("{} of them never destroyed before exit", pile.not_destroyed)
                           : std::string("each burst made while the earlier ones were alive (all destroyed only at the end)");
    std::string text = fmt::format(
        "{} communicators made at {} (rank(s) {}, each), in {} bursts from {:.1f} s to {:.1f} s; {}, at most {} alive at once{}",
        pile.made, site.first, ranks_text(pile.ranks), pile.bursts, pile.first_s, pile.last_s, kept, pile.peak_alive,
        pile.memory_bytes ? fmt::format(", together holding {} of GPU memory when made", bytes_text(pile.memory_bytes)) : "");
    out.pile_ups.push_back({{"created_at", site.first}, {"stack", site.stack}, {"python_site", site.python}, {"made", pile.made},
                            {"gpu_memory_bytes", pile.memory_bytes},
                            {"not_destroyed", pile.not_destroyed}, {"bursts", pile.bursts}, {"peak_alive", pile.peak_alive},
                            {"first_s", pile.first_s}, {"last_s", pile.last_s}, {"ranks", pile.ranks}, {"text", text}});
    out.lines.push_back("  PILING UP: " + text + "; destroy each group you replace (ncclCommDestroy, or "
                        "torch.distributed.destroy_process_group(group))");
  }
  if (f.peak.process)
    out.peak_alive = {{"count", f.peak.count}, {"rank", world_rank(*f.peak.process)}, {"host", f.peak.process->host()},
                      {"pid", f.peak.process->pid()}, {"at_s", f.peak.at_s}};
  for (const ResourceOrder& o : f.order) {
    const ResourceInstance& r = *o.resource;
    const ProcessTrace& p = *o.process;
    Site made = describe_site(sym, p, r.stack, r.site, r.python_site);
    json entry = {{"kind", o.kind == ResourceOrder::Kind::kOutlivedComm ? "outlived_communicator" : "registered_twice"},
                  {"resource", trace::resource_kind(r.api)},
                  {"handle", fmt::format("0x{:x}", r.handle)},
                  {"buffer", r.buffer ? json(fmt::format("0x{:x}", r.buffer)) : json(nullptr)},
                  {"bytes", r.bytes},
                  {"comm", r.comm_id ? json(hex_id(r.comm_id)) : json(nullptr)},
                  {"rank", r.rank},
                  {"host", p.host()},
                  {"pid", p.pid()},
                  {"created_at", made.first},
                  {"python_site", made.python}};
    std::string what = fmt::format("{} 0x{:x}{} on comm {} rank {} (pid {})", trace::resource_kind(r.api), r.handle,
                                   r.buffer ? fmt::format(" of buffer 0x{:x}", r.buffer) : "", hex_id(r.comm_id), r.rank, p.pid());
    if (o.kind == ResourceOrder::Kind::kOutlivedComm) {
      std::string destroyed = o.comm ? describe_site(sym, p, o.comm->release_stack, o.comm->release_site, o.comm->release_python_site).first : "";
      entry["comm_released_at"] = destroyed;
      out.lines.push_back(fmt::format("  ORDER: {} was still held when its communicator was destroyed; made at {}{} — "
                                      "release it first ({})",
                                      what, made.first, destroyed.empty() ? "" : ", communicator destroyed at " + destroyed,
                                      trace::api_name(trace::releasing_api(r.api))));
    } else {
      Site first = describe_site(sym, p, o.earlier->stack, o.earlier->site, o.earlier->python_site);
      entry["earlier_handle"] = fmt::format("0x{:x}", o.earlier->handle);
      entry["earlier_created_at"] = first.first;
      out.lines.push_back(fmt::format("  ORDER: {} registers a buffer already registered on it (as 0x{:x}, made at {}); "
                                      "made at {} — NCCL does not count registrations: each takes memory of its own",
                                      what, o.earlier->handle, first.first, made.first));
    }
    out.order.push_back(entry);
  }
  return out;
}

// One row per leaked communicator rank instance and per unreleased resource, as `leaks --json`
// lists them. kind says which; resource_kind the resource's own kind (registration, window, ...).
// A resource row is named after the communicator it belongs to, so rows group by name.
void write_leaks_csv(const Job& job, const json& leaks) {
  std::map<std::string, std::string> name_of;  // comm id as the rows write it -> name
  for (const auto& [id, name] : comm_names(job)) name_of[hex_id(id)] = name;
  write_csv_row({"kind", "comm", "name", "rank", "nranks", "state", "api", "host", "pid", "trace", "created_at", "bytes",
                 "resource_kind"});
  for (const json& leak : leaks) {
    bool communicator = leak["kind"] == "communicator";
    std::string comm = csv_cell(leak["comm"]);
    std::string name = communicator ? leak["name"].get<std::string>() : name_of.count(comm) ? name_of[comm] : "";
    write_csv_row({communicator ? "communicator" : "resource", comm, name, csv_cell(leak["rank"]), csv_cell(leak["nranks"]),
                   communicator ? leak["state"].get<std::string>() : "", leak["api"].get<std::string>(),
                   leak["host"].get<std::string>(), csv_cell(leak["pid"]), leak["trace"].get<std::string>(),
                   leak["created_at"].get<std::string>(), communicator ? "" : csv_cell(leak["bytes"]),
                   communicator ? "" : leak["kind"].get<std::string>()});
  }
}

}  // namespace

int run_leaks(const Job& job, const Options& options) {
  if (job.processes.empty()) {
    std::fprintf(stderr, "ncclwatch-report: no usable trace files\n");
    return 2;
  }
  Symbolizer symbolizer;
  Symbolizer* sym = options.symbolize ? &symbolizer : nullptr;
  LeakScan scan = scan_leaks(job, sym);
  const json& leaks = scan.leaks;
  const json& communicators = scan.communicators;
  size_t leaked_comm_ranks = scan.leaked_comm_ranks, leaked_resources = scan.leaked_resources;
  const auto& groups = scan.groups;
  const auto& resource_lines = scan.resource_lines;
  const auto& state_counts = scan.state_counts;
  const auto& finalized_only = scan.finalized_only;

  LifecycleReport lifecycle = lifecycle_report(job, sym);
  bool found = leaked_comm_ranks + leaked_resources > 0 || lifecycle.findings();
  std::vector<UntracedCopy> untraced = untraced_copies(job);
  if (options.csv || options.json) say_other_builds(symbolizer);
  if (options.csv) {
    write_leaks_csv(job, leaks);
    // Standard output holds the table only: what would make "no leaks" untrue goes to stderr.
    for (const UntracedCopy& u : untraced)
      fmt::print(stderr, "ncclwatch-report: NOT TRACED in {} process(es): {}: {} (its communicators are not counted here)\n",
                 u.processes, u.path, u.reason);
    return found ? 1 : 0;
  }
  if (options.json) {
    json not_traced = json::array();
    for (const UntracedCopy& u : untraced)
      not_traced.push_back({{"path", u.path}, {"reason", u.reason}, {"processes", u.processes}});
    json out = {{"leaks", leaks}, {"communicators", communicators}, {"traces", job.processes.size()},
                {"not_traced", not_traced}, {"pile_ups", lifecycle.pile_ups}, {"order", lifecycle.order},
                {"peak_alive", lifecycle.peak_alive}, {"remedies", remedies(scan.leaked_identities())}};
    std::cout << dump_json(out, 2) << "\n";
    return found ? 1 : 0;
  }
  if (leaked_comm_ranks + leaked_resources == 0) {
    fmt::print("No leaks: {} communicator instance(s) in {} trace file(s), all released.\n", communicators.size(),
               job.processes.size());
  } else {
    fmt::print("{} communicator(s) never destroyed ({} rank instance(s)), {} NCCL resource(s) never released\n",
               groups.size(), leaked_comm_ranks, leaked_resources);
    for (const auto& [id, g] : groups) {
      const CommInstance& c = *g.first;
      std::string states;
      for (const std::string& s : g.states) {
        if (!states.empty()) states += "; ";
        states += s;
      }
      fmt::print("  comm {}{} ({}, {} ranks): {} on rank(s) {}\n", hex_id(id), c.name.empty() ? "" : " \"" + c.name + "\"",
                 trace::api_name(c.api), c.nranks, states, ranks_list(g.ranks));
      Site site = describe_site(sym, *g.process, c.stack, c.site, c.python_site);
      if (!site.first.empty()) fmt::print("      created at {}{}\n", site.first, c.nvshmem ? " (by NVSHMEM, for its teams)" : "");
      if (c.python_site.size() > 1) fmt::print("      python: {}\n", python_stack_text(c.python_site));
      if (std::string memory = memory_text(c.memory); !memory.empty()) fmt::print("      held {}\n", memory);
      if (g.process->has_several_libraries()) fmt::print("      by NCCL {}\n", g.process->library_path(c));
    }
    for (const std::string& line : resource_lines) fmt::print("{}\n", line);
    for (const std::string& remedy : remedies(scan.leaked_identities())) fmt::print("  remedy: {}\n", remedy);
  }
  for (const std::string& line : lifecycle.lines) fmt::print("{}\n", line);
  for (const auto& [id, ranks] : finalized_only)
    fmt::print("  note: comm {} on rank(s) {} was {}\n", hex_id(id), ranks_list(ranks), lifecycle::kFinalizedNote);
  for (const UntracedCopy& u : untraced)
    fmt::print("  NOT TRACED in {} process(es): {}: {} (its communicators are not counted here)\n", u.processes, u.path,
               u.reason);
  say_other_builds(symbolizer);
  std::string counts;
  for (const auto& [state, n] : state_counts) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, state);
  if (!counts.empty()) fmt::print("Communicator instances by end state: {}\n", counts);
  if (!lifecycle.peak_alive.is_null() && lifecycle.peak_alive["count"].get<uint64_t>() > 1)
    fmt::print("Communicators alive at once: at most {} (rank {}, {:.1f} s after it started)\n",
               lifecycle.peak_alive["count"].get<uint64_t>(), lifecycle.peak_alive["rank"].get<int>(),
               lifecycle.peak_alive["at_s"].get<double>());
  return found ? 1 : 0;
}

json leaks_json(const Job& job, bool symbolize) {
  Symbolizer symbolizer;
  Symbolizer* sym = symbolize ? &symbolizer : nullptr;
  LeakScan scan = scan_leaks(job, sym);
  json not_traced = json::array();
  for (const UntracedCopy& u : untraced_copies(job))
    not_traced.push_back({{"path", u.path}, {"reason", u.reason}, {"processes", u.processes}});
  json groups = json::array();
  bool torch = false;
  for (const auto& [id, g] : scan.groups) {
    const CommInstance& c = *g.first;
    torch |= c.torch;
    Site site = describe_site(sym, *g.process, c.stack, c.site, c.python_site);
    std::vector<int32_t> ranks(g.ranks.begin(), g.ranks.end());
    json group = {{"comm", hex_id(id)},
                  {"name", c.name},
                  {"api", trace::api_name(c.api)},
                  {"nranks", c.nranks},
                  {"ranks_text", ranks_text(ranks)},
                  {"states", g.states},
                  {"hosts", g.hosts},
                  {"created_at", site.first},
                  {"python_site", site.python},
                  {"made_by_nvshmem", c.nvshmem}};
    if (g.process->has_several_libraries()) group["library"] = g.process->library_path(c);
    groups.push_back(group);
  }
  LifecycleReport lifecycle = lifecycle_report(job, sym);
  say_other_builds(symbolizer);
  return {{"leaks", scan.leaks}, {"communicators", scan.communicators}, {"traces", job.processes.size()},
          {"not_traced", not_traced}, {"groups", groups}, {"torch", torch}, {"remedies", remedies(scan.leaked_identities())},
          {"pile_ups", lifecycle.pile_ups},
          {"order", lifecycle.order}, {"peak_alive", lifecycle.peak_alive}, {"lifecycle_lines", lifecycle.lines}};
}

}  // namespace ncclwatch::report
