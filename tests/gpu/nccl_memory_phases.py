"""Where NCCL's GPU memory goes over a communicator's life, read independently of the shim: two
ranks (one process each; on one GPU when the machine has one, each with its own NCCL_HOSTID)
make a communicator through ctypes, then run a set of first uses (all-reduce small and large,
all-gather, reduce-scatter, broadcast, send/receive), each twice; where the library has
ncclCommSuspend (2.29.7+), suspends it (NCCL_SUSPEND_MEM), resumes it and all-reduces once more;
then destroys it. After each step
both ranks meet at a barrier, then each reads the device's free memory (torch.cuda.mem_get_info)
and NCCL's own count for its communicator (ncclCommMemStats, where the library has it), and
writes one JSON line per step to stdout. Rank and rendezvous folder on the command line."""
import ctypes
import json
import os
import sys
import time

import torch

from process_gpu_memory import process_memory_mib

rank, rendezvous = int(sys.argv[1]), sys.argv[2]
WORLD = 2
NCCL_FLOAT32, NCCL_SUM = 7, 0
STAT_SUSPENDABLE, STAT_SUSPENDED, STAT_PERSIST, STAT_TOTAL = 0, 1, 2, 3
NCCL_SUSPEND_MEM = 1
nccl = ctypes.CDLL("libnccl.so.2")
has_memstats = hasattr(nccl, "ncclCommMemStats")
has_suspend = hasattr(nccl, "ncclCommSuspend")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.005)


def barrier(tag):
    open(os.path.join(rendezvous, f"{tag}.{rank}"), "w").close()
    for r in range(WORLD):
        wait_for(os.path.join(rendezvous, f"{tag}.{r}"))


def unique_id():
    path = os.path.join(rendezvous, "uid")
    uid = UniqueId()
    if rank == 0:
        assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
        with open(path + ".tmp", "wb") as f:
            f.write(bytes(uid.internal))
        os.rename(path + ".tmp", path)
        return uid
    wait_for(path)
    ctypes.memmove(uid.internal, open(path, "rb").read(), 128)
    return uid


def nccl_stat(comm, stat):
    if not has_memstats or comm is None:
        return None
    value = ctypes.c_uint64()
    return value.value if nccl.ncclCommMemStats(comm, stat, ctypes.byref(value)) == 0 else None


def step(name, comm):
    torch.cuda.synchronize()
    barrier(name)
    row = {"rank": rank, "step": name, "device": torch.cuda.current_device(), "free": torch.cuda.mem_get_info()[0],
           "nccl_total": nccl_stat(comm, STAT_TOTAL), "nccl_persist": nccl_stat(comm, STAT_PERSIST),
           "nccl_suspendable": nccl_stat(comm, STAT_SUSPENDABLE), "nccl_suspended": nccl_stat(comm, STAT_SUSPENDED),
           "smi_used_mib": process_memory_mib(),
           "time": time.monotonic()}
    print(json.dumps(row), flush=True)
    barrier(name + ".read")  # no rank moves on while another reads


torch.cuda.set_device(rank % torch.cuda.device_count())
x = torch.ones(64 << 20, device="cuda")  # 256 MiB: every buffer is made before the first reading
y = torch.empty(WORLD * (64 << 20), device="cuda")
stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
step("start", None)
comm = ctypes.c_void_p()
assert nccl.ncclCommInitRank(ctypes.byref(comm), WORLD, unique_id(), rank) == 0
step("init", comm)
ptr, out = ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr())
peer = 1 - rank
uses = {
    "allreduce_8B": lambda: nccl.ncclAllReduce(ptr, ptr, ctypes.c_size_t(2), NCCL_FLOAT32, NCCL_SUM, comm, stream),
    "allreduce_256MiB": lambda: nccl.ncclAllReduce(ptr, ptr, ctypes.c_size_t(64 << 20), NCCL_FLOAT32, NCCL_SUM, comm, stream),
    "allgather_4MiB": lambda: nccl.ncclAllGather(ptr, out, ctypes.c_size_t(1 << 20), NCCL_FLOAT32, comm, stream),
    "reducescatter_4MiB": lambda: nccl.ncclReduceScatter(out, ptr, ctypes.c_size_t(1 << 20), NCCL_FLOAT32, NCCL_SUM, comm, stream),
    "broadcast_4MiB": lambda: nccl.ncclBroadcast(ptr, ptr, ctypes.c_size_t(1 << 20), NCCL_FLOAT32, 0, comm, stream),
}


def sendrecv():
    assert nccl.ncclGroupStart() == 0
    assert nccl.ncclSend(ptr, ctypes.c_size_t(1 << 20), NCCL_FLOAT32, peer, comm, stream) == 0
    assert nccl.ncclRecv(out, ctypes.c_size_t(1 << 20), NCCL_FLOAT32, peer, comm, stream) == 0
    return nccl.ncclGroupEnd()


uses["sendrecv_4MiB"] = sendrecv
for name, use in uses.items():
    for turn in (1, 2):
        assert use() == 0, name
        step(f"{name}#{turn}", comm)
if has_suspend:
    assert nccl.ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == 0
    step("suspend", comm)
    assert nccl.ncclCommResume(comm) == 0
    step("resume", comm)
    assert uses["allreduce_256MiB"]() == 0
    step("after_resume", comm)
assert nccl.ncclCommDestroy(comm) == 0
step("destroy", None)
