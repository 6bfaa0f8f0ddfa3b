// The shim's own threads (GPU timing collector, live metrics writer): named, so ps, top and gdb
// say whose they are, and with every signal blocked from their first instruction. A process-
// directed signal goes to any thread that does not block it; an application that blocks SIGTERM
// in its threads to take it with sigwait or a signalfd would otherwise see it land in ours, and
// the process end by it instead.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace ncclwatch {

// Starts `body` on a detached thread named `name` (15 characters at most). Throws what
// std::thread throws when no thread can be made; the caller's signal mask is left as it was.
template <class Body>
void start_background_thread(const char* name, Body&& body) {
  // A new thread inherits its creator's mask: blocked here, it is blocked before it runs.
  sigset_t all, callers;
  sigfillset(&all);
  // Faults stay deliverable: a blocked SIGBUS raised by an access is fatal at once, so a trace file
  // shrunk under this thread's write would kill the process past our handler (trace_writer.cc).
  for (int fault : {SIGBUS, SIGSEGV, SIGFPE, SIGILL}) sigdelset(&all, fault);
  pthread_sigmask(SIG_BLOCK, &all, &callers);
  struct RestoreMask {
    const sigset_t& mask;
    ~RestoreMask() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{callers};
  std::thread thread(std::forward<Body>(body));
  pthread_setname_np(thread.native_handle(), name);
  thread.detach();
}

}  // namespace ncclwatch
