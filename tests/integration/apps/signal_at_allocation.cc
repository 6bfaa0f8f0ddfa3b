// Preloaded by the signal test before the shim: the Nth allocation through operator new
// (SIGNAL_AT_ALLOCATION=N) sends the process SIGTERM first, so a signal lands inside whatever the program or
// the shim was doing at that moment: a function-local static half-built, a lock held. Unset, it
// counts the allocations and says how many on stderr at exit ("allocations N"), for the test to
// know the range to sweep.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_allocations{0};

long target() {
  // getenv allocates nothing: safe inside operator new.
  static const long at = [] {
    const char* value = std::getenv("SIGNAL_AT_ALLOCATION");
    return value ? std::atol(value) : -1;
  }();
  return at;
}

__attribute__((destructor)) void say_count() {
  if (target() >= 0) return;
  char line[48];
  int n = std::snprintf(line, sizeof(line), "allocations %ld\n", g_allocations.load());
  if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
}
}  // namespace

void* operator new(std::size_t size) {
  if (g_allocations.fetch_add(1) + 1 == target()) {
    // Said first, so that a run whose Nth allocation never came (threads allocate in any order)
    // is told from one that outlived its signal.
    static const char kSent[] = "signal sent\n";
    (void)!write(STDERR_FILENO, kSent, sizeof(kSent) - 1);
    // To the process, not raise(): a thread that blocks signals (the shim's, the stand-in's) would
    // keep it pending forever. The kernel gives it to this thread where it takes signals (then it
    // lands inside this allocation), else to another thread, wherever that one is.
    kill(getpid(), SIGTERM);
  }
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}

// Every other plain form, so that a sanitizer's allocator sees matching pairs (the aligned forms
// stay the runtime's, pairs of their own).
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
