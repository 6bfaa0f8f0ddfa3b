#include "process/clock.h"

#include <cpuid.h>

#include <atomic>

namespace ncclwatch::detail {

bool tsc_is_invariant() noexcept {
  // CPUID's "invariant TSC" bit, from which Linux derives the constant_tsc and nonstop_tsc flags,
  // rather than /proc/cpuinfo: a signal handler may take the first clock reading (record times),
  // and reading a file there, or waiting on a function-local static another frame of the same
  // thread is building, is not safe. Racing threads compute the same answer.
  static std::atomic<int> known{0};  // constant-initialized: 0 not yet asked, 1 invariant, 2 not
  int answer = known.load(std::memory_order_relaxed);
  if (answer == 0) {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    bool invariant = __get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) && (edx & (1u << 8));
    answer = invariant ? 1 : 2;
    known.store(answer, std::memory_order_relaxed);
  }
  return answer == 1;
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
