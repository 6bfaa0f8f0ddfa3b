// advice: the job's NCCL settings worth a look (settings_advice.h), each with what it does, where
// it was set and, for a forced NCCL_ALGO / NCCL_PROTO, what it cost where the traces measured it.
// Exit 1 when there is any.
#include "reports/analysis_json.h"
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

namespace ncclwatch::report {
namespace {

using nlohmann::json;

json to_json(const ForcedChoiceCost& c) {
  return {{"op", std::string(trace::api_name(c.api))}, {"bytes", c.bytes},
          {"nranks", c.nranks},                         {"forced_plan", c.forced_plan},
          {"own_plan", c.own_plan},                     {"forced_us", c.forced_us},
          {"own_us", c.own_us},                         {"added_us_per_call", c.added_us()},
          {"clock", c.clock},                           {"forced_calls", c.forced_calls},
          {"kernel_added_us_per_call", c.kernel_added_us ? json(*c.kernel_added_us) : json(nullptr)},
          {"same_plan", c.same_plan()}};
}

json to_json(const SettingAdvice& a) {
  json costs = json::array();
  for (const ForcedChoiceCost& c : a.costs) costs.push_back(to_json(c));
  json out = {{"setting", a.setting}, {"value", a.value}, {"processes", a.processes},
              {"hosts", a.hosts},     {"why", a.why}};
  if (a.setting == "NCCL_ALGO" || a.setting == "NCCL_PROTO") {
    out["costs"] = costs;
    out["cost_measured"] = !a.cost_unmeasured;
  }
  return out;
}

std::string clock_name(const std::string& clock) {
  return clock == "kernel" ? "kernel time by NCCL's GPU timer" : "time by CUDA events";
}

void print(const SettingAdvice& a) {
  // Hosts joined first: print_text makes each argument printable (they come from the traces).
  print_text("{}={}  ({} process{} on {})\n  {}\n", a.setting, a.value, a.processes, a.processes == 1 ? "" : "es",
             fmt::format("{}", fmt::join(a.hosts, ", ")), a.why);
  for (const ForcedChoiceCost& c : a.costs)
    print_text("  {} {} B on {} rank{}: {} {:.1f} us per call against NCCL's own {} {:.1f} us ({}): {:+.1f} us per "
               "call over {} call{}{}{}\n",
               trace::api_name(c.api), c.bytes, c.nranks, c.nranks == 1 ? "" : "s",
               c.forced_plan.empty() ? "forced" : c.forced_plan, c.forced_us, c.own_plan.empty() ? "choice" : c.own_plan,
               c.own_us, clock_name(c.clock), c.added_us(), c.forced_calls, c.forced_calls == 1 ? "" : "s",
               c.kernel_added_us ? fmt::format("; its kernels {:+.1f} us by NCCL's GPU timer", *c.kernel_added_us) : "",
               c.same_plan() ? " (the plan NCCL chose itself: the difference is between the runs, not the setting's)" : "");
  if (a.cost_unmeasured)
    print_text("  its cost is not measured: no op of its sizes ran with NCCL's own choice in these traces (give "
               "ncclwatch-report the traces of a run without it too)\n");
}

}  // namespace

int run_advice(const Options& options) {
  AnalysisOptions ao;
  ao.align_clocks = false;
  std::optional<JobAnalysis> analysis = load_job_or_explain(options.inputs, ao);
  if (!analysis) return kNoUsableInput;
  std::vector<SettingAdvice> advice = settings_advice(*analysis, latency_table(*analysis));
  if (options.json) {
    json list = json::array();
    for (const SettingAdvice& a : advice) list.push_back(to_json(a));
    std::cout << dump_json(json{{"advice", list}}, 2) << "\n";
  } else if (advice.empty()) {
    print_text("no NCCL setting of this job to look at\n");
  } else {
    for (const SettingAdvice& a : advice) print(a);
  }
  return advice.empty() ? 0 : 1;
}

}  // namespace ncclwatch::report
