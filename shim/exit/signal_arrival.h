// Who sent the signal that ends the process (or that the application's own handler is about to
// take): read from the kernel's siginfo inside the handler, written as a SignalRecord once per
// signal number, and kept for the exit alert. Async-signal-safe throughout: no allocation, no
// lock; the sender's name comes from /proc/<pid>/comm through open, read and close.
#pragma once

#include "exit/alert_text.h"

#include <signal.h>

namespace ncclwatch {

// `handled`: the signal goes on to the application's handler; otherwise its default action kills.
void record_signal_arrival(int sig, const siginfo_t* info, bool handled) noexcept;

// For the alert: "  ended by SIGTERM, sent by pid 4242 (torchrun, its parent)\n", nothing when no
// watched signal arrived.
void describe_signal_arrival(AlertText& out) noexcept;

void signal_arrival_after_fork_in_child() noexcept;

}  // namespace ncclwatch
