#include "site/stack_requests.h"

#include "process/process.h"
#include "site/callsite.h"
#include "site/native_stack.h"
#include "site/python_site.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

namespace ncclwatch {
namespace {

namespace keys = trace::stacks_record;

// At most one request answered per this many seconds: a `dump-now` renewed every half second by
// whoever can write the folder costs one Stacks record per 5 s, not two a second. A watcher asks
// once per suspicion, and reads the traces at most once per 5 s itself (ncclwatch-report watch).
constexpr int64_t kMinNsBetweenAnswers = 5'000'000'000;
// The Stacks records' share of the history (NCCLWATCH_MAX_MB less the ring and the totals): what
// is left is the lifecycle records', which a flood of requests must never crowd out.
constexpr uint64_t kStacksShareDivisor = 4;

// Only the GPU-timing thread reads and writes these.
int64_t g_next_look_ns = 0;
int64_t g_next_answer_ns = 0;  // no answer before this (monotonic ns)
bool g_looked = false;         // the first look was made: what it saw was asked of earlier processes

// What identifies one request: a new `dump-now` (renamed into place, as the watcher writes it) or a
// touch of the old one changes one of these. Requests are told apart by change, never by comparing
// their times with ours or each other's: a file dated in the future, planted before the job started,
// would otherwise have made every later request look older than the one already answered.
struct RequestIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;  // set by the kernel to its own clock at each change: no one can date it ahead
  bool operator==(const RequestIdentity&) const = default;
};
RequestIdentity g_seen{};   // the request last seen (answered, or there before the first look)
bool g_pending = false;     // a request seen is waiting for kMinNsBetweenAnswers to pass

std::atomic<uint64_t> g_stacks_bytes{0};  // written into the trace so far, by every writer of stacks

// The request file, when it is one: a regular file (never followed through a link) of this
// process's user or root's. Anyone else's, in a folder others can write, is no request.
std::optional<RequestIdentity> request(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  if (st.st_uid != geteuid() && st.st_uid != 0) return std::nullopt;
  return RequestIdentity{st.st_dev, st.st_ino, static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                         static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

uint64_t stacks_budget_bytes() {
  uint64_t max_bytes = config().max_trace_bytes;
  trace::TraceBudget budget = trace::trace_budget(max_bytes);
  uint64_t spoken_for = budget.ring_bytes() + budget.totals_bytes() + trace::kHeaderBytes;
  return (max_bytes > spoken_for ? max_bytes - spoken_for : 0) / kStacksShareDivisor;
}

// Counts `bytes` of stacks against their share; false (said once) when they do not fit in it.
bool take_from_stacks_budget(uint64_t bytes) {
  static const uint64_t budget = stacks_budget_bytes();
  uint64_t used = g_stacks_bytes.load(std::memory_order_relaxed);
  do {
    if (used + bytes > budget) {
      std::string text = "ncclwatch: the stacks have taken their share of the trace (" + std::to_string(budget >> 10) +
                         " KiB, a quarter of what NCCLWATCH_MAX_MB leaves the history); later stacks are not written, "
                         "so that lifecycle records keep their room";
      notice_once(Notice::kStacksBudgetSpent, text.c_str());
      return false;
    }
    // Relaxed: a counter only; the record it pays for is published by its own commit.
  } while (!g_stacks_bytes.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
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
    if (!take_from_stacks_budget(blob.size() + sizeof(trace::StringsRecord))) return;
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
    RequestIdentity asked = request(path).value_or(RequestIdentity{});
    if (!g_looked) {
      // The first look: what is there already was asked of processes before this one.
      g_looked = true;
      g_seen = asked;
      return;
    }
    if (asked != g_seen && asked.ino != 0) g_pending = true;
    g_seen = asked;
    if (!g_pending || now < g_next_answer_ns) return;
    g_pending = false;
    g_next_answer_ns = now + kMinNsBetweenAnswers;
    write_stacks(keys::kRequested, native_thread ? native_thread() : 0);
  } catch (...) {
    notice_once(Notice::kStacksLost, "ncclwatch: an internal error while answering a request for Python stacks");
  }
}

void stack_requests_after_fork_in_child() noexcept {
  g_next_look_ns = 0;
  g_next_answer_ns = 0;
  g_looked = false;
  g_seen = {};
  g_pending = false;
  // The child's trace is its own: so is its stacks' share of it.
  g_stacks_bytes.store(0, std::memory_order_relaxed);
}

}  // namespace ncclwatch
