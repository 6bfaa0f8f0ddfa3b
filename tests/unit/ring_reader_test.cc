// The reader on the ring of format 4, on files made byte by byte: the window put back in order,
// slots a writer left half-written or a lap behind skipped, names resolved, totals handed on.
#include "model/trace_reader.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace ncclwatch;
using namespace ncclwatch::trace;
namespace fs = std::filesystem;

namespace {

// A format-4 file under construction.
class TraceBytes {
 public:
  TraceBytes() : bytes_(kHeaderBytes) {
    FileHeader h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.version = kVersion;
    h.min_reader_version = kMinReadableVersion;
    h.header_bytes = kHeaderBytes;
    h.pid = 42;
    std::memcpy(bytes_.data(), &h, sizeof(h));
  }
  // Appends a committed record of `size` bytes; returns its offset.
  template <class T> size_t add(RecordType type, const T& body, size_t size = sizeof(T)) {
    size_t at = bytes_.size();
    bytes_.resize(at + padded_size(size));
    std::memcpy(bytes_.data() + at, &body, sizeof(T));
    auto* h = reinterpret_cast<RecordHeader*>(bytes_.data() + at);
    h->size = static_cast<uint32_t>(padded_size(size));
    h->type = static_cast<uint16_t>(type);
    h->commit = kCommitMark;
    return at;
  }
  RingSlot& slot_at(size_t offset) { return *reinterpret_cast<RingSlot*>(bytes_.data() + offset); }
  OpTotalsEntry& entry_at(size_t offset) { return *reinterpret_cast<OpTotalsEntry*>(bytes_.data() + offset); }
  std::string save(const std::string& name) {
    fs::path dir = fs::temp_directory_path() / ("ncclwatch-ring-" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes_.data()),
                                                static_cast<std::streamsize>(bytes_.size()));
    return path;
  }

 private:
  std::vector<std::byte> bytes_;
};

constexpr uint32_t kChunkSlots = 4;
constexpr uint64_t kRingSlots = 8;

// A ring of 2 chunks x 4 slots (the second chunk first in the file, as a writer racing to make
// them may leave it), holding indices 10..17: the run wrote 18 records, the newest 8 remain.
struct RingFile {
  TraceBytes t;
  size_t slots[kRingSlots] = {};  // offset of each ring position
  RingFile() {
    CommRefRecord comm{};
    comm.time_ns = 1;
    comm.comm_id = 0xC0FFEE;
    comm.comm = 0x1000;
    comm.index = 1;
    comm.rank = 1;
    comm.nranks = 2;
    t.add(RecordType::kCommRef, comm);
    StreamRefRecord stream{};
    stream.stream = 0x5000;
    stream.index = 1;
    t.add(RecordType::kStreamRef, stream);
    ThreadRefRecord thread{};
    thread.launch_prefix = 3;
    thread.tid = 777;
    t.add(RecordType::kThreadRef, thread);
    for (uint32_t ordinal : {1u, 0u}) {
      RingChunkRecord chunk{};
      chunk.ring_slots = kRingSlots;
      chunk.ordinal = ordinal;
      chunk.slots = kChunkSlots;
      size_t at = t.add(RecordType::kRingChunk, chunk, kRingChunkHeaderBytes + kChunkSlots * kRingSlotBytes);
      for (uint32_t s = 0; s < kChunkSlots; ++s) slots[ordinal * kChunkSlots + s] = at + kRingChunkHeaderBytes + s * kRingSlotBytes;
    }
    for (uint64_t index = 10; index < 18; ++index) {
      RingSlot& slot = t.slot_at(slots[index % kRingSlots]);
      slot.stamp = ring_stamp(index, RingKind::kOp);
      slot.op.seq = index;
      slot.op.count = 256;
      slot.op.host_begin_ns = static_cast<int64_t>(index * 1000);
      slot.op.host_duration = 50;
      slot.op.launch_id = (uint64_t{3} << kLaunchPrefixShift) | index;
      slot.op.comm_index = 1;
      slot.op.stream_index = 1;
      slot.op.peer = -1;
      slot.op.redop = 0;
      slot.op.api = static_cast<uint8_t>(Api::kAllReduce);
      slot.op.datatype = 7;
    }
  }
};

struct Read {
  bool ok = false;
  std::vector<OpRecord> ops;
  std::vector<model::OpTotalsRow> totals;
  model::ReadStats stats;
  std::vector<model::TraceProblem> problems;
};

Read read(const std::string& path) {
  Read r;
  FileHeader header{};
  r.ok = model::read_trace(
      path,
      [&](const model::RecordView& v) {
        if (v.type == RecordType::kCollective) r.ops.push_back(*v.as<OpRecord>());
        if (v.type == RecordType::kOpTotals) r.totals.push_back(*v.as<model::OpTotalsRow>());
      },
      header, r.stats, r.problems);
  return r;
}

std::vector<uint64_t> seqs(const Read& r) {
  std::vector<uint64_t> out;
  for (const OpRecord& o : r.ops) out.push_back(o.seq);
  return out;
}

}  // namespace

TEST_CASE("a wrapped ring reads back oldest first, as full op records") {
  RingFile f;
  Read r = read(f.t.save("wrapped.nwt"));
  REQUIRE(r.ok);
  CHECK(seqs(r) == std::vector<uint64_t>{10, 11, 12, 13, 14, 15, 16, 17});
  CHECK(r.stats.ring_slots == kRingSlots);
  CHECK(r.stats.ring_written == 18);
  CHECK(r.stats.ring_kept == 8);
  CHECK(r.stats.overwritten() == 10);
  const OpRecord& o = r.ops.front();
  CHECK(o.comm_id == 0xC0FFEE);
  CHECK(o.comm == 0x1000);
  CHECK(o.rank == 1);
  CHECK(o.nranks == 2);
  CHECK(o.stream == 0x5000);
  CHECK(o.tid == 777);
  CHECK(o.host_end_ns == 10050);
  CHECK(o.count == 256);
  CHECK(o.api == static_cast<uint16_t>(Api::kAllReduce));
  CHECK(r.problems.empty());
}

TEST_CASE("slots half-written or a lap behind are left out, the rest stays in order") {
  RingFile f;
  // Index 12's writer died before committing; index 15's slot still holds index 7, a lap older
  // (its new writer gave up on it).
  f.t.slot_at(f.slots[12 % kRingSlots]).stamp = ring_stamp(12, RingKind::kWriting);
  f.t.slot_at(f.slots[15 % kRingSlots]).stamp = ring_stamp(7, RingKind::kOp);
  Read r = read(f.t.save("torn.nwt"));
  REQUIRE(r.ok);
  CHECK(seqs(r) == std::vector<uint64_t>{10, 11, 13, 14, 16, 17});
  CHECK(r.stats.ring_written == 18);
  CHECK(r.stats.ring_kept == 6);
}

TEST_CASE("a ring not yet wrapped starts at index 0, and unknown names read as unknown") {
  TraceBytes t;
  RingChunkRecord chunk{};
  chunk.ring_slots = 4;
  chunk.slots = 4;
  size_t at = t.add(RecordType::kRingChunk, chunk, kRingChunkHeaderBytes + 4 * kRingSlotBytes);
  for (uint64_t index = 0; index < 3; ++index) {
    RingSlot& slot = t.slot_at(at + kRingChunkHeaderBytes + index * kRingSlotBytes);
    slot.stamp = ring_stamp(index, RingKind::kOp);
    slot.op.seq = index + 1;
    slot.op.comm_index = 9;  // no CommRef says which
    slot.op.host_duration = 2000;
    slot.op.flags = kCompactDurationMicros | kOpTimed;
    slot.op.api = static_cast<uint8_t>(Api::kAllReduce);
  }
  Read r = read(t.save("fresh.nwt"));
  REQUIRE(r.ok);
  CHECK(seqs(r) == std::vector<uint64_t>{1, 2, 3});
  CHECK(r.stats.overwritten() == 0);
  CHECK(r.ops[0].comm_id == 0);
  CHECK(r.ops[0].rank == -1);
  CHECK(r.ops[0].host_end_ns - r.ops[0].host_begin_ns == 2000000);  // microseconds
  CHECK(r.ops[0].flags == kOpTimed);
}

TEST_CASE("the totals table is handed on entry by entry, names resolved") {
  RingFile f;
  OpTotalsRecord table{};
  table.entries = 4;
  size_t at = f.t.add(RecordType::kOpTotals, table, kOpTotalsHeaderBytes + 4 * sizeof(OpTotalsEntry));
  OpTotalsEntry& e = f.t.entry_at(at + kOpTotalsHeaderBytes + 2 * sizeof(OpTotalsEntry));
  e.key = 99;
  e.count = 256;
  e.comm_index = 1;
  e.api = static_cast<uint16_t>(Api::kAllReduce);
  e.datatype = 7;
  e.ready = 1;
  e.calls = 18;
  e.gpu_timed = 2;
  e.gpu_histogram[totals_bucket(50000)] = 2;
  OpTotalsEntry& claimed = f.t.entry_at(at + kOpTotalsHeaderBytes + 3 * sizeof(OpTotalsEntry));
  claimed.key = 7;  // claimed, never made ready: left out
  claimed.calls = 5;
  f.t.entry_at(at + kOpTotalsHeaderBytes).calls = 3;  // entry 0: keys that found no room
  Read r = read(f.t.save("totals.nwt"));
  REQUIRE(r.ok);
  REQUIRE(r.totals.size() == 2);
  CHECK(r.totals[0].overflow == 1);
  CHECK(r.totals[0].calls == 3);
  CHECK(r.totals[1].comm_id == 0xC0FFEE);
  CHECK(r.totals[1].rank == 1);
  CHECK(r.totals[1].calls == 18);
  CHECK(r.totals[1].gpu_histogram[totals_bucket(50000)] == 2);
}

TEST_CASE("a ring chunk that disagrees with the others is named and left out") {
  RingFile f;
  RingChunkRecord odd{};
  odd.ring_slots = 16;  // not the ring's 8
  odd.slots = kChunkSlots;
  f.t.add(RecordType::kRingChunk, odd, kRingChunkHeaderBytes + kChunkSlots * kRingSlotBytes);
  Read r = read(f.t.save("odd.nwt"));
  REQUIRE(r.ok);
  CHECK(r.ops.size() == 8);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].what.find("disagrees") != std::string::npos);
}

TEST_CASE("the totals' histogram buckets are half-octaves from 1 us") {
  CHECK(totals_bucket(0) == 0);
  CHECK(totals_bucket(1023) == 0);
  CHECK(totals_bucket(1024) == 0);
  CHECK(totals_bucket(1536) == 1);
  CHECK(totals_bucket(2048) == 2);
  CHECK(totals_bucket(uint64_t{1} << 40) == kTotalsBuckets - 1);
  for (int b = 1; b < kTotalsBuckets; ++b) {
    auto floor = static_cast<uint64_t>(totals_bucket_floor_ns(b));
    CHECK(totals_bucket(floor) == b);
    CHECK(totals_bucket(floor - 1) == b - 1);
  }
}

TEST_CASE("damaged ring headers and stamps cost their records, never the reader") {
  SECTION("a chunk claiming no slots") {
    RingFile f;
    RingChunkRecord empty{};
    empty.ring_slots = kRingSlots;
    empty.slots = 0;
    f.t.add(RecordType::kRingChunk, empty, kRingChunkHeaderBytes);
    Read r = read(f.t.save("zero_slots.nwt"));
    REQUIRE(r.ok);
    CHECK(r.ops.size() == 8);
    CHECK(r.problems.size() == 1);
  }
  SECTION("a stamp below 256, which names no index") {
    RingFile f;
    // (2^64 - 1) % 8 == 7: the position such a stamp would claim, were it an index.
    f.t.slot_at(f.slots[7]).stamp = static_cast<uint64_t>(RingKind::kOp);
    Read r = read(f.t.save("stamp_one.nwt"));
    REQUIRE(r.ok);
    CHECK(seqs(r) == std::vector<uint64_t>{10, 11, 12, 13, 14, 16, 17});
  }
}
