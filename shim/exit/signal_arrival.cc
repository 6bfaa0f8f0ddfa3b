#include "exit/signal_arrival.h"

#include "process/process.h"
#include "trace/trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace ncclwatch {
namespace {

std::atomic<bool> g_arrived[NSIG];
// The first arrival, for the alert: filled by the handler that set g_first_ready's claim.
std::atomic<bool> g_first_claimed{false};
std::atomic<bool> g_first_ready{false};
trace::SignalRecord g_first;

// The codes under which si_pid and si_uid name a sending process (kill, tgkill, sigqueue).
bool names_sender(int code) { return code == SI_USER || code == SI_TKILL || code == SI_QUEUE; }

// "/proc/<pid>/comm" into `path` (at least 32 bytes), without the C library's formatting.
void comm_path(pid_t pid, char* path) {
  char digits[16];
  int n = 0;
  for (unsigned v = static_cast<unsigned>(pid); n == 0 || v; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  char* at = path;
  for (const char* p = "/proc/"; *p;) *at++ = *p++;
  while (n) *at++ = digits[--n];
  for (const char* p = "/comm"; *p;) *at++ = *p++;
  *at = '\0';
}

// The sender's command name, as the kernel keeps it; "" when it is gone or unreadable.
void read_sender_name(pid_t pid, char (&name)[16]) {
  std::memset(name, 0, sizeof(name));
  char path[32];
  comm_path(pid, path);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = ::read(fd, name, sizeof(name) - 1);
  ::close(fd);
  if (n <= 0) return;
  for (ssize_t i = 0; i < n; ++i)
    if (name[i] == '\n' || static_cast<unsigned char>(name[i]) < 0x20) name[i] = '\0';
}

const char* watched_signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

}  // namespace

void record_signal_arrival(int sig, const siginfo_t* info, bool handled) noexcept {
  if (sig <= 0 || sig >= NSIG || g_arrived[sig].exchange(true, std::memory_order_relaxed)) return;
  trace::SignalRecord rec{};
  rec.time_ns = monotonic_ns();
  rec.signal = sig;
  rec.handled = handled;
  if (info) {
    rec.code = info->si_code;
    if (names_sender(info->si_code) && info->si_pid > 0) {
      rec.sender_pid = info->si_pid;
      rec.sender_uid = info->si_uid;
      rec.sender_is_parent = info->si_pid == getppid();
      read_sender_name(info->si_pid, rec.sender_name);
    }
  }
  if (!g_first_claimed.exchange(true, std::memory_order_relaxed)) {
    g_first = rec;
    // Release pairs with the acquire in describe_signal_arrival(): g_first is complete.
    g_first_ready.store(true, std::memory_order_release);
  }
  // Only into an open trace: the exit reserve removes a file still being created, right for a
  // process about to die, wrong for one whose own handler may let it go on.
  if (!trace_path_c()[0]) return;
  RecordSlot slot = reserve_exit_record(sizeof(trace::SignalRecord));
  if (!slot) return;
  auto* out = slot.as<trace::SignalRecord>();
  trace::RecordHeader header = out->h;  // the size the reservation stored
  *out = rec;
  out->h = header;
  slot.commit(trace::RecordType::kSignal);
}

void describe_signal_arrival(AlertText& out) noexcept {
  if (!g_first_ready.load(std::memory_order_acquire)) return;
  const trace::SignalRecord& s = g_first;
  out.add(s.handled ? "  received " : "  ended by ").add(watched_signal_name(s.signal));
  if (s.sender_pid == getpid()) {
    out.add(", sent by the process itself");
  } else if (s.sender_pid) {
    out.add(", sent by pid ").add_int(s.sender_pid).add(" (");
    if (s.sender_name[0]) out.add(s.sender_name).add(", ");
    out.add(s.sender_is_parent ? "its parent, uid " : "uid ").add_int(s.sender_uid).add(')');
  } else if (s.code == SI_KERNEL) {
    out.add(", sent by the kernel");
  }
  out.add('\n');
}

void signal_arrival_after_fork_in_child() noexcept {
  for (auto& arrived : g_arrived) arrived.store(false, std::memory_order_relaxed);
  g_first_claimed.store(false, std::memory_order_relaxed);
  g_first_ready.store(false, std::memory_order_relaxed);
}

}  // namespace ncclwatch
