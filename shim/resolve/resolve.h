// resolve/ — finding the real NCCL libraries and binding calls to them. NCCL's API as the shim
// declares it (nccl_api.h); the resolver, one typed table per library from
// common/ncclwatch/nccl_api.def (resolver.h); the census of every NCCL copy the process holds,
// traced or not (library_census.h, reading ELF by hand: elf_image.h); the shim's exported dlsym
// (dlsym_hook.cc, built into libncclwatch.so only), which hands out per-library trampolines
// (bound_wrappers.h). The trampolines reach wrap/'s wrappers by their NCCL names (nccl.h), at
// link time: no include goes up.
//
// May include: process/, trace/ (the census writes kLibrary records).
//
// Front door: nccl_api.h, resolver.h, library_census.h, cuda_entry_points.h. Inside: bound_wrappers.h, elf_image.h.
#pragma once

#include "resolve/cuda_entry_points.h"
#include "resolve/library_census.h"
#include "resolve/nccl_api.h"
#include "resolve/resolver.h"
