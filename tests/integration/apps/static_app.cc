// NCCL linked into the program itself (the stand-in's static archive), as some frameworks
// embed it: its calls bind inside the executable and never reach a preloaded library. The shim
// cannot trace them; it must say so. Makes one communicator and leaks it.
#include "check.h"

int main() {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&comm, 1, id, 0));
  std::printf("static_app: done\n");
  return 0;
}
