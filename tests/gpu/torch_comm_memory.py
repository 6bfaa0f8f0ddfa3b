"""GPU memory per communicator on real NCCL, against PyTorch's own reading: one rank makes 4
groups with dist.new_group() (made at once: the world is bound to the device), all-reduces once on
each, then destroys them. Around each new_group() and each destroy_process_group(group) the
program reads the device's free memory with torch.cuda.mem_get_info(), so torch_comm_memory.sh can
hold the shim's figures (ncclCommMemStats where NCCL has it, else the free memory's change across
the call) against them; the first all-reduce's growth shows what NCCL allocates lazily, after
the init the shim measures."""
import json
import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29581")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)


def free_memory():
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]


rows, groups = [], []
for _ in range(4):
    before = free_memory()
    group = dist.new_group([0])
    made = free_memory()
    dist.all_reduce(x, group=group)
    used = free_memory()
    groups.append(group)
    rows.append({"init_drop": before - made, "first_use_drop": made - used})
for group, row in zip(groups, rows):
    before = free_memory()
    dist.destroy_process_group(group)
    row["destroy_rise"] = free_memory() - before
print(json.dumps(rows))
dist.destroy_process_group()
