// The records of one trace folded into its process's communicators and resources with their end
// states (job_model.h says what they hold), as the records stream by.
#include "model/lifecycle_fold.h"

#include <ncclwatch/trace_strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ncclwatch::model {
namespace {

using namespace trace;

std::map<std::string, std::string> parse_strings(const RecordView& r) {
  std::map<std::string, std::string> out;
  const auto* rec = r.as<StringsRecord>();
  if (!rec || sizeof(StringsRecord) + rec->bytes > r.size) return out;
  std::string blob = record_text(r.data + sizeof(StringsRecord), rec->bytes);
  for_each_string(blob, [&](std::string_view key, std::string_view value) {
    // Repeated keys (library_record::kMissing) are joined.
    auto [it, inserted] = out.emplace(key, value);
    if (!inserted) (it->second += ',') += value;
  });
  return out;
}

// What is kept of a call site. Every communicator an ncclCommInitAll made keeps a copy of its one
// begin record's call site, so an oversized one would be multiplied by the records that follow. The
// shim writes at most 64 frames (shim/callsite.h); names and call-site summaries are short.
constexpr size_t kMaxFramesKept = 64;

constexpr size_t kMaxTextKept = 1024;  // bytes of a name or call-site summary
constexpr size_t kMaxPythonKept = 4096;  // bytes of Python frames (the shim writes at most 3)

// What follows an ApiEvent.
struct EventTail {
  std::vector<uint64_t> stack;
  std::string name;
  std::string site;
  std::vector<PythonFrame> python_site;
  ProcessGroupName process_group;
};

// Frames, name, call-site summary and Python site that follow an ApiEvent, bounds-checked and cut
// to the above.
EventTail event_tail(const RecordView& r, const ApiEvent& e) {
  EventTail out;
  size_t frames_bytes = size_t{e.nframes} * 8;
  if (sizeof(ApiEvent) + frames_bytes + e.name_len + e.site_len > r.size) return out;
  const std::byte* tail = r.data + sizeof(ApiEvent);
  out.stack.resize(std::min<size_t>(e.nframes, kMaxFramesKept));
  if (!out.stack.empty()) std::memcpy(out.stack.data(), tail, out.stack.size() * 8);
  out.name = record_text(tail + frames_bytes, std::min<size_t>(e.name_len, kMaxTextKept));
  out.site = record_text(tail + frames_bytes + e.name_len, std::min<size_t>(e.site_len, kMaxTextKept));
  size_t python_at = frames_bytes + e.name_len + e.site_len;
  if (sizeof(ApiEvent) + python_at + e.python_site_len <= r.size) {
    std::string python = record_text(tail + python_at, std::min<size_t>(e.python_site_len, kMaxPythonKept));
    out.python_site = parse_python_site(python);
    out.process_group = parse_process_group(python);
  }
  return out;
}

Api api_of(const ApiEvent& e) { return static_cast<Api>(e.api); }

// Positions in a vector grouped by a key, newest first: per key a chain through one array, so
// that adding one costs no list of its own.
class NewestFirst {
 public:
  static constexpr size_t kNone = SIZE_MAX;
  void add(uint64_t key, size_t position) {  // positions come in increasing order
    if (older_.size() <= position) older_.resize(position + 1, kNone);
    size_t& newest = newest_.try_emplace(key, kNone).first->second;
    older_[position] = newest;
    newest = position;
  }
  // The newest position of `key` (kNone: none left), to read or to drop it; nullptr: never added.
  size_t* newest(uint64_t key) {
    auto it = newest_.find(key);
    return it == newest_.end() ? nullptr : &it->second;
  }
  size_t older(size_t position) const { return older_[position]; }  // the next older one of its key

 private:
  std::unordered_map<uint64_t, size_t> newest_;
  std::vector<size_t> older_;
};

// A call's begin record, kept until its end arrives: the call site and name are in it.
struct Pending {
  ApiEvent event;
  EventTail tail;
};

// The records that describe the process itself: its settings, NCCL copies, notices, stacks, modules,
// how it ended, the signals it saw, what it lost and the exit's list of live communicators.
class ProcessFacts {
 public:
  explicit ProcessFacts(ProcessTrace& p) : p_(p) {}

  // False: not a record of these.
  bool add(const RecordView& r) {
    switch (r.type) {
      case RecordType::kProcess: p_.strings = parse_strings(r); break;
      case RecordType::kLibrary: on_library(r); break;
      case RecordType::kNotice: {
        auto s = parse_strings(r);
        if (auto it = s.find(std::string(notice_record::kText)); it != s.end()) p_.notices.push_back(it->second);
        break;
      }
      case RecordType::kStacks: on_stacks(r); break;
      case RecordType::kEnding: p_.ending.merge(parse_strings(r)); break;
      case RecordType::kModule: on_module(r); break;
      case RecordType::kExitBegin:  // the first one counts
      case RecordType::kProcessEnd:  // the last one counts
        if (const auto* e = r.as<ExitRecord>()) {
          auto& kept = r.type == RecordType::kExitBegin ? p_.exit_begin : p_.process_end;
          if (r.type == RecordType::kProcessEnd || !kept) kept = *e;
          p_.last_time_ns = std::max(p_.last_time_ns, e->time_ns);
        }
        break;
      case RecordType::kSignal:
        if (const auto* e = r.as<SignalRecord>(); e && p_.signals.size() < kMaxSignalsKept) p_.signals.push_back(*e);
        break;
      case RecordType::kLost:
        if (const auto* l = r.as<LostRecord>()) p_.lost_records += l->count;
        break;
      case RecordType::kLiveAtExit: on_live_at_exit(r); break;
      default: return false;
    }
    return true;
  }

 private:
  // The latest record wins: a later request, or the stall, says where the threads are now.
  void on_stacks(const RecordView& r) {
    const auto* rec = r.as<StringsRecord>();
    if (!rec || sizeof(StringsRecord) + rec->bytes > r.size) return;
    p_.stacks = parse_python_stacks(record_text(r.data + sizeof(StringsRecord), rec->bytes), rec->time_ns);
  }

  void on_library(const RecordView& r) {
    auto strings = parse_strings(r);
    auto get = [&](std::string_view name) {
      auto it = strings.find(std::string(name));
      return it == strings.end() ? std::string() : it->second;
    };
    namespace key = library_record;
    NcclLibrary lib;
    lib.id = std::atoi(get(key::kId).c_str());
    lib.path = get(key::kPath);
    lib.version = get(key::kVersion);
    lib.status = get(key::kStatus);
    if (lib.status.empty()) lib.status = library_record::kAttached;  // format 2 wrote only the attached one
    if (lib.id == 0 && lib.attached()) lib.id = 1;
    lib.reached = get(key::kReached);
    lib.reason = get(key::kReason);
    p_.libraries.push_back(std::move(lib));
  }

  void on_live_at_exit(const RecordView& r) {
    const auto* rec = r.as<LiveAtExitRecord>();
    if (!rec) return;
    // Never more entries than the record's own bytes hold.
    size_t fits = (r.size - sizeof(LiveAtExitRecord)) / sizeof(LiveComm);
    ProcessTrace::LiveAtExit live;
    live.complete = rec->complete == 1 && rec->count <= fits;
    live.comms.resize(std::min<size_t>(rec->count, fits));
    if (!live.comms.empty())
      std::memcpy(live.comms.data(), r.data + sizeof(LiveAtExitRecord), live.comms.size() * sizeof(LiveComm));
    for (LiveComm& l : live.comms) {
      l.nranks = p_.implausible.nranks(l.nranks, r);
      l.rank = p_.implausible.rank(l.rank, r);
    }
    p_.live_at_exit = std::move(live);
  }

  void on_module(const RecordView& r) {
    const auto* m = r.as<ModuleRecord>();
    if (!m || sizeof(ModuleRecord) + m->path_len > r.size) return;
    std::string build_id;
    if (sizeof(ModuleRecord) + m->path_len + m->build_id_len <= r.size && m->build_id_len <= kMaxBuildIdBytes)
      build_id.assign(reinterpret_cast<const char*>(r.data + sizeof(ModuleRecord) + m->path_len), m->build_id_len);
    p_.modules.push_back({m->base, record_text(r.data + sizeof(ModuleRecord), m->path_len), std::move(build_id)});
  }

  ProcessTrace& p_;
};

// Registrations, windows, NCCL allocations, device communicators and reduction ops: made by one
// call, released by its counterpart or with their communicator.
class ResourceFold {
 public:
  explicit ResourceFold(ProcessTrace& p) : p_(p) {}

  // A call that made a resource returned (those that failed made none).
  void made(Api api, const ApiEvent& e, const Pending* begin) {
    if (!succeeded_or_pending(e.result)) return;
    ResourceInstance res;
    res.api = api;
    res.handle = e.resource;
    res.comm = e.comm;
    res.comm_id = e.comm_id;
    res.rank = e.rank;
    res.bytes = e.bytes;
    res.created_ns = e.time_ns;
    if (begin) {
      res.stack = begin->tail.stack;
      res.site = begin->tail.site;
      res.python_site = begin->tail.python_site;
      if (api == Api::kCommRegister || api == Api::kCommWindowRegister) res.buffer = begin->event.resource;
    }
    p_.resources.push_back(std::move(res));
  }

  // The most recent unreleased resource `acquired_by` made with this handle (on this communicator,
  // where both name one) is released.
  void release(Api acquired_by, const ApiEvent& e) {
    if (e.result != kNcclSuccess) return;
    index_new_entries();
    size_t* newest = by_handle_.newest(e.resource);
    if (!newest) return;
    // A released one stays released: dropped, each is passed over once.
    while (*newest != NewestFirst::kNone && p_.resources[*newest].released) *newest = by_handle_.older(*newest);
    for (size_t i = *newest; i != NewestFirst::kNone; i = by_handle_.older(i)) {
      ResourceInstance& r = p_.resources[i];
      if (r.api == acquired_by && !r.released && (e.comm == 0 || r.comm == 0 || r.comm == e.comm)) {
        r.released = true;
        r.released_ns = e.time_ns;
        return;
      }
    }
  }

  // NCCL frees a communicator's registrations, windows, device comms and redops with it.
  void release_with_comm(uint64_t comm, int64_t when) {
    index_new_entries();
    size_t* newest = by_comm_.newest(comm);
    if (!newest) return;
    for (size_t i = *newest; i != NewestFirst::kNone; i = by_comm_.older(i)) {
      ResourceInstance& r = p_.resources[i];
      if (r.released) continue;
      r.released = true;
      r.released_with_comm = true;
      r.released_ns = when;
    }
    *newest = NewestFirst::kNone;  // all released: a later communicator with this handle starts afresh
  }

 private:
  // Indexes the resources the records added since the last call, for the lookups of releases.
  void index_new_entries() {
    for (; indexed_ < p_.resources.size(); ++indexed_) {
      const ResourceInstance& r = p_.resources[indexed_];
      by_handle_.add(r.handle, indexed_);
      if (r.comm) by_comm_.add(r.comm, indexed_);
    }
  }

  ProcessTrace& p_;
  // Where the releases look: positions in p_.resources, so that a release costs the same however
  // many the process made before it.
  NewestFirst by_handle_, by_comm_;
  size_t indexed_ = 0;
};

// The calls of one process folded into its communicators with their end states: creations (and
// those that never returned), finalizes, destroys and aborts, and, for a trace that lost records,
// what its exit record says was alive.
class CommFold {
 public:
  explicit CommFold(ProcessTrace& p) : p_(p), resources_(p) {}

  void begin(const RecordView& r, const ApiEvent& e) {
    Api api = api_of(e);
    Pending pending{e, event_tail(r, e)};
    if (api == Api::kCommFinalize)
      if (CommInstance* c = live_comm(e.comm)) c->finalize_begin_ns = e.time_ns;
    if (api == Api::kCommDestroy || api == Api::kCommAbort) {
      if (CommInstance* c = live_comm(e.comm)) {
        c->release_api = api;
        c->release_begin_ns = e.time_ns;
        c->release_stack = pending.tail.stack;
        c->release_site = pending.tail.site;
        c->release_python_site = pending.tail.python_site;
        // One made during exit (an exit handler's) and released there lived its whole life in exit.
        c->release_during_exit =
            ((e.flags & kFlagDuringExit) || entered_after_exit_began(e.time_ns)) && !c->made_during_exit;
      }
    }
    pending_[e.call_id] = std::move(pending);
  }

  // A reading after a set-up call, suspend or resume, kept with the communicator it names: a
  // bounded number, the latest replacing the last kept beyond it (what it holds stays current).
  void memory(const MemoryRecord& m) {
    CommInstance* c = live_comm(m.comm);
    if (!c) return;
    MemoryReading r;
    r.time_ns = m.time_ns;
    r.api = static_cast<Api>(m.api);
    r.count = m.op_count;
    r.peer = m.peer;
    auto magnitude = [](int64_t v) { return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); };
    if ((m.flags & kFlagMemoryFromNccl) && m.held_bytes <= kMostGpuBytes) r.held_bytes = m.held_bytes;
    if ((m.flags & kFlagMemoryFromFreeChange) && magnitude(m.taken_bytes) <= kMostGpuBytes) {
      r.taken_bytes = m.taken_bytes;
      r.taken_by_process = m.flags & kFlagMemoryOwnProcess;
      r.shared_device = !r.taken_by_process && (m.flags & kFlagMemorySharedDevice);
    }
    if (c->readings.size() < kMostReadingsKept) c->readings.push_back(r);
    else c->readings.back() = r;
  }
  static constexpr size_t kMostReadingsKept = 8 * kMaxMemoryReadings;

  void end(const ApiEvent& e) {
    Api api = api_of(e);
    auto it = pending_.find(e.call_id);
    const Pending* begin = it == pending_.end() ? nullptr : &it->second;
    if (creates_comm(api)) {
      CommInstance c;
      c.handle = e.comm;
      c.id = e.comm_id ? e.comm_id : (begin ? begin->event.comm_id : 0);
      c.parent_id = e.parent_id;
      c.rank = e.rank;
      c.nranks = e.nranks;
      c.device = e.device;
      c.api = api;
      c.result = e.result;
      c.non_blocking = e.flags & kFlagNonBlocking;
      c.created_ns = e.time_ns;
      c.made_during_exit = (e.flags & kFlagDuringExit) || entered_after_exit_began(e.time_ns);
      c.library = e.library;
      c.memory = CommMemoryFigure::of(e);
      if (begin) {
        c.begin_ns = begin->event.time_ns;
        c.torch = begin->event.flags & kFlagTorchCaller;
        c.nvshmem = begin->event.flags & kFlagNvshmemCaller;
        c.stack = begin->tail.stack;
        c.name = begin->tail.name;
        c.site = begin->tail.site;
        c.python_site = begin->tail.python_site;
        c.process_group = begin->tail.process_group;
      }
      if (!succeeded_or_pending(e.result) || e.comm == 0) {
        c.state = CommState::kInitFailed;
        c.handle = 0;
      }
      p_.comms.push_back(std::move(c));
      // ncclCommInitAll writes several ends for one begin: keep the begin until the last.
      if (api != Api::kCommInitAll && it != pending_.end()) pending_.erase(it);
      return;
    }
    // The begin record is needed below (call-site stack); forget it once this end is handled.
    struct ForgetPending {
      std::map<uint64_t, Pending>& pending;
      std::map<uint64_t, Pending>::iterator it;
      ~ForgetPending() {
        if (it != pending.end()) pending.erase(it);
      }
    } forget{pending_, it};
    switch (api) {
      case Api::kCommFinalize:
        if (CommInstance* c = live_comm(e.comm)) {
          c->finalize_returned = true;
          if (succeeded_or_pending(e.result)) c->finalized_ns = e.time_ns;
        }
        break;
      case Api::kCommDestroy:
      case Api::kCommAbort:
        if (CommInstance* c = live_comm(e.comm)) {
          c->release_end_ns = e.time_ns;
          c->release_result = e.result;
          c->freed = CommMemoryFigure::of(e);
          if (release_frees_comm(api, e.result)) resources_.release_with_comm(e.comm, e.time_ns);
        }
        break;
      case Api::kMemAlloc:
      case Api::kCommRegister:
      case Api::kCommWindowRegister:
      case Api::kDevCommCreate:
      case Api::kRedOpCreatePreMulSum:
        resources_.made(api, e, begin);
        break;
      case Api::kMemFree: resources_.release(Api::kMemAlloc, e); break;
      case Api::kCommDeregister: resources_.release(Api::kCommRegister, e); break;
      case Api::kCommWindowDeregister: resources_.release(Api::kCommWindowRegister, e); break;
      case Api::kDevCommDestroy: resources_.release(Api::kDevCommCreate, e); break;
      case Api::kRedOpDestroy: resources_.release(Api::kRedOpCreatePreMulSum, e); break;
      default: break;
    }
  }

  void finish() {
    int64_t trace_end = p_.process_end ? p_.process_end->time_ns : p_.last_time_ns;
    for (CommInstance& c : p_.comms) {
      c.state = decide_state(c);
      if (lifecycle::is_teardown_hang(c.state)) {
        int64_t entered = c.state == CommState::kFinalizeHung ? c.finalize_begin_ns : c.release_begin_ns;
        c.teardown_inside_ns = std::max<int64_t>(0, trace_end - entered);
        // Entered a moment before the process ended (a launcher's kill): cut short, not hung.
        c.state = lifecycle::teardown_end(c.state, c.teardown_inside_ns);
      }
    }
    add_creations_that_never_returned();
    if (p_.process_end) p_.lost_records = std::max(p_.lost_records, p_.process_end->lost_records);
    believe_exit_counts_of_a_full_trace();
  }

 private:
  bool entered_after_exit_began(int64_t t) const { return p_.exit_begin && t >= p_.exit_begin->time_ns; }

  // The most recent communicator with this handle that is not yet released.
  CommInstance* live_comm(uint64_t handle) {
    if (!handle) return nullptr;
    index_new_comms();
    size_t* newest = comms_by_handle_.newest(handle);
    if (!newest) return nullptr;
    // One released never lives again: dropped, each is passed over once.
    while (*newest != NewestFirst::kNone && !is_live(p_.comms[*newest])) *newest = comms_by_handle_.older(*newest);
    return *newest == NewestFirst::kNone ? nullptr : &p_.comms[*newest];
  }

  static bool is_live(const CommInstance& c) {
    return c.state != CommState::kInitFailed && !(c.release_end_ns && released_ok(c));
  }

  // Indexes the communicators the records added since the last call, for the lookups of releases.
  void index_new_comms() {
    for (; comms_indexed_ < p_.comms.size(); ++comms_indexed_)
      if (uint64_t handle = p_.comms[comms_indexed_].handle) comms_by_handle_.add(handle, comms_indexed_);
  }

  static bool released_ok(const CommInstance& c) {
    return release_frees_comm(c.release_api, c.release_result);
  }

  // Never released, as far as the trace goes.
  static bool unreleased(CommState state) {
    return state == CommState::kLeaked || state == CommState::kFinalized || lifecycle::is_teardown_hang(state);
  }

  // A full trace (NCCLWATCH_MAX_MB, a full disk) loses the records of later releases; the exit
  // record, written from a reserve, counts what was really alive at exit. When it says nothing
  // was, what the trace shows alive was released unrecorded: a full trace makes no false leak.
  void believe_exit_counts_of_a_full_trace() {
    if (!p_.process_end || p_.lost_records == 0) return;
    if (p_.live_at_exit && p_.live_at_exit->complete) {
      believe_list_of_a_full_trace(p_.live_at_exit->comms);
    } else if (p_.process_end->live_comms == 0)
      for (CommInstance& c : p_.comms)
        if (unreleased(c.state)) c.state = CommState::kReleaseUnrecorded;
    if (p_.process_end->live_resources == 0)
      for (ResourceInstance& r : p_.resources) r.released = true;
  }

  // The exit's list of live communicators decides (format 5): one the trace shows alive but the list
  // does not name was released, its record lost; one the list names but the trace lost entirely
  // is added, known by its identity only.
  void believe_list_of_a_full_trace(const std::vector<LiveComm>& listed) {
    auto key = [](uint64_t handle, uint64_t id) { return std::pair{handle, id}; };
    std::set<std::pair<uint64_t, uint64_t>> alive;
    for (const LiveComm& l : listed) alive.insert(key(l.handle, l.comm_id));
    std::set<std::pair<uint64_t, uint64_t>> seen;
    for (CommInstance& c : p_.comms) {
      if (!unreleased(c.state)) continue;
      if (alive.count(key(c.handle, c.id))) seen.insert(key(c.handle, c.id));
      else c.state = CommState::kReleaseUnrecorded;
    }
    for (const LiveComm& l : listed) {
      if (seen.count(key(l.handle, l.comm_id))) continue;
      CommInstance c;
      c.handle = l.handle;
      c.id = l.comm_id;
      c.rank = l.rank;
      c.nranks = l.nranks;
      c.creation_unrecorded = true;
      auto state = static_cast<CommState>(l.end_state);
      c.state = state == CommState::kFinalized || lifecycle::ended_inside_teardown(state) || state == CommState::kReleasedAtExit
                    ? state
                    : CommState::kLeaked;
      p_.comms.push_back(std::move(c));
    }
  }

  // A creation call entered and never returned: the classic hang of a rank that never joined,
  // which keeps every other rank waiting in its init. An instance of its own, init_hung, from
  // what the call's begin record knows (id, rank and size as passed, call site, name).
  void add_creations_that_never_returned() {
    std::unordered_set<int64_t> begun;  // when the creations that returned began
    for (const CommInstance& c : p_.comms) begun.insert(c.begin_ns);
    for (const auto& [call_id, pending] : pending_) {
      const ApiEvent& e = pending.event;
      Api api = api_of(e);
      if (!creates_comm(api)) continue;
      // ncclCommInitAll keeps its begin until its last end: one end seen, it returned.
      if (api == Api::kCommInitAll && begun.count(e.time_ns)) continue;
      CommInstance c;
      c.id = e.comm_id;
      c.parent_id = e.parent_id;
      c.rank = e.rank;
      c.nranks = e.nranks;
      c.device = e.device;
      c.api = api;
      c.non_blocking = e.flags & kFlagNonBlocking;
      c.library = e.library;
      c.begin_ns = e.time_ns;
      c.torch = e.flags & kFlagTorchCaller;
      c.nvshmem = e.flags & kFlagNvshmemCaller;
      c.stack = pending.tail.stack;
      c.name = pending.tail.name;
      c.site = pending.tail.site;
      c.python_site = pending.tail.python_site;
      c.process_group = pending.tail.process_group;
      c.state = CommState::kInitHung;
      begun.insert(c.begin_ns);
      p_.comms.push_back(std::move(c));
    }
  }

  CommState decide_state(const CommInstance& c) const {
    if (c.state == CommState::kInitFailed) return CommState::kInitFailed;
    if (c.release_begin_ns) {
      if (!c.release_end_ns) return c.release_api == Api::kCommAbort ? CommState::kAbortHung : CommState::kDestroyHung;
      if (!released_ok(c)) return c.finalized_ns ? CommState::kFinalized : CommState::kLeaked;
      if (c.release_during_exit) return CommState::kReleasedAtExit;
      return c.release_api == Api::kCommAbort ? CommState::kAborted : CommState::kDestroyed;
    }
    if (c.finalize_begin_ns && !c.finalize_returned) return CommState::kFinalizeHung;
    return c.finalized_ns ? CommState::kFinalized : CommState::kLeaked;
  }

  ProcessTrace& p_;
  ResourceFold resources_;
  std::map<uint64_t, Pending> pending_;
  // Where the releases look (see index_new_comms): positions in p_.comms, so that a release costs
  // the same however many the process made before it.
  NewestFirst comms_by_handle_;
  size_t comms_indexed_ = 0;
};

}  // namespace

struct LifecycleFold::Impl {
  explicit Impl(ProcessTrace& p) : process(p), facts(p), calls(p) {}

  void add(const RecordView& r) {
    if (facts.add(r)) return;
    if (r.type == RecordType::kMemory) {
      if (const auto* m = r.as<MemoryRecord>()) calls.memory(*m);
      return;
    }
    if (r.type != RecordType::kCallBegin && r.type != RecordType::kCallEnd) return;
    const auto* e = r.as<ApiEvent>();
    if (!e) return;
    process.last_time_ns = std::max(process.last_time_ns, e->time_ns);
    if (r.type == RecordType::kCallBegin) calls.begin(r, *e);
    else calls.end(plausible(*e, r));
  }

  // The event with a rank and size no job has taken as unknown (and named once per file).
  ApiEvent plausible(const ApiEvent& e, const RecordView& r) {
    ApiEvent checked = e;
    checked.nranks = process.implausible.nranks(e.nranks, r);
    checked.rank = process.implausible.rank(e.rank, r);
    return checked;
  }

  ProcessTrace& process;
  ProcessFacts facts;
  CommFold calls;
};

LifecycleFold::LifecycleFold(ProcessTrace& out) : impl_(std::make_unique<Impl>(out)) {}
LifecycleFold::~LifecycleFold() = default;
void LifecycleFold::add_lifecycle_record(const RecordView& record) { impl_->add(record); }
void LifecycleFold::finish(std::vector<TraceProblem>& problems) {
  impl_->calls.finish();
  impl_->process.implausible.report(impl_->process.path, problems);
}

}  // namespace ncclwatch::model
