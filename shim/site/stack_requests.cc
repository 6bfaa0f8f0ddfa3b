#include "site/stack_requests.h"

#include "process/process.h"
#include "site/python_site.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace ncclwatch {
namespace {

namespace keys = trace::stacks_record;

std::atomic<bool> g_watching{false};

// The request file's modification time, in ns since the epoch; 0 when there is none.
int64_t request_time(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

void write_python_stacks(std::string_view reason) noexcept {
  try {
    constexpr size_t kBytes = 128 * 1024;  // 16 threads of 32 frames of up to ~250 bytes
    auto text = std::make_unique<char[]>(kBytes);
    if (capture_python_stacks(text.get(), kBytes) == 0) return;
    std::string blob;
    trace::append_string(blob, keys::kReason, reason);
    std::string_view rest(text.get());
    // Threads are separated by an empty line.
    while (!rest.empty()) {
      size_t end = rest.find("\n\n");
      std::string_view thread = rest.substr(0, end == std::string_view::npos ? rest.size() : end + 1);
      if (!thread.empty()) trace::append_string(blob, keys::kThread, thread);
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 2);
    }
    write_strings_record(trace::RecordType::kStacks, blob);
  } catch (...) {
    notice_once(Notice::kStacksLost, "ncclwatch: an internal error while reading the Python stacks; they are not in the trace");
  }
}

void watch_stack_requests() noexcept {
  if (g_watching.exchange(true)) return;
  try {
    std::string path = config().trace_dir + "/" + std::string(keys::kRequestFile);
    // Requests made before this process started are not its to answer.
    int64_t answered = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    start_background_thread("ncclwatch-ask", [path, answered]() mutable {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        if (!g_watching.load(std::memory_order_relaxed)) return;
        int64_t asked = request_time(path);
        if (asked <= answered) continue;
        answered = asked;
        write_python_stacks(keys::kRequested);
      }
    });
  } catch (...) {
    notice_once(Notice::kStacksLost, "ncclwatch: could not start the thread that answers requests for Python stacks");
  }
}

void stack_requests_after_fork_in_child() noexcept {
  // The thread is not in the child; it starts again when the child attaches.
  g_watching.store(false, std::memory_order_relaxed);
}

}  // namespace ncclwatch
