"""PyTorch jobs whose right answers are known, to check the reports' numbers against them.

    torchrun --nproc-per-node 2 torch_numbers.py straggler   # rank 1 sleeps 20 ms before each all-reduce
    torchrun --nproc-per-node 2 torch_numbers.py straggler20 OUT  # the same, 20 all-reduces only;
                                                             # OUT: rank 1's true lateness
    torchrun --nproc-per-node 2 torch_numbers.py clean       # mixed ops, nobody late
    torchrun --nproc-per-node 2 torch_numbers.py sizes OUT   # all-reduces of 1 KiB..128 MiB, 20 each;
                                                             # OUT: their CUDA-event times (rank 0)

No rank synchronizes its host with its GPU inside the loops, as in training: a fast rank's host
runs ahead of its GPU, which is what makes host enqueue times useless for lateness.

On a machine with fewer GPUs than ranks, the ranks share them, each claiming a host of its own
(NCCL_HOSTID): NCCL refuses two ranks on one GPU of one host, and between hosts it goes through
its network transport (sockets here).
"""
import json
import os
import statistics
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


def straggler20(rank, side):
    # The truth: rank 1's GPU starts each all-reduce when its host enqueues it (its stream is idle,
    # waiting), while rank 0's starts as the previous all-reduce ends. So rank 1 is late by its
    # host's period between enqueues less one all-reduce's own time, both measured here: the
    # period by the host clock, the op by CUDA events on rank 1's stream (the last to arrive, it
    # waits for nobody).
    t = torch.ones(1 << 20, device="cuda")
    enqueued, marks = [], []
    for _ in range(20):
        if rank == 1:
            time.sleep(STRAGGLER_SLEEP_S)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        enqueued.append(time.perf_counter())
        start.record()
        dist.all_reduce(t)
        end.record()
        marks.append((start, end))
    torch.cuda.synchronize()
    if rank == 1 and len(sys.argv) > 2:
        period_ms = statistics.median(1e3 * (b - a) for a, b in zip(enqueued[1:], enqueued[2:]))
        op_ms = statistics.median(s.elapsed_time(e) for s, e in marks[2:])
        with open(sys.argv[2], "w") as f:
            json.dump({"period_ms": period_ms, "op_ms": op_ms, "late_ms": period_ms - op_ms}, f)


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
    # The truth to hold the trace against: each all-reduce timed by CUDA events on the caller's
    # stream, which PyTorch makes wait for NCCL's (as nccl-tests times its iterations).
    event_ms = {}
    for size in (1 << 10, 1 << 16, 1 << 20, 4 << 20, 32 << 20, 128 << 20):
        t = torch.ones(size // 4, device="cuda")
        marks = []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dist.all_reduce(t)
            end.record()
            marks.append((start, end))
        torch.cuda.synchronize()
        event_ms[size] = statistics.median(s.elapsed_time(e) for s, e in marks[1:])  # first call: set-up
    if rank == 0 and len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump({"median_ms": event_ms, "nranks": dist.get_world_size()}, f)


def main():
    mode = sys.argv[1]
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if int(os.environ.get("LOCAL_WORLD_SIZE", 1)) > torch.cuda.device_count():
        os.environ["NCCL_HOSTID"] = f"rank{local_rank}"
    device = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=torch.device("cuda", device))
    side = dist.new_group(ranks=list(range(dist.get_world_size())))
    {"straggler": straggler, "straggler20": straggler20, "clean": clean, "sizes": sizes}[mode](dist.get_rank(), side)
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
