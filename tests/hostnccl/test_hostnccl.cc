// Single-process tests of the NCCL stand-in: API contracts, InitAll and
// group init (several ranks in one process), host-side objects, errors.
#include "hostcuda.h"

#include <catch2/catch.hpp>
#include <nccl.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

std::vector<CUstream> make_streams(int n) {
  std::vector<CUstream> s(static_cast<size_t>(n));
  for (auto& x : s) REQUIRE(cuStreamCreate(&x, 0) == CUDA_SUCCESS);
  return s;
}

// Rank i contributes i + 1; every rank checks the sum.
void allreduce_in_group(const std::vector<ncclComm_t>& comms, const std::vector<CUstream>& streams) {
  const int n = int(comms.size());
  std::vector<int32_t> in(comms.size()), out(comms.size(), -1);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int i = 0; i < n; ++i) {
    in[size_t(i)] = i + 1;
    REQUIRE(ncclAllReduce(&in[size_t(i)], &out[size_t(i)], 1, ncclInt32, ncclSum, comms[size_t(i)],
                          streams[size_t(i)]) == ncclSuccess);
  }
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (auto s : streams) REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
  for (int i = 0; i < n; ++i) CHECK(out[size_t(i)] == n * (n + 1) / 2);
}

void destroy_all(const std::vector<ncclComm_t>& comms) {
  for (auto c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

ncclComm_t single_rank_comm() {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t c = nullptr;
  REQUIRE(ncclCommInitRank(&c, 1, id, 0) == ncclSuccess);
  return c;
}

}  // namespace

TEST_CASE("version is the header's and error strings are NCCL's") {
  int v = 0;
  REQUIRE(ncclGetVersion(&v) == ncclSuccess);
  CHECK(v == NCCL_VERSION_CODE);
  CHECK(std::string(ncclGetErrorString(ncclSuccess)) == "no error");
  CHECK(std::string(ncclGetErrorString(ncclInProgress)) == "NCCL operation in progress");
  CHECK(ncclGetLastError(nullptr) != nullptr);
}

TEST_CASE("unique ids are random") {
  ncclUniqueId a, b;
  REQUIRE(ncclGetUniqueId(&a) == ncclSuccess);
  REQUIRE(ncclGetUniqueId(&b) == ncclSuccess);
  CHECK(memcmp(&a, &b, sizeof a) != 0);
}

TEST_CASE("invalid init arguments are rejected like NCCL") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t c = nullptr;
  CHECK(ncclCommInitRank(&c, 0, id, 0) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&c, 2, id, 2) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&c, 2, id, -1) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(nullptr, 1, id, 0) == ncclInvalidArgument);
  ncclConfig_t bad{};
  CHECK(ncclCommInitRankConfig(&c, 1, id, 0, &bad) == ncclInvalidArgument);
  CHECK(ncclCommInitAll(nullptr, 2, nullptr) == ncclInvalidArgument);
}

TEST_CASE("a single-rank communicator reports its shape and runs collectives") {
  ncclComm_t c = single_rank_comm();
  int n = 0, r = -1, dev = -1;
  CHECK(ncclCommCount(c, &n) == ncclSuccess);
  CHECK(ncclCommUserRank(c, &r) == ncclSuccess);
  CHECK(ncclCommCuDevice(c, &dev) == ncclSuccess);
  CHECK(n == 1);
  CHECK(r == 0);
  CHECK(dev == 0);
  ncclResult_t async = ncclInternalError;
  CHECK(ncclCommGetAsyncError(c, &async) == ncclSuccess);
  CHECK(async == ncclSuccess);
  double in[3] = {1.5, 2.5, 3.5}, out[3] = {};
  CHECK(ncclAllReduce(in, out, 3, ncclFloat64, ncclSum, c, nullptr) == ncclSuccess);
  REQUIRE(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  CHECK(out[2] == 3.5);
  CHECK(ncclCommFinalize(c) == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
  CHECK(ncclCommDestroy(nullptr) == ncclSuccess);
}

TEST_CASE("InitAll creates every rank in one process, on the listed devices") {
  const int n = 4;
  std::vector<ncclComm_t> comms(n);
  const int devlist[n] = {3, 2, 1, 0};
  REQUIRE(ncclCommInitAll(comms.data(), n, devlist) == ncclSuccess);
  for (int i = 0; i < n; ++i) {
    int r = -1, count = -1, dev = -1;
    CHECK(ncclCommUserRank(comms[size_t(i)], &r) == ncclSuccess);
    CHECK(ncclCommCount(comms[size_t(i)], &count) == ncclSuccess);
    CHECK(ncclCommCuDevice(comms[size_t(i)], &dev) == ncclSuccess);
    CHECK(r == i);
    CHECK(count == n);
    CHECK(dev == devlist[i]);
  }
  allreduce_in_group(comms, make_streams(n));
  destroy_all(comms);
}

TEST_CASE("CommInitRank inside a group initialises several ranks from one thread") {
  const int n = 3;
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclComm_t> comms(n);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int i = 0; i < n; ++i) REQUIRE(ncclCommInitRank(&comms[size_t(i)], n, id, i) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  allreduce_in_group(comms, make_streams(n));
  destroy_all(comms);
}

TEST_CASE("CommInitRankScalable uses the first id") {
  const int n = 2;
  std::array<ncclUniqueId, 2> ids;
  for (auto& id : ids) REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclComm_t> comms(n);
  // Catch2's assertions are not thread-safe: threads keep results, the test thread checks them.
  std::vector<ncclResult_t> results(n, ncclInternalError);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back(
        [&, i] { results[size_t(i)] = ncclCommInitRankScalable(&comms[size_t(i)], n, i, 2, ids.data(), nullptr); });
  }
  for (auto& t : threads) t.join();
  for (ncclResult_t result : results) REQUIRE(result == ncclSuccess);
  allreduce_in_group(comms, make_streams(n));
  destroy_all(comms);
}

TEST_CASE("Finalize waits for the communicator's enqueued work") {
  const int n = 2;
  std::vector<ncclComm_t> comms(n);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  auto streams = make_streams(n);
  int32_t in = 1, out0 = 0;
  REQUIRE(ncclAllReduce(&in, &out0, 1, ncclInt32, ncclSum, comms[0], streams[0]) == ncclSuccess);
  ncclResult_t late_result = ncclInternalError;
  CUresult late_sync = CUDA_ERROR_UNKNOWN;
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    int32_t out1 = 0;
    late_result = ncclAllReduce(&in, &out1, 1, ncclInt32, ncclSum, comms[1], streams[1]);
    late_sync = cuStreamSynchronize(streams[1]);
  });
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(ncclCommFinalize(comms[0]) == ncclSuccess);
  // Finalize returned only once the op had run: it waited for the late peer, and the result is in.
  // (The stream's worker clears its own bookkeeping a moment after the op completes, so its
  // pending count is no measure here: under ThreadSanitizer it still read 1.)
  CHECK(std::chrono::steady_clock::now() - t0 >= 150ms);
  CHECK(out0 == 2);
  late.join();
  CHECK(late_result == ncclSuccess);
  CHECK(late_sync == CUDA_SUCCESS);
  destroy_all(comms);
}

TEST_CASE("revoke ends pending work and refuses new operations") {
  const int n = 2;
  std::vector<ncclComm_t> comms(n);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  auto streams = make_streams(n);
  int32_t in = 1, out = -1;
  REQUIRE(ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, comms[0], streams[0]) == ncclSuccess);
  std::this_thread::sleep_for(50ms);
  CHECK(hostcuda_pending(streams[0]) == 1);  // rank 1 never joins
  REQUIRE(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT) == ncclSuccess);
  REQUIRE(cuStreamSynchronize(streams[0]) == CUDA_SUCCESS);
  CHECK(out == -1);
  CHECK(ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, comms[0], streams[0]) == ncclInvalidUsage);
  destroy_all(comms);
}

TEST_CASE("CommShrink builds a communicator of the remaining ranks") {
  const int n = 3;
  std::vector<ncclComm_t> comms(n), shrunk(n - 1);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  int excluded[] = {1};
  std::vector<ncclResult_t> results(n, ncclInternalError);
  std::vector<std::thread> threads;
  for (int i : {0, 2}) {
    threads.emplace_back([&, i] {
      results[size_t(i)] =
          ncclCommShrink(comms[size_t(i)], excluded, 1, &shrunk[size_t(i / 2)], nullptr, NCCL_SHRINK_DEFAULT);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(results[0] == ncclSuccess);
  CHECK(results[2] == ncclSuccess);
  int r = -1;
  CHECK(ncclCommUserRank(shrunk[1], &r) == ncclSuccess);
  CHECK(r == 1);
  allreduce_in_group(shrunk, make_streams(n - 1));
  destroy_all(shrunk);
  destroy_all(comms);
}

TEST_CASE("abort of a communicator still waiting for its peers returns at once") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  REQUIRE(ncclCommInitRankConfig(&c, 2, id, 0, &config) == ncclInProgress);
  REQUIRE(c != nullptr);
  ncclResult_t async = ncclSuccess;
  CHECK(ncclCommGetAsyncError(c, &async) == ncclSuccess);
  CHECK(async == ncclInProgress);
  CHECK(ncclCommAbort(c) == ncclSuccess);
  CHECK(ncclCommGetAsyncError(c, &async) == ncclInvalidUsage);  // aborted handle
  // The missing rank can still join what rank 0 published (and, as the
  // last rank done, removes the comm's shared memory).
  ncclComm_t late = nullptr;
  REQUIRE(ncclCommInitRank(&late, 2, id, 1) == ncclSuccess);
  CHECK(ncclCommDestroy(late) == ncclSuccess);
}

TEST_CASE("MemAlloc and buffer registration round trip") {
  ncclComm_t c = single_rank_comm();
  void* p = nullptr;
  REQUIRE(ncclMemAlloc(&p, 1000) == ncclSuccess);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  memset(p, 1, 1000);
  void* handle = nullptr;
  REQUIRE(ncclCommRegister(c, p, 1000, &handle) == ncclSuccess);
  CHECK(handle != nullptr);
  CHECK(ncclCommDeregister(c, handle) == ncclSuccess);
  CHECK(ncclCommDeregister(c, handle) == ncclInvalidArgument);
  int unknown;
  CHECK(ncclCommDeregister(c, &unknown) == ncclInvalidArgument);

  ncclWindow_t win = nullptr;
  REQUIRE(ncclCommWindowRegister(c, p, 4096, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess);
  CHECK(win != nullptr);
  CHECK(ncclCommWindowDeregister(c, win) == ncclSuccess);
  CHECK(ncclMemFree(p) == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("PreMulSum ops get ids past the built-in ops and are destroyed once") {
  ncclComm_t c = single_rank_comm();
  float scalar = 2.0f;
  ncclRedOp_t a, b;
  REQUIRE(ncclRedOpCreatePreMulSum(&a, &scalar, ncclFloat32, ncclScalarHostImmediate, c) == ncclSuccess);
  REQUIRE(ncclRedOpCreatePreMulSum(&b, &scalar, ncclFloat32, ncclScalarDevice, c) == ncclSuccess);
  CHECK(int(a) >= int(ncclNumOps));
  CHECK(a != b);
  float in[2] = {1, 3}, out[2] = {};
  REQUIRE(ncclAllReduce(in, out, 2, ncclFloat32, a, c, nullptr) == ncclSuccess);
  CHECK(ncclAllReduce(in, out, 2, ncclFloat64, a, c, nullptr) == ncclInvalidArgument);  // wrong type
  REQUIRE(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  CHECK(out[1] == 6.0f);
  CHECK(ncclRedOpDestroy(a, c) == ncclSuccess);
  CHECK(ncclRedOpDestroy(a, c) == ncclInvalidArgument);
  CHECK(ncclRedOpDestroy(ncclSum, c) == ncclInvalidArgument);
  CHECK(ncclRedOpDestroy(b, c) == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
}

struct ncclDevCommRequirements;
struct ncclDevComm;
extern "C" ncclResult_t ncclDevCommCreate(ncclComm_t, const struct ncclDevCommRequirements*, struct ncclDevComm*);
extern "C" ncclResult_t ncclDevCommDestroy(ncclComm_t, const struct ncclDevComm*);

TEST_CASE("DevCommCreate and DevCommDestroy record and validate device communicators") {
  ncclComm_t c = single_rank_comm();
  alignas(64) unsigned char reqs[256] = {}, dev[1024] = {};
  auto* r = reinterpret_cast<const ncclDevCommRequirements*>(reqs);
  auto* d = reinterpret_cast<ncclDevComm*>(dev);
  CHECK(ncclDevCommCreate(c, r, d) == ncclSuccess);
  CHECK(ncclDevCommCreate(c, nullptr, d) == ncclInvalidArgument);
  CHECK(ncclDevCommDestroy(c, d) == ncclSuccess);
  CHECK(ncclDevCommDestroy(c, d) == ncclInvalidArgument);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("collective argument errors are reported, not queued") {
  ncclComm_t c = single_rank_comm();
  int32_t buf[4] = {};
  CHECK(ncclAllReduce(buf, buf, 4, ncclInt32, ncclSum, nullptr, nullptr) == ncclInvalidArgument);
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat8e4m3, ncclSum, c, nullptr) == ncclInvalidArgument);
  CHECK(ncclAllReduce(buf, buf, 4, ncclInt32, ncclRedOp_t(42), c, nullptr) == ncclInvalidArgument);
  CHECK(ncclAllReduce(nullptr, buf, 4, ncclInt32, ncclSum, c, nullptr) == ncclInvalidArgument);
  CHECK(ncclBroadcast(buf, buf, 4, ncclInt32, 1, c, nullptr) == ncclInvalidArgument);
  CHECK(ncclSend(buf, 4, ncclInt32, -1, c, nullptr) == ncclInvalidArgument);
  CHECK(hostcuda_pending(nullptr) == 0);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
  CHECK(ncclAllReduce(buf, buf, 4, ncclInt32, ncclSum, c, nullptr) == ncclInvalidArgument);  // destroyed
}

TEST_CASE("groups: nesting, GroupEnd without start, GroupSimulateEnd drops the held ops") {
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  ncclComm_t c = single_rank_comm();
  int32_t in = 5, out = 0;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, c, nullptr) == ncclSuccess);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  REQUIRE(ncclGroupSimulateEnd(&sim) == ncclSuccess);
  REQUIRE(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  CHECK(out == 0);

  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, c, nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(hostcuda_pending(nullptr) == 0);  // still held by the outer group
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  REQUIRE(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  CHECK(out == 5);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("the device defaults to rank modulo HOSTCUDA_DEVICES") {
  setenv("HOSTCUDA_DEVICES", "2", 1);
  std::vector<ncclComm_t> comms(3);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int i = 0; i < 3; ++i) REQUIRE(ncclCommInitRank(&comms[size_t(i)], 3, id, i) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  unsetenv("HOSTCUDA_DEVICES");
  for (int i = 0; i < 3; ++i) {
    int dev = -1;
    CHECK(ncclCommCuDevice(comms[size_t(i)], &dev) == ncclSuccess);
    CHECK(dev == i % 2);
  }
  destroy_all(comms);
}
