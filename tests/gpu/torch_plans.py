"""What NCCL planned for each op, through the shim's profiler plugin (NCCLWATCH_PROFILER=1), on real
NCCL: two ranks (one process each, sharing a GPU when each sets its own NCCL_HOSTID) run all-reduces
of 8 B to 64 MiB, an all-gather, a reduce-scatter, a broadcast and a send/recv, 5 times each.
profiler_plans.sh holds the trace's OpPlan records against NCCL's own log of each launch
(NCCL_DEBUG_SUBSYS=TUNING, rank 0).
    torch_plans.py RANK PORT"""
import os
import sys
import time

import torch
import torch.distributed as dist

rank, port = int(sys.argv[1]), sys.argv[2]
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                        device_id=torch.device("cuda:0"))
for _ in range(5):
    for elements in (2, 1 << 14, 1 << 20, 1 << 24):
        dist.all_reduce(torch.ones(elements, device="cuda"))
    dist.all_gather_into_tensor(torch.empty(2 << 20, device="cuda"), torch.ones(1 << 20, device="cuda"))
    dist.reduce_scatter_tensor(torch.empty(1 << 20, device="cuda"), torch.ones(2 << 20, device="cuda"))
    dist.broadcast(torch.ones(1 << 18, device="cuda"), src=0)
    if rank == 0:
        dist.send(torch.ones(1 << 18, device="cuda"), dst=1)
    else:
        dist.recv(torch.empty(1 << 18, device="cuda"), src=0)
torch.cuda.synchronize()
time.sleep(float(os.environ.get("PLANS_HOLD_S", "0")))  # alive past a profiler's periodic dump
dist.destroy_process_group()
print("done")
