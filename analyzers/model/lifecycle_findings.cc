#include "lifecycle_findings.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace ncclwatch::report {
namespace {

using trace::Api;

bool made(const CommInstance& c) { return c.state != CommState::kInitFailed && c.created_ns; }

// When `c` stopped counting as alive: its release's end, or never (0).
int64_t released_at(const CommInstance& c) {
  if (c.release_end_ns && (c.release_api == Api::kCommAbort || c.release_result == 0)) return c.release_end_ns;
  return 0;
}

// The most of `comms` alive at once, and when.
std::pair<uint64_t, int64_t> peak_alive(const std::vector<const CommInstance*>& comms) {
  std::vector<std::pair<int64_t, int>> changes;  // (time, +1 made / -1 released): releases first on ties
  for (const CommInstance* c : comms) {
    changes.emplace_back(c->created_ns, +1);
    if (int64_t end = released_at(*c)) changes.emplace_back(end, -1);
  }
  std::sort(changes.begin(), changes.end());
  uint64_t alive = 0, peak = 0;
  int64_t when = 0;
  for (const auto& [t, delta] : changes) {
    alive = delta > 0 ? alive + 1 : (alive ? alive - 1 : 0);
    if (alive > peak) {
      peak = alive;
      when = t;
    }
  }
  return {peak, when};
}

bool destroyed_before_exit(const CommInstance& c) { return released_at(c) && !c.release_during_exit; }

double since_start(const ProcessTrace& p, int64_t t) {
  return static_cast<double>(wrap_sub(t, p.header.start_mono_ns)) / 1e9;
}

}  // namespace

std::string site_key(const ProcessTrace& p, const std::vector<uint64_t>& frames, size_t depth) {
  std::string key;
  for (size_t i = 0; i < frames.size() && i < depth; ++i) {
    uint64_t address = frames[i];
    const Module* in = nullptr;
    for (const Module& m : p.modules)
      if (m.base <= address && (!in || m.base > in->base)) in = &m;
    if (!in) continue;
    std::string name = in->path.substr(in->path.rfind('/') + 1);
    key += fmt::format("{}{}+0x{:x}", key.empty() ? "" : " ", name, address - in->base);
  }
  return key;
}

int32_t world_rank(const ProcessTrace& p) {
  const CommInstance* widest = nullptr;
  for (const CommInstance& c : p.comms)
    if (c.rank >= 0 && (!widest || c.nranks > widest->nranks)) widest = &c;
  return widest ? widest->rank : -1;
}

LifecycleFindings lifecycle_findings(const Job& job) {
  LifecycleFindings out;
  std::map<std::string, CommPileUp> pile_ups;
  for (const ProcessTrace& p : job.processes) {
    std::vector<const CommInstance*> alive_ever;
    std::map<std::string, std::vector<const CommInstance*>> by_site;
    for (const CommInstance& c : p.comms) {
      if (!made(c)) continue;
      alive_ever.push_back(&c);
      // From Python every group comes through one native instruction: the Python line tells them apart.
      std::string key = site_key(p, c.stack, 1);
      if (key.empty()) key = c.site;
      if (!c.python_site.empty()) key = fmt::format("{}:{} {}", c.python_site.front().file, c.python_site.front().line, key);
      by_site[key].push_back(&c);
    }
    auto [peak, when] = peak_alive(alive_ever);
    if (peak > out.peak.count) out.peak = {peak, &p, since_start(p, when)};

    for (auto& [key, comms] : by_site) {
      if (key.empty() || comms.size() < kPileUpMin) continue;
      uint64_t kept = static_cast<uint64_t>(
          std::count_if(comms.begin(), comms.end(), [](const CommInstance* c) { return !destroyed_before_exit(*c); }));
      std::vector<int64_t> created;
      for (const CommInstance* c : comms) created.push_back(c->created_ns);
      std::sort(created.begin(), created.end());
      uint64_t bursts = 1, burst_size = 1, largest_burst = 1;
      for (size_t i = 1; i < created.size(); ++i) {
        bool new_burst = wrap_sub(created[i], created[i - 1]) > kBurstGapNs;
        bursts += new_burst;
        burst_size = new_burst ? 1 : burst_size + 1;
        largest_burst = std::max(largest_burst, burst_size);
      }
      // Piling up: a later burst was made while an earlier one's were still alive. Groups
      // destroyed before they are remade never exceed one burst, however many cycles run.
      uint64_t site_peak = peak_alive(comms).first;
      if (bursts < 2 || site_peak <= largest_burst || site_peak < kPileUpMin) continue;
      CommPileUp& pile = pile_ups[key];
      pile.site_key = key;
      int32_t rank = world_rank(p);
      if (rank >= 0) pile.ranks.push_back(rank);
      if (comms.size() > pile.made) {
        pile.process = &p;
        pile.example = comms.front();
        pile.made = comms.size();
        pile.not_destroyed = kept;
        pile.bursts = bursts;
        pile.peak_alive = site_peak;
        pile.memory_bytes = 0;
        for (const CommInstance* c : comms) pile.memory_bytes += c->memory.bytes;
        pile.first_s = since_start(p, created.front());
        pile.last_s = since_start(p, created.back());
      }
    }

    // Resources out of order.
    for (const ResourceInstance& r : p.resources) {
      bool tied_to_comm = r.api == Api::kCommRegister || r.api == Api::kCommWindowRegister || r.api == Api::kDevCommCreate;
      if (!tied_to_comm || !r.released_with_comm) continue;
      const CommInstance* comm = nullptr;
      for (const CommInstance& c : p.comms)
        if (c.handle == r.comm && c.created_ns <= r.created_ns && released_at(c) == r.released_ns) comm = &c;
      // A communicator released while the program exits takes its resources with it: that is the
      // leak of the communicator, already named, not an order of its own.
      if (comm && comm->release_during_exit) continue;
      out.order.push_back({ResourceOrder::Kind::kOutlivedComm, &p, &r, nullptr, comm});
    }
    for (size_t i = 0; i < p.resources.size(); ++i) {
      const ResourceInstance& later = p.resources[i];
      if (!later.buffer || (later.api != Api::kCommRegister && later.api != Api::kCommWindowRegister)) continue;
      for (size_t j = 0; j < i; ++j) {
        const ResourceInstance& earlier = p.resources[j];
        bool still_held = !earlier.released || earlier.released_ns > later.created_ns;
        if (earlier.api == later.api && earlier.comm == later.comm && earlier.buffer == later.buffer && still_held) {
          out.order.push_back({ResourceOrder::Kind::kRegisteredTwice, &p, &later, &earlier, nullptr});
          break;
        }
      }
    }
  }
  for (auto& [key, pile] : pile_ups) {
    std::sort(pile.ranks.begin(), pile.ranks.end());
    pile.ranks.erase(std::unique(pile.ranks.begin(), pile.ranks.end()), pile.ranks.end());
    out.pile_ups.push_back(std::move(pile));
  }
  return out;
}

}  // namespace ncclwatch::report
