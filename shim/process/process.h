// process/ — the ground floor: what every other folder stands on, about the process the shim is
// loaded into. Its settings, read from the environment once (config.h); its clocks (clock.h);
// what it says on stderr, once per kind of trouble (notices.h); who it is (process_info.h); the
// state every module keeps per application thread, in one TLS block (thread_state.h); the shim's
// own threads (background_thread.h); text cut and masked before it is stored or printed
// (text_limits.h); a spin lock a signal handler may try (spin_lock.h);
// the signals it catches, chained as the kernel would deliver them to the application (signal_chain.h); a small file replaced in one
// step, never through a planted link or someone else's file (file_replace.h).
//
// May include: no other folder (common/ncclwatch only). Notices are copied into the trace through
// a hook the trace writer sets (set_notice_recorder), not an include.
//
// Every header here is used outside the folder: this front door only gathers them.
#pragma once

#include "process/background_thread.h"
#include "process/clock.h"
#include "process/config.h"
#include "process/file_replace.h"
#include "process/notices.h"
#include "process/process_info.h"
#include "process/signal_chain.h"
#include "process/spin_lock.h"
#include "process/text_limits.h"
#include "process/thread_state.h"
