"""A PyTorch job that hangs the way real ones do: rank 1 skips one of many identical all-reduces
on the world group, while a second group all-reduces every 5 steps. Every rank then waits at a
later collective until PyTorch's timeout (20 s here) kills the job.

    NCCLWATCH_STALL_SEC=5 ncclwatch run -- torchrun --nproc-per-node 2 examples/torch_hang.py
    ncclwatch-report hang ncclwatch/job-*      # names rank 1 and where it diverged
"""
import datetime
import os

import torch
import torch.distributed as dist


def main():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if int(os.environ.get("LOCAL_WORLD_SIZE", 1)) > torch.cuda.device_count():
        # More ranks than GPUs: each rank claims a host of its own, so that NCCL lets them share a
        # GPU (through its network transport).
        os.environ["NCCL_HOSTID"] = f"rank{local_rank}"
    device = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=torch.device("cuda", device),
                            timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    side = dist.new_group(ranks=list(range(dist.get_world_size())))
    t = torch.ones(1 << 16, device="cuda")
    for step in range(1, 21):
        if not (rank == 1 and step == 7):  # the bug: rank 1 skips its 7th world all-reduce
            dist.all_reduce(t)
        if step % 5 == 0:
            dist.all_reduce(t, group=side)
    torch.cuda.synchronize()
    print(f"rank {rank}: finished (not reached when the job hangs)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
