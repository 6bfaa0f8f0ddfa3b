// The few signals the shim catches (SIGBUS for its trace mapping; SIGTERM, SIGINT and SIGHUP to write
// how the process ended), chained so that the application sees each one exactly as the kernel would
// have delivered it without us: its handler runs with its own mask, SA_NODEFER, SA_ONSTACK and
// SA_RESTART; a one-shot handler (SA_RESETHAND, System V signal()) runs once, then the default
// action; SIG_IGN ignores a sent signal; SIG_DFL dies by it.
//
// The shim's handler stays first even when the application installs its own later: sigaction(),
// signal(), bsd_signal() and sysv_signal() are interposed (process/signal_exports.cc, in the
// preloaded library only) and, for a claimed signal, record the application's action, answer with
// it, and re-install the shim's handler with that action's flags and mask.
#pragma once

#include <signal.h>

namespace ncclwatch {

struct SignalClaim {
  // First, on every delivery: true when the signal was the shim's own (the application never sees it).
  bool (*take)(int sig, siginfo_t* info, void* context) noexcept = nullptr;
  // Just before the default action kills the process (a sent signal, or a fault nobody handles).
  // `info` as the kernel gave it: who sent the signal.
  void (*before_default)(int sig, const siginfo_t* info) noexcept = nullptr;
  // Just before the application's own handler runs.
  void (*before_handler)(int sig, const siginfo_t* info) noexcept = nullptr;
};

// Puts the shim's handler in front of the application's action for `sig` (once per process; a
// forked child inherits it). With `leave_ignored`, a signal the application ignores is left
// untouched: SIG_IGN is inherited across exec, a handler is not. Async-signal-unsafe: normal code only.
bool claim_signal(int sig, const SignalClaim& claim, bool leave_ignored) noexcept;

// sigaction() as the application sees it: for a claimed signal its own action, kept behind ours.
int chained_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept;

// Around an exec: the new image inherits the application's dispositions (SIG_IGN stays ignored),
// never our handlers; if the exec fails, ours go back in front.
void give_back_claimed_signals() noexcept;
void reclaim_signals() noexcept;

}  // namespace ncclwatch
