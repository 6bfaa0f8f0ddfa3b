// NCCLWATCH_METRICS_FILE: the process's communicators, resources, ops and stalls as Prometheus
// text (the families of common/ncclwatch/metrics_text.h), rewritten by a thread of its own every
// NCCLWATCH_METRICS_SEC while the job runs, so node-exporter's textfile collector can serve them.
// Each write goes to a temporary file renamed over the target: a reader never sees half a file.
#pragma once

namespace ncclwatch {

// Starts the writer thread once per process, when the setting asks for it (at the first
// communicator: before it there is nothing to say).
void start_live_metrics() noexcept;

// The last write, at a normal exit: what is still alive then is what the exit alert calls leaked.
void write_final_live_metrics() noexcept;

void live_metrics_after_fork_in_child() noexcept;

}  // namespace ncclwatch
