// For a watcher of the trace folder (ncclwatch-report watch leaves a file `watching` there while
// it runs): `<trace>.progress`, how many collectives this process issued on each communicator,
// rewritten at most once a second while the counts change. From these the watcher sees a rank
// whose peers issued ops it never did, seconds before any watchdog fires (a rank that is not
// slow on the GPU but stuck on its host: a data loader, a checkpoint, a deadlock). Nothing is
// written while nobody watches. Called by the GPU-timing thread on its rounds.
#pragma once

namespace ncclwatch {

void publish_progress_for_watchers() noexcept;

}  // namespace ncclwatch
