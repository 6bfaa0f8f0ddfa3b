// NCCL's API as the shim sees it: nccl.h plus the device-communicator entry points, whose
// header (nccl_device.h) needs a CUDA compiler; their arguments are opaque pointers to us.
#pragma once

#include <nccl.h>

extern "C" {
struct ncclDevComm;
struct ncclDevCommRequirements;
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);
}

// Only NCCL names leave the library (see libncclwatch.map).
#define NCCLWATCH_EXPORT extern "C" __attribute__((visibility("default")))
