// Test programs stop at the first NCCL call that fails, saying which and where.
#pragma once

#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                  \
  do {                                                                               \
    ncclResult_t r_ = (call);                                                        \
    if (r_ != ncclSuccess) {                                                         \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, ncclGetErrorString(r_), \
                   __FILE__, __LINE__);                                              \
      std::exit(3);                                                                  \
    }                                                                                \
  } while (0)
