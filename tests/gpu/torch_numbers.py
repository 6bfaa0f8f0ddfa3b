"""PyTorch jobs whose right answers are known, to check the reports' numbers against them.

    torchrun --nproc-per-node 2 torch_numbers.py straggler   # rank 1 sleeps 20 ms before each all-reduce
    torchrun --nproc-per-node 2 torch_numbers.py clean       # mixed ops, nobody late
    torchrun --nproc-per-node 2 torch_numbers.py sizes       # all-reduces of 1 KiB..128 MiB, 20 each

No rank synchronizes its host with its GPU inside the loops, as in training: a fast rank's host
runs ahead of its GPU, which is what makes host enqueue times useless for lateness.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

STRAGGLER_SLEEP_S = 0.020


def straggler(rank, side):
    t = torch.ones(1 << 20, device="cuda")  # 4 MiB
    # 120 steps: with the default sampling (one launch in 8 GPU-timed) about 15 all-reduces are
    # timed on both ranks, enough to tell a straggler from chance.
    for step in range(1, 121):
        if rank == 1:
            time.sleep(STRAGGLER_SLEEP_S)
        dist.all_reduce(t)
        if step % 5 == 0:
            dist.all_reduce(t, group=side)


def clean(rank, side):
    world = dist.get_world_size()
    x = torch.ones(1 << 18, device="cuda")
    gathered = torch.empty(world * (1 << 18), device="cuda")
    for step in range(20):
        dist.all_reduce(x)
        dist.all_gather_into_tensor(gathered, x)
        dist.reduce_scatter_tensor(x, gathered)
        dist.broadcast(x, src=step % world)
        out = torch.empty_like(gathered)
        dist.all_to_all_single(out, gathered)
        if rank == 0:
            dist.send(x, 1)
        elif rank == 1:
            dist.recv(x, 0)
        if step % 5 == 0:
            dist.all_reduce(x, group=side)
            dist.barrier()


def sizes(rank, side):
    for size in (1 << 10, 1 << 16, 1 << 20, 4 << 20, 32 << 20, 128 << 20):
        t = torch.ones(size // 4, device="cuda")
        for _ in range(20):
            dist.all_reduce(t)
        torch.cuda.synchronize()


def main():
    mode = sys.argv[1]
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    side = dist.new_group(ranks=list(range(dist.get_world_size())))
    {"straggler": straggler, "clean": clean, "sizes": sizes}[mode](dist.get_rank(), side)
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
