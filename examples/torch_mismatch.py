"""A PyTorch job that is wrong: at step 4 rank 1 all-reduces half the elements. NCCL does not
notice: the job either exits 0 with wrong data or (on 2 H200s with NCCL 2.28.9) hangs, and
nobody says why — except ncclwatch:

    ncclwatch run -- torchrun --nproc-per-node 2 examples/torch_mismatch.py
    ncclwatch-report hang ncclwatch/job-*      # count mismatch at the seq of step 4
"""
import os

import torch
import torch.distributed as dist


def main():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()
    t = torch.ones(1 << 16, device="cuda")
    for step in range(1, 9):
        if rank == 1 and step == 4:
            dist.all_reduce(t[: t.numel() // 2])  # the bug: half the elements on one rank
        else:
            dist.all_reduce(t)
    torch.cuda.synchronize()
    print(f"rank {rank}: done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
