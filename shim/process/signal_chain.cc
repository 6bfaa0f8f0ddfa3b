#include "process/signal_chain.h"

#include "process/spin_lock.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace ncclwatch {
namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

// The C library's sigaction (the next one after ours: a sanitizer's interceptor where one follows).
// Found when the first signal is claimed, never in a handler.
std::atomic<SigactionFn> g_real_sigaction{nullptr};

SigactionFn real_sigaction() noexcept {
  // Acquire pairs with the release below: the pointer is complete.
  SigactionFn fn = g_real_sigaction.load(std::memory_order_acquire);
  if (!fn) {
    fn = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
    if (!fn) fn = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "__sigaction"));
    g_real_sigaction.store(fn, std::memory_order_release);
  }
  return fn;
}

constexpr size_t kActionWords = sizeof(struct sigaction) / sizeof(uint64_t);
static_assert(sizeof(struct sigaction) % sizeof(uint64_t) == 0);

// One claimed signal. The application's action is read by handlers on any thread while a
// sigaction() call may change it: a sequence lock (odd while written) over word-sized atomics.
struct Slot {
  std::atomic<bool> claimed{false};
  SignalClaim claim;                      // set before `claimed`, never changed after
  std::atomic<uint32_t> version{0};
  uint64_t app_words[kActionWords] = {};  // the application's struct sigaction
  // A one-shot action (SA_RESETHAND) was delivered: the kernel would have reset it to SIG_DFL.
  std::atomic<bool> reset_by_delivery{false};
};
Slot g_slots[NSIG];
std::atomic<bool> g_any_claimed{false};
// Writers of the slots (claims, sigaction calls), always with every signal blocked, so a handler
// on the writer's own thread never meets it taken.
SpinLock g_writers;

// Only under g_writers, signals blocked.
void store_app_action(Slot& s, const struct sigaction& action) noexcept {
  uint64_t words[kActionWords];
  std::memcpy(words, &action, sizeof(action));
  uint32_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);
  // Release fence: a reader that sees any new word also sees the odd version (pairs with its acquire fence).
  std::atomic_thread_fence(std::memory_order_release);
  for (size_t i = 0; i < kActionWords; ++i)
    std::atomic_ref<uint64_t>(s.app_words[i]).store(words[i], std::memory_order_relaxed);
  s.reset_by_delivery.store(false, std::memory_order_relaxed);
  // Release pairs with the reader's acquire load of the version: the words are complete.
  s.version.store(v + 2, std::memory_order_release);
}

// Any thread, signal handlers included.
struct sigaction load_app_action(Slot& s) noexcept {
  uint64_t words[kActionWords];
  for (;;) {
    uint32_t before = s.version.load(std::memory_order_acquire);
    if (before & 1) continue;  // a writer is mid-way (it runs with signals blocked: it finishes)
    for (size_t i = 0; i < kActionWords; ++i)
      words[i] = std::atomic_ref<uint64_t>(s.app_words[i]).load(std::memory_order_relaxed);
    // Acquire fence pairs with the writer's release fence: a torn read shows as a changed version.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) == before) break;
  }
  struct sigaction action;
  std::memcpy(&action, words, sizeof(action));
  if (s.reset_by_delivery.load(std::memory_order_acquire)) {
    action.sa_handler = SIG_DFL;
    action.sa_flags &= ~(SA_SIGINFO | SA_RESETHAND);
  }
  return action;
}

bool is_handler(const struct sigaction& a) { return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN; }

// A fault the kernel raised for an access (it happens again when the handler returns), as opposed
// to a signal somebody sent.
bool is_synchronous_fault(int sig, const siginfo_t* info) {
  return sig == SIGBUS && info && info->si_code > 0 && info->si_code != SI_KERNEL;
}

void on_claimed_signal(int sig, siginfo_t* info, void* context);

// What the kernel is given: our handler, with the flags and mask the application's handler asked
// for, so the kernel itself blocks what it would have blocked and picks the stack it would have picked.
struct sigaction ours_in_front_of(const struct sigaction& app) {
  struct sigaction ours{};
  ours.sa_sigaction = on_claimed_signal;
  if (is_handler(app)) {
    ours.sa_mask = app.sa_mask;
    ours.sa_flags = SA_SIGINFO | (app.sa_flags & (SA_ONSTACK | SA_RESTART | SA_NODEFER));
  } else {
    // The application has no handler: an alternate stack, where there is one, spares a thread
    // whose own stack is nearly used up; SA_RESTART keeps its system calls as they were.
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  }
  return ours;
}

void die_by_default_action(Slot& s, int sig, const siginfo_t* info, bool fault) {
  if (s.claim.before_default) s.claim.before_default(sig, info);
  struct sigaction fallback{};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  if (SigactionFn real = g_real_sigaction.load(std::memory_order_acquire)) real(sig, &fallback, nullptr);
  // A fault happens again once we return, now at the default action; a sent signal is sent again
  // (blocked in this handler, it is delivered as the handler returns).
  if (!fault) raise(sig);
}

void on_claimed_signal(int sig, siginfo_t* info, void* context) {
  int saved_errno = errno;
  Slot& s = g_slots[sig];
  if (s.claim.take && s.claim.take(sig, info, context)) {
    errno = saved_errno;
    return;
  }
  struct sigaction app = load_app_action(s);
  bool fault = is_synchronous_fault(sig, info);
  if (is_handler(app)) {
    // The kernel resets a one-shot action as it delivers it: the next one meets SIG_DFL.
    if (app.sa_flags & SA_RESETHAND) s.reset_by_delivery.store(true, std::memory_order_release);
    if (s.claim.before_handler) s.claim.before_handler(sig, info);
    errno = saved_errno;
    if (app.sa_flags & SA_SIGINFO) app.sa_sigaction(sig, info, context);
    else app.sa_handler(sig);
    return;
  }
  // SIG_IGN: a sent signal is dropped; a fault cannot be ignored, the kernel kills with it.
  if (app.sa_handler == SIG_IGN && !fault) {
    errno = saved_errno;
    return;
  }
  die_by_default_action(s, sig, info, fault);
  errno = saved_errno;
}

// Runs `body` with every signal blocked and the writers' lock held.
template <class Body> void as_writer(Body&& body) {
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  g_writers.lock();
  body();
  g_writers.unlock();
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace

bool claim_signal(int sig, const SignalClaim& claim, bool leave_ignored) noexcept {
  if (sig <= 0 || sig >= NSIG) return false;
  SigactionFn real = real_sigaction();
  if (!real) return false;
  bool claimed = false;
  as_writer([&] {
    Slot& s = g_slots[sig];
    if (s.claimed.load(std::memory_order_relaxed)) {
      claimed = true;
      return;
    }
    struct sigaction current{};
    if (real(sig, nullptr, &current) != 0 || (leave_ignored && current.sa_handler == SIG_IGN)) return;
    s.claim = claim;
    store_app_action(s, current);
    g_any_claimed.store(true, std::memory_order_release);
    struct sigaction ours = ours_in_front_of(current);
    if (real(sig, &ours, nullptr) != 0) return;
    // Release pairs with the acquire in chained_sigaction(): the slot is complete once claimed.
    s.claimed.store(true, std::memory_order_release);
    claimed = true;
  });
  return claimed;
}

int chained_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  SigactionFn real = real_sigaction();
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  // Acquire pairs with the release in claim_signal(): nothing claimed yet, nothing to keep.
  if (sig <= 0 || sig >= NSIG || !g_any_claimed.load(std::memory_order_acquire)) return real(sig, act, old);
  int result = 0;
  as_writer([&] {
    Slot& s = g_slots[sig];
    if (!s.claimed.load(std::memory_order_acquire)) {
      result = real(sig, act, old);
      return;
    }
    struct sigaction previous = load_app_action(s);
    if (act) {
      struct sigaction ours = ours_in_front_of(*act);
      if (real(sig, &ours, nullptr) != 0) {
        result = -1;
        return;
      }
      store_app_action(s, *act);
    }
    if (old) *old = previous;
  });
  return result;
}

namespace {
// Installs, for every claimed signal, the action `pick` makes of the application's own.
template <class Pick> void reinstall_claimed(Pick&& pick) {
  SigactionFn real = g_real_sigaction.load(std::memory_order_acquire);
  if (!real || !g_any_claimed.load(std::memory_order_acquire)) return;
  as_writer([&] {
    for (int sig = 1; sig < NSIG; ++sig) {
      Slot& s = g_slots[sig];
      if (!s.claimed.load(std::memory_order_relaxed)) continue;
      struct sigaction action = pick(load_app_action(s));
      real(sig, &action, nullptr);
    }
  });
}
}  // namespace

void give_back_claimed_signals() noexcept {
  reinstall_claimed([](const struct sigaction& app) { return app; });
}

void reclaim_signals() noexcept {
  reinstall_claimed([](const struct sigaction& app) { return ours_in_front_of(app); });
}

}  // namespace ncclwatch
