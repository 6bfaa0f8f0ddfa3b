// The collective path's TSC-based clock must agree with CLOCK_MONOTONIC.
#include "process/clock.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <thread>

TEST_CASE("the TSC clock tracks CLOCK_MONOTONIC within microseconds") {
  using namespace ncclwatch;
  int64_t worst = 0;
  int64_t last = 0;
  for (int i = 0; i < 2000; ++i) {
    int64_t before = clock_monotonic_ns();
    int64_t fast = monotonic_ns();
    int64_t after = clock_monotonic_ns();
    // `fast` should fall between the two reference readings, give or take the rate's error.
    int64_t off = fast < before ? before - fast : fast > after ? fast - after : 0;
    worst = std::max(worst, off);
    CHECK(fast >= last);  // never runs backwards on one thread
    last = fast;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  INFO("worst disagreement " << worst << " ns");
  CHECK(worst < 20'000);
}
