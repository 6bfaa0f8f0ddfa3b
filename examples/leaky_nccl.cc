// A plain C++ NCCL program with a classic leak: it creates a world communicator, splits it,
// runs an all-reduce on each, destroys the split, and forgets the world communicator. Between,
// a sweep of all-reduces from 4 KiB to 16 MiB on the world communicator gives `latency` its rows.
// One process per GPU; ranks meet through a file (NCCLWATCH_TEST_RENDEZVOUS) — run it with
// tests/launcher/mprun.py, as scripts/demo does:
//     ncclwatch run -- python3 tests/launcher/mprun.py -n 2 -- build/examples/leaky_nccl
#include "rendezvous.h"

#include <cuda.h>
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

// One GPU per rank: make its primary context current (the CUDA runtime inside NCCL uses it).
void select_device(int rank) {
  CUdevice device;
  CUcontext context;
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0 ||
      cuDeviceGet(&device, rank % count) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS) {
    std::fprintf(stderr, "rank %d: no usable CUDA device\n", rank);
    std::exit(1);
  }
}

int main() {
  int rank = test_rank(), nranks = test_nranks();
  select_device(rank);
  ncclUniqueId id = rendezvous_unique_id("world");
  ncclComm_t world = nullptr, pairs = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "world";
  CHECK(ncclCommInitRankConfig(&world, nranks, id, rank, &config));
  CHECK(ncclCommSplit(world, rank / 2, rank, &pairs, nullptr));

  // Device memory from NCCL's allocator keeps this example free of the CUDA runtime.
  float* data = nullptr;
  const size_t count = 1 << 20, largest = 4 << 20;
  CHECK(ncclMemAlloc(reinterpret_cast<void**>(&data), largest * sizeof(float)));
  CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, world, nullptr));
  CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, pairs, nullptr));
  for (size_t n = 1 << 10; n <= largest; n <<= 4)  // 4 KiB, 64 KiB, 1 MiB, 16 MiB of floats
    for (int i = 0; i < 20; ++i) CHECK(ncclAllReduce(data, data, n, ncclFloat, ncclSum, world, nullptr));
  // The all-reduces run asynchronously: they must be done before their buffer is freed.
  if (cuCtxSynchronize() != CUDA_SUCCESS) return 1;

  CHECK(ncclCommFinalize(pairs));
  CHECK(ncclCommDestroy(pairs));
  CHECK(ncclMemFree(data));
  std::printf("rank %d of %d: done (the world communicator is never destroyed)\n", rank, nranks);
  return 0;  // forgot ncclCommDestroy(world)
}
