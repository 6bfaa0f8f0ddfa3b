#include "process/clock.h"

#include <cstdio>
#include <cstring>

namespace ncclwatch::detail {

bool tsc_is_invariant() noexcept {
  static const bool invariant = [] {
    FILE* f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (std::fgets(line, sizeof(line), f)) {
      if (std::strncmp(line, "flags", 5) == 0) {
        found = std::strstr(line, " constant_tsc") && std::strstr(line, " nonstop_tsc");
        break;
      }
    }
    std::fclose(f);
    return found;
  }();
  return invariant;
}

int64_t resample_tsc_clock(uint64_t) noexcept {
  // Bracket clock_gettime between two TSC reads: a pair split by preemption is not used for the
  // rate (it would skew every time stamp of the next 10 ms).
  uint64_t before = __rdtsc();
  int64_t now = clock_monotonic_ns();
  uint64_t after = __rdtsc();
  if (!tsc_is_invariant()) return now;
  TscScale& s = t_thread.tsc;
  uint64_t tsc = before + (after - before) / 2;
  bool tight = after - before < 4096;  // a few hundred ns at any clock rate
  if (!tight) {
    if (s.ns_per_tick_q32 == 0) return now;
    s.base_tsc = tsc;  // still a valid point to count from, within the spread
    s.base_ns = now;
    return now;
  }
  if (s.prev_tsc != 0 && tsc > s.prev_tsc && now > s.prev_ns && now - s.prev_ns >= 5'000'000) {
    // The rate over the last 5+ ms: clock_gettime's own jitter is then under 1e-4 of it.
    s.ns_per_tick_q32 = (static_cast<uint64_t>(now - s.prev_ns) << 32) / (tsc - s.prev_tsc);
    s.prev_tsc = tsc;
    s.prev_ns = now;
  } else if (s.prev_tsc == 0 || now - s.prev_ns >= 5'000'000) {
    s.prev_tsc = tsc;
    s.prev_ns = now;
  }
  s.base_tsc = tsc;
  s.base_ns = now;
  return now;
}

}  // namespace ncclwatch::detail
