// For the GPU test programs: a CUDA or NCCL call that fails stops the program, saying which and
// where (exit 3).
#pragma once

#include <cstdio>
#include <cstdlib>

#define CK(call)                                                                                          \
  do {                                                                                                    \
    auto r_ = (call);                                                                                     \
    if (r_ != 0) {                                                                                        \
      std::fprintf(stderr, "%s failed (%d) at %s:%d\n", #call, static_cast<int>(r_), __FILE__, __LINE__); \
      std::exit(3);                                                                                       \
    }                                                                                                     \
  } while (0)
