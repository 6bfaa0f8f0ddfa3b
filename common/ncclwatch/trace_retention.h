// The trace's retention parts (format 4): the ring of recent ops, the totals table and the Ref
// records the ring's ops name, with the budget that sizes them. Part of trace_format.h, which
// includes it where it stands (in its own file for length): include trace_format.h.
#pragma once

#ifndef NCCLWATCH_INSIDE_TRACE_FORMAT
#error "include <ncclwatch/trace_format.h>, not this part of it"
#endif

namespace ncclwatch::trace {

// ---------------------------------------------------------------------------------------------
// Retention (format 4). A trace has three parts, all in the one record stream above:
//   history    every record but ops and GPU timings: lifecycles, resources, libraries, notices,
//              stalls, exits, and the Ref records below. Never overwritten.
//   ring       the newest ops and GPU timings, in fixed 64-byte slots spread over RingChunk
//              records (allocated as the first lap reaches them). Slot i of the run lands at
//              ring position i % ring_slots; the reader puts the window back in order by i.
//   totals     one OpTotals table: per (communicator, op, count, datatype) the calls, host and
//              GPU time and a GPU latency histogram of the whole run, updated in place.
// Every part is written straight into the shared file mapping, so a SIGKILL loses nothing
// committed. Sizes come from NCCLWATCH_MAX_MB (see trace_budget()).

inline constexpr uint32_t kRingSlotBytes = 64;
inline constexpr uint32_t kMaxRingChunks = 4096;

// A ring slot's first word. 0: never written. Otherwise (index + 1) << 8 | kind, where kind 0
// means a writer is filling it (or died doing so: the reader skips it).
enum class RingKind : uint8_t { kWriting = 0, kOp = 1, kGpuTiming = 2 };
constexpr uint64_t ring_stamp(uint64_t index, RingKind kind) { return (index + 1) << 8 | static_cast<uint8_t>(kind); }
constexpr RingKind ring_stamp_kind(uint64_t stamp) { return static_cast<RingKind>(stamp & 0xff); }
constexpr uint64_t ring_stamp_index(uint64_t stamp) { return (stamp >> 8) - 1; }  // stamp != 0

// CompactOp.flags, besides the kOp* flags (low byte)
inline constexpr uint16_t kCompactDurationMicros = 1u << 15;  // host_duration counts microseconds

// An OpRecord in 56 bytes (after the slot's stamp): the communicator and the stream interned
// (CommRef, StreamRef), the caller's thread implied by launch_id's prefix (ThreadRef), the host
// end as a duration.
struct CompactOp {
  uint64_t seq;
  uint64_t count;
  int64_t host_begin_ns;
  uint64_t launch_id;
  uint32_t host_duration;  // ns, or us with kCompactDurationMicros; saturates
  uint32_t comm_index;     // CommRef.index; 0: no communicator known
  int32_t peer;
  int16_t redop;           // saturates at INT16_MAX
  uint16_t stream_index;   // StreamRef.index; 0: the null stream or unknown
  uint8_t api;
  int8_t result;
  uint8_t datatype;
  uint8_t group_depth;
  uint16_t flags;          // kOp* | kCompact*
  uint16_t graph;          // OpRecord.graph (saturates)
};
static_assert(sizeof(CompactOp) == kRingSlotBytes - 8);

// A GpuTimingRecord's body (after the slot's stamp).
struct CompactTiming {
  uint64_t launch_id;
  uint64_t stream;
  int64_t gpu_begin_ns;
  int64_t gpu_end_ns;
  int64_t clock_error_ns;
  uint32_t ops;
  uint32_t flags;
  uint64_t reserved;
};
static_assert(sizeof(CompactTiming) == kRingSlotBytes - 8);

struct RingSlot {
  uint64_t stamp;
  union {
    CompactOp op;
    CompactTiming timing;
  };
};
static_assert(sizeof(RingSlot) == kRingSlotBytes);

// Followed, after padding to 64 bytes, by `slots` RingSlots: ring positions
// [ordinal * slots, (ordinal + 1) * slots). Committed when made; each slot commits itself.
struct RingChunkRecord {
  RecordHeader h;
  uint64_t ring_slots;   // the whole ring's positions (the same in every chunk)
  uint32_t ordinal;
  uint32_t slots;
  uint64_t reserved[4];
};
inline constexpr uint32_t kRingChunkHeaderBytes = 64;
static_assert(sizeof(RingChunkRecord) <= kRingChunkHeaderBytes);

// GPU latency histogram of the totals: bucket b holds durations in [2^(10 + b/2), 2^(10 + (b+1)/2))
// ns, half-octaves from 1 us (bucket 0 also takes anything shorter) to ~8.6 s (the last, longer).
inline constexpr int kTotalsBuckets = 46;
constexpr int totals_bucket(uint64_t ns) {
  if (ns < 1024) return 0;
  int log2 = 63 - __builtin_clzll(ns);
  int half = (ns >> (log2 - 1)) & 1;  // upper half of the octave (ns >= 1024, so log2 >= 10)
  int b = 2 * (log2 - 10) + half;
  return b < kTotalsBuckets ? b : kTotalsBuckets - 1;
}
// The smallest duration bucket b holds, in ns.
constexpr double totals_bucket_floor_ns(int b) {
  double v = 1024.0;
  for (int i = 0; i < b / 2; ++i) v *= 2;
  return b % 2 ? v * 1.5 : v;
}

// One (communicator, op, count, datatype) of the totals table, 256 bytes. Claimed by a
// compare-and-swap of `key` (a hash, never 0), then filled and marked `ready`; the counters are
// relaxed atomic adds. Entry 0 of a table counts the calls of keys that found no free entry.
struct OpTotalsEntry {
  uint64_t key;
  uint64_t count;
  uint32_t comm_index;      // CommRef.index
  uint16_t api;
  uint8_t datatype;
  uint8_t ready;            // 1 once the fields above are written
  uint64_t calls;
  uint64_t host_ns;         // summed enqueue time
  uint64_t gpu_timed;       // launches of this op alone that got a GPU timing
  uint64_t gpu_ns;          // their summed GPU time
  int64_t first_ns;         // host time of the first call (CLOCK_MONOTONIC)
  int64_t last_ns;          // ... and of the latest
  uint32_t gpu_histogram[kTotalsBuckets];
};
static_assert(sizeof(OpTotalsEntry) == 256);

// Followed, after padding to 64 bytes, by `entries` OpTotalsEntry.
struct OpTotalsRecord {
  RecordHeader h;
  uint32_t entries;
  uint32_t reserved0;
  uint64_t reserved[5];
};
inline constexpr uint32_t kOpTotalsHeaderBytes = 64;
static_assert(sizeof(OpTotalsRecord) <= kOpTotalsHeaderBytes);

// Written once per communicator (per handle for one the shim never saw made) before its first
// ring op names `index`.
struct CommRefRecord {
  RecordHeader h;
  int64_t time_ns;
  uint64_t comm_id;
  uint64_t comm;       // handle
  uint32_t index;      // from 1
  int32_t rank;
  int32_t nranks;
  uint32_t reserved;
};

struct StreamRefRecord {
  RecordHeader h;
  int64_t time_ns;
  uint64_t stream;
  uint32_t index;      // from 1
  uint32_t reserved;
};

// Launch ids are (thread prefix << 40) | count; this names the thread of a prefix.
struct ThreadRefRecord {
  RecordHeader h;
  int64_t time_ns;
  uint64_t launch_prefix;  // launch_id >> 40
  uint32_t tid;
  uint32_t reserved;
};
inline constexpr int kLaunchPrefixShift = 40;

// How NCCLWATCH_MAX_MB is spent: 3/4 on the ring, about 1.5 % (64 to 4096 entries) on the totals,
// the rest on the history. Chunks are powers of two slots, at most kMaxRingChunks of them.
struct TraceBudget {
  uint64_t ring_slots;
  uint32_t chunk_slots;
  uint32_t ring_chunks;
  uint32_t totals_entries;
  uint64_t ring_bytes() const { return uint64_t{ring_chunks} * (kRingChunkHeaderBytes + uint64_t{chunk_slots} * kRingSlotBytes); }
  uint64_t totals_bytes() const { return kOpTotalsHeaderBytes + uint64_t{totals_entries} * sizeof(OpTotalsEntry); }
};
constexpr TraceBudget trace_budget(uint64_t max_bytes) {
  TraceBudget b{};
  uint64_t want_slots = max_bytes / 4 * 3 / kRingSlotBytes;
  uint64_t chunk = 256;
  while (chunk < 16384 && chunk * 64 < want_slots) chunk *= 2;  // about 64 chunks, 16-1024 KiB each
  while (chunk * kMaxRingChunks < want_slots) chunk *= 2;
  b.chunk_slots = static_cast<uint32_t>(chunk);
  uint64_t chunks = want_slots / chunk;
  b.ring_chunks = static_cast<uint32_t>(chunks < 2 ? 2 : chunks);
  b.ring_slots = uint64_t{b.ring_chunks} * chunk;
  uint64_t entries = max_bytes / 64 / sizeof(OpTotalsEntry);
  b.totals_entries = static_cast<uint32_t>(entries < 64 ? 64 : entries > 4096 ? 4096 : entries);
  return b;
}

}  // namespace ncclwatch::trace
