// A stand-in for NVSHMEM's host library (its file name has "nvshmem" in it, as
// libnvshmem_host.so.3 does): its init makes communicators for its teams, as the real one does
// through ncclCommInitRank when PyTorch's NVSHMEM symmetric memory or DeepEP's buffer starts it,
// and only its finalize destroys them.
#include <nccl.h>

namespace {
constexpr int kTeams = 2;
ncclComm_t g_teams[kTeams];
}  // namespace

extern "C" __attribute__((visibility("default"))) int nvshmem_standin_init() {
  for (ncclComm_t& team : g_teams) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&team, 1, id, 0) != ncclSuccess) return 1;
  }
  return 0;
}

extern "C" __attribute__((visibility("default"))) int nvshmem_standin_finalize() {
  for (ncclComm_t& team : g_teams)
    if (ncclCommDestroy(team) != ncclSuccess) return 1;
  return 0;
}
