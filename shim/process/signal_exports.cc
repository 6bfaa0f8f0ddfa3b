// The C library's ways of setting a signal's action, interposed so that the shim's handler stays in
// front of the application's for the signals it claims (signal_chain.h); for every other signal,
// and before anything is claimed, each goes straight to the C library. In the preloaded library
// only: test programs that link the shim's objects keep their own.
#include "process/signal_chain.h"

#include <errno.h>
#include <signal.h>

namespace {

// signal() and its variants, built on sigaction as the C library builds them, so they too keep
// the shim's handler in front.
sighandler_t set_handler(int sig, sighandler_t handler, int flags, bool block_itself) {
  if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction action{}, previous{};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  if (block_itself) sigaddset(&action.sa_mask, sig);
  action.sa_flags = flags;
  if (ncclwatch::chained_sigaction(sig, &action, &previous) < 0) return SIG_ERR;
  return previous.sa_handler;
}

// BSD semantics (glibc's signal() unless strict ISO C): the handler stays, the signal is blocked
// while it runs, interrupted system calls restart.
sighandler_t bsd_semantics(int sig, sighandler_t handler) { return set_handler(sig, handler, SA_RESTART, true); }
// System V semantics (-std=c99 makes signal() this): one shot, not blocked while it runs.
sighandler_t sysv_semantics(int sig, sighandler_t handler) {
  return set_handler(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

}  // namespace

// noexcept: the C library declares them so (__THROW).
extern "C" {

__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return ncclwatch::chained_sigaction(sig, act, old);
}
__attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler) noexcept {
  return bsd_semantics(sig, handler);
}
__attribute__((visibility("default"))) sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept {
  return bsd_semantics(sig, handler);
}
__attribute__((visibility("default"))) sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept {
  return sysv_semantics(sig, handler);
}
__attribute__((visibility("default"))) sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept {
  return sysv_semantics(sig, handler);
}

}  // extern "C"
