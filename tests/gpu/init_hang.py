"""The init hang on real NCCL, through ctypes: each of two processes makes a one-rank communicator
(so both leave a trace), then rank 0 enters the init of a two-rank communicator that rank 1 never
calls. The script that runs it ends both with SIGTERM and asks `hang` who waits for whom."""
import ctypes
import os
import sys
import time

import torch

rank, rendezvous = int(sys.argv[1]), sys.argv[2]
nccl = ctypes.CDLL("libnccl.so.2")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


torch.cuda.set_device(0)
solo, uid = ctypes.c_void_p(), UniqueId()
assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
assert nccl.ncclCommInitRank(ctypes.byref(solo), 1, uid, 0) == 0
if rank == 1:
    open(os.path.join(rendezvous, "ready.1"), "w").close()
    while True:
        time.sleep(1)
side, uid = ctypes.c_void_p(), UniqueId()
assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
open(os.path.join(rendezvous, "entering.0"), "w").close()
nccl.ncclCommInitRank(ctypes.byref(side), 2, uid, 0)  # rank 1 never joins: does not return
sys.exit(3)
