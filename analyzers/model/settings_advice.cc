#include "model/settings_advice.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace ncclwatch::model {
namespace {

bool is_on(const std::string& v) { return !v.empty() && v != "0"; }

std::optional<uint64_t> whole(const std::string& v) {
  if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::strtoull(v.c_str(), nullptr, 10);
}

struct JobFacts {
  size_t hosts = 0;
};

// One rule: the variable, whether its value harms this job, and why. Checked against NCCL's own
// sources (2.28.9, 2.30.7) where it says what NCCL does.
struct Rule {
  const char* setting;
  std::function<bool(const std::string& value, const JobFacts&)> applies;
  const char* why;
};

const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      {"NCCL_IB_DISABLE", [](const std::string& v, const JobFacts& f) { return is_on(v) && f.hosts > 1; },
       "InfiniBand is off in a job on several hosts: their traffic goes over TCP sockets"},
      {"NCCL_P2P_DISABLE", [](const std::string& v, const JobFacts&) { return is_on(v); },
       "GPU peer-to-peer is off: GPUs of one host exchange through host memory, not NVLink or PCIe peer copies"},
      {"NCCL_SHM_DISABLE", [](const std::string& v, const JobFacts&) { return is_on(v); },
       "the shared-memory transport is off: where peer-to-peer is not possible, ranks of one host go through the "
       "network transport"},
      {"NCCL_BUFFSIZE", [](const std::string& v, const JobFacts&) { auto n = whole(v); return n && *n < (1u << 20); },
       "a buffer under 1 MiB per channel and peer (NCCL's default is 4 MiB): large ops take many more, smaller steps"},
      {"NCCL_LL_THRESHOLD", [](const std::string&, const JobFacts&) { return true; },
       "NCCL 2.28 and 2.30 do not read it: it has no effect (NCCL_PROTO chooses protocols)"},
      {"NCCL_TREE_THRESHOLD", [](const std::string&, const JobFacts&) { return true; },
       "NCCL 2.28 and 2.30 do not read it: it has no effect (NCCL_ALGO chooses algorithms)"},
      {"NCCL_MAX_RINGS", [](const std::string&, const JobFacts&) { return true; },
       "NCCL 2.28 and 2.30 do not read it: it has no effect (NCCL_MAX_NCHANNELS limits channels)"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", [](const std::string& v, const JobFacts&) { return v == "0"; },
       "PyTorch's watchdog does not abort a failed or timed-out collective: a hang stays a hang, with no error"},
      {"NCCL_ASYNC_ERROR_HANDLING", [](const std::string& v, const JobFacts&) { return v == "0"; },
       "(PyTorch's older name of TORCH_NCCL_ASYNC_ERROR_HANDLING) its watchdog does not abort a failed or timed-out "
       "collective: a hang stays a hang, with no error"},
      {"NCCL_ALGO", [](const std::string& v, const JobFacts&) { return !v.empty(); },
       "forces NCCL's algorithm at every size, where NCCL's tuning would choose per size"},
      {"NCCL_PROTO", [](const std::string& v, const JobFacts&) { return !v.empty(); },
       "forces NCCL's protocol at every size, where NCCL's tuning would choose per size"},
  };
  return table;
}

// NCCL_DEBUG=INFO or TRACE with collectives in the subsystems: a log line for every call.
bool logs_every_call(const std::map<std::string, std::string>& env) {
  auto level = env.find("NCCL_DEBUG"), subsys = env.find("NCCL_DEBUG_SUBSYS");
  if (level == env.end() || (level->second != "INFO" && level->second != "TRACE")) return false;
  if (subsys == env.end()) return false;
  const std::string& s = subsys->second;
  return (s.find("COLL") != std::string::npos || s.find("ALL") != std::string::npos) && s.find("^") == std::string::npos;
}

// The collectives NCCL runs by an algorithm and protocol of its choosing, which NCCL_ALGO and
// NCCL_PROTO force; all-to-all, gather and scatter are sends and receives, which have neither.
bool runs_an_algorithm(trace::Api api) {
  using trace::Api;
  switch (api) {
    case Api::kAllReduce:
    case Api::kBroadcast:
    case Api::kBcast:
    case Api::kReduce:
    case Api::kAllGather:
    case Api::kReduceScatter: return true;
    default: return false;
  }
}

// A row's mean time per call by the CUDA events (steady state, else its first calls'): none for a
// host-timed row, whose times are enqueue times.
std::optional<double> events_mean(const LatencyRow& r) {
  if (r.timing != TimingSource::kGpu && r.timing != TimingSource::kGpuRunHistogram) return std::nullopt;
  return r.mean_us ? r.mean_us : r.first_call_mean_us;
}

// The mean per call of a side's rows by one clock, weighted by their calls: none where no row has it.
std::optional<double> side_mean(const std::vector<const LatencyRow*>& rows, bool kernel) {
  double sum = 0, calls = 0;
  for (const LatencyRow* r : rows) {
    std::optional<double> us = kernel ? r->kernel_mean_us : events_mean(*r);
    if (!us) continue;
    double n = double(kernel ? r->kernel_ops : std::max<uint64_t>(r->calls, 1));
    sum += *us * n;
    calls += n;
  }
  return calls ? std::optional<double>(sum / calls) : std::nullopt;
}

// The forced setting's cost: rows of communicators whose processes set it against rows of the same
// op, size and communicator size whose processes set neither NCCL_ALGO nor NCCL_PROTO.
void add_costs(SettingAdvice& advice, const JobAnalysis& a, const LatencyTable& latency,
               const std::vector<std::map<std::string, std::string>>& envs) {
  auto comm_sets = [&](uint64_t comm_id, const char* setting) {
    auto m = a.members.find(comm_id);
    if (m == a.members.end()) return false;
    return std::any_of(m->second.begin(), m->second.end(), [&](const MemberRef& ref) {
      auto it = envs[ref.process].find(setting);
      return it != envs[ref.process].end() && !it->second.empty();
    });
  };
  using Key = std::tuple<trace::Api, uint64_t, int32_t>;
  std::map<Key, std::vector<const LatencyRow*>> forced, own;
  for (const LatencyRow& row : latency.rows) {
    if (!runs_an_algorithm(row.api) || (!events_mean(row) && !row.kernel_mean_us)) continue;
    Key key{row.api, row.bytes, row.nranks};
    if (comm_sets(row.comm_id, advice.setting.c_str())) forced[key].push_back(&row);
    else if (!comm_sets(row.comm_id, "NCCL_ALGO") && !comm_sets(row.comm_id, "NCCL_PROTO")) own[key].push_back(&row);
  }
  for (const auto& [key, rows] : forced) {
    auto theirs = own.find(key);
    if (theirs == own.end()) continue;
    // What the job paid per call: the CUDA events, which count the time the stream spent on the op
    // outside its kernel too (its launch, a starved GPU between kernels), where both sides have
    // them; the kernel clock beside them (on an H100, NCCL 2.28.9, two ranks sharing the GPU: a
    // forced tree's kernels ran 1.9 ms longer per 8 B call, while the job's own events paid 5.4 ms
    // more), or alone where the events are missing.
    auto mine = side_mean(rows, false), other = side_mean(theirs->second, false);
    auto mine_kernel = side_mean(rows, true), other_kernel = side_mean(theirs->second, true);
    bool events = mine && other;
    if (!events && !(mine_kernel && other_kernel)) continue;
    ForcedChoiceCost c;
    std::tie(c.api, c.bytes, c.nranks) = key;
    c.forced_plan = plans_text(rows.front()->plans);
    c.own_plan = plans_text(theirs->second.front()->plans);
    c.forced_us = events ? *mine : *mine_kernel;
    c.own_us = events ? *other : *other_kernel;
    c.clock = events ? "events" : "kernel";
    if (events && mine_kernel && other_kernel) c.kernel_added_us = *mine_kernel - *other_kernel;
    for (const LatencyRow* r : rows) c.forced_calls += r->calls;
    advice.costs.push_back(std::move(c));
  }
  advice.cost_unmeasured = advice.costs.empty();
}

}  // namespace

std::vector<SettingAdvice> settings_advice(const JobAnalysis& a, const LatencyTable& latency) {
  std::vector<std::map<std::string, std::string>> envs;
  std::set<std::string> hosts;
  for (const ProcessTrace& p : a.job.processes) {
    envs.push_back(p.environment());
    hosts.insert(p.host());
  }
  JobFacts facts{hosts.size()};
  std::vector<SettingAdvice> out;
  auto collect = [&](const std::string& setting, const std::function<bool(size_t)>& applies_to, const std::string& why) {
    std::map<std::string, SettingAdvice> by_value;
    for (size_t p = 0; p < envs.size(); ++p) {
      if (!applies_to(p)) continue;
      auto it = envs[p].find(setting);
      std::string value = it == envs[p].end() ? "" : it->second;
      SettingAdvice& adv = by_value[value];
      adv.setting = setting;
      adv.value = value;
      adv.why = why;
      ++adv.processes;
      const std::string host = a.job.processes[p].host();
      if (std::find(adv.hosts.begin(), adv.hosts.end(), host) == adv.hosts.end()) adv.hosts.push_back(host);
    }
    for (auto& [value, adv] : by_value) {
      std::sort(adv.hosts.begin(), adv.hosts.end());
      if (setting == "NCCL_ALGO" || setting == "NCCL_PROTO") add_costs(adv, a, latency, envs);
      out.push_back(std::move(adv));
    }
  };
  for (const Rule& rule : rules()) {
    collect(rule.setting, [&](size_t p) {
      auto it = envs[p].find(rule.setting);
      return it != envs[p].end() && rule.applies(it->second, facts);
    }, rule.why);
  }
  collect("NCCL_DEBUG", [&](size_t p) { return logs_every_call(envs[p]); },
          "with collectives in NCCL_DEBUG_SUBSYS, NCCL logs a line for every call: the host pays for each");
  return out;
}

}  // namespace ncclwatch::model
