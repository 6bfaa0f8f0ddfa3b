"""A CuPy communicator pair over two GPUs of one process (ncclCommInitAll), one grouped
all-reduce, then both destroyed. CuPy's NCCL module links libnccl.so.2 directly."""
import cupy as cp
from cupy.cuda import nccl

devices = [0, 1]
comms = nccl.NcclCommunicator.initAll(devices)
buffers = []
for device in devices:
    with cp.cuda.Device(device):
        buffers.append(cp.ones(1 << 20, dtype=cp.float32))
nccl.groupStart()
for device, comm, buf in zip(devices, comms, buffers):
    with cp.cuda.Device(device):
        comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, cp.cuda.Stream.null.ptr)
nccl.groupEnd()
for device, buf in zip(devices, buffers):
    with cp.cuda.Device(device):
        cp.cuda.Stream.null.synchronize()
        assert float(buf[0]) == len(devices)
for comm in comms:
    comm.destroy()
print(f"cupy all-reduce on {len(devices)} GPUs ok")
