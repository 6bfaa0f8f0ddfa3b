"""Where NCCL's GPU memory goes in a PyTorch job, with truths read by the job itself: one rank
(alone on its GPU, so the device's free memory moves for this process only) binds the world to
the device, makes a side group it all-reduces on once and then keeps while training goes on (the
idle group), and every "epoch" makes two more groups from one function without destroying the old
ones (the groups that pile up). Around each of those steps it reads torch.cuda.mem_get_info() and
nvidia-smi's memory for this process, and prints one JSON line per step; the last line is the
list of groups with what each took when made and at its first all-reduce. Seconds of training
between steps on the command line (default 3)."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from process_gpu_memory import process_memory_mib

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29583")
train_s = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
x = torch.ones(16 << 20, device="cuda")  # 64 MiB, made before any reading
dist.all_reduce(x)


def reading(step):
    torch.cuda.synchronize()
    row = {"step": step, "free": torch.cuda.mem_get_info()[0], "smi_mib": process_memory_mib(), "time": time.monotonic()}
    print(json.dumps(row), flush=True)
    return row


def train(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        dist.all_reduce(x)
        torch.cuda.synchronize()


groups = []  # (name, group, free before made, after made, after its first all-reduce)


def made_and_used(name, make):
    before = reading(f"{name}.before")
    group = make()
    made = reading(f"{name}.made")
    dist.all_reduce(x, group=group)
    used = reading(f"{name}.used")
    groups.append({"name": name, "made_drop": before["free"] - made["free"], "first_use_drop": made["free"] - used["free"],
                   "smi_growth_mib": None if before["smi_mib"] is None else used["smi_mib"] - before["smi_mib"]})
    return group


def make_parallel_groups(epoch):
    return [made_and_used(f"epoch{epoch}.g{i}", lambda: dist.new_group([0])) for i in range(2)]


start = reading("start")
side = made_and_used("side", lambda: dist.new_group([0], group_desc="side_group"))  # used once, then idle
kept = []
for epoch in range(3):
    train(train_s)
    kept += make_parallel_groups(epoch)  # never destroyed: they pile up
train(train_s)
end = reading("end")
print(json.dumps({"groups": groups, "total_drop": start["free"] - end["free"],
                  "smi_growth_mib": None if start["smi_mib"] is None else end["smi_mib"] - start["smi_mib"]}), flush=True)
dist.destroy_process_group()
