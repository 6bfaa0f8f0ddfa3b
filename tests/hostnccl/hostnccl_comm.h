// Communicators of the NCCL stand-in.
#pragma once

#include "hostnccl_shm.h"

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace hostnccl {

struct PreMulScalar {
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  const void* ptr = nullptr;  // read when the op runs (ncclScalarDevice)
  unsigned char value[8] = {};  // copied at creation (ncclScalarHostImmediate)
};

// Everything a communicator's queued work needs. Shared with that work, so
// it outlives an aborted handle whose work is still winding down.
struct CommState {
  uint64_t tag = 0;  // names its shared memory; equal on all ranks
  int nranks = 0;
  int rank = 0;
  int device = 0;
  bool blocking = true;

  // ncclInProgress until init finishes, then the async error.
  std::atomic<ncclResult_t> status{ncclInProgress};
  std::atomic<bool> aborted{false};  // queued work ends without moving data
  std::atomic<bool> revoked{false};

  // Sequence numbers pair the k-th operation of every rank, as NCCL's
  // ordering does: collectives per comm, send/recv per peer and direction.
  std::atomic<uint64_t> coll_seq{0};
  std::atomic<uint64_t> split_seq{0};
  std::vector<std::atomic<uint64_t>> send_seq, recv_seq;

  std::unique_ptr<Ctl> ctl;
  std::atomic<bool> detached{false};

  // Host-side objects, under mu.
  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0;  // enqueued work that has not finished
  std::map<int, PreMulScalar> premul_ops;
  int next_op = ncclNumOps;
  std::set<void*> registrations;
  std::set<void*> windows;
  std::set<const void*> devcomms;
  std::atomic<long long> device_bytes{0};  // device memory it holds (HOSTNCCL_COMM_MIB, HOSTNCCL_SETUP_MIB) ...
  int memory_device = 0;       // ... on the device current when it was made, as allocations land
  std::set<int> set_up_kinds;  // op kinds it has run, each having taken HOSTNCCL_SETUP_MIB (under mu)
  // What its set-up took, the part a suspend releases (NCCL's scratch), and whether it is suspended
  // (under mu). device_bytes keeps counting it while suspended, as NCCL's total does.
  long long set_up_bytes = 0;
  long long uncounted_bytes = 0;  // taken at first ops, not in ncclCommMemStats (HOSTNCCL_SETUP_UNCOUNTED_MIB)
  bool suspended = false;
  // hostnccl_profiler.h: the plugin's context for this communicator (nullptr: none), and the ops
  // of each Kind planned so far (NCCL's seqNumber per function).
  void* profiler_context = nullptr;
  std::atomic<uint64_t> planned[11] = {};

  CommState(uint64_t tag, int nranks, int rank, int device);
  ~CommState();
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
  void work_enqueued();
  void work_finished();
  void wait_quiet();  // until outstanding == 0
  void detach();      // this rank is done with the comm (destroy/abort/exit), once
  // Its first op of `kind` takes HOSTNCCL_SETUP_MIB more device memory, as NCCL's connection set-up
  // at an algorithm's first use does (in the calling thread, before the call returns).
  void set_up_for(int kind);
  // ncclCommSuspend(NCCL_SUSPEND_MEM) gives the device what its set-up took; resume takes it back.
  // False when it already is in that state.
  bool suspend_memory(bool suspend);
  // The device memory it has now: device_bytes less what a suspend released.
  long long resident_bytes();
};

// Fills the stand-in's ids: random bytes, the first 8 are the job key.
void make_unique_id(ncclUniqueId* id);

// CommInitRank* and InitAll. device < 0: rank % HOSTCUDA_DEVICES.
ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config, int device);
ncclResult_t init_all(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t split(ncclComm_t comm, int color, int key, ncclComm_t* out, const ncclConfig_t* config);
ncclResult_t shrink(ncclComm_t comm, const int* exclude, int nexclude, ncclComm_t* out,
                    const ncclConfig_t* config, int flags);

// Validates a handle; nullptr if it is null, foreign or destroyed.
CommState* state_of(ncclComm_t comm);

void set_last_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const char* last_error();

}  // namespace hostnccl

// The opaque type behind ncclComm_t. Handles are never freed, only marked
// dead, so a stale handle is reported instead of crashing a test.
struct ncclComm {
  static constexpr uint32_t kMagic = 0x686e636c;
  uint32_t magic = kMagic;
  std::atomic<bool> dead{false};
  std::shared_ptr<hostnccl::CommState> state;
};
