#include "model/peer_links.h"

#include <algorithm>
#include <set>
#include <string>

namespace ncclwatch::model {

namespace {
// No proxy operation takes an hour: a longer one is a damaged record or a wrapped clock.
constexpr int64_t kMaxSpanNs = int64_t{3600} * 1000 * 1000 * 1000;
// Below this many steps waited on, a peer's mean is noise, not a verdict.
constexpr uint64_t kMinSteps = 8;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
}  // namespace

void PeerLink::merge(const PeerLink& o) {
  if (nranks < 0) nranks = o.nranks;
  operations += o.operations;
  steps += o.steps;
  bytes += o.bytes;
  busy_ns += o.busy_ns;
  step_ns += o.step_ns;
  gpu_wait_ns += o.gpu_wait_ns;
  peer_wait_ns += o.peer_wait_ns;
  partial += o.partial;
}

void add_proxy_operation(PeerLinks& out, const trace::OpProxyRecord& p, const RecordView& r,
                         ImplausibleValues& implausible) {
  int32_t nranks = implausible.nranks(p.nranks, r);
  bool ranks_fit = nranks > 1 && p.rank >= 0 && p.rank < nranks && p.remote >= 0 && p.remote < nranks &&
                   p.remote != p.rank;
  int64_t span = p.stop_ns - p.start_ns;
  bool times_fit = span >= 0 && span <= kMaxSpanNs && p.step_ns <= uint64_t(kMaxSpanNs) &&
                   p.gpu_wait_ns + p.peer_wait_ns <= p.step_ns;
  if (!ranks_fit || !times_fit) {
    implausible.note("an op_proxy record (rank " + std::to_string(p.rank) + " of " + std::to_string(p.nranks) +
                         ", peer " + std::to_string(p.remote) + ", " + std::to_string(span) + " ns, steps " +
                         std::to_string(p.step_ns) + " ns waiting " + std::to_string(p.gpu_wait_ns + p.peer_wait_ns) +
                         " ns) cannot be a proxy operation's: left out",
                     r);
    return;
  }
  PeerLink& link = out[{p.comm_id, p.rank, p.remote, (p.flags & trace::kProxySend) != 0}];
  link.nranks = nranks;
  ++link.operations;
  link.steps += p.steps_done;
  link.bytes += p.bytes;
  link.busy_ns += uint64_t(span);
  link.step_ns += p.step_ns;
  link.gpu_wait_ns += p.gpu_wait_ns;
  link.peer_wait_ns += p.peer_wait_ns;
  if ((p.flags & trace::kProxyStepsLost) || p.steps_done < p.steps_planned) ++link.partial;
}

std::vector<SlowPeer> slow_peers(const PeerLinks& links) {
  struct Waits {
    uint64_t on_ns = 0, on_steps = 0;    // others' steps toward this rank
    uint64_t own_ns = 0, own_steps = 0;  // its own steps toward the others
    std::set<int32_t> waiting;
    int32_t nranks = -1;
  };
  std::map<uint64_t, std::map<int32_t, Waits>> comms;
  for (const auto& [key, link] : links) {
    auto& ranks = comms[key.comm_id];
    Waits& on = ranks[key.remote];
    on.on_ns += link.peer_wait_ns;
    on.on_steps += link.steps;
    on.nranks = link.nranks;
    if (link.peer_wait_ns) on.waiting.insert(key.rank);
    Waits& own = ranks[key.rank];
    own.own_ns += link.peer_wait_ns;
    own.own_steps += link.steps;
    own.nranks = link.nranks;
  }
  std::vector<SlowPeer> out;
  for (const auto& [comm_id, ranks] : comms) {
    auto per_step = [](uint64_t ns, uint64_t steps) { return steps ? ns / 1e3 / double(steps) : 0.0; };
    const std::pair<const int32_t, Waits>* worst = nullptr;
    for (const auto& entry : ranks)
      if (entry.second.on_steps >= kMinSteps &&
          (!worst || per_step(entry.second.on_ns, entry.second.on_steps) >
                         per_step(worst->second.on_ns, worst->second.on_steps)))
        worst = &entry;
    if (!worst) continue;
    std::vector<double> others;
    for (const auto& [rank, w] : ranks)
      if (rank != worst->first && w.on_steps) others.push_back(per_step(w.on_ns, w.on_steps));
    const Waits& w = worst->second;
    SlowPeer s{comm_id, worst->first, w.nranks, per_step(w.on_ns, w.on_steps), median(others),
               per_step(w.own_ns, w.own_steps), {w.waiting.begin(), w.waiting.end()}, w.on_steps};
    double baseline = std::max(s.others_us, s.own_wait_us);
    if (s.waited_on_us >= kSlowFactor * baseline && s.waited_on_us - baseline >= kMinExcessUs) out.push_back(s);
  }
  return out;
}

}  // namespace ncclwatch::model
