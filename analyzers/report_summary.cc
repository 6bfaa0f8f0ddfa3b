// summary: one screen about the whole job: ranks, hosts, communicators, leaks, slowest ops,
// stalls, mismatches (even when nothing hung), environment differences, and the first thing to
// look at.
#include "reports.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

namespace ncclwatch::report {

using nlohmann::json;

int run_summary(const Options& options) {
  JobAnalysis a = analyze_job(options.inputs, {});
  print_problems(a.job.problems);
  const Job& job = a.job;
  if (job.processes.empty()) {
    std::fprintf(stderr, "ncclwatch-report: no usable trace files\n");
    return 2;
  }
  std::set<std::string> hosts;
  std::set<uint64_t> comm_ids;
  std::map<std::string, int> states;
  size_t leaked_ranks = 0, open_resources = 0, killed = 0;
  uint64_t lost = 0;
  std::set<uint64_t> leaked_ids;
  std::set<int> world_ranks;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const ProcessTrace& p = job.processes[i];
    hosts.insert(p.host());
    lost += p.lost_records;
    if (!p.process_end) ++killed;
    // Every rank this process holds in its largest communicator (one process may drive several GPUs).
    int32_t widest = 0;
    for (const RankComm& c : a.ops[i].comms) widest = std::max(widest, c.nranks);
    for (const RankComm& c : a.ops[i].comms)
      if (c.rank >= 0 && c.nranks == widest) world_ranks.insert(c.rank);
    for (const CommInstance& c : p.comms) {
      if (c.state != CommState::kInitFailed) comm_ids.insert(c.id);
      ++states[state_name(c.state)];
      if (is_leak(c.state)) {
        ++leaked_ranks;
        leaked_ids.insert(c.id);
      }
    }
    for (const ResourceInstance& r : p.resources) open_resources += !r.released;
  }
  for (const CommOps& c : a.comms) comm_ids.insert(c.comm_id);
  comm_ids.erase(0);
  bool leaks = leaked_ranks + open_resources > 0;
  bool hang_findings = false;
  json hang = hang_json(a, hang_findings);
  json latency = latency_json(a);

  // The slowest ops: latency rows by their worst steady-state time (first calls are set-up).
  std::vector<json> rows;
  for (const json& r : latency["rows"])
    if (!r["max_us"].is_null()) rows.push_back(r);
  std::sort(rows.begin(), rows.end(), [](const json& x, const json& y) { return x["max_us"].get<double>() > y["max_us"].get<double>(); });
  if (rows.size() > 5) rows.resize(5);
  size_t mismatched_seqs = 0, missing = 0, absent = 0, stalls = 0, divergences = 0;
  std::vector<std::string> stragglers;  // hang's own words, so both reports say the same
  for (const json& c : hang["comms"]) {
    for (const json& r : c["stragglers"]["ranks"])
      if (r["finding"].get<bool>()) stragglers.push_back(r["text"].get<std::string>());
    mismatched_seqs += c["mismatched_seqs"].get<size_t>();
    missing += c["missing"].size();
    absent += c["absent_count"].get<size_t>();
    stalls += c["stall_records"].get<size_t>();
    divergences += c["divergence"].size();
  }
  // Which NCCL copies the traces cover, grouped across processes.
  struct LibraryUse {
    std::string version, status, how;
    int processes = 0;
  };
  std::map<std::string, LibraryUse> libraries;  // by path
  for (const ProcessTrace& p : job.processes) {
    for (const NcclLibrary& lib : p.libraries) {
      LibraryUse& use = libraries[lib.path];
      // attached wins over unused: one process may call a copy another only loaded
      if (use.status.empty() || lib.status == "attached" || lib.status == "not traced") {
        use.version = lib.version;
        use.status = lib.status;
        use.how = lib.status == "attached" ? lib.reached : lib.reason;
      }
      ++use.processes;
    }
  }
  std::vector<UntracedCopy> untraced = untraced_copies(job);

  std::string first_look;
  if (hang_findings) first_look = hang["verdict"].get<std::string>();
  else if (leaks) first_look = "leaks: run `ncclwatch-report leaks`";
  else if (!untraced.empty())
    first_look = "not traced: " + untraced.front().path + " (" + untraced.front().reason + "): its NCCL calls are in no trace";
  else if (!stragglers.empty() || !hang["environment"].empty()) first_look = hang["verdict"].get<std::string>();
  else first_look = "nothing: no leak, hang or mismatch found";
  // A copy we could not trace is a finding: "no leaks" cannot be vouched for.
  bool findings = leaks || hang_findings || !untraced.empty();

  if (options.json) {
    json out = {{"traces", job.processes.size()},
                {"ranks", world_ranks.size()},
                {"hosts", hosts},
                {"communicators", comm_ids.size()},
                {"states", states},
                {"leaked_communicators", leaked_ids.size()},
                {"leaked_instances", leaked_ranks},
                {"unreleased_resources", open_resources},
                {"processes_without_final_record", killed},
                {"lost_records", lost},
                {"mismatched_seqs", mismatched_seqs},
                {"missing", missing},
                {"absent_ranks", absent},
                {"stall_records", stalls},
                {"divergences", divergences},
                {"stragglers", stragglers},
                {"slowest_ops", rows},
                {"environment", hang["environment"]},
                {"verdict", hang["verdict"]},
                {"first_look", first_look}};
    json nccl = json::array();
    for (const auto& [path, use] : libraries)
      nccl.push_back({{"path", path}, {"version", use.version}, {"status", use.status}, {"how", use.how},
                      {"processes", use.processes}});
    out["nccl_libraries"] = nccl;
    std::cout << dump_json(out, 2) << "\n";
    return findings ? 1 : 0;
  }
  fmt::print("ncclwatch summary: {} process trace(s), {} rank(s) on {} host(s), {} communicator(s)\n", job.processes.size(),
             world_ranks.size(), hosts.size(), comm_ids.size());
  std::string by_state;
  for (const auto& [s, n] : states) by_state += fmt::format("{}{} {}", by_state.empty() ? "" : ", ", n, s);
  if (!by_state.empty()) fmt::print("  communicator instances: {}\n", by_state);
  for (const auto& [path, use] : libraries) {
    if (use.status == "not traced")
      fmt::print("  NOT TRACED: {} in {} process(es): {}\n", path, use.processes, use.how);
    else
      fmt::print("  NCCL {} {}: {} in {} process(es){}\n", nccl_version_text(use.version), path, use.status, use.processes,
                 use.how.empty() ? "" : " (" + use.how + ")");
  }
  if (killed) fmt::print("  {} process(es) ended without a final record (killed or crashed)\n", killed);
  if (lost) fmt::print("  {} record(s) were lost while tracing\n", lost);
  if (leaks)
    fmt::print("  LEAKS: {} communicator(s) never destroyed, {} resource(s) never released — run `ncclwatch-report leaks`\n",
               leaked_ids.size(), open_resources);
  else
    fmt::print("  no leaks: every communicator and resource was released\n");
  if (mismatched_seqs) fmt::print("  MISMATCHES: ranks passed different arguments to {} collective(s) — run `ncclwatch-report hang`\n", mismatched_seqs);
  if (missing || absent) fmt::print("  HANG: {} rank(s) stopped short, {} rank(s) left no trace — run `ncclwatch-report hang`\n", missing, absent);
  if (divergences) fmt::print("  {} rank(s) departed from their peers' program\n", divergences);
  if (stalls) fmt::print("  {} stall record(s) from the watchdog\n", stalls);
  for (const std::string& s : stragglers) fmt::print("  STRAGGLER: {}\n", s);
  for (const json& e : hang["environment"]) fmt::print("  environment differs across ranks: {}\n", e["key"].get<std::string>());
  if (!rows.empty()) {
    fmt::print("  slowest ops:\n");
    for (const json& r : rows)
      fmt::print("    {} {} B on comm {}: max {:.1f} us, p50 {:.1f} us ({}, {} calls){}\n", r["op"].get<std::string>(),
                 r["bytes"].get<uint64_t>(), r["comm"].get<std::string>(), r["max_us"].get<double>(),
                 r["p50_us"].get<double>(), r["timing"].get<std::string>() == "host" ? "host enqueue" : r["timing"].get<std::string>(),
                 r["calls"].get<uint64_t>(),
                 // a first call worth naming: slower than any steady one (NCCL's connection set-up)
                 r["first_calls"]["max_us"].is_null() || r["first_calls"]["max_us"].get<double>() <= r["max_us"].get<double>()
                     ? ""
                     : fmt::format("; first call up to {:.1f} ms (set-up)", r["first_calls"]["max_us"].get<double>() / 1e3));
  }
  fmt::print("  look first at: {}\n", first_look);
  return findings ? 1 : 0;
}

}  // namespace ncclwatch::report
