#include "process/notices.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace ncclwatch {
namespace {
std::atomic<bool> g_said[static_cast<int>(Notice::kCount)];
}

namespace {
std::atomic<void (*)(const char*) noexcept> g_recorder{nullptr};

void record(const char* text) {
  if (auto recorder = g_recorder.load(std::memory_order_acquire)) recorder(text);
}

// write(2) rather than stdio: this may run while stdio is locked or torn down.
void print_line(const char* text) {
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  ignored = ::write(STDERR_FILENO, "\n", 1);
  (void)ignored;
}
}  // namespace

void notice_once(Notice kind, const char* text) noexcept {
  // Relaxed is enough: the flag only prevents repeats, it guards no data.
  if (g_said[static_cast<int>(kind)].exchange(true, std::memory_order_relaxed)) return;
  print_line(text);
  if (kind != Notice::kTraceOpenFailed && kind != Notice::kTraceFull) record(text);
}

void say(const char* text) noexcept {
  print_line(text);
  record(text);
}

void set_notice_recorder(void (*recorder)(const char* text) noexcept) noexcept {
  g_recorder.store(recorder, std::memory_order_release);
}

void notices_after_fork_in_child() noexcept {
  for (auto& said : g_said) said.store(false, std::memory_order_relaxed);
}

}  // namespace ncclwatch
