// The per-communicator state the collective path reads without a lock: lookups by handle (and
// the per-thread memo of the last one), and the launch counts per op shape that choose which
// launches get GPU timestamps.
#include "comms/comm_table.h"
#include "gpu/gpu_timer.h"

#include <catch2/catch.hpp>

#include <set>

using namespace ncclwatch;

TEST_CASE("a comm is found by handle until it is retired, and a reused handle finds the new comm") {
  static CommTrack first, second;
  first.handle = second.handle = 0x7f0000001000;
  first.id = 1;
  second.id = 2;
  CHECK(find_comm_track(first.handle) == nullptr);
  publish_comm(&first);
  CHECK(find_comm_track(first.handle) == &first);
  CHECK(find_comm_track(first.handle) == &first);  // from the memo
  retire_comm(first.handle);
  CHECK(find_comm_track(first.handle) == nullptr);  // the memo knows the table changed
  publish_comm(&second);
  CHECK(find_comm_track(second.handle) == &second);
  retire_comm(second.handle);
}

TEST_CASE("launches are counted per op shape, each shape on its own") {
  static CommTrack track;
  uint64_t reduce_1k = op_shape(trace::Api::kAllReduce, 1024, 7);
  uint64_t broadcast_1k = op_shape(trace::Api::kBroadcast, 1024, 7);
  uint64_t reduce_1k_half = op_shape(trace::Api::kAllReduce, 1024, 6);
  CHECK(std::set<uint64_t>{reduce_1k, broadcast_1k, reduce_1k_half}.size() == 3);
  for (uint32_t i = 0; i < 20; ++i) CHECK(track.count_launch_of_shape(reduce_1k) == i);
  CHECK(track.count_launch_of_shape(broadcast_1k) == 0);
  CHECK(track.count_launch_of_shape(reduce_1k_half) == 0);
  CHECK(track.count_launch_of_shape(reduce_1k) == 20);
}

TEST_CASE("shapes past the table's capacity share one count, and the first shapes keep theirs") {
  static CommTrack track;
  for (uint64_t count = 1; count <= 200; ++count)
    track.count_launch_of_shape(op_shape(trace::Api::kAllGather, count, 7));
  uint32_t own = 0;
  for (uint64_t count = 1; count <= 200; ++count)
    own += track.count_launch_of_shape(op_shape(trace::Api::kAllGather, count, 7)) == 1;
  CHECK(own >= CommTrack::kShapeSlots / 2);  // most slots hold a shape of their own
  CHECK(own <= CommTrack::kShapeSlots);
  CHECK(track.count_launch_of_shape(op_shape(trace::Api::kAllGather, 1, 7)) == 2);  // the first shape kept its slot
}
