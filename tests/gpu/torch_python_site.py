"""Megatron's pattern under torchrun: model-parallel groups made with dist.new_group() each cycle
and dropped without destroying them (three cycles of 4, 1.2 s apart), the world group made eagerly
(init_process_group with device_id) or lazily (at its first collective). Each communicator's
Python line is marked "# SITE name" for torch_python_site.sh to check against the reports."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["eager", "lazy"], required=True)
parser.add_argument("--no-destroy", action="store_true", help="leave out destroy_process_group()")
args = parser.parse_args()
local = int(os.environ["LOCAL_RANK"])
world = int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(local)
if args.mode == "eager":
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))  # SITE world_eager
else:
    dist.init_process_group("nccl")
x = torch.ones(1 << 10, device="cuda")
dist.all_reduce(x)  # SITE world_lazy


def build_model_parallel_groups():
    groups = []
    for _ in range(4):
        groups.append(dist.new_group(ranks=list(range(world)), group_desc="model_parallel"))  # SITE new_group
    return groups


def warm_up(groups):
    for group in groups:
        dist.all_reduce(x, group=group)  # SITE first_use


for cycle in range(3):
    if cycle:
        time.sleep(1.2)
    groups = build_model_parallel_groups()  # the previous cycle's are dropped, as destroy_model_parallel() does
    warm_up(groups)
torch.cuda.synchronize()
if not args.no_destroy:
    dist.destroy_process_group()
print(f"rank {dist.get_rank() if dist.is_initialized() else local}: done on Python {sys.version.split()[0]}")
