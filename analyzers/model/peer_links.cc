#include "model/peer_links.h"

#include "model/wording.h"

#include <fmt/format.h>

#include <algorithm>
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
  step_ns += o.step_ns;
  gpu_wait_ns += o.gpu_wait_ns;
  peer_wait_ns += o.peer_wait_ns;
  partial += o.partial;
  moving_bytes += o.moving_bytes;
  moving_ns += o.moving_ns + o.stretch_ns();
}

namespace {
// A send's moving span [begin, end] into its link's union of them: records come as operations stop,
// so a span mostly overlaps the latest stretch or follows it.
void add_moving(PeerLink& link, int64_t begin, int64_t end, uint64_t bytes) {
  link.moving_bytes += bytes;
  bool overlaps = link.stretch_end > 0 && begin <= link.stretch_end && end >= link.stretch_begin;
  if (overlaps) {
    link.stretch_begin = std::min(link.stretch_begin, begin);
    link.stretch_end = std::max(link.stretch_end, end);
    return;
  }
  link.moving_ns += link.stretch_ns();
  link.stretch_begin = begin;
  link.stretch_end = end;
}
}  // namespace

void close_moving_stretches(PeerLinks& links) {
  for (auto& [key, link] : links) {
    link.moving_ns += link.stretch_ns();
    link.stretch_begin = link.stretch_end = 0;
  }
}

void add_proxy_operation(PeerLinks& out, const trace::OpProxyRecord& p, const RecordView& r,
                         ImplausibleValues& implausible) {
  int32_t nranks = implausible.nranks(p.nranks, r);
  bool ranks_fit = nranks > 1 && p.rank >= 0 && p.rank < nranks && p.remote >= 0 && p.remote < nranks &&
                   p.remote != p.rank;
  // As unsigned: a hostile pair of times cannot overflow the difference.
  bool ordered = p.stop_ns >= p.start_ns;
  int64_t span = ordered && uint64_t(p.stop_ns) - uint64_t(p.start_ns) <= uint64_t(kMaxSpanNs)
                     ? int64_t(uint64_t(p.stop_ns) - uint64_t(p.start_ns))
                     : -1;
  bool times_fit = span >= 0 && p.step_ns <= uint64_t(kMaxSpanNs) && p.gpu_wait_ns <= p.step_ns &&
                   p.peer_wait_ns <= p.step_ns - p.gpu_wait_ns;
  if (!ranks_fit || !times_fit) {
    implausible.note("an op_proxy record (rank " + std::to_string(p.rank) + " of " + std::to_string(p.nranks) +
                         ", peer " + std::to_string(p.remote) + ", from " + std::to_string(p.start_ns) + " to " +
                         std::to_string(p.stop_ns) + " ns, steps " + std::to_string(p.step_ns) + " ns waiting " +
                         std::to_string(p.gpu_wait_ns) + " + " + std::to_string(p.peer_wait_ns) +
                         " ns) cannot be a proxy operation's: left out",
                     r);
    return;
  }
  PeerLink& link = out[{p.comm_id, p.rank, p.remote, (p.flags & trace::kProxySend) != 0}];
  link.nranks = nranks;
  ++link.operations;
  link.steps += p.steps_done;
  link.bytes += p.bytes;
  link.step_ns += p.step_ns;
  link.gpu_wait_ns += p.gpu_wait_ns;
  link.peer_wait_ns += p.peer_wait_ns;
  if ((p.flags & trace::kProxyStepsLost) || p.steps_done < p.steps_planned) ++link.partial;
  // Within the operation's span (checked above), so start + offset cannot overflow.
  int64_t moving_after = int64_t{p.moving_after_us} * 1000;
  if ((p.flags & trace::kProxySend) && (p.flags & trace::kProxyMoving) && moving_after <= span)
    add_moving(link, p.start_ns + moving_after, p.stop_ns, p.bytes);
}

std::vector<SlowPeer> slow_peers(const PeerLinks& links) {
  struct Rank {
    uint64_t recv_wait_ns = 0, recv_steps = 0;  // its receive steps
    uint64_t step_ns = 0, steps = 0;            // all its steps
    int32_t nranks = -1;
    double recv_wait_us() const { return recv_steps ? recv_wait_ns / 1e3 / double(recv_steps) : 0; }
    double step_us() const { return steps ? step_ns / 1e3 / double(steps) : 0; }
  };
  std::map<uint64_t, std::map<int32_t, Rank>> comms;
  for (const auto& [key, link] : links) {
    Rank& r = comms[key.comm_id][key.rank];
    r.nranks = link.nranks;
    r.step_ns += link.step_ns;
    r.steps += link.steps;
    if (key.send) continue;
    r.recv_wait_ns += link.peer_wait_ns;
    r.recv_steps += link.steps;
  }
  std::vector<SlowPeer> out;
  for (const auto& [comm_id, ranks] : comms) {
    // Two ranks wait on each other alike whichever is slow: three or more tell it apart.
    std::vector<std::pair<int32_t, const Rank*>> receiving;
    for (const auto& [rank, r] : ranks)
      if (r.recv_steps >= kMinSteps) receiving.emplace_back(rank, &r);
    if (receiving.size() < 3) continue;
    auto least = std::min_element(receiving.begin(), receiving.end(), [](const auto& x, const auto& y) {
      return x.second->recv_wait_us() < y.second->recv_wait_us();
    });
    std::vector<double> waits, step_times;
    std::vector<int32_t> waiting;
    for (const auto& [rank, r] : receiving) {
      if (rank == least->first) continue;
      waits.push_back(r->recv_wait_us());
      step_times.push_back(r->step_us());
    }
    const Rank& slow = *least->second;
    SlowPeer s{comm_id, least->first, slow.nranks, slow.recv_wait_us(), median(waits), slow.step_us(),
               median(step_times), {}, slow.recv_steps};
    for (const auto& [rank, r] : receiving)
      if (rank != s.rank && r->recv_wait_us() >= kSlowFactor * s.own_wait_us) s.waiting.push_back(rank);
    bool others_waited = s.others_us >= kSlowFactor * s.own_wait_us && s.others_us - s.own_wait_us >= kMinExcessUs;
    if (others_waited && s.step_us >= 0.5 * s.others_step_us) out.push_back(std::move(s));
  }
  return out;
}

std::string slow_peer_text(const SlowPeer& s, const std::string& comm) {
  return fmt::format("comm {}: rank {}'s peers waited on it: the other ranks' receive steps waited {:.1f} us each on "
                     "their peers (median; rank{} {} waited at least {:.0f}x as long as it did), its own {:.1f} us over {} "
                     "steps, with its steps as long as theirs ({:.1f} against {:.1f} us): they wait on what it forwards "
                     "late (a starved proxy, a slow link)",
                     comm, s.rank, s.others_us, s.waiting.size() == 1 ? "" : "s", ranks_text(s.waiting), kSlowFactor,
                     s.own_wait_us, s.steps, s.step_us, s.others_step_us);
}

}  // namespace ncclwatch::model
