// Prints, as JSON, what the Python loader (python/ncclwatch/trace_format.py) must agree with: the
// offset of every field of the record structs and their sizes (common/ncclwatch/trace_format.h),
// the record type and API numbers and names, and the analyzers' datatype, reduction and
// byte-count conventions (analyzers/model/nccl_facts.h). tests/python/test_loader.py compares.
#include "model/nccl_facts.h"

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
                                 FIELD(OpRecord, group_depth), FIELD(OpRecord, flags), FIELD(OpRecord, redop),
                                 FIELD(OpRecord, graph)}}};
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
                                 FIELD(ApiEvent, library), FIELD(ApiEvent, python_site_len)}}};
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
  out["LostRecord"] = {{"size", sizeof(trace::LostRecord)},
                       {"fields", {FIELD(LostRecord, time_ns), FIELD(LostRecord, count)}}};
  // Retention (format 4).
  out["RingChunkRecord"] = {{"size", sizeof(trace::RingChunkRecord)},
                            {"fields", {FIELD(RingChunkRecord, ring_slots), FIELD(RingChunkRecord, ordinal),
                                        FIELD(RingChunkRecord, slots)}}};
  out["RingSlot"] = {{"size", sizeof(trace::RingSlot)},
                     {"fields", {FIELD(RingSlot, stamp), FIELD(RingSlot, op), FIELD(RingSlot, timing)}}};
  out["CompactOp"] = {{"size", sizeof(trace::CompactOp)},
                      {"fields", {FIELD(CompactOp, seq), FIELD(CompactOp, count), FIELD(CompactOp, host_begin_ns),
                                  FIELD(CompactOp, launch_id), FIELD(CompactOp, host_duration), FIELD(CompactOp, comm_index),
                                  FIELD(CompactOp, peer), FIELD(CompactOp, redop), FIELD(CompactOp, stream_index),
                                  FIELD(CompactOp, api), FIELD(CompactOp, result), FIELD(CompactOp, datatype),
                                  FIELD(CompactOp, group_depth), FIELD(CompactOp, flags), FIELD(CompactOp, graph)}}};
  out["CompactTiming"] = {{"size", sizeof(trace::CompactTiming)},
                          {"fields", {FIELD(CompactTiming, launch_id), FIELD(CompactTiming, stream),
                                      FIELD(CompactTiming, gpu_begin_ns), FIELD(CompactTiming, gpu_end_ns),
                                      FIELD(CompactTiming, clock_error_ns), FIELD(CompactTiming, ops),
                                      FIELD(CompactTiming, flags)}}};
  out["OpTotalsRecord"] = {{"size", sizeof(trace::OpTotalsRecord)}, {"fields", {FIELD(OpTotalsRecord, entries)}}};
  out["OpTotalsEntry"] = {{"size", sizeof(trace::OpTotalsEntry)},
                          {"fields", {FIELD(OpTotalsEntry, key), FIELD(OpTotalsEntry, count), FIELD(OpTotalsEntry, comm_index),
                                      FIELD(OpTotalsEntry, api), FIELD(OpTotalsEntry, datatype), FIELD(OpTotalsEntry, ready),
                                      FIELD(OpTotalsEntry, calls), FIELD(OpTotalsEntry, host_ns),
                                      FIELD(OpTotalsEntry, gpu_timed), FIELD(OpTotalsEntry, gpu_ns),
                                      FIELD(OpTotalsEntry, first_ns), FIELD(OpTotalsEntry, last_ns),
                                      FIELD(OpTotalsEntry, gpu_histogram)}}};
  out["CommRefRecord"] = {{"size", sizeof(trace::CommRefRecord)},
                          {"fields", {FIELD(CommRefRecord, time_ns), FIELD(CommRefRecord, comm_id), FIELD(CommRefRecord, comm),
                                      FIELD(CommRefRecord, index), FIELD(CommRefRecord, rank), FIELD(CommRefRecord, nranks)}}};
  out["StreamRefRecord"] = {{"size", sizeof(trace::StreamRefRecord)},
                            {"fields", {FIELD(StreamRefRecord, time_ns), FIELD(StreamRefRecord, stream),
                                        FIELD(StreamRefRecord, index)}}};
  out["ThreadRefRecord"] = {{"size", sizeof(trace::ThreadRefRecord)},
                            {"fields", {FIELD(ThreadRefRecord, time_ns), FIELD(ThreadRefRecord, launch_prefix),
                                        FIELD(ThreadRefRecord, tid)}}};
  out["constants"] = {{"version", trace::kVersion}, {"oldest_readable", trace::kOldestReadableFormat},
                      {"header_bytes", trace::kHeaderBytes}, {"commit_mark", trace::kCommitMark},
                      {"max_record_bytes", trace::kMaxRecordBytes}, {"op_timed", trace::kOpTimed},
                      {"op_captured", trace::kOpCaptured}, {"timing_has_begin", trace::kTimingHasBegin},
                      {"max_chunk_record_bytes", trace::kMaxChunkRecordBytes},
                      {"ring_slot_bytes", trace::kRingSlotBytes},
                      {"ring_chunk_header_bytes", trace::kRingChunkHeaderBytes},
                      {"op_totals_header_bytes", trace::kOpTotalsHeaderBytes},
                      {"max_ring_chunks", trace::kMaxRingChunks},
                      {"totals_buckets", trace::kTotalsBuckets},
                      {"launch_prefix_shift", trace::kLaunchPrefixShift},
                      {"compact_duration_micros", trace::kCompactDurationMicros},
                      {"ring_kinds", {static_cast<int>(trace::RingKind::kWriting), static_cast<int>(trace::RingKind::kOp),
                                      static_cast<int>(trace::RingKind::kGpuTiming)}}};
  json floors = json::array();
  for (int b = 0; b < trace::kTotalsBuckets; ++b) floors.push_back(trace::totals_bucket_floor_ns(b));
  out["totals_bucket_floor_ns"] = floors;
  json types = json::object();
#define RECORD_TYPE(Id, value, name) types[std::to_string(value)] = name;
  NCCLWATCH_RECORD_TYPES(RECORD_TYPE)
#undef RECORD_TYPE
  out["record_types"] = types;
  json apis = json::object(), per_rank = json::array();
#define NCCLWATCH_TRACED(kind, name, since, Id, value)                                                     \
  apis[std::to_string(value)] = #name;                                                                     \
  if (model::bytes_of(trace::Api::k##Id, 1, 0, 2) == 2) per_rank.push_back(#name);
#include <ncclwatch/nccl_api.def>
  out["apis"] = apis;
  out["count_per_rank"] = per_rank;
  json datatypes = json::array();
  for (uint8_t d = 0; d < 12; ++d) datatypes.push_back({model::datatype_name(d), model::datatype_size(d)});
  out["datatypes"] = datatypes;
  json redops = json::object();
  for (int32_t r = -1; r < 8; ++r) redops[std::to_string(r)] = model::redop_name(r);
  out["redops"] = redops;
  std::cout << out.dump(1) << "\n";
  return 0;
}
