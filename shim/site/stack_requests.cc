#include "site/stack_requests.h"

#include "process/process.h"
#include "site/callsite.h"
#include "site/native_stack.h"
#include "site/python_site.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

namespace ncclwatch {
namespace {

namespace keys = trace::stacks_record;

// Only the GPU-timing thread reads and writes these.
int64_t g_next_look_ns = 0;
int64_t g_answered_ns = 0;  // the request file's time last answered (0: not looked yet)

// The request file's modification time, in ns since the epoch; 0 when there is none.
int64_t request_time(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// "tid addr addr ..." (hex), or for kNativeUnread "tid why"; writes the frames' kModule records.
void append_native_stack(std::string& blob, pid_t tid) {
  NativeStack stack = scan_native_stack(tid);
  std::string text = std::to_string(tid);
  if (stack.nframes == 0) {
    text += ' ';
    text += stack.unread ? stack.unread : "no frames";
    trace::append_string(blob, keys::kNativeUnread, text);
    return;
  }
  char hex[24];
  for (int i = 0; i < stack.nframes; ++i) {
    std::snprintf(hex, sizeof(hex), " %llx", static_cast<unsigned long long>(stack.frames[i]));
    text += hex;
  }
  describe_modules_of(stack.frames, stack.nframes);
  trace::append_string(blob, keys::kNative, text);
}

}  // namespace

void write_stacks(std::string_view reason, pid_t native_tid) noexcept {
  try {
    constexpr size_t kBytes = 128 * 1024;  // 16 threads of 32 frames of up to ~250 bytes
    auto text = std::make_unique<char[]>(kBytes);
    size_t python_bytes = capture_python_stacks(text.get(), kBytes);
    if (python_bytes == 0 && native_tid <= 0) return;
    std::string blob;
    trace::append_string(blob, keys::kReason, reason);
    std::string_view rest(python_bytes ? text.get() : "");
    // Threads are separated by an empty line.
    while (!rest.empty()) {
      size_t end = rest.find("\n\n");
      std::string_view thread = rest.substr(0, end == std::string_view::npos ? rest.size() : end + 1);
      if (!thread.empty()) trace::append_string(blob, keys::kThread, thread);
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 2);
    }
    if (native_tid > 0) append_native_stack(blob, native_tid);
    write_strings_record(trace::RecordType::kStacks, blob);
  } catch (...) {
    notice_once(Notice::kStacksLost, "ncclwatch: an internal error while reading the stacks; they are not in the trace");
  }
}

void answer_stack_request(pid_t (*native_thread)()) noexcept {
  try {
    int64_t now = monotonic_ns();
    if (g_next_look_ns && now < g_next_look_ns) return;
    g_next_look_ns = now + 1'000'000'000;
    static const std::string path = config().trace_dir + "/" + std::string(keys::kRequestFile);
    int64_t asked = request_time(path);
    if (g_answered_ns == 0) {
      // The first look: what is there already was asked of processes before this one.
      g_answered_ns = std::max<int64_t>(asked, 1);
      return;
    }
    if (asked <= g_answered_ns) return;
    g_answered_ns = asked;
    write_stacks(keys::kRequested, native_thread ? native_thread() : 0);
  } catch (...) {
    notice_once(Notice::kStacksLost, "ncclwatch: an internal error while answering a request for Python stacks");
  }
}

void stack_requests_after_fork_in_child() noexcept {
  g_next_look_ns = 0;
  g_answered_ns = 0;
}

}  // namespace ncclwatch
