#include "model/lifecycle_findings.h"

#include "model/trace_text.h"

#include <fmt/format.h>

#include <signal.h>

#include <cstring>

#include <algorithm>
#include <iterator>
#include <limits>
#include <list>
#include <map>
#include <tuple>
#include <utility>

namespace ncclwatch::model {
namespace {

using trace::Api;

bool made(const CommInstance& c) { return c.state != CommState::kInitFailed && c.created_ns; }

// When `c` stopped counting as alive: its release's end, or never (0).
int64_t released_at(const CommInstance& c) {
  if (c.release_end_ns && trace::release_frees_comm(c.release_api, c.release_result)) return c.release_end_ns;
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

// Each registration (or window) of a buffer made on a communicator while an earlier one of the
// same kind, buffer and communicator was still held, with the first such earlier one, in file order.
std::vector<std::pair<const ResourceInstance*, const ResourceInstance*>> registered_while_held(
    const std::vector<ResourceInstance>& resources) {
  // The registrations grouped by (kind, communicator, buffer), each group in file order.
  std::vector<const ResourceInstance*> sorted;
  for (const ResourceInstance& r : resources)
    if (r.buffer && (r.api == Api::kCommRegister || r.api == Api::kCommWindowRegister)) sorted.push_back(&r);
  auto key = [](const ResourceInstance* r) { return std::tuple(r->api, r->comm, r->buffer); };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const auto* x, const auto* y) { return key(x) < key(y); });
  std::vector<std::pair<const ResourceInstance*, const ResourceInstance*>> found;
  std::vector<int64_t> earliest_from;
  std::list<const ResourceInstance*> candidates;  // earlier registrations of the group, in file order
  for (size_t first = 0, end = 0; first < sorted.size(); first = end) {
    for (end = first + 1; end < sorted.size() && key(sorted[end]) == key(sorted[first]);) ++end;
    // The earliest creation from each registration of the group on: one released by then is held
    // by none of those, and leaves the candidates for good (each leaves once, as registrations
    // are made in about the order written).
    earliest_from.assign(end - first + 1, std::numeric_limits<int64_t>::max());
    for (size_t k = end - first; k-- > 0;) earliest_from[k] = std::min(earliest_from[k + 1], sorted[first + k]->created_ns);
    candidates.clear();
    for (size_t k = 0; k < end - first; ++k) {
      const ResourceInstance* later = sorted[first + k];
      for (auto it = candidates.begin(); it != candidates.end();) {
        const ResourceInstance* earlier = *it;
        if (!earlier->released || earlier->released_ns > later->created_ns) {
          found.emplace_back(later, earlier);
          break;
        }
        it = earlier->released_ns <= earliest_from[k] ? candidates.erase(it) : std::next(it);
      }
      candidates.push_back(later);
    }
  }
  // In file order, as the reports list them.
  std::sort(found.begin(), found.end());
  return found;
}

// The communicator a resource was released with: the last one made before it with its handle whose
// release ended when the resource's did. The communicators are sorted by (handle, release end),
// each such run in file order.
class ReleasedComms {
 public:
  explicit ReleasedComms(const std::vector<CommInstance>& comms) {
    for (const CommInstance& c : comms) sorted_.push_back(&c);
    std::stable_sort(sorted_.begin(), sorted_.end(), [](const CommInstance* x, const CommInstance* y) {
      return std::pair(x->handle, released_at(*x)) < std::pair(y->handle, released_at(*y));
    });
  }
  const CommInstance* of(const ResourceInstance& r) const {
    auto [first, end] = std::equal_range(sorted_.begin(), sorted_.end(), std::pair(r.comm, r.released_ns),
                                         [](const auto& x, const auto& y) { return key(x) < key(y); });
    for (auto c = end; c != first;)
      if ((*--c)->created_ns <= r.created_ns) return *c;
    return nullptr;
  }

 private:
  static std::pair<uint64_t, int64_t> key(const CommInstance* c) { return {c->handle, released_at(*c)}; }
  static std::pair<uint64_t, int64_t> key(const std::pair<uint64_t, int64_t>& k) { return k; }
  std::vector<const CommInstance*> sorted_;
};

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
    int32_t process_rank = world_rank(p);
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
      if (process_rank >= 0) pile.ranks.push_back(process_rank);
      if (comms.size() > pile.made) {
        pile.process = &p;
        pile.example = comms.front();
        pile.made = comms.size();
        pile.not_destroyed = kept;
        pile.bursts = bursts;
        pile.peak_alive = site_peak;
        pile.memory_bytes = 0;
        for (const CommInstance* c : comms) add_saturated(pile.memory_bytes, c->held().bytes);
        pile.first_s = since_start(p, created.front());
        pile.last_s = since_start(p, created.back());
      }
    }

    // Resources out of order.
    ReleasedComms released_comms(p.comms);
    for (const ResourceInstance& r : p.resources) {
      bool tied_to_comm = r.api == Api::kCommRegister || r.api == Api::kCommWindowRegister || r.api == Api::kDevCommCreate;
      if (!tied_to_comm || !r.released_with_comm) continue;
      const CommInstance* comm = released_comms.of(r);
      // A communicator released while the program exits takes its resources with it: that is the
      // leak of the communicator, already named, not an order of its own.
      if (comm && comm->release_during_exit) continue;
      out.order.push_back({ResourceOrder::Kind::kOutlivedComm, &p, &r, nullptr, comm});
    }
    for (const auto& [later, earlier] : registered_while_held(p.resources))
      out.order.push_back({ResourceOrder::Kind::kRegisteredTwice, &p, later, earlier, nullptr});
  }
  for (auto& [key, pile] : pile_ups) {
    std::sort(pile.ranks.begin(), pile.ranks.end());
    pile.ranks.erase(std::unique(pile.ranks.begin(), pile.ranks.end()), pile.ranks.end());
    out.pile_ups.push_back(std::move(pile));
  }
  return out;
}

// (job_model.h) How a trace ends, in words.
std::string signal_name(int sig) {
  const char* abbrev = sig > 0 ? sigabbrev_np(sig) : nullptr;
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

std::string trace_end_text(const ProcessTrace& p) {
  if (!p.process_end) return "the trace ends (the process was killed)";
  switch (static_cast<trace::ExitReason>(p.process_end->reason)) {
    case trace::ExitReason::kSignal: return signal_name(p.process_end->signal);
    case trace::ExitReason::kQuickExit: return fmt::format("the process ended by _exit({})", p.process_end->signal);
    case trace::ExitReason::kExec: return "the process image was replaced (exec)";
    case trace::ExitReason::kExited: return fmt::format("the process exited with status {}", p.process_end->signal);
    default: return "the process exited";
  }
}

bool ended_by_kill(const ProcessTrace& p) {
  return !p.process_end || p.process_end->reason == static_cast<uint32_t>(trace::ExitReason::kSignal);
}

namespace {
std::string ending_value(const ProcessTrace& p, std::string_view key) {
  auto it = p.ending.find(std::string(key));
  return it == p.ending.end() ? "" : it->second;
}

// " after RuntimeError: boom (raised at train.py:12 in step)", or "" without an exception.
std::string exception_text(const ProcessTrace& p) {
  namespace e = trace::ending_record;
  std::string type = ending_value(p, e::kExceptionType);
  if (type.empty()) return "";
  std::string out = fmt::format(" after {}: {}", type, ending_value(p, e::kExceptionMessage));
  std::string file = ending_value(p, e::kExceptionFile);
  if (!file.empty()) {
    std::string_view base = file;
    if (size_t slash = base.rfind('/'); slash != std::string_view::npos) base.remove_prefix(slash + 1);
    out += fmt::format(" (raised at {}:{} in {})", base, ending_value(p, e::kExceptionLine), ending_value(p, e::kExceptionFunction));
  }
  return out;
}
}  // namespace

const trace::SignalRecord* signal_arrival(const ProcessTrace& p, int sig) {
  for (const trace::SignalRecord& s : p.signals)
    if (sig == 0 || s.signal == sig) return &s;
  return nullptr;
}

std::string signal_sender_name(const trace::SignalRecord& s) {
  return printable_text(std::string_view(s.sender_name, strnlen(s.sender_name, sizeof(s.sender_name))));
}

std::string signal_sender_text(const trace::SignalRecord& s, int64_t own_pid) {
  if (s.sender_pid == own_pid && own_pid > 0) return ", sent by the process itself";
  if (s.sender_pid > 0) {
    std::string name = signal_sender_name(s);
    return fmt::format(", sent by pid {} ({}{}uid {})", s.sender_pid, name.empty() ? "" : name + ", ",
                       s.sender_is_parent ? "its parent, " : "", s.sender_uid);
  }
  return s.code == SI_KERNEL ? ", sent by the kernel" : "";
}

std::string process_ending_text(const ProcessTrace& p) {
  std::string exception = exception_text(p);
  // A signal the application's handler took before the process ended its own way.
  std::string after_signal;
  if (const trace::SignalRecord* s = signal_arrival(p); s && s->handled)
    after_signal = fmt::format(" after {}{}", signal_name(s->signal), signal_sender_text(*s, p.pid()));
  if (!p.process_end) return "ended without a final record (killed or crashed)" + after_signal + exception;
  const trace::ExitRecord& end = *p.process_end;
  switch (static_cast<trace::ExitReason>(end.reason)) {
    case trace::ExitReason::kSignal: {
      const trace::SignalRecord* s = signal_arrival(p, end.signal);
      return "was killed by " + signal_name(end.signal) + (s ? signal_sender_text(*s, p.pid()) : "") + exception;
    }
    case trace::ExitReason::kQuickExit: return fmt::format("ended by _exit({})", end.signal) + after_signal + exception;
    case trace::ExitReason::kExec: return "was replaced by an exec";
    case trace::ExitReason::kExited: return fmt::format("exited with status {}", end.signal) + after_signal + exception;
    default: return "exited" + after_signal + exception;
  }
}

}  // namespace ncclwatch::model
