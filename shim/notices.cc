#include "notices.h"

#include "trace_writer.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace ncclwatch {
namespace {
std::atomic<bool> g_said[static_cast<int>(Notice::kCount)];
}

void notice_once(Notice kind, const char* text) noexcept {
  // Relaxed is enough: the flag only prevents repeats, it guards no data.
  if (g_said[static_cast<int>(kind)].exchange(true, std::memory_order_relaxed)) return;
  // write(2) rather than stdio: this may run while stdio is locked or torn down.
  size_t len = std::strlen(text);
  ssize_t ignored = ::write(STDERR_FILENO, text, len);
  ignored = ::write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  if (kind != Notice::kTraceOpenFailed && kind != Notice::kTraceFull) write_notice_record(text);
}

void reset_notices() noexcept {
  for (auto& said : g_said) said.store(false, std::memory_order_relaxed);
}

}  // namespace ncclwatch
