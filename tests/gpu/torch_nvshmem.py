"""PyTorch's NVSHMEM symmetric memory on one GPU: allocating from it starts NVSHMEM, which makes
NCCL communicators for its teams through the same libnccl. torch_nvshmem.sh checks that each is
traced, named as NVSHMEM's, with the Python line that started NVSHMEM, and given NVSHMEM's remedy.
With --destroy the program calls destroy_process_group() at the end."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29593")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
symm_mem.set_backend("NVSHMEM")
buffer = symm_mem.empty(1 << 20, device="cuda")  # SITE nvshmem_init
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
if "--destroy" in sys.argv:
    dist.destroy_process_group()
print("torch nvshmem done")
