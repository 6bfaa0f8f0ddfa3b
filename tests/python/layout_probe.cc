// Prints, as JSON, what the Python loader (python/ncclwatch/trace_format.py) must agree with: the
// offset of every field of the record structs and their sizes (common/ncclwatch/trace_format.h),
// the record type and API numbers and names, and the analyzers' datatype, reduction and
// byte-count conventions (analyzers/model/nccl_facts.h). tests/python/test_loader.py compares.
#include "nccl_facts.h"

#include <ncclwatch/trace_format.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <iostream>

using namespace ncclwatch;
using nlohmann::json;

#define FIELD(S, f) {#f, offsetof(trace::S, f)}

int main() {
  json out;
  out["FileHeader"] = {{"size", sizeof(trace::FileHeader)},
                       {"fields", {FIELD(FileHeader, magic), FIELD(FileHeader, version), FIELD(FileHeader, min_reader_version),
                                   FIELD(FileHeader, header_bytes), FIELD(FileHeader, pid), FIELD(FileHeader, ppid),
                                   FIELD(FileHeader, start_wall_ns), FIELD(FileHeader, start_mono_ns), FIELD(FileHeader, host)}}};
  out["OpRecord"] = {{"size", sizeof(trace::OpRecord)},
                     {"fields", {FIELD(OpRecord, comm_id), FIELD(OpRecord, comm), FIELD(OpRecord, seq), FIELD(OpRecord, count),
                                 FIELD(OpRecord, stream), FIELD(OpRecord, host_begin_ns), FIELD(OpRecord, host_end_ns),
                                 FIELD(OpRecord, launch_id), FIELD(OpRecord, tid), FIELD(OpRecord, api), FIELD(OpRecord, result),
                                 FIELD(OpRecord, peer), FIELD(OpRecord, rank), FIELD(OpRecord, nranks), FIELD(OpRecord, datatype),
                                 FIELD(OpRecord, group_depth), FIELD(OpRecord, flags), FIELD(OpRecord, redop)}}};
  out["GpuTimingRecord"] = {{"size", sizeof(trace::GpuTimingRecord)},
                            {"fields", {FIELD(GpuTimingRecord, launch_id), FIELD(GpuTimingRecord, stream),
                                        FIELD(GpuTimingRecord, gpu_begin_ns), FIELD(GpuTimingRecord, gpu_end_ns),
                                        FIELD(GpuTimingRecord, clock_error_ns), FIELD(GpuTimingRecord, ops),
                                        FIELD(GpuTimingRecord, flags)}}};
  out["ApiEvent"] = {{"size", sizeof(trace::ApiEvent)},
                     {"fields", {FIELD(ApiEvent, call_id), FIELD(ApiEvent, time_ns), FIELD(ApiEvent, tid), FIELD(ApiEvent, api),
                                 FIELD(ApiEvent, result), FIELD(ApiEvent, comm), FIELD(ApiEvent, comm_id),
                                 FIELD(ApiEvent, parent_id), FIELD(ApiEvent, resource), FIELD(ApiEvent, bytes),
                                 FIELD(ApiEvent, rank), FIELD(ApiEvent, nranks), FIELD(ApiEvent, device), FIELD(ApiEvent, arg0),
                                 FIELD(ApiEvent, arg1), FIELD(ApiEvent, flags), FIELD(ApiEvent, nframes),
                                 FIELD(ApiEvent, name_len), FIELD(ApiEvent, split_index), FIELD(ApiEvent, site_len),
                                 FIELD(ApiEvent, library)}}};
  out["StallRecord"] = {{"size", sizeof(trace::StallRecord)},
                        {"fields", {FIELD(StallRecord, time_ns), FIELD(StallRecord, launch_id), FIELD(StallRecord, comm_id),
                                    FIELD(StallRecord, seq), FIELD(StallRecord, enqueued_ns), FIELD(StallRecord, api),
                                    FIELD(StallRecord, state), FIELD(StallRecord, ncomms)}}};
  out["ExitRecord"] = {{"size", sizeof(trace::ExitRecord)},
                       {"fields", {FIELD(ExitRecord, time_ns), FIELD(ExitRecord, reason), FIELD(ExitRecord, signal),
                                   FIELD(ExitRecord, live_comms), FIELD(ExitRecord, live_resources),
                                   FIELD(ExitRecord, lost_records)}}};
  out["StringsRecord"] = {{"size", sizeof(trace::StringsRecord)},
                          {"fields", {FIELD(StringsRecord, time_ns), FIELD(StringsRecord, bytes)}}};
  out["constants"] = {{"version", trace::kVersion}, {"oldest_readable", trace::kOldestReadableFormat},
                      {"header_bytes", trace::kHeaderBytes}, {"commit_mark", trace::kCommitMark},
                      {"max_record_bytes", trace::kMaxRecordBytes}, {"op_timed", trace::kOpTimed},
                      {"op_captured", trace::kOpCaptured}, {"timing_has_begin", trace::kTimingHasBegin}};
  json types = json::object();
#define RECORD_TYPE(Id, value, name) types[std::to_string(value)] = name;
  NCCLWATCH_RECORD_TYPES(RECORD_TYPE)
#undef RECORD_TYPE
  out["record_types"] = types;
  json apis = json::object(), per_rank = json::array();
#define NCCLWATCH_TRACED(kind, name, since, Id, value)                                                     \
  apis[std::to_string(value)] = #name;                                                                     \
  if (report::bytes_of(trace::Api::k##Id, 1, 0, 2) == 2) per_rank.push_back(#name);
#include <ncclwatch/nccl_api.def>
  out["apis"] = apis;
  out["count_per_rank"] = per_rank;
  json datatypes = json::array();
  for (uint8_t d = 0; d < 12; ++d) datatypes.push_back({report::datatype_name(d), report::datatype_size(d)});
  out["datatypes"] = datatypes;
  json redops = json::object();
  for (int32_t r = -1; r < 8; ++r) redops[std::to_string(r)] = report::redop_name(r);
  out["redops"] = redops;
  std::cout << out.dump(1) << "\n";
  return 0;
}
