// Wrappers for NCCL resources: allocations, registrations, windows, device communicators and
// custom reduction ops. Each acquire is remembered until its release; what is left at exit is
// reported. Resources tied to a communicator are freed by NCCL with it (registry.cc).
#include "comms/comms.h"
#include "process/process.h"
#include "resolve/resolve.h"
#include "site/site.h"
#include "wrap/recorder.h"

#include <algorithm>
#include <cstring>

namespace ncclwatch {
namespace {

using trace::Api;
using trace::RecordType;

struct ResourceCall {
  Api api = Api::kUnknown;
  uint64_t call_id = 0;
  trace::ApiEvent begin{};
  CallSite site;
};

// How much of the call site a resource call records. A release needs none (its acquisition has
// it). PyTorch makes and destroys a PreMulSum operator around every collective that uses one
// (FSDP's reduce-scatters): it gets the caller's few frames, without the Python lines, unwound
// once per calling instruction (`caller`, the wrapper's return address) and then reused.
enum class Site { kNone, kFull, kNearest };

static_assert(sizeof(NearestSiteMemo::summary) == sizeof(CallSite::summary));

void capture_nearest_site(CallSite& site, const void* caller) noexcept {
  NearestSiteMemo& memo = t_thread.nearest_site;
  uint64_t key = reinterpret_cast<uint64_t>(caller);
  if (key && key == memo.caller) {
    site.nframes = memo.nframes;
    std::memcpy(site.frames, memo.frames, sizeof(memo.frames));
    std::memcpy(site.summary, memo.summary, sizeof(memo.summary));
    site.in_torch = memo.in_torch;
    return;
  }
  capture_call_site(site, std::min(config().frames, NearestSiteMemo::kFrames), false);
  // A caller inside the shim is a dlsym'd library's trampoline, shared by all its callers.
  if (!caller || is_inside_shim(caller)) return;
  memo.caller = key;
  memo.nframes = std::min(site.nframes, NearestSiteMemo::kFrames);
  std::memcpy(memo.frames, site.frames, sizeof(memo.frames));
  std::memcpy(memo.summary, site.summary, sizeof(memo.summary));
  memo.in_torch = site.in_torch;
}

void begin_resource_call(ResourceCall& call, Api api, ncclComm_t comm, uint64_t resource, uint64_t bytes,
                         Site site, const void* caller = nullptr) noexcept {
  call.api = api;
  bool capture_site = site != Site::kNone;
  safely([&] {
    call.call_id = next_call_id();
    if (site == Site::kFull) capture_call_site(call.site, config().frames);
    if (site == Site::kNearest) capture_nearest_site(call.site, caller);
    call.begin = make_event(call.call_id, api);
    call.begin.comm = as_u64(comm);
    call.begin.resource = resource;
    call.begin.bytes = bytes;
    CommEntry entry;
    if (comm && registry().find_comm(as_u64(comm), entry)) {
      call.begin.comm_id = entry.id;
      call.begin.rank = entry.rank;
      call.begin.nranks = entry.nranks;
    }
    emit_api_event(RecordType::kCallBegin, call.begin, capture_site ? &call.site : nullptr);
  });
}

trace::ApiEvent end_event(const ResourceCall& call, ncclResult_t result, uint64_t resource) {
  trace::ApiEvent end = call.begin;
  end.time_ns = make_event(call.call_id, call.api).time_ns;
  end.result = static_cast<int16_t>(result);
  end.resource = resource;
  return end;
}

void finish_acquire(const ResourceCall& call, ncclResult_t result, uint64_t resource) noexcept {
  safely([&] {
    trace::ApiEvent end = end_event(call, result, resource);
    emit_api_event(RecordType::kCallEnd, end);
    if (!trace::succeeded_or_pending(result)) return;
    ResourceEntry entry;
    entry.acquired_by = call.api;
    entry.handle = resource;
    entry.comm = end.comm;
    entry.comm_id = end.comm_id;
    entry.rank = end.rank;
    entry.bytes = end.bytes;
    entry.created_ns = end.time_ns;
    std::memcpy(entry.site, call.site.summary, sizeof(entry.site));
    short_python_site(call.site.python, entry.python_site, sizeof(entry.python_site));
    registry().add_resource(entry);
  });
}

void finish_release(const ResourceCall& call, ncclResult_t result, Api acquired_by) noexcept {
  safely([&] {
    emit_api_event(RecordType::kCallEnd, end_event(call, result, call.begin.resource));
    if (result == ncclSuccess) registry().release_resource(acquired_by, call.begin.resource, call.begin.comm);
  });
}

}  // namespace
}  // namespace ncclwatch

using namespace ncclwatch;

NCCLWATCH_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclMemAlloc, ptr, size)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kMemAlloc, nullptr, 0, size, Site::kFull);
  ncclResult_t result = real->ncclMemAlloc(ptr, size);
  finish_acquire(call, result, ptr ? as_u64(*ptr) : 0);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclMemFree(void* ptr) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclMemFree, ptr)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kMemFree, nullptr, as_u64(ptr), 0, Site::kNone);
  ncclResult_t result = real->ncclMemFree(ptr);
  finish_release(call, result, trace::Api::kMemAlloc);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommRegister, comm, buff, size, handle)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kCommRegister, comm, as_u64(buff), size, Site::kFull);
  ncclResult_t result = real->ncclCommRegister(comm, buff, size, handle);
  finish_acquire(call, result, handle ? as_u64(*handle) : 0);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommDeregister, comm, handle)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kCommDeregister, comm, as_u64(handle), 0, Site::kNone);
  ncclResult_t result = real->ncclCommDeregister(comm, handle);
  finish_release(call, result, trace::Api::kCommRegister);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                     int winFlags) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommWindowRegister, comm, buff, size, win, winFlags)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kCommWindowRegister, comm, as_u64(buff), size, Site::kFull);
  ncclResult_t result = real->ncclCommWindowRegister(comm, buff, size, win, winFlags);
  finish_acquire(call, result, win ? as_u64(*win) : 0);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclCommWindowDeregister, comm, win)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kCommWindowDeregister, comm, as_u64(win), 0, Site::kNone);
  ncclResult_t result = real->ncclCommWindowDeregister(comm, win);
  finish_release(call, result, trace::Api::kCommWindowRegister);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                                                struct ncclDevComm* outDevComm) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclDevCommCreate, comm, reqs, outDevComm)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kDevCommCreate, comm, 0, 0, Site::kFull);
  ncclResult_t result = real->ncclDevCommCreate(comm, reqs, outDevComm);
  // The caller keeps the device comm at this address and passes it back to destroy it.
  finish_acquire(call, result, as_u64(outDevComm));
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclDevCommDestroy, comm, devComm)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kDevCommDestroy, comm, as_u64(devComm), 0, Site::kNone);
  ncclResult_t result = real->ncclDevCommDestroy(comm, devComm);
  finish_release(call, result, trace::Api::kDevCommCreate);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclRedOpCreatePreMulSum, op, scalar, datatype, residence, comm)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kRedOpCreatePreMulSum, comm, 0, 0, Site::kNearest, __builtin_return_address(0));
  ncclResult_t result = real->ncclRedOpCreatePreMulSum(op, scalar, datatype, residence, comm);
  finish_acquire(call, result, op ? static_cast<uint64_t>(*op) : 0);
  return result;
}

NCCLWATCH_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclRedOpDestroy, op, comm)
  ResourceCall call;
  begin_resource_call(call, trace::Api::kRedOpDestroy, comm, static_cast<uint64_t>(op), 0, Site::kNone);
  ncclResult_t result = real->ncclRedOpDestroy(op, comm);
  finish_release(call, result, trace::Api::kRedOpCreatePreMulSum);
  return result;
}
