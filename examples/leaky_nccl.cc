// A plain C++ NCCL program with a classic leak: it creates a world communicator, splits it,
// runs an all-reduce on each, destroys the split, and forgets the world communicator.
// One process per GPU; ranks meet through a file (NCCLWATCH_TEST_RENDEZVOUS) — run it with
// tests/launcher/mprun.py, as scripts/demo does:
//     ncclwatch run -- python3 tests/launcher/mprun.py -n 2 -- build/examples/leaky_nccl
#include "rendezvous.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    if (r_ != ncclSuccess) {                                                                 \
      std::fprintf(stderr, "%s: %s\n", #call, ncclGetErrorString(r_));                       \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

int main() {
  int rank = test_rank(), nranks = test_nranks();
  ncclUniqueId id = rendezvous_unique_id("world");
  ncclComm_t world = nullptr, pairs = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "world";
  CHECK(ncclCommInitRankConfig(&world, nranks, id, rank, &config));
  CHECK(ncclCommSplit(world, rank / 2, rank, &pairs, nullptr));

  // Device memory from NCCL's allocator keeps this example free of the CUDA runtime.
  float* data = nullptr;
  const size_t count = 1 << 20;
  CHECK(ncclMemAlloc(reinterpret_cast<void**>(&data), count * sizeof(float)));
  CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, world, nullptr));
  CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, pairs, nullptr));

  CHECK(ncclCommFinalize(pairs));
  CHECK(ncclCommDestroy(pairs));
  CHECK(ncclMemFree(data));
  std::printf("rank %d of %d: done (the world communicator is never destroyed)\n", rank, nranks);
  return 0;  // forgot ncclCommDestroy(world)
}
