#include "trace/trace_writer.h"

#include "process/process.h"

#include <ncclwatch/trace_strings.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace ncclwatch {
namespace {

using namespace trace;

// The file grows in chunks; each chunk is allocated on disk (posix_fallocate) before it is
// mapped, so a full disk shows up as a failed allocation here, never as SIGBUS in the application.
constexpr uint64_t kChunkBytes = 4ull << 20;
// Ordinary records always leave this much of the mapped, allocated file free behind them: the
// exit records go there, so a trace that is full (disk full, NCCLWATCH_MAX_MB) or in the middle
// of growing still ends with how the process ended and how many records it lost, written
// without a lock or a system call (the signal path).
// Room for the exit records and the list of communicators alive at exit (exit_hooks.cc: 512 of
// 32 bytes).
constexpr uint64_t kExitReserveBytes = 20 << 10;

// The file's whole address range is reserved when it opens (PROT_NONE, no memory behind it), so
// records never move. The reservation counts against RLIMIT_AS all the same: under a finite limit
// (`ulimit -v`) the trace takes at most this share of it, and never less than the minimum.
constexpr uint64_t kAddressSpaceShare = 64;
constexpr uint64_t kMinLimitedBytes = 2 * kChunkBytes;
constexpr uint64_t kMaxLimitedBytes = 256ull << 20;  // CUDA jobs need limits of many GiB

enum class State : int { kClosed, kOpen, kFailed };

struct Writer {
  std::mutex open_mutex;                 // taken to open and to grow: rare
  std::atomic<State> state{State::kClosed};
  int fd = -1;
  std::byte* base = nullptr;             // start of the reserved address range
  uint64_t capacity = 0;                 // bytes of address range reserved
  std::atomic<uint64_t> mapped{0};       // bytes of the file mapped at base
  std::atomic<uint64_t> next{0};         // next free offset; only ever advanced within `mapped`
  std::atomic<uint64_t> lost{0};
  // Bytes of the budget kept for the ring's and the totals' chunks not made yet: the history may
  // not take them (it could otherwise starve the ring of a long run's newest ops).
  std::atomic<uint64_t> held_back{0};
  // Set when the file was shrunk under the mapping (another process truncated it): the mapping
  // now points at anonymous memory and nothing more is written (see on_bus_error()).
  std::atomic<bool> file_lost{false};
  std::string path;
};

std::atomic<Writer*> g_writer{nullptr};

Writer& writer() {
  static Writer* w = [] {
    auto* made = new Writer();  // never destroyed: records may be written during exit
    g_writer.store(made, std::memory_order_release);
    return made;
  }();
  return *w;
}

// For signal handlers: the writer once made, else nullptr. Never writer() there: the handler may
// interrupt the thread that is making it, and a function-local static's guard then throws.
Writer* existing_writer() noexcept { return g_writer.load(std::memory_order_acquire); }

// A file created but not yet given its header (growing it may take long on a full or slow disk):
// if the process ends meanwhile, the exit path removes it, as nothing could read it.
char g_unfinished_path[4096];
std::atomic<bool> g_unfinished{false};

void discard_unfinished_file() noexcept {
  if (g_unfinished.exchange(false, std::memory_order_acq_rel)) unlink(g_unfinished_path);  // async-signal-safe
}

// --- A file shrunk under the mapping ---------------------------------------------------------
// Someone else may truncate the trace while we write it (`: > file`, a cleanup script, a quota
// tool). Touching a mapped page past the new end of a shared file mapping raises SIGBUS, which
// would kill the application. Our handler takes only faults inside our own mapping: it puts
// anonymous memory in the file's place (the faulting access then completes there, harmlessly),
// marks the file lost, and says so once. Every other SIGBUS goes where it would have without us.

std::atomic<bool> g_bus_handler_installed{false};  // once per process: a forked child inherits it
char g_file_lost_message[4352];                    // built when the file opens: the handler cannot format
size_t g_file_lost_message_size = 0;

// The mapped range as the handler sees it: set before the state turns kOpen.
std::atomic<std::byte*> g_mapped_base{nullptr};

void write_to_stderr(const char* text, size_t size) noexcept {
  while (size > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n;
    size -= static_cast<size_t>(n);
  }
}

// Whether the access at `address` faulted because our file shrank; if so, the mapping is replaced.
// Async-signal-safe: atomics, fstat, mmap and write only.
bool take_fault_in_our_mapping(const void* address) noexcept {
  std::byte* base = g_mapped_base.load(std::memory_order_acquire);
  if (!base) return false;  // nothing mapped, so no writer either
  Writer& w = *existing_writer();
  auto* at = static_cast<const std::byte*>(address);
  if (at < base || at >= base + w.capacity) return false;
  // Acquire pairs with the release in grow_locked(): every byte below `mapped` was mapped from the file.
  uint64_t mapped = w.mapped.load(std::memory_order_acquire);
  if (static_cast<uint64_t>(at - base) >= mapped) return false;  // PROT_NONE reserve: not a file fault
  // Zeroed private memory in place of the file, for every thread at once: the range stays valid for
  // writers that are mid-record, and the file is never touched again. Repeated by a second thread
  // that faults meanwhile, it is the same harmless replacement.
  if (mmap(base, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
    return false;
  if (!w.file_lost.exchange(true, std::memory_order_acq_rel))
    write_to_stderr(g_file_lost_message, g_file_lost_message_size);
  return true;
}

// Whether another process shrank our file (for a SIGBUS that carries no address: an earlier
// handler re-raised it, as Python's faulthandler does).
bool our_file_shrank() noexcept {
  if (!g_mapped_base.load(std::memory_order_acquire)) return false;
  Writer& w = *existing_writer();
  struct stat st{};
  return w.fd >= 0 && fstat(w.fd, &st) == 0 && static_cast<uint64_t>(st.st_size) < w.mapped.load(std::memory_order_acquire);
}

// The first look at every SIGBUS (signal_chain.h delivers the rest as the kernel would have).
bool take_bus_error(int, siginfo_t* info, void*) noexcept {
  int saved_errno = errno;
  bool fault = info && info->si_code > 0;  // raised by the kernel for an access, not sent
  bool ours = fault ? take_fault_in_our_mapping(info->si_addr)
                    : our_file_shrank() && take_fault_in_our_mapping(g_mapped_base.load(std::memory_order_acquire));
  errno = saved_errno;
  return ours;  // ours: the access is retried, on the anonymous memory now in place
}

void install_bus_handler(const std::string& path) {
  int n = snprintf(g_file_lost_message, sizeof(g_file_lost_message),
                   "ncclwatch: the trace %s was truncated by another process; tracing stopped, the job runs on "
                   "(the exit alert still works)\n",
                   path.c_str());
  g_file_lost_message_size = n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof(g_file_lost_message) - 1);
  if (g_bus_handler_installed.exchange(true)) return;
  SignalClaim claim;
  claim.take = take_bus_error;
  // Even where the application ignores SIGBUS: a fault in our mapping would kill it regardless.
  claim_signal(SIGBUS, claim, /*leave_ignored=*/false);
}

bool make_directories(const std::string& dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), config().group_readable ? 0750 : 0700) != 0 && errno != EEXIST) return false;
  }
  struct stat st{};
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Maps the file up to at least `needed` bytes. Caller holds open_mutex.
bool grow_locked(Writer& w, uint64_t needed) {
  uint64_t mapped = w.mapped.load(std::memory_order_relaxed);
  if (needed <= mapped) return true;
  if (needed > w.capacity || w.file_lost.load(std::memory_order_acquire)) return false;
  // Shrunk by someone else since we last grew it: growing would extend it again over a hole where
  // our records were, silently. Take it as lost, as a fault inside the mapping would.
  struct stat st{};
  if (fstat(w.fd, &st) == 0 && static_cast<uint64_t>(st.st_size) < mapped) {
    take_fault_in_our_mapping(w.base);
    return false;
  }
  // Whole chunks, except the last one, which stops at the NCCLWATCH_MAX_MB limit.
  uint64_t target = std::min((needed + kChunkBytes - 1) / kChunkBytes * kChunkBytes, w.capacity);
  if (posix_fallocate(w.fd, static_cast<off_t>(mapped), static_cast<off_t>(target - mapped)) != 0) {
    // Nearly full disk: take just what this record needs, in whole pages.
    uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    target = std::min((needed + page - 1) / page * page, w.capacity);
    if (posix_fallocate(w.fd, static_cast<off_t>(mapped), static_cast<off_t>(target - mapped)) != 0) return false;
  }
  // MAP_POPULATE: fault the chunk in now, once, rather than a page at a time on the collective
  // path (page faults are dear inside virtual machines).
  void* at = mmap(w.base + mapped, target - mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
                  w.fd, static_cast<off_t>(mapped));
  if (at == MAP_FAILED) return false;
  // Pairs with the acquire load in reserve_record(): a writer that sees the new size may touch it.
  w.mapped.store(target, std::memory_order_release);
  return true;
}

void fail_open(Writer& w, const std::string& why) {
  w.state.store(State::kFailed, std::memory_order_release);
  std::string text = "ncclwatch: cannot write the trace (" + why +
                     "); the job runs on, the exit alert still works, but this process's records are lost";
  notice_once(Notice::kTraceOpenFailed, text.c_str());
}

bool open_locked(Writer& w) {
  const Config& cfg = config();
  const ProcessInfo& proc = process_info();
  if (!make_directories(cfg.trace_dir)) {
    fail_open(w, "directory " + cfg.trace_dir + ": " + std::strerror(errno));
    return false;
  }
  // Unique by host, pid and start time; O_EXCL|O_NOFOLLOW: never clobber, never follow a link.
  std::string stem = cfg.trace_dir + "/" + host_for_file_names(proc.host) + "-" + std::to_string(proc.pid) + "-" +
                     std::to_string(proc.start_wall_ns / 1000);
  int fd = -1;
  std::string path;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    path = stem;
    if (attempt) {
      path += '.';  // not "." + std::to_string(): GCC 12's -Wrestrict misfires on that at -O3
      path += std::to_string(attempt);
    }
    path += kFileExtension;
    // Owner-only by default: a trace holds the job's command line, environment and call sites.
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, cfg.group_readable ? 0640 : 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    fail_open(w, path + ": " + std::strerror(errno));
    return false;
  }
  if (path.size() < sizeof(g_unfinished_path)) {
    std::memcpy(g_unfinished_path, path.c_str(), path.size() + 1);
    g_unfinished.store(true, std::memory_order_release);
  }
  uint64_t capacity = trace_capacity_bytes();
  if (capacity < cfg.max_trace_bytes) {
    struct rlimit limit{};
    getrlimit(RLIMIT_AS, &limit);
    notice_once(Notice::kTraceCapacityLimited,
                ("ncclwatch: the address space is limited (RLIMIT_AS " + std::to_string(limit.rlim_cur >> 20) +
                 " MiB): the trace takes at most " + std::to_string(capacity >> 20) + " MiB of it (NCCLWATCH_MAX_MB=" +
                 std::to_string(cfg.max_trace_bytes >> 20) + " asked)")
                    .c_str());
  }
  void* range = mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) {
    close(fd);
    discard_unfinished_file();
    fail_open(w, "cannot reserve address space");
    return false;
  }
  w.fd = fd;
  w.base = static_cast<std::byte*>(range);
  w.capacity = capacity;
  w.path = path;
  install_bus_handler(path);
  // Release pairs with the handler's acquire: base and capacity are set before it may use them.
  g_mapped_base.store(w.base, std::memory_order_release);
  if (!grow_locked(w, kHeaderBytes + kExitReserveBytes)) {
    g_mapped_base.store(nullptr, std::memory_order_release);
    munmap(range, capacity);
    close(fd);
    discard_unfinished_file();  // no empty leftovers
    w.fd = -1;
    fail_open(w, path + ": cannot allocate disk space");
    return false;
  }
  auto* header = reinterpret_cast<FileHeader*>(w.base);
  header->version = kVersion;
  header->min_reader_version = kMinReadableVersion;
  header->header_bytes = kHeaderBytes;
  header->pid = static_cast<uint32_t>(proc.pid);
  header->ppid = static_cast<uint32_t>(proc.ppid);
  header->start_wall_ns = proc.start_wall_ns;
  header->start_mono_ns = proc.start_mono_ns;
  std::strncpy(header->host, proc.host.c_str(), sizeof(header->host) - 1);
  // The magic last: a reader never trusts a half-written header.
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(header->magic, kMagic, sizeof(kMagic));
  w.next.store(kHeaderBytes, std::memory_order_relaxed);
  TraceBudget budget = trace_budget(capacity);
  w.held_back.store(budget.ring_bytes() + budget.totals_bytes(), std::memory_order_relaxed);
  w.state.store(State::kOpen, std::memory_order_release);
  g_unfinished.store(false, std::memory_order_release);
  return true;
}

bool ensure_open(Writer& w) {
  // Pairs with the release stores in open_locked()/fail_open().
  State s = w.state.load(std::memory_order_acquire);
  if (s == State::kOpen) return true;
  if (s == State::kFailed) return false;
  bool opened = false;
  {
    std::lock_guard lock(w.open_mutex);
    s = w.state.load(std::memory_order_relaxed);
    if (s == State::kClosed) opened = open_locked(w);
    else return s == State::kOpen;
  }
  // Outside the lock: the process record goes through reserve_record() like any other.
  if (opened) {
    write_strings_record(RecordType::kProcess, process_info().as_strings());
    for (const std::string& problem : config().problems) write_notice_record(problem.c_str());
  }
  return opened;
}

void count_lost(Writer& w) {
  // Relaxed: a statistic; the exit record reads it after every writer is done or gone.
  w.lost.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

uint64_t trace_capacity_bytes() noexcept {
  static const uint64_t capacity = [] {
    uint64_t wanted = config().max_trace_bytes;
    struct rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return wanted;
    uint64_t share = limit.rlim_cur / kAddressSpaceShare / kChunkBytes * kChunkBytes;
    return std::min(wanted, std::clamp(share, kMinLimitedBytes, kMaxLimitedBytes));
  }();
  return capacity;
}

void RecordSlot::commit(RecordType type) const noexcept {
  uint32_t word = static_cast<uint32_t>(type) | (uint32_t{kCommitMark} << 16);
  // Release: pairs with the reader's acquire of the same word; the body is visible before it.
  // The type and commit halves form the header's second 32-bit word.
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(at_ + offsetof(RecordHeader, type))).store(word, std::memory_order_release);
}

namespace {

// Claims `size` bytes at `next` if they end at least `headroom` bytes before the end of the
// mapping. Lock-free and allocation-free: the signal path uses it too.
std::byte* claim_mapped(Writer& w, uint32_t size, uint64_t headroom) noexcept {
  // Acquire pairs with the release store in grow_locked(): the bytes below `mapped` are mapped.
  uint64_t mapped = w.mapped.load(std::memory_order_acquire);
  // Relaxed: the offset only partitions the file between writers; the commit word publishes data.
  uint64_t offset = w.next.load(std::memory_order_relaxed);
  do {
    if (offset + size + headroom > mapped) return nullptr;
  } while (!w.next.compare_exchange_weak(offset, offset + size, std::memory_order_relaxed));
  std::byte* at = w.base + offset;
  // The size goes in first so a reader can step over this record even before it is committed.
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(at)).store(size, std::memory_order_relaxed);
  return at;
}

void say_trace_full(Writer& w, const char* why) {
  try {
    notice_once(Notice::kTraceFull,
                ("ncclwatch: the trace " + w.path + " " + why + "; further records are lost and counted").c_str());
  } catch (...) {
    // Silent: the line could not be built (no memory); the records lost are still counted in the trace.
  }
}

}  // namespace

namespace {

// `held_back`: bytes at the end of the budget this reservation may not use.
RecordSlot reserve_within(Writer& w, uint32_t size, uint64_t held_back) noexcept {
  for (;;) {
    if (std::byte* at = claim_mapped(w, size, kExitReserveBytes)) {
      if (held_back == 0 || w.next.load(std::memory_order_relaxed) + kExitReserveBytes + held_back <= w.capacity)
        return RecordSlot(at, size);
      // Claimed into the held-back share: give the bytes back as padding, the record is lost.
      RecordSlot(at, size).commit(RecordType::kPadding);
      count_lost(w);
      say_trace_full(w, "reached NCCLWATCH_MAX_MB for lifecycle records (the rest is kept for the newest ops)");
      return {};
    }
    uint64_t needed = w.next.load(std::memory_order_relaxed) + size + kExitReserveBytes;
    if (needed + held_back > w.capacity) {
      count_lost(w);
      say_trace_full(w, "reached NCCLWATCH_MAX_MB");
      return {};
    }
    bool grown = false;
    try {
      std::lock_guard lock(w.open_mutex);
      grown = grow_locked(w, needed);
    } catch (...) {
      // grown stays false: said just below, and the record counted as lost.
    }
    if (!grown) {
      count_lost(w);
      say_trace_full(w, "cannot grow (the disk is full)");
      return {};
    }
  }
}

}  // namespace

RecordSlot reserve_record(uint32_t size) noexcept {
  Writer& w = writer();
  if (!ensure_open(w) || w.file_lost.load(std::memory_order_relaxed)) {
    count_lost(w);
    return {};
  }
  return reserve_within(w, size, w.held_back.load(std::memory_order_relaxed));
}

RecordSlot reserve_chunk_record(uint32_t size) noexcept {
  Writer& w = writer();
  if (!ensure_open(w) || w.file_lost.load(std::memory_order_relaxed)) return {};
  RecordSlot slot = reserve_within(w, size, 0);
  if (slot) {
    // The chunk now holds its share: release it for the history (never below zero).
    uint64_t held = w.held_back.load(std::memory_order_relaxed);
    while (!w.held_back.compare_exchange_weak(held, held > size ? held - size : 0, std::memory_order_relaxed)) {
    }
  }
  return slot;
}

void count_lost_record() noexcept { count_lost(writer()); }

RecordSlot reserve_exit_record(uint32_t size) noexcept {
  Writer* existing = existing_writer();  // the signal path
  if (!existing) return {};
  Writer& w = *existing;
  // Acquire pairs with the release in open_locked(): base and mapping are set before the state.
  if (w.state.load(std::memory_order_acquire) != State::kOpen) {
    discard_unfinished_file();  // the process ends before its trace got a header
    return {};
  }
  if (w.file_lost.load(std::memory_order_relaxed)) return {};
  std::byte* at = claim_mapped(w, size, 0);
  return at ? RecordSlot(at, size) : RecordSlot();
}

uint64_t lost_record_count() noexcept {
  const Writer* w = existing_writer();  // the signal path
  return w ? w->lost.load(std::memory_order_relaxed) : 0;
}

const char* trace_path_c() noexcept {
  const Writer* w = existing_writer();  // the signal path
  // Acquire pairs with the release in open_locked(): the path is set before the state.
  return w && w->state.load(std::memory_order_acquire) == State::kOpen ? w->path.c_str() : "";
}

void write_strings_record(RecordType type, const std::string& blob) noexcept {
  uint32_t size = padded_size(sizeof(StringsRecord) + blob.size());
  if (size > kMaxRecordBytes) return;
  RecordSlot slot = reserve_record(size);
  if (!slot) return;
  auto* rec = slot.as<StringsRecord>();
  rec->time_ns = monotonic_ns();
  rec->bytes = static_cast<uint32_t>(blob.size());
  std::memcpy(slot.bytes() + sizeof(StringsRecord), blob.data(), blob.size());
  slot.commit(type);
}

void write_notice_record(const char* text) noexcept {
  try {
    if (writer().state.load(std::memory_order_acquire) != State::kOpen) return;
    std::string blob;
    append_string(blob, notice_record::kText, text);
    write_strings_record(RecordType::kNotice, blob);
  } catch (...) {
    // Silent: the notice is on stderr already; only its copy in the trace is lost.
  }
}

namespace {
// Notices are copied into the trace from the start (notices.h cannot depend on this file).
[[maybe_unused]] const bool g_notices_recorded = (set_notice_recorder(write_notice_record), true);
}  // namespace

void trace_writer_after_fork_in_child() noexcept {
  Writer& w = writer();
  // The parent's file stays the parent's: unmap and close without writing, and never remove it
  // (a fork while another thread was creating it leaves the flag set in the child).
  g_unfinished.store(false, std::memory_order_relaxed);
  g_mapped_base.store(nullptr, std::memory_order_release);
  if (w.base) munmap(w.base, w.capacity);
  if (w.fd >= 0) close(w.fd);
  new (&w.open_mutex) std::mutex();
  w.fd = -1;
  w.base = nullptr;
  w.capacity = 0;
  w.mapped.store(0, std::memory_order_relaxed);
  w.next.store(0, std::memory_order_relaxed);
  w.lost.store(0, std::memory_order_relaxed);
  w.held_back.store(0, std::memory_order_relaxed);
  w.file_lost.store(false, std::memory_order_relaxed);
  w.path.clear();
  w.state.store(State::kClosed, std::memory_order_release);
}

}  // namespace ncclwatch
