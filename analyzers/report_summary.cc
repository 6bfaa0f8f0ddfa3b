// summary: one screen about the whole job. Grows as the analyzers do.
#include "reports.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <map>
#include <set>

namespace ncclwatch::report {

int run_summary(const Job& job, const Options& options) {
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
  for (const ProcessTrace& p : job.processes) {
    hosts.insert(p.host());
    lost += p.lost_records;
    if (!p.process_end) ++killed;
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
  bool findings = leaked_ranks + open_resources > 0;
  if (options.json) {
    nlohmann::json out = {{"traces", job.processes.size()},
                          {"hosts", hosts},
                          {"communicators", comm_ids.size()},
                          {"states", states},
                          {"leaked_communicators", leaked_ids.size()},
                          {"leaked_instances", leaked_ranks},
                          {"unreleased_resources", open_resources},
                          {"processes_without_final_record", killed},
                          {"lost_records", lost}};
    std::cout << out.dump(2) << "\n";
    return findings ? 1 : 0;
  }
  fmt::print("ncclwatch summary: {} process trace(s) on {} host(s), {} communicator(s)\n", job.processes.size(),
             hosts.size(), comm_ids.size());
  std::string by_state;
  for (const auto& [s, n] : states) by_state += fmt::format("{}{} {}", by_state.empty() ? "" : ", ", n, s);
  if (!by_state.empty()) fmt::print("  communicator instances: {}\n", by_state);
  if (killed) fmt::print("  {} process(es) ended without a final record (killed or crashed)\n", killed);
  if (lost) fmt::print("  {} record(s) were lost while tracing\n", lost);
  if (findings)
    fmt::print("  LEAKS: {} communicator(s) never destroyed, {} resource(s) never released — run `ncclwatch-report leaks`\n",
               leaked_ids.size(), open_resources);
  else
    fmt::print("  no leaks: every communicator and resource was released\n");
  return findings ? 1 : 0;
}

}  // namespace ncclwatch::report
