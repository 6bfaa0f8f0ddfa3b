"""One PyTorch rank on one GPU, for the trace's ring and the piling-up finding on real NCCL:
three cycles of 4 new_group()s, 1.2 s apart, none destroyed (and no destroy_process_group), then
20,000 all-reduces of two sizes, far more than a 1 MiB trace's ring of 12,288 records holds."""
import os
import time

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29561")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
small, big = torch.ones(16, device="cuda"), torch.ones(1 << 18, device="cuda")
groups = []
for cycle in range(3):
    if cycle:
        time.sleep(1.2)
    for _ in range(4):
        group = dist.new_group([0])
        dist.all_reduce(small, group=group)
        groups.append(group)
for i in range(20000):
    dist.all_reduce(small if i % 2 else big)
torch.cuda.synchronize()
print("torch ring done")
