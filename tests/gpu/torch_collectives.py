"""All-reduces of 1 KiB .. 128 MiB on every rank, for comparing ncclwatch-report latency with
nccl-tests on the same machine:  torchrun --nproc-per-node 2 tests/gpu/torch_collectives.py"""
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
for shift in (10, 13, 16, 19, 22, 25, 27):
    t = torch.ones((1 << shift) // 4, device="cuda")
    for _ in range(5):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    for _ in range(40):
        dist.all_reduce(t)
    torch.cuda.synchronize()
dist.barrier()
torch.cuda.synchronize()
dist.destroy_process_group()
