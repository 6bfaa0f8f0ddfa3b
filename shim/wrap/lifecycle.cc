// Wrappers for communicator lifecycle calls: init, split, shrink, finalize, destroy, abort, revoke.
#include "comms/comms.h"
#include "exit/exit.h"
#include "gpu/gpu.h"
#include "metrics/metrics.h"
#include "process/process.h"
#include "site/site.h"
#include "wrap/recorder.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ncclwatch {
namespace {

using trace::Api;
using trace::RecordType;

bool releases_comm(Api api) { return api == Api::kCommDestroy || api == Api::kCommAbort; }
bool suspends_or_resumes(Api api) { return api == Api::kCommSuspend || api == Api::kCommResume; }

// The fields of ncclConfig_t we read. NCCL only appends to the struct, and `size` says how
// much of it the caller's header had, so a field is read only when the caller's struct has it.
struct ConfigView {
  bool non_blocking = false;
  bool blocking_set = false;  // config->blocking given (not NCCL_CONFIG_UNDEF_INT): NCCL_COMM_BLOCKING does not apply
  std::string_view name;
};

ConfigView read_config(const ncclConfig_t* config) {
  ConfigView view;
  if (!config) return view;
  size_t size = config->size;
  if (size >= offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    view.non_blocking = config->blocking == 0;
    view.blocking_set = config->blocking != NCCL_CONFIG_UNDEF_INT;
  }
  if (size >= offsetof(ncclConfig_t, commName) + sizeof(const char*) && config->commName) {
    std::string_view name(config->commName, strnlen(config->commName, 256));
    view.name = name.substr(0, utf8_prefix_length(name, 255));  // never half a character
  }
  return view;
}

// A communicator-creating call between its begin and end records.
struct Creation {
  uint64_t call_id = 0;
  Api api = Api::kUnknown;
  uint64_t comm_id = 0;
  uint64_t parent_id = 0;
  uint64_t parent_handle = 0;  // split, shrink, grow: the communicator it came from
  int rank = -1;
  int nranks = -1;
  ConfigView config;
  CallSite site;
  // What the device's free memory was before the call: one communicator made on the calling
  // thread's device (not ncclCommInitAll's several) changes it by what that communicator took.
  bool one_comm_on_this_device = true;
  MemorySample free_before;
};

void begin_creation(Creation& c, int32_t arg0 = 0, int32_t arg1 = 0, uint64_t parent_handle = 0,
                    uint32_t split_index = 0) noexcept {
  c.call_id = next_call_id();
  safely([&] {
  capture_call_site(c.site, config().frames);
  if (c.one_comm_on_this_device) c.free_before = memory_now();
  trace::ApiEvent e = make_event(c.call_id, c.api);
  e.comm = parent_handle;
  e.comm_id = c.comm_id;
  e.parent_id = c.parent_id;
  e.rank = c.rank;
  e.nranks = c.nranks;
  e.arg0 = arg0;
  e.arg1 = arg1;
  e.split_index = split_index;
  if (c.config.non_blocking) e.flags |= trace::kFlagNonBlocking;
  if (c.site.in_torch) e.flags |= trace::kFlagTorchCaller;
  if (c.site.by_nvshmem) e.flags |= trace::kFlagNvshmemCaller;
  emit_api_event(RecordType::kCallBegin, e, &c.site, c.config.name);
  });
}

// Asks NCCL about a communicator it just made. Only for blocking comms that succeeded: a
// non-blocking one may still be initializing.
void query_comm(const RealNccl* real, ncclComm_t comm, int& rank, int& nranks, int& device) {
  int value = -1;
  if (rank < 0 && real->ncclCommUserRank && real->ncclCommUserRank(comm, &value) == ncclSuccess) rank = value;
  if (nranks < 0 && real->ncclCommCount && real->ncclCommCount(comm, &value) == ncclSuccess) nranks = value;
  if (device < 0 && real->ncclCommCuDevice && real->ncclCommCuDevice(comm, &value) == ncclSuccess) device = value;
}

// Whether the communicator is non-blocking: its config says so, or NCCL_COMM_BLOCKING=0 where the
// config leaves it open, or its init was still in progress, or (a split's with no config) its
// parent is.
bool made_non_blocking(const Creation& c, ncclResult_t result) {
  if (c.config.non_blocking || result == ncclInProgress) return true;
  if (c.config.blocking_set) return false;
  const char* env = std::getenv("NCCL_COMM_BLOCKING");
  if (env && std::strcmp(env, "0") == 0) return true;
  const CommTrack* parent = c.parent_handle ? find_comm_track(c.parent_handle) : nullptr;
  return parent && parent->set_up_unread;
}

void finish_creation(const RealNccl* real, Creation& c, ncclResult_t result, ncclComm_t comm) noexcept {
  safely([&] {
  int rank = c.rank, nranks = c.nranks, device = -1;
  if (result == ncclSuccess && comm) query_comm(real, comm, rank, nranks, device);
  trace::ApiEvent e = make_event(c.call_id, c.api);
  e.result = static_cast<int16_t>(result);
  e.comm = as_u64(comm);
  e.comm_id = comm ? c.comm_id : 0;
  e.parent_id = c.parent_id;
  e.rank = rank;
  e.nranks = nranks;
  e.device = device;
  if (c.config.non_blocking) e.flags |= trace::kFlagNonBlocking;
  // A non-blocking communicator may still be allocating when the call returns.
  CommMemory held;
  if (result == ncclSuccess && comm) {
    CommMemory taken = c.one_comm_on_this_device ? memory_change(c.free_before, true) : CommMemory{};
    held = held_at_creation(nccl_comm_memory(real, comm), taken);
  }
  e.bytes = held.bytes;
  e.flags |= held.flag;
  emit_api_event(RecordType::kCallEnd, e);
  if (!trace::succeeded_or_pending(result) || !comm) return;

  CommEntry entry;
  entry.handle = as_u64(comm);
  entry.id = c.comm_id;
  entry.parent_id = c.parent_id;
  entry.rank = rank;
  entry.nranks = nranks;
  entry.device = device;
  entry.created_by = c.api;
  entry.created_ns = e.time_ns;
  entry.made_during_exit = e.flags & trace::kFlagDuringExit;
  entry.torch_caller = c.site.in_torch;
  entry.nvshmem_caller = c.site.by_nvshmem;
  entry.memory_bytes = held.bytes;
  entry.library_id = real->library_id;
  std::memcpy(entry.site, c.site.summary, sizeof(entry.site));
  short_python_site(c.site.python, entry.python_site, sizeof(entry.python_site));
  process_group_text(c.site.python, entry.process_group, sizeof(entry.process_group));
  // memcpy from a null pointer is undefined even for 0 bytes (no commName).
  if (size_t n = utf8_prefix_length(c.config.name, sizeof(entry.name) - 1)) std::memcpy(entry.name, c.config.name.data(), n);
  registry().add_comm(entry);
  auto* track = new CommTrack();  // lives as long as the process: collectives may race a release
  track->handle = entry.handle;
  track->id = entry.id;
  track->rank = rank;
  track->nranks = nranks;
  track->held_bytes.store(held.bytes, std::memory_order_relaxed);
  if (held.flag & trace::kFlagMemoryFromNccl) track->nccl_count_bytes.store(static_cast<int64_t>(held.bytes), std::memory_order_relaxed);
  track->set_up_unread = made_non_blocking(c, result);
  track->free_change_unattributable = !c.one_comm_on_this_device;
  publish_comm(track);
  start_live_metrics();
  });
}

// For split/shrink: the parent's identity and this child's order among the parent's children.
void identify_child(Creation& c, ncclComm_t parent, int64_t color_or_tag, uint32_t& order) {
  CommEntry parent_entry;
  uint64_t parent_handle = as_u64(parent);
  c.parent_handle = parent_handle;
  if (registry().find_comm(parent_handle, parent_entry)) {
    c.parent_id = parent_entry.id;
    int64_t index = registry().take_child_index(parent_handle);
    order = static_cast<uint32_t>(index < 0 ? 0 : index);
    c.comm_id = comm_id_for_child(c.parent_id, order, color_or_tag);
  }
}

// Finalize, destroy, abort and revoke share one shape: begin, call, end, update the registry.
// Destroy and abort are collective and can hang when a peer is gone: the begin record is
// written before the call so a hung one shows as entered and never returned.
struct Teardown {
  Api api = Api::kUnknown;
  uint64_t handle = 0;
  uint64_t call_id = 0;
  bool known = false;
  CommEntry entry;
  trace::ApiEvent begin{};
  // Destroy, abort, suspend and resume: the free memory before, to compare after (no NCCL call).
  MemorySample free_before;
};

// The phase a communicator is in while `api` runs on it.
CommPhase teardown_phase(Api api) {
  if (api == Api::kCommAbort) return CommPhase::kAborting;
  if (api == Api::kCommFinalize) return CommPhase::kFinalizing;
  return CommPhase::kDestroying;
}

void begin_teardown(Teardown& t, Api api, ncclComm_t comm, int32_t arg0) noexcept {
  t.api = api;
  t.handle = as_u64(comm);
  // Before the call: no memory reading asks NCCL about a communicator on its way out.
  if (!suspends_or_resumes(api))
    if (CommTrack* track = find_comm_track(t.handle)) track->closing.store(true, std::memory_order_release);
  safely([&] {
    if (releases_comm(api) || suspends_or_resumes(api)) t.free_before = memory_now();
    t.known = registry().find_comm(t.handle, t.entry);
    t.call_id = next_call_id();
    t.begin = make_event(t.call_id, api);
    t.begin.comm = t.handle;
    t.begin.comm_id = t.known ? t.entry.id : 0;
    t.begin.rank = t.known ? t.entry.rank : -1;
    t.begin.nranks = t.known ? t.entry.nranks : -1;
    t.begin.arg0 = arg0;
    emit_api_event(RecordType::kCallBegin, t.begin);
    if (t.known && (releases_comm(api) || api == Api::kCommFinalize))
      registry().enter_teardown(t.handle, teardown_phase(api), t.begin.time_ns);
  });
}

void finish_teardown(const Teardown& t, ncclResult_t result) noexcept {
  safely([&] {
    trace::ApiEvent end = t.begin;
    end.time_ns = make_event(t.call_id, t.api).time_ns;
    end.result = static_cast<int16_t>(result);
    if (releases_comm(t.api) && trace::release_frees_comm(t.api, result)) {
      CommMemory freed = memory_change(t.free_before, false);
      end.bytes = freed.bytes;
      end.flags |= freed.flag;
    }
    emit_api_event(RecordType::kCallEnd, end);
    if (!t.known) return;
    if (suspends_or_resumes(t.api) && result == ncclSuccess)
      if (CommTrack* track = find_comm_track(t.handle))
        record_suspend_or_resume(*track, static_cast<uint16_t>(t.api), t.free_before);
    if (releases_comm(t.api)) {
      if (trace::release_frees_comm(t.api, result)) {
        // Made during exit and released: a whole life inside an exit handler, not a late release.
        bool released_late = (t.begin.flags & trace::kFlagDuringExit) && !t.entry.made_during_exit;
        registry().release_comm(t.handle, released_late, t.api);
        retire_comm(t.handle);
      }
      else
        registry().set_phase(t.handle, t.entry.phase);
    } else if (t.api == Api::kCommFinalize) {
      registry().set_phase(t.handle, trace::succeeded_or_pending(result) ? CommPhase::kFinalized : t.entry.phase);
    }
  });
}

}  // namespace
}  // namespace ncclwatch

using namespace ncclwatch;

NCCLWATCH_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommInitRank, comm, nranks, commId, rank)
  Creation c;
  c.api = trace::Api::kCommInitRank;
  c.comm_id = comm_id_from_unique_id(commId);
  c.rank = rank;
  c.nranks = nranks;
  begin_creation(c);
  ncclResult_t result = real->ncclCommInitRank(comm, nranks, commId, rank);
  finish_creation(real, c, result, comm ? *comm : nullptr);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                     ncclConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommInitRankConfig, comm, nranks, commId, rank, config)
  Creation c;
  c.api = trace::Api::kCommInitRankConfig;
  c.comm_id = comm_id_from_unique_id(commId);
  c.rank = rank;
  c.nranks = nranks;
  c.config = read_config(config);
  begin_creation(c);
  ncclResult_t result = real->ncclCommInitRankConfig(comm, nranks, commId, rank, config);
  finish_creation(real, c, result, comm ? *comm : nullptr);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                       ncclUniqueId* commIds, ncclConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommInitRankScalable, newcomm, nranks, myrank, nId, commIds, config)
  Creation c;
  c.api = trace::Api::kCommInitRankScalable;
  c.comm_id = (commIds && nId > 0) ? comm_id_from_unique_id(commIds[0]) : 0;
  c.rank = myrank;
  c.nranks = nranks;
  c.config = read_config(config);
  begin_creation(c, nId);
  ncclResult_t result = real->ncclCommInitRankScalable(newcomm, nranks, myrank, nId, commIds, config);
  finish_creation(real, c, result, newcomm ? *newcomm : nullptr);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommInitAll, comms, ndev, devlist)
  Creation c;
  c.api = trace::Api::kCommInitAll;
  c.nranks = ndev;
  c.one_comm_on_this_device = false;
  begin_creation(c, ndev);
  c.comm_id = comm_id_for_local_group(XXH3_64bits(process_info().host.data(), process_info().host.size()),
                                      static_cast<uint64_t>(process_info().pid), c.call_id);
  ncclResult_t result = real->ncclCommInitAll(comms, ndev, devlist);
  // One end record (and one registry entry) per communicator made, rank = its index.
  for (int i = 0; comms && i < ndev; ++i) {
    c.rank = i;
    finish_creation(real, c, result, trace::succeeded_or_pending(result) ? comms[i] : nullptr);
    if (!trace::succeeded_or_pending(result)) break;
  }
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                            ncclConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommSplit, comm, color, key, newcomm, config)
  Creation c;
  c.api = trace::Api::kCommSplit;
  c.config = read_config(config);
  uint32_t order = 0;
  identify_child(c, comm, color, order);
  begin_creation(c, color, key, as_u64(comm), order);
  ncclResult_t result = real->ncclCommSplit(comm, color, key, newcomm, config);
  finish_creation(real, c, result, newcomm ? *newcomm : nullptr);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommShrink, comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags)
  Creation c;
  c.api = trace::Api::kCommShrink;
  c.config = read_config(config);
  // Every surviving rank passes the same exclusion list: it tags the child like a color.
  uint64_t excluded_hash = (excludeRanksList && excludeRanksCount > 0)
                               ? XXH3_64bits(excludeRanksList, sizeof(int) * static_cast<size_t>(excludeRanksCount))
                               : 0;
  uint32_t order = 0;
  identify_child(c, comm, static_cast<int64_t>(excluded_hash), order);
  begin_creation(c, excludeRanksCount, shrinkFlags, as_u64(comm), order);
  ncclResult_t result = real->ncclCommShrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  finish_creation(real, c, result, newcomm ? *newcomm : nullptr);
  return result;
}

// Growing (NCCL 2.29) makes a new communicator with more ranks. The ranks it had make it from
// their comm, a child like a split's; the joining ranks from the unique id alone. Nothing both
// sides share identifies it, so the two sides carry different identities.
NCCLWATCH_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                           ncclComm_t* newcomm, ncclConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommGrow, comm, nRanks, uniqueId, rank, newcomm, config)
  Creation c;
  c.api = trace::Api::kCommGrow;
  c.config = read_config(config);
  c.nranks = nRanks;
  uint32_t order = 0;
  if (comm) {
    identify_child(c, comm, nRanks, order);
  } else if (uniqueId) {
    c.comm_id = comm_id_from_unique_id(*uniqueId);
    c.rank = rank;
  }
  begin_creation(c, nRanks, rank, as_u64(comm), order);
  ncclResult_t result = real->ncclCommGrow(comm, nRanks, uniqueId, rank, newcomm, config);
  finish_creation(real, c, result, newcomm ? *newcomm : nullptr);
  return result;
}

namespace ncclwatch {
namespace {
// The shape of every call on an existing comm: begin record, call, end record, registry update.
template <class Call> ncclResult_t run_teardown(trace::Api api, ncclComm_t comm, int32_t arg0, Call&& call) noexcept {
  Teardown t;
  begin_teardown(t, api, comm, arg0);
  ncclResult_t result = call();
  finish_teardown(t, result);
  return result;
}
}  // namespace
}  // namespace ncclwatch

// Suspending (NCCL 2.29) releases a communicator's memory until it is resumed: recorded as
// calls on the comm, which stays alive (and a leak if never destroyed).
NCCLWATCH_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommSuspend, comm, flags)
  return run_teardown(trace::Api::kCommSuspend, comm, flags, [&] { return real->ncclCommSuspend(comm, flags); });
}

NCCLWATCH_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommResume, comm)
  return run_teardown(trace::Api::kCommResume, comm, 0, [&] { return real->ncclCommResume(comm); });
}

NCCLWATCH_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommFinalize, comm)
  return run_teardown(trace::Api::kCommFinalize, comm, 0, [&] { return real->ncclCommFinalize(comm); });
}

NCCLWATCH_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommDestroy, comm)
  return run_teardown(trace::Api::kCommDestroy, comm, 0, [&] { return real->ncclCommDestroy(comm); });
}

NCCLWATCH_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommAbort, comm)
  return run_teardown(trace::Api::kCommAbort, comm, 0, [&] { return real->ncclCommAbort(comm); });
}

NCCLWATCH_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommRevoke, comm, revokeFlags)
  return run_teardown(trace::Api::kCommRevoke, comm, revokeFlags,
                      [&] { return real->ncclCommRevoke(comm, revokeFlags); });
}
