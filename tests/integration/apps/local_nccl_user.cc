// A library linked against NCCL, opened by local_loader with RTLD_LOCAL: NCCL then sits in a
// local scope where dlsym(RTLD_NEXT) from a preloaded library finds nothing (as under Python).
#include "rendezvous.h"

#include <nccl.h>

extern "C" __attribute__((visibility("default"))) int run_leaky_job() {
  ncclUniqueId id = rendezvous_unique_id("world");
  ncclComm_t world = nullptr, doomed = nullptr;
  if (ncclCommInitRank(&world, test_nranks(), id, test_rank()) != ncclSuccess) return 3;
  ncclUniqueId id2 = rendezvous_unique_id("doomed");
  if (ncclCommInitRank(&doomed, test_nranks(), id2, test_rank()) != ncclSuccess) return 3;
  if (ncclCommDestroy(doomed) != ncclSuccess) return 3;
  return 0;  // world is leaked on purpose
}
