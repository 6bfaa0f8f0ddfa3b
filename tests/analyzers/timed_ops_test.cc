// The one pairing of ops with the GPU timings of their launches (model/timed_ops.h), rule by rule,
// on records made here: what every reader of ops (op model, timeline, html) relies on.
#include "model/timed_ops.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace ncclwatch;
using namespace ncclwatch::model;
using trace::Api;

namespace {

// What the sink was told, one line per event.
struct Recorder {
  std::vector<std::string> events;

  std::optional<uint64_t> on_op(const trace::OpRecord& o, const RecordView&, bool awaits_timing) {
    events.push_back("op " + std::to_string(o.seq) + (awaits_timing ? " waits" : " now"));
    return o.seq;
  }
  void on_timed(std::span<const uint64_t> seqs, const LaunchTiming& t) {
    std::string e = "timed";
    for (uint64_t s : seqs) e += " " + std::to_string(s);
    e += t.gpu_begin ? " gpu" : " host";
    e += " " + std::to_string(t.end_ns - t.begin_ns) + "ns of " + std::to_string(t.launch_ops);
    if (!t.stream_named) e += " unnamed";
    events.push_back(e);
  }
  void on_no_timing(std::span<const uint64_t> seqs, bool promised, NoTiming why) {
    std::string e = why == NoTiming::kUntimedGroup ? "untimed" : why == NoTiming::kGivenUp ? "given up" : "file ended";
    for (uint64_t s : seqs) e += " " + std::to_string(s);
    if (promised) e += " promised";
    events.push_back(e);
  }
};

// Feeds records to a TimedOps as the reader would hand them on.
struct Feeder {
  Recorder sink;
  TimedOps<uint64_t, Recorder> ops;
  explicit Feeder(size_t capacity = kMaxWaitingLaunches) : ops(sink, capacity) {}

  void op(uint64_t seq, uint64_t launch, uint16_t flags, uint8_t depth = 0, uint64_t stream = 1,
          Api api = Api::kAllReduce, int64_t host_begin_ns = -1) {
    trace::OpRecord o{};
    o.h.type = static_cast<uint16_t>(trace::RecordType::kCollective);
    o.seq = seq;
    o.launch_id = launch;
    o.flags = flags;
    o.group_depth = depth;
    o.stream = stream;
    o.api = static_cast<uint16_t>(api);
    o.host_begin_ns = host_begin_ns >= 0 ? host_begin_ns : 1000 * static_cast<int64_t>(launch);
    o.host_end_ns = o.host_begin_ns + 10;
    ops.add(RecordView{trace::RecordType::kCollective, reinterpret_cast<const std::byte*>(&o), sizeof(o), 0});
  }
  void group_end(uint64_t launch, bool timed) { op(0, launch, timed ? trace::kOpTimed : 0, 0, 1, Api::kGroupEnd); }
  void timing(uint64_t launch, uint64_t stream, bool has_begin = true) {
    trace::GpuTimingRecord g{};
    g.launch_id = launch;
    g.stream = stream;
    g.gpu_begin_ns = 1000 * static_cast<int64_t>(launch) + 100;
    g.gpu_end_ns = g.gpu_begin_ns + 50;
    g.flags = has_begin ? trace::kTimingHasBegin : 0;
    ops.add(RecordView{trace::RecordType::kGpuTiming, reinterpret_cast<const std::byte*>(&g), sizeof(g), 0});
  }
  const std::vector<std::string>& events() const { return sink.events; }
};

}  // namespace

TEST_CASE("a timed op gets its launch's timing; an untimed or captured one is handed on at once") {
  Feeder f;
  f.op(1, 1, trace::kOpTimed);
  f.op(2, 2, 0);
  f.op(3, 3, trace::kOpTimed | trace::kOpCaptured);  // runs at graph replay: never waits
  f.timing(1, 1);
  f.timing(1, 1);  // a second timing of a launch already done is an orphan
  f.timing(9, 1);
  CHECK(f.events() == std::vector<std::string>{"op 1 waits", "op 2 now", "op 3 now", "timed 1 gpu 50ns of 1"});
  CHECK(f.ops.timing_records() == 3);
  CHECK(f.ops.orphan_timings() == 2);
}

TEST_CASE("a timing just before its lone op's record (older shims) is the op's; a stale one is not") {
  Feeder f;
  f.timing(4, 1);  // launch 4's timing ends at 4150 ns, its op began at 4000
  f.timing(5, 2);  // another stream's
  f.op(4, 4, trace::kOpTimed);
  f.op(5, 5, trace::kOpTimed, 0, 1);  // launch 5 on stream 1: stream 2's timing is not its
  f.op(6, 6, trace::kOpTimed, 1);     // grouped: its timing comes after the group's end
  f.timing(6, 1);
  CHECK(f.events() == std::vector<std::string>{"op 4 waits", "timed 4 gpu 50ns of 1", "op 5 waits", "op 6 waits",
                                               "timed 6 gpu 50ns of 1"});
  CHECK(f.ops.timing_records() == 3);
  CHECK(f.ops.orphan_timings() == 1);
  // A timing that ended before the op began is of an earlier launch of the same id (another thread's).
  Feeder stale;
  stale.timing(1, 1);  // ended at 1150 ns
  stale.op(7, 1, trace::kOpTimed, 0, 1, Api::kAllReduce, 5000);
  stale.ops.finish();
  CHECK(stale.events() == std::vector<std::string>{"op 7 waits", "file ended 7 promised"});
  CHECK(stale.ops.orphan_timings() == 1);
}

TEST_CASE("a group waits for its end: timed, the timing takes every op; untimed, they are released there") {
  Feeder f;
  f.op(1, 5, 0, 1);
  f.op(2, 5, 0, 1);
  f.group_end(5, true);
  f.timing(5, 1, false);  // only the end measured: from the launch's host enqueue
  f.op(3, 6, 0, 1);
  f.group_end(6, false);
  f.ops.finish();
  CHECK(f.events() == std::vector<std::string>{"op 1 waits", "op 2 waits", "timed 1 2 host 150ns of 2", "op 3 waits",
                                               "untimed 3"});
}

TEST_CASE("a launch over several streams is timed stream by stream; an unnamed stream takes them all") {
  Feeder f;
  f.op(1, 7, 0, 1, 10);
  f.op(2, 7, 0, 1, 20);
  f.group_end(7, true);
  f.timing(7, 20);
  f.timing(7, 10);
  f.op(3, 8, trace::kOpTimed, 0, 10);
  f.timing(8, 99);
  CHECK(f.events() == std::vector<std::string>{"op 1 waits", "op 2 waits", "timed 2 gpu 50ns of 2", "timed 1 gpu 50ns of 2",
                                               "op 3 waits", "timed 3 gpu 50ns of 1 unnamed"});
}

TEST_CASE("launches waiting past the bound are given up oldest first; the rest when the file ends") {
  Feeder f(2);
  f.op(1, 1, trace::kOpTimed);
  f.op(2, 2, trace::kOpTimed);
  f.op(3, 3, 0, 1);  // grouped, nothing promised yet
  f.op(4, 4, trace::kOpTimed);
  f.ops.finish();
  CHECK(f.events() == std::vector<std::string>{"op 1 waits", "op 2 waits", "op 3 waits", "given up 1 promised",
                                               "op 4 waits", "given up 2 promised", "file ended 3",
                                               "file ended 4 promised"});
}

namespace {

// Ops of given communicators and streams, timed at given GPU times (ns): what the order rules see.
struct OrderFeeder {
  struct Sink {
    std::map<uint64_t, LaunchTiming> timed;  // by launch (= seq here)
    std::optional<uint64_t> on_op(const trace::OpRecord& o, const RecordView&, bool) { return o.launch_id; }
    void on_timed(std::span<const uint64_t> launches, const LaunchTiming& t) {
      for (uint64_t l : launches) timed[l] = t;
    }
    void on_no_timing(std::span<const uint64_t>, bool, NoTiming) {}
  } sink;
  TimedOps<uint64_t, Sink> ops{sink};

  // Launch `launch`: one all-reduce on `comm` (rank 0) and `stream`, timed when `timed`.
  void op(uint64_t launch, uint64_t comm, uint64_t stream, bool timed) {
    trace::OpRecord o{};
    o.comm_id = comm;
    o.seq = launch;
    o.launch_id = launch;
    o.stream = stream;
    o.flags = timed ? trace::kOpTimed : 0;
    o.api = static_cast<uint16_t>(Api::kAllReduce);
    ops.add(RecordView{trace::RecordType::kCollective, reinterpret_cast<const std::byte*>(&o), sizeof(o), 0});
  }
  void timing(uint64_t launch, uint64_t stream, int64_t begin_ns, int64_t end_ns) {
    trace::GpuTimingRecord g{};
    g.launch_id = launch;
    g.stream = stream;
    g.gpu_begin_ns = begin_ns;
    g.gpu_end_ns = end_ns;
    g.flags = trace::kTimingHasBegin;
    ops.add(RecordView{trace::RecordType::kGpuTiming, reinterpret_cast<const std::byte*>(&g), sizeof(g), 0});
  }
  const LaunchTiming& of(uint64_t launch) { return sink.timed.at(launch); }
};

constexpr uint64_t kComm = 0xc0, kOtherComm = 0xc1, kStreamA = 0xa, kStreamB = 0xb;

}  // namespace

TEST_CASE("a communicator driven from two streams: each launch begins when the one before it ended") {
  // FSDP's backward: an all-gather on the prefetch stream, then a reduce-scatter on the reduce
  // stream, idle, so its start event fires at once; NCCL runs it only after the all-gather.
  OrderFeeder f;
  f.op(1, kComm, kStreamA, true);
  f.op(2, kComm, kStreamB, true);
  f.timing(1, kStreamA, 0, 4'000'000);
  f.timing(2, kStreamB, 10'000, 8'500'000);
  CHECK(f.of(1).begin_ns == 0);
  CHECK(f.of(2).begin_ns == 4'000'000);  // the all-gather's end, not its own start event
  CHECK(f.of(2).end_ns - f.of(2).begin_ns == 4'500'000);
  CHECK(f.of(2).began_at_previous_end);
  CHECK_FALSE(f.of(2).begin_upper_bound);

  // The previous launch, on the other stream, untimed: the begin is the start event, and only an
  // upper bound of the time is known.
  f.op(3, kComm, kStreamA, false);
  f.op(4, kComm, kStreamB, true);
  f.timing(4, kStreamB, 9'000'000, 13'000'000);
  CHECK(f.of(4).begin_ns == 9'000'000);
  CHECK(f.of(4).begin_upper_bound);

  // Untimed before it on its own stream: stream order already makes the start event right.
  f.op(5, kComm, kStreamB, false);
  f.op(6, kComm, kStreamB, true);
  f.timing(6, kStreamB, 20'000'000, 24'000'000);
  CHECK_FALSE(f.of(6).begin_upper_bound);
  CHECK(f.of(6).begin_ns == 20'000'000);
}

TEST_CASE("a launch that began as its stream's previous launch ended was held by it") {
  OrderFeeder f;
  f.op(1, kComm, kStreamA, true);
  f.op(2, kOtherComm, kStreamA, true);  // a receive after a send, on another communicator
  f.op(3, kComm, kStreamA, true);
  f.timing(1, kStreamA, 0, 3'000'000);
  f.timing(2, kStreamA, 3'005'000, 3'100'000);  // 5 us after: the GPU went straight on
  f.timing(3, kStreamA, 4'100'000, 4'200'000);  // 1 ms after: the stream was idle, its rank late
  CHECK(f.of(2).began_at_previous_end);
  CHECK(f.of(2).begin_ns == 3'005'000);  // another communicator: not held in its order
  CHECK_FALSE(f.of(3).began_at_previous_end);
  CHECK_FALSE(f.of(1).began_at_previous_end);
}

TEST_CASE("launches waiting long, in any order: the oldest waits while thousands pass, timings come back to front") {
  Feeder f;
  f.op(1, 1, trace::kOpTimed);  // its timing comes last: the ring's oldest all along
  for (uint64_t l = 2; l <= 3000; ++l) {  // each timed at once: the ring closes up behind the oldest
    f.op(l, l, trace::kOpTimed);
    f.timing(l, 1);
  }
  for (uint64_t l = 3001; l <= 3500; ++l) f.op(l, l, trace::kOpTimed);  // 500 waiting together: the ring grows
  for (uint64_t l = 3500; l > 3000; --l) f.timing(l, 1);                 // their timings newest first
  f.timing(1, 1);
  f.timing(1, 1);  // a second timing of a launch done: an orphan
  f.ops.finish();
  std::map<uint64_t, int> timed;  // op -> timings it got
  size_t lines = 0;
  for (const std::string& e : f.events()) {
    if (e.rfind("timed ", 0) != 0) continue;
    ++lines;
    CHECK(e.ends_with(" gpu 50ns of 1"));
    ++timed[std::stoull(e.substr(6))];
  }
  CHECK(lines == 3500);
  CHECK(timed.size() == 3500);
  CHECK(std::all_of(timed.begin(), timed.end(), [](const auto& t) { return t.second == 1; }));
  CHECK(f.events().back() == "timed 1 gpu 50ns of 1");  // nothing left for the file's end
  CHECK(f.ops.orphan_timings() == 1);
  CHECK(f.ops.timing_records() == 3501);
}
