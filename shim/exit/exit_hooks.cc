#include "exit/exit_hooks.h"

#include "comms/comms.h"
#include "exit/alert_text.h"
#include "exit/signal_arrival.h"
#include "gpu/gpu.h"
#include "graph/graph.h"
#include "metrics/metrics.h"
#include "process/process.h"
#include "resolve/resolve.h"
#include "site/site.h"
#include "trace/trace.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace ncclwatch {
namespace {

using trace::ExitReason;

std::atomic<bool> g_exit_began{false};
std::atomic<bool> g_exit_recorded{false}; // the kExitBegin record is written
std::atomic<bool> g_alert_done{false};    // the alert is printed (or was not needed)
std::mutex g_attach_mutex;

using IsFinalizingFn = int (*)();
std::atomic<IsFinalizingFn> g_python_is_finalizing{nullptr};
// A SIGINT handed to the application's own handler (Python's, which raises KeyboardInterrupt). An
// unhandled KeyboardInterrupt ends Python by finalizing, then by SIGINT at its default action
// (so the shell sees ^C): no exit() runs, so the end is written from Python's last exit hook.
std::atomic<bool> g_interrupt_passed_on{false};
using PyAtExitFn = int (*)(void (*)());

constexpr int kWatchedSignals[] = {SIGTERM, SIGINT, SIGHUP};

void write_exit_record(trace::RecordType type, ExitReason reason, int signal, uint32_t live_comms,
                       uint32_t live_resources) noexcept {
  RecordSlot slot = reserve_exit_record(sizeof(trace::ExitRecord));
  if (!slot) return;
  auto* rec = slot.as<trace::ExitRecord>();
  rec->time_ns = monotonic_ns();
  rec->reason = static_cast<uint32_t>(reason);
  rec->signal = signal;
  rec->live_comms = live_comms;
  rec->live_resources = live_resources;
  rec->lost_records = lost_record_count();
  slot.commit(type);
}

// The communicators alive when the alert was built, for the LiveAtExit record. Static: the signal
// path cannot allocate. As many as the exit reserve holds (trace_writer.cc keeps room for them).
constexpr uint32_t kMaxLiveListed = 512;
trace::LiveComm g_live_at_exit[kMaxLiveListed];
uint32_t g_live_listed = 0;

void write_live_at_exit_record(bool complete) noexcept {
  uint32_t size = static_cast<uint32_t>(sizeof(trace::LiveAtExitRecord) + g_live_listed * sizeof(trace::LiveComm));
  RecordSlot slot = reserve_exit_record(size);
  if (!slot) return;
  auto* rec = slot.as<trace::LiveAtExitRecord>();
  rec->time_ns = monotonic_ns();
  rec->count = g_live_listed;
  rec->complete = complete ? 1 : 0;
  std::memcpy(slot.bytes() + sizeof(trace::LiveAtExitRecord), g_live_at_exit, g_live_listed * sizeof(trace::LiveComm));
  slot.commit(trace::RecordType::kLiveAtExit);
}

void mark_exit_began(ExitReason reason, int signal) noexcept {
  g_exit_began.store(true, std::memory_order_relaxed);
  if (!detail::g_process_attached.load(std::memory_order_relaxed)) return;
  if (!g_exit_recorded.exchange(true, std::memory_order_relaxed))
    write_exit_record(trace::RecordType::kExitBegin, reason, signal, 0, 0);
}

// The end state, and what happened to it in words.
// "; created at train.py:43 (main) via c10d::NCCLComm::create (libtorch_cuda.so)": the Python
// line first when there is one, since that is the line the user wrote.
void describe_site(AlertText& out, const char* lead, const char* python_site, const char* native_site) {
  if (!python_site[0] && !native_site[0]) return;
  out.add(lead);
  if (python_site[0]) out.add(python_site).add(native_site[0] ? " via " : "");
  out.add(native_site);
}

// The call a communicator in a teardown phase is inside.
const char* teardown_call(CommPhase phase) {
  switch (phase) {
    case CommPhase::kFinalizing: return "ncclCommFinalize";
    case CommPhase::kDestroying: return "ncclCommDestroy";
    case CommPhase::kAborting: return "ncclCommAbort";
    default: return nullptr;
  }
}

// How long `c`'s teardown call has been inside at `now` (-1: not in one, or unknown).
int64_t teardown_inside_ns(const CommEntry& c, int64_t now) {
  return teardown_call(c.phase) && c.teardown_entered_ns ? now - c.teardown_entered_ns : -1;
}

lifecycle::EndState end_state_now(const CommEntry& c, int64_t now) {
  return end_state_at_exit(c.phase, teardown_inside_ns(c, now));
}

// The GPU memory `c` holds as last read: at its creation, or after its set-up calls since.
uint64_t held_now(const CommEntry& c) {
  // The table itself, not find_comm_track's per-thread memo: this may run in a signal handler.
  const CommTrack* track = detail::find_comm_track_in_table(c.handle);
  uint64_t held = track ? track->held_bytes.load(std::memory_order_relaxed) : 0;
  return held ? held : c.memory_bytes;
}

void describe_end(AlertText& out, const CommEntry& c, int64_t now) {
  lifecycle::EndState state = end_state_now(c, now);
  out.add(lifecycle::end_state_name(state));
  if (const char* call = teardown_call(c.phase)) {
    out.add(" (").add(call).add(" entered");
    if (c.teardown_entered_ns) out.add(' ').add_seconds(now - c.teardown_entered_ns).add(" before exit");
    out.add(state == lifecycle::EndState::kEndedInTeardown ? ")" : ", never returned)");
  }
  if (c.phase == CommPhase::kReleasedAtExit) out.add(" by ").add(trace::api_name(c.released_by)).add(" during exit");
}

struct AlertCounts {
  uint32_t comms = 0;         // still in the table: the exit record's live count
  uint32_t leaked_comms = 0;  // of them, leaks (lifecycle::is_leak): what the alert counts
  uint32_t resources = 0;
  lifecycle::LeakMakers makers;  // who made the leaks: which remedies to print
  bool complete = true;  // false when the state could not be read (signal path, lock busy)
};

// Builds the alert block; returns what it found. `wait` false in signal handlers.
AlertCounts build_alert(AlertText& out, bool wait) {
  AlertCounts counts;
  int64_t now = monotonic_ns();
  // Not process_info(): in a signal handler its lock may be held by the very thread interrupted.
  const ProcessInfo* proc = process_info_if_collected();
  static char body_buffer[48 * 1024];  // static: a signal may land on a thread with a small stack
  AlertText body(body_buffer, sizeof(body_buffer));
  // Room for one more entry line (call sites can be long); past it, entries are only counted.
  constexpr size_t kEntryRoom = 2048;
  uint32_t not_shown = 0;
  auto full = [&] { return body.size() + kEntryRoom > sizeof(body_buffer); };
  g_live_listed = 0;
  // Before the first communicator there is no table, and nothing to list.
  Registry* table = existing_registry();
  bool read = !table || table->read(
      [&](const std::vector<CommEntry>& comms, const std::vector<ResourceEntry>& resources, const ReleaseTally&) {
        for (const CommEntry& c : comms) {
          ++counts.comms;
          if (g_live_listed < kMaxLiveListed) {
            trace::LiveComm& live = g_live_at_exit[g_live_listed++];
            live = {c.handle, c.id, c.rank, c.nranks, static_cast<uint32_t>(end_state_now(c, now)), 0};
          }
          bool leak = lifecycle::is_leak(end_state_now(c, now));
          counts.leaked_comms += leak;
          if (leak) counts.makers.add(c.nvshmem_caller, c.torch_caller, end_state_now(c, now));
          if (full()) {
            ++not_shown;
            continue;
          }
          body.add(leak ? "  comm " : "  note: comm ").add_hex(c.id, 16).add(" rank ").add_int(c.rank).add('/').add_int(c.nranks);
          if (c.name[0]) body.add(" \"").add(c.name).add('"');
          body.add(" (").add(trace::api_name(c.created_by));
          if (c.process_group[0]) body.add(", ").add(c.process_group);
          body.add(", age ").add_seconds(now - c.created_ns);
          if (uint64_t held = held_now(c)) body.add(", ").add_bytes(held).add(" of GPU memory");
          body.add("): ");
          if (leak || end_state_now(c, now) == lifecycle::EndState::kEndedInTeardown) describe_end(body, c, now);
          else body.add(lifecycle::kFinalizedNote);
          describe_site(body, "; created at ", c.python_site, c.site);
          if (c.nvshmem_caller) body.add(lifecycle::kNvshmemMadeNote);
          if (library_count() > 1) body.add("; by NCCL ").add(library_path(c.library_id));
          body.add('\n');
        }
        for (const ResourceEntry& r : resources) {
          ++counts.resources;
          if (full()) {
            ++not_shown;
            continue;
          }
          body.add("  ").add(trace::resource_kind(r.acquired_by)).add(" 0x").add_hex(r.handle);
          if (r.bytes) body.add(", ").add_bytes(r.bytes);
          if (r.comm_id) body.add(", comm ").add_hex(r.comm_id, 16).add(" rank ").add_int(r.rank);
          body.add(" (").add(trace::api_name(r.acquired_by)).add(", age ").add_seconds(now - r.created_ns);
          body.add("): never released");
          describe_site(body, "; made at ", r.python_site, r.site);
          body.add('\n');
        }
      },
      wait);
  if (not_shown) body.add("  ... and ").add_int(not_shown).add(" more, listed in the trace\n");
  counts.complete = read;
  if (read && counts.leaked_comms == 0 && counts.resources == 0) return counts;

  out.add("ncclwatch: ");
  if (!read) {
    out.add("could not read the communicator table at exit (it was busy); see the trace\n");
  } else {
    out.add_int(counts.leaked_comms).add(" communicator(s) never destroyed");
    if (counts.resources) out.add(", ").add_int(counts.resources).add(" NCCL resource(s) never released");
    out.add(" in pid ").add_int(getpid());
    if (proc) out.add(" on ").add(proc->host.c_str());
    if (proc && !proc->job_rank.empty()) out.add(" (job rank ").add(proc->job_rank.c_str()).add(')');
    out.add('\n');
    // Why it is ending without its teardown, where Python said (python_exception.h).
    describe_signal_arrival(out);
    if (const char* exception = python_exception_summary(); exception[0])
      out.add("  the program is ending on an uncaught ").add(exception).add('\n');
    out.add(body.data());
    for (const char* remedy : lifecycle::remedies_for(counts.makers))
      out.add(lifecycle::kRemedyLead).add(remedy).add('\n');
  }
  const char* path = trace_path_c();
  if (path[0]) out.add("  trace: ").add(path).add('\n');
  return counts;
}

void print(const AlertText& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

// Writes the final record and prints the alert, once. Returns whether something leaked.
bool finish_process(ExitReason reason, int signal, bool wait) {
  // A process that never called NCCL through us has a trace only when it holds a copy we
  // could not trace (library_census.h).
  if (!detail::g_process_attached.load(std::memory_order_relaxed) && !trace_path_c()[0]) return false;
  if (g_alert_done.exchange(true, std::memory_order_relaxed)) return false;
  static char buffer[64 * 1024];  // static: the signal path cannot allocate
  AlertText text(buffer, sizeof(buffer));
  AlertCounts counts = build_alert(text, wait);
  write_live_at_exit_record(counts.complete && g_live_listed == counts.comms);
  write_exit_record(trace::RecordType::kProcessEnd, reason, signal, counts.comms, counts.resources);
  clear_watcher_files();
  bool leaked = counts.leaked_comms + counts.resources > 0 || !counts.complete;
  if (leaked && config().on_leak != LeakPolicy::kOff) print(text);
  return leaked;
}

// Registered at the first NCCL call, so it runs before the static destructors of objects built
// earlier: a destroy from such a destructor counts as "at exit".
void on_exit_began() {
  // CUDA may be torn down by handlers that run after this one: the collector stops first (it was
  // told at the start of exit, gpu_collector.cc, to let the launches still running finish).
  stop_gpu_timer();
  mark_exit_began(ExitReason::kNormal, 0);
}

// Registered in the constructor, so it runs after nearly everything else at exit.
void on_final_exit(int status, void*) {
  if (config().record) report_untraced_nccl(true);
  bool leaked = finish_process(ExitReason::kExited, status, true);
  write_final_live_metrics();
  if (leaked && status == 0 && config().on_leak == LeakPolicy::kFail) {
    std::fflush(nullptr);
    _exit(kLeakExitStatus);
  }
}

// Python's last exit hook (Py_AtExit), after the interpreter is torn down, PyTorch's destructors
// included. After a Ctrl-C Python may kill itself with SIGINT next, without exit(): the end is
// written now. Otherwise exit() follows and on_final_exit writes it, as for any program.
void on_python_finalized() {
  if (!g_interrupt_passed_on.load(std::memory_order_relaxed)) return;
  stop_gpu_timer();
  mark_exit_began(ExitReason::kSignal, SIGINT);
  finish_process(ExitReason::kSignal, SIGINT, true);
  write_final_live_metrics();
}

// The application had no handler (or a one-shot one already ran): the process dies by `sig`
// next. Signal context: the table is read without waiting.
void before_death_by_signal(int sig, const siginfo_t* info) noexcept {
  record_signal_arrival(sig, info, /*handled=*/false);
  mark_exit_began(ExitReason::kSignal, sig);
  finish_process(ExitReason::kSignal, sig, false);
}

// The application handles it (Python turns SIGINT into KeyboardInterrupt): its own exit path will
// reach our exit hook if it does exit.
void before_application_handler(int sig, const siginfo_t* info) noexcept {
  record_signal_arrival(sig, info, /*handled=*/true);
  if (sig == SIGINT) g_interrupt_passed_on.store(true, std::memory_order_relaxed);
}

void install_signal_handlers() {
  SignalClaim claim;
  claim.before_default = before_death_by_signal;
  claim.before_handler = before_application_handler;
  // An ignored signal stays ignored, untouched: a handler would not be inherited across exec
  // as SIG_IGN is (`nohup` would stop protecting the job's children), and the signal cannot
  // end the process anyway.
  for (int sig : kWatchedSignals) claim_signal(sig, claim, /*leave_ignored=*/true);
}

// Whether this is the process image the shim attached to: a vfork child shares our memory (and
// ran no fork handler), so it must never end our trace.
std::atomic<pid_t> g_attached_pid{0};
bool is_attached_image() noexcept {
  return detail::g_process_attached.load(std::memory_order_acquire) &&
         getpid() == g_attached_pid.load(std::memory_order_relaxed);
}

// The one after-fork reset: NCCL state does not cross fork, so the child starts with nothing and
// writes its own file. Each module's state that must not cross it is reset by its
// <module>_after_fork_in_child(), all called here.
void after_fork_in_child() {
  detail::g_process_attached.store(false, std::memory_order_relaxed);
  g_exit_began.store(false, std::memory_order_relaxed);
  g_exit_recorded.store(false, std::memory_order_relaxed);
  g_alert_done.store(false, std::memory_order_relaxed);
  new (&g_attach_mutex) std::mutex();
  registry().after_fork_in_child();
  comm_table_after_fork_in_child();
  gpu_timer_after_fork_in_child();
  graph_table_after_fork_in_child();
  trace_writer_after_fork_in_child();
  op_ring_after_fork_in_child();
  trace_refs_after_fork_in_child();
  callsite_after_fork_in_child();
  stack_requests_after_fork_in_child();
  process_info_after_fork_in_child();
  notices_after_fork_in_child();
  library_census_after_fork_in_child();
  resolver_after_fork_in_child();
  thread_state_after_fork_in_child();
  live_metrics_after_fork_in_child();
  python_exception_after_fork_in_child();
  signal_arrival_after_fork_in_child();
}

__attribute__((constructor)) void on_load() {
  if (!shim_in_global_scope()) return;  // no call can reach this copy: nothing to watch, nothing to say
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  on_exit(on_final_exit, nullptr);
  report_nccl_ahead_of_shim_at_load();
}

}  // namespace

void attach_process() noexcept {
  // Pairs with the release store below: once attached, every hook is in place.
  if (detail::g_process_attached.load(std::memory_order_acquire)) return;
  try {
    std::lock_guard lock(g_attach_mutex);
    if (detail::g_process_attached.load(std::memory_order_relaxed)) return;
    atexit(on_exit_began);
    install_signal_handlers();
    auto finalizing = reinterpret_cast<IsFinalizingFn>(real_dlsym(RTLD_DEFAULT, "Py_IsFinalizing"));
    if (!finalizing) finalizing = reinterpret_cast<IsFinalizingFn>(real_dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"));
    g_python_is_finalizing.store(finalizing, std::memory_order_relaxed);
    // Once per process image: a forked child inherits the registration with the interpreter.
    static bool python_hook_registered = false;
    if (finalizing && !python_hook_registered) {
      if (auto at_exit = reinterpret_cast<PyAtExitFn>(real_dlsym(RTLD_DEFAULT, "Py_AtExit"))) at_exit(on_python_finalized);
      watch_for_python_exception();
      python_hook_registered = true;
    }
    print_setting_problems();
    g_attached_pid.store(getpid(), std::memory_order_relaxed);
    detail::g_process_attached.store(true, std::memory_order_release);
  } catch (...) {
    notice_once(Notice::kAttachFailed,
                "ncclwatch: an internal error stopped the exit hooks from being set up; the leak alert at exit "
                "and the trace's end record may be missing");
  }
  library_census_process_attached();
  report_untraced_nccl(false);
}


void image_ends_by_quick_exit(int status) noexcept {
  if (!is_attached_image()) return;
  // The GPU timing thread records what already ran (bounded; it makes the CUDA calls, not us).
  stop_gpu_timer(/*let_running_finish=*/true);
  mark_exit_began(ExitReason::kQuickExit, status);
  // _exit may be called from a signal handler: the table is read without waiting.
  finish_process(ExitReason::kQuickExit, status, false);
  write_final_live_metrics();
}

void image_ends_by_exec() noexcept {
  if (is_attached_image()) {
    stop_gpu_timer(/*let_running_finish=*/true);
    // No ExitBegin: nothing of the program's own runs after this point in the image.
    finish_process(ExitReason::kExec, 0, false);
  }
  give_back_claimed_signals();
}

void exec_failed() noexcept {
  reclaim_signals();
  if (!is_attached_image()) return;
  // The image goes on: the real end is written again when it comes (readers keep the last).
  g_alert_done.store(false, std::memory_order_relaxed);
  notice_once(Notice::kExecFailed, "ncclwatch: an exec failed after the trace was ended for it; the process goes on "
                                   "and its trace continues (GPU timing stays off)");
}

bool program_exiting() noexcept {
  if (g_exit_began.load(std::memory_order_relaxed)) return true;
  // Python tears objects down (PyTorch's process groups among them) before exit() is called.
  if (IsFinalizingFn finalizing = g_python_is_finalizing.load(std::memory_order_relaxed); finalizing && finalizing()) {
    mark_exit_began(ExitReason::kPythonFinalizing, 0);
    return true;
  }
  return false;
}

}  // namespace ncclwatch
