// What each NCCL function is, from the API table (nccl_api.def): the Api values the trace stores
// (stable), each one's name and kind, which call releases what another acquired, and the
// ncclResult_t values readers tell apart. Shared by the shim and the analyzers; included by
// trace_format.h.
#pragma once

#include <cstdint>

namespace ncclwatch::trace {

// Which API a record is about, where values are stable.
enum class Api : uint16_t {
  kUnknown = 0,
#define NCCLWATCH_TRACED(kind, name, since, Id, value) k##Id = value,
#include <ncclwatch/nccl_api.def>
};

// What kind of NCCL function an Api value is (the table's kinds).
enum class ApiKind : uint8_t { kUnknown, kLifecycle, kResource, kCollective, kP2P, kOneSided, kGroup };

// The ncclResult_t values readers tell apart (nccl.h's; the shim checks them against it).
inline constexpr int kNcclSuccess = 0;
inline constexpr int kNcclInProgress = 7;
// A call that worked: a non-blocking communicator's calls answer ncclInProgress, no failure.
constexpr bool succeeded_or_pending(int result) { return result == kNcclSuccess || result == kNcclInProgress; }

// Names used in reports and JSON.
constexpr const char* api_name(Api api) {
  switch (api) {
#define NCCLWATCH_TRACED(kind, name, since, Id, value) \
  case Api::k##Id:                                     \
    return #name;
#include <ncclwatch/nccl_api.def>
    case Api::kUnknown: break;
  }
  return "unknown";
}

constexpr ApiKind api_kind(Api api) {
  switch (api) {
#define NCCLWATCH_KIND_LIFECYCLE ApiKind::kLifecycle
#define NCCLWATCH_KIND_RESOURCE ApiKind::kResource
#define NCCLWATCH_KIND_COLLECTIVE ApiKind::kCollective
#define NCCLWATCH_KIND_P2P ApiKind::kP2P
#define NCCLWATCH_KIND_ONE_SIDED ApiKind::kOneSided
#define NCCLWATCH_KIND_GROUP ApiKind::kGroup
#define NCCLWATCH_TRACED(kind, name, since, Id, value) \
  case Api::k##Id:                                     \
    return NCCLWATCH_KIND_##kind;
#include <ncclwatch/nccl_api.def>
#undef NCCLWATCH_KIND_LIFECYCLE
#undef NCCLWATCH_KIND_RESOURCE
#undef NCCLWATCH_KIND_COLLECTIVE
#undef NCCLWATCH_KIND_P2P
#undef NCCLWATCH_KIND_ONE_SIDED
#undef NCCLWATCH_KIND_GROUP
    case Api::kUnknown: break;
  }
  return ApiKind::kUnknown;
}

constexpr bool is_point_to_point(Api api) { return api_kind(api) == ApiKind::kP2P; }
constexpr bool is_collective(Api api) { return api_kind(api) == ApiKind::kCollective; }
// Ops without a sequence number: nothing pairs them call for call across ranks.
constexpr bool is_one_sided(Api api) { return api_kind(api) == ApiKind::kOneSided; }

// The kind of resource an acquiring call makes, as named in reports and JSON.
constexpr const char* resource_kind(Api acquired_by) {
  switch (acquired_by) {
    case Api::kMemAlloc: return "allocation";
    case Api::kCommRegister: return "registration";
    case Api::kCommWindowRegister: return "window";
    case Api::kDevCommCreate: return "device_comm";
    case Api::kRedOpCreatePreMulSum: return "redop";
    default: return "resource";
  }
}

// The call that releases what `acquired_by` made.
constexpr Api releasing_api(Api acquired_by) {
  switch (acquired_by) {
    case Api::kMemAlloc: return Api::kMemFree;
    case Api::kCommRegister: return Api::kCommDeregister;
    case Api::kCommWindowRegister: return Api::kCommWindowDeregister;
    case Api::kDevCommCreate: return Api::kDevCommDestroy;
    case Api::kRedOpCreatePreMulSum: return Api::kRedOpDestroy;
    default: return Api::kUnknown;
  }
}

// Whether a destroy or abort freed its communicator: an abort always does, a failed destroy
// leaves it as it was.
constexpr bool release_frees_comm(Api release_api, int result) {
  return release_api == Api::kCommAbort || result == kNcclSuccess;
}

constexpr bool creates_comm(Api api) {
  return api == Api::kCommInitRank || api == Api::kCommInitRankConfig || api == Api::kCommInitAll ||
         api == Api::kCommInitRankScalable || api == Api::kCommSplit || api == Api::kCommShrink || api == Api::kCommGrow;
}

}  // namespace ncclwatch::trace
