// Multi-process check of every collective against a locally computed
// reference, for all supported datatypes and reduction ops, in place and
// out of place. Run N ranks through mprun.py; exits non-zero on mismatch.
#include "hostcuda.h"
#include "hostnccl_reduce.h"
#include "rendezvous.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

#define CHECK_NCCL(call)                                                                  \
  do {                                                                                    \
    ncclResult_t r_ = (call);                                                             \
    if (r_ != ncclSuccess) {                                                              \
      fprintf(stderr, "rank %d: %s failed: %s\n", test_rank(), #call, ncclGetErrorString(r_)); \
      exit(2);                                                                            \
    }                                                                                     \
  } while (0)

int g_failures = 0;

struct Type {
  ncclDataType_t t;
  const char* name;
  bool is_signed;
  bool is_float;
  double tol;  // relative, floats only
};

const Type kTypes[] = {
    {ncclInt8, "int8", true, false, 0},          {ncclUint8, "uint8", false, false, 0},
    {ncclInt32, "int32", true, false, 0},        {ncclUint32, "uint32", false, false, 0},
    {ncclInt64, "int64", true, false, 0},        {ncclUint64, "uint64", false, false, 0},
    {ncclFloat16, "float16", true, true, 1e-2},  {ncclFloat32, "float32", true, true, 1e-6},
    {ncclFloat64, "float64", true, true, 1e-12}, {ncclBfloat16, "bfloat16", true, true, 1e-2},
};

const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
const char* op_name(ncclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[op];
}

// Input element j of rank p: small integers so every type holds every result
// exactly (prod of 4 ranks <= 81 fits int8), with signs where the type has them.
double value(const Type& t, int p, size_t j) {
  double v = 1 + double((size_t(p) + j) % 3);
  return t.is_signed && (size_t(p) * 5 + j) % 2 ? -v : v;
}

double reference(const Type& t, ncclRedOp_t op, const std::vector<double>& xs) {
  double acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    switch (op) {
      case ncclProd: acc *= xs[i]; break;
      case ncclMax: acc = std::max(acc, xs[i]); break;
      case ncclMin: acc = std::min(acc, xs[i]); break;
      default: acc += xs[i]; break;
    }
  }
  if (op == ncclAvg) acc = t.is_float ? acc / double(xs.size()) : std::trunc(acc / double(xs.size()));
  return acc;
}

// Typed access to raw buffers through the stand-in's own element helpers.
void store(const Type& t, void* buf, size_t i, double v) {
  hostnccl::dispatch_type(t.t, [&](auto e) {
    using E = decltype(e);
    E::store(buf, i, typename E::Acc(v));
  });
}

double load(const Type& t, const void* buf, size_t i) {
  double out = 0;
  hostnccl::dispatch_type(t.t, [&](auto e) { out = double(decltype(e)::load(buf, i)); });
  return out;
}

struct Buffer {
  std::vector<unsigned char> bytes;
  Buffer(const Type& t, size_t elems) : bytes(elems * hostnccl::type_size(t.t) + 1, 0xAB) {}
  void* at(const Type& t, size_t elem) { return bytes.data() + elem * hostnccl::type_size(t.t); }
};

void expect(const std::string& what, const Type& t, const void* buf, size_t i, double expected) {
  double got = load(t, buf, i);
  bool ok = t.is_float ? std::fabs(got - expected) <= t.tol * std::max(1.0, std::fabs(expected)) : got == expected;
  if (!ok) {
    if (++g_failures <= 20) {
      fprintf(stderr, "rank %d: %s [%s] element %zu: got %g, expected %g\n", test_rank(), what.c_str(), t.name, i,
              got, expected);
    }
  }
}

struct Ctx {
  ncclComm_t comm;
  CUstream stream;
  int rank, n;
  size_t c = 37;  // per-rank elements
  void sync() const {
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS) exit(2);
  }
};

void test_allreduce(const Ctx& x, const Type& t, ncclRedOp_t op, bool inplace) {
  Buffer send(t, x.c), recv(t, x.c);
  for (size_t i = 0; i < x.c; ++i) store(t, send.at(t, 0), i, value(t, x.rank, i));
  void* out = inplace ? send.at(t, 0) : recv.at(t, 0);
  CHECK_NCCL(ncclAllReduce(send.at(t, 0), out, x.c, t.t, op, x.comm, x.stream));
  x.sync();
  for (size_t i = 0; i < x.c; ++i) {
    std::vector<double> xs;
    for (int p = 0; p < x.n; ++p) xs.push_back(value(t, p, i));
    expect(std::string("allreduce ") + op_name(op) + (inplace ? " in-place" : ""), t, out, i, reference(t, op, xs));
  }
}

void test_reduce(const Ctx& x, const Type& t, ncclRedOp_t op, bool inplace, int root) {
  Buffer send(t, x.c), recv(t, x.c);
  for (size_t i = 0; i < x.c; ++i) store(t, send.at(t, 0), i, value(t, x.rank, i));
  void* out = inplace ? send.at(t, 0) : recv.at(t, 0);
  CHECK_NCCL(ncclReduce(send.at(t, 0), out, x.c, t.t, op, root, x.comm, x.stream));
  x.sync();
  if (x.rank != root) return;
  for (size_t i = 0; i < x.c; ++i) {
    std::vector<double> xs;
    for (int p = 0; p < x.n; ++p) xs.push_back(value(t, p, i));
    expect(std::string("reduce ") + op_name(op) + (inplace ? " in-place" : ""), t, out, i, reference(t, op, xs));
  }
}

void test_reducescatter(const Ctx& x, const Type& t, ncclRedOp_t op, bool inplace) {
  size_t total = x.c * size_t(x.n);
  Buffer send(t, total), recv(t, x.c);
  for (size_t j = 0; j < total; ++j) store(t, send.at(t, 0), j, value(t, x.rank, j));
  void* out = inplace ? send.at(t, size_t(x.rank) * x.c) : recv.at(t, 0);
  CHECK_NCCL(ncclReduceScatter(send.at(t, 0), out, x.c, t.t, op, x.comm, x.stream));
  x.sync();
  for (size_t i = 0; i < x.c; ++i) {
    std::vector<double> xs;
    for (int p = 0; p < x.n; ++p) xs.push_back(value(t, p, size_t(x.rank) * x.c + i));
    expect(std::string("reducescatter ") + op_name(op) + (inplace ? " in-place" : ""), t, out, i,
           reference(t, op, xs));
  }
}

void test_broadcast(const Ctx& x, const Type& t, bool inplace, int root, bool legacy_bcast) {
  Buffer send(t, x.c), recv(t, x.c);
  for (size_t i = 0; i < x.c; ++i) store(t, send.at(t, 0), i, value(t, x.rank, i));
  void* out = inplace || legacy_bcast ? send.at(t, 0) : recv.at(t, 0);
  if (legacy_bcast) {
    CHECK_NCCL(ncclBcast(out, x.c, t.t, root, x.comm, x.stream));
  } else {
    CHECK_NCCL(ncclBroadcast(send.at(t, 0), out, x.c, t.t, root, x.comm, x.stream));
  }
  x.sync();
  for (size_t i = 0; i < x.c; ++i) expect(legacy_bcast ? "bcast" : "broadcast", t, out, i, value(t, root, i));
}

void test_allgather(const Ctx& x, const Type& t, bool inplace) {
  size_t total = x.c * size_t(x.n);
  Buffer send(t, x.c), recv(t, total);
  void* in = inplace ? recv.at(t, size_t(x.rank) * x.c) : send.at(t, 0);
  for (size_t i = 0; i < x.c; ++i) store(t, in, i, value(t, x.rank, i));
  CHECK_NCCL(ncclAllGather(in, recv.at(t, 0), x.c, t.t, x.comm, x.stream));
  x.sync();
  for (int p = 0; p < x.n; ++p)
    for (size_t i = 0; i < x.c; ++i)
      expect(inplace ? "allgather in-place" : "allgather", t, recv.at(t, 0), size_t(p) * x.c + i, value(t, p, i));
}

void test_alltoall(const Ctx& x, const Type& t) {
  size_t total = x.c * size_t(x.n);
  Buffer send(t, total), recv(t, total);
  for (size_t j = 0; j < total; ++j) store(t, send.at(t, 0), j, value(t, x.rank, j));
  CHECK_NCCL(ncclAlltoAll(send.at(t, 0), recv.at(t, 0), x.c, t.t, x.comm, x.stream));
  x.sync();
  for (int p = 0; p < x.n; ++p)
    for (size_t i = 0; i < x.c; ++i)
      expect("alltoall", t, recv.at(t, 0), size_t(p) * x.c + i, value(t, p, size_t(x.rank) * x.c + i));
}

void test_gather(const Ctx& x, const Type& t, bool inplace, int root) {
  size_t total = x.c * size_t(x.n);
  Buffer send(t, x.c), recv(t, total);
  void* in = inplace && x.rank == root ? recv.at(t, size_t(root) * x.c) : send.at(t, 0);
  for (size_t i = 0; i < x.c; ++i) store(t, in, i, value(t, x.rank, i));
  CHECK_NCCL(ncclGather(in, recv.at(t, 0), x.c, t.t, root, x.comm, x.stream));
  x.sync();
  if (x.rank != root) return;
  for (int p = 0; p < x.n; ++p)
    for (size_t i = 0; i < x.c; ++i)
      expect(inplace ? "gather in-place" : "gather", t, recv.at(t, 0), size_t(p) * x.c + i, value(t, p, i));
}

void test_scatter(const Ctx& x, const Type& t, bool inplace, int root) {
  size_t total = x.c * size_t(x.n);
  Buffer send(t, total), recv(t, x.c);
  for (size_t j = 0; j < total; ++j) store(t, send.at(t, 0), j, value(t, x.rank, j));
  void* out = inplace && x.rank == root ? send.at(t, size_t(root) * x.c) : recv.at(t, 0);
  CHECK_NCCL(ncclScatter(send.at(t, 0), out, x.c, t.t, root, x.comm, x.stream));
  x.sync();
  for (size_t i = 0; i < x.c; ++i)
    expect(inplace ? "scatter in-place" : "scatter", t, out, i, value(t, root, size_t(x.rank) * x.c + i));
}

// PreMulSum: each rank scales its own input by its own scalar, then sum.
void test_premulsum(const Ctx& x, const Type& t, ncclScalarResidence_t residence) {
  Buffer scalar(t, 1), send(t, x.c), recv(t, x.c);
  store(t, scalar.at(t, 0), 0, x.rank + 1);
  ncclRedOp_t op;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, scalar.at(t, 0), t.t, residence, x.comm));
  if (int(op) < int(ncclNumOps)) {
    ++g_failures;
    fprintf(stderr, "premulsum op id %d is a built-in op\n", int(op));
  }
  for (size_t i = 0; i < x.c; ++i) store(t, send.at(t, 0), i, value(t, x.rank, i));
  CHECK_NCCL(ncclAllReduce(send.at(t, 0), recv.at(t, 0), x.c, t.t, op, x.comm, x.stream));
  CHECK_NCCL(ncclRedOpDestroy(op, x.comm));  // allowed once the op is enqueued
  x.sync();
  for (size_t i = 0; i < x.c; ++i) {
    double sum = 0;
    for (int p = 0; p < x.n; ++p) sum += (p + 1) * value(t, p, i);
    expect("premulsum", t, recv.at(t, 0), i, sum);
  }
}

// Ranks passing different counts: nothing crashes or hangs; elements every
// rank has are reduced normally.
void test_mismatched_counts(const Ctx& x) {
  const Type& t = kTypes[2];  // int32
  size_t mine = 5 + size_t(x.rank);
  std::vector<int32_t> send(mine, 1), recv(mine, -1);
  CHECK_NCCL(ncclAllReduce(send.data(), recv.data(), mine, ncclInt32, ncclSum, x.comm, x.stream));
  x.sync();
  for (size_t i = 0; i < 5; ++i) expect("allreduce with mismatched counts", t, recv.data(), i, x.n);
}

}  // namespace

int main() {
  Ctx x{};
  x.rank = test_rank();
  x.n = test_nranks();
  ncclUniqueId id = rendezvous_unique_id();
  CHECK_NCCL(ncclCommInitRank(&x.comm, x.n, id, x.rank));
  if (cuStreamCreate(&x.stream, 0) != CUDA_SUCCESS) return 2;

  int iteration = 0;
  for (const Type& t : kTypes) {
    for (bool inplace : {false, true}) {
      for (ncclRedOp_t op : kOps) {
        int root = iteration++ % x.n;
        test_allreduce(x, t, op, inplace);
        test_reduce(x, t, op, inplace, root);
        test_reducescatter(x, t, op, inplace);
      }
      int root = iteration++ % x.n;
      test_broadcast(x, t, inplace, root, false);
      test_allgather(x, t, inplace);
      test_gather(x, t, inplace, root);
      test_scatter(x, t, inplace, (root + 1) % x.n);
    }
    test_broadcast(x, t, true, iteration % x.n, true);
    test_alltoall(x, t);
  }
  for (const Type& t : kTypes) {
    if (t.t == ncclFloat32 || t.t == ncclFloat64 || t.t == ncclInt32) {
      test_premulsum(x, t, ncclScalarHostImmediate);
      test_premulsum(x, t, ncclScalarDevice);
    }
  }
  test_mismatched_counts(x);

  CHECK_NCCL(ncclCommFinalize(x.comm));
  CHECK_NCCL(ncclCommDestroy(x.comm));
  if (g_failures) {
    fprintf(stderr, "rank %d: %d mismatches\n", x.rank, g_failures);
    return 1;
  }
  printf("rank %d of %d: all collectives match the reference\n", x.rank, x.n);
  return 0;
}
