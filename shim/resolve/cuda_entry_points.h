// The CUDA driver entry points the shim interposes to follow NCCL ops into CUDA graphs. They are
// defined in wrap/cuda_graphs.cc and reached here at link time, as the NCCL trampolines are: no
// include goes up. Programs reach the driver three ways, all covered:
//   - by name, linked against libcuda.so.1: the shim exports the same names (libncclwatch.map);
//   - dlopen + dlsym(handle, name): dlsym_hook.cc hands out the wrapper;
//   - cuGetProcAddress (the CUDA runtime, static or shared, gets every driver function so): its
//     wrapper hands out the wrapper of the variant the caller asked for.
#pragma once

#include <cstdint>

namespace ncclwatch {

// For a dlsym lookup of the exact symbol `name` that found `real` (the driver's): the wrapper to
// answer instead, which from now on calls `real`; nullptr when `name` is not interposed.
void* cuda_entry_wrapper_for_symbol(const char* name, void* real) noexcept;

// Whether the shim exports `name` as one of the driver's entry points.
bool is_interposed_cuda_entry(const char* name) noexcept;

}  // namespace ncclwatch
