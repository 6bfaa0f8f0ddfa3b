// Makes a communicator on a thread Python never saw (as NCCL's or PyTorch's own threads do): the
// Python site reader must find no Python state there, record no Python line, and not crash.
#include <nccl.h>

#include <thread>

extern "C" __attribute__((visibility("default"))) int init_on_native_thread() {
  ncclResult_t result = ncclInternalError;
  std::thread worker([&] {
    ncclUniqueId id;
    ncclComm_t comm = nullptr;
    if (ncclGetUniqueId(&id) == ncclSuccess) result = ncclCommInitRank(&comm, 1, id, 0);
  });
  worker.join();
  return result;  // the communicator is leaked on purpose
}
