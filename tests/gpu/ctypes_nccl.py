"""NCCL through Python's ctypes, the way vLLM's and SGLang's pynccl reach it: PyTorch for memory
and streams, ctypes.CDLL("libnccl.so.2") for NCCL. One rank per process (rank and rendezvous
folder on the command line; the unique ids travel through files). Each rank makes two
communicators, all-reduces on both, destroys the first and leaves the second alive."""
import ctypes
import os
import sys
import time

import torch

rank, rendezvous = int(sys.argv[1]), sys.argv[2]
WORLD = 2
NCCL_FLOAT32, NCCL_SUM = 7, 0
nccl = ctypes.CDLL("libnccl.so.2")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def unique_id(tag):
    path = os.path.join(rendezvous, tag)
    uid = UniqueId()
    if rank == 0:
        assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
        with open(path + ".tmp", "wb") as f:
            f.write(bytes(uid.internal))
        os.rename(path + ".tmp", path)
        return uid
    while not os.path.exists(path):
        time.sleep(0.01)
    ctypes.memmove(uid.internal, open(path, "rb").read(), 128)
    return uid


torch.cuda.set_device(rank)
comms = []
for tag in ("first", "second"):
    comm = ctypes.c_void_p()
    assert nccl.ncclCommInitRank(ctypes.byref(comm), WORLD, unique_id(tag), rank) == 0
    comms.append(comm)
x = torch.ones(1 << 20, device="cuda")
stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
for comm in comms:
    ptr = ctypes.c_void_p(x.data_ptr())
    assert nccl.ncclAllReduce(ptr, ptr, ctypes.c_size_t(x.numel()), NCCL_FLOAT32, NCCL_SUM, comm, stream) == 0
torch.cuda.synchronize()
assert x[0].item() == WORLD * WORLD, x[0].item()
assert nccl.ncclCommDestroy(comms[0]) == 0
print(f"rank {rank}: ctypes all-reduce gave {x[0].item()}; second communicator left alive")
