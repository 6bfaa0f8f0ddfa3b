// exit/ — the end of the process, and its forks. Attaching at the first NCCL call; noticing that
// the process began exiting (exit(), a fatal signal, Python finalizing); the exit alert, built
// without allocating so a signal handler can print it (alert_text.h); the final records; and, in
// a forked child, the reset of every module's state (exit_hooks.cc calls each
// <module>_after_fork_in_child). Nothing here calls NCCL or CUDA.
//
// May include: process/, comms/, resolve/, trace/, site/, gpu/, metrics/: every folder but wrap/.
//
// Front door: exit_hooks.h. Inside: alert_text.h, signal_arrival.h (who sent the ending signal).
#pragma once

#include "exit/exit_hooks.h"
