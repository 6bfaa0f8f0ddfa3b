// A library carrying its own NCCL (the stand-in's static archive) and exporting it, linked
// -Bsymbolic: its own calls bind to its copy inside it, whatever a preload defines.
#include "check.h"

extern "C" __attribute__((visibility("default"))) int run_embedded_job() {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&comm, 1, id, 0));
  return 0;  // leaked
}
