"""A PyTorch DDP job on NCCL: one training step on the world group plus an all-reduce on a
second group made with new_group. Run it under ncclwatch:

    ncclwatch run -- torchrun --nproc-per-node 2 examples/torch_ddp.py            # clean
    ncclwatch run -- torchrun --nproc-per-node 2 examples/torch_ddp.py --no-destroy  # leaks

Without destroy_process_group() PyTorch aborts the communicators from a destructor while the
interpreter shuts down; ncclwatch names each one as released_at_exit, with the remedy.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-destroy", action="store_true", help="skip destroy_process_group() (the leak)")
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()

    model = DistributedDataParallel(torch.nn.Linear(1024, 1024).cuda(), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = model(torch.randn(64, 1024, device="cuda")).square().mean()
    loss.backward()
    optimizer.step()

    side = dist.new_group(ranks=list(range(dist.get_world_size())))
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t, group=side)
    torch.cuda.synchronize()
    print(f"rank {rank}: step done, loss {loss.item():.4f}, side all-reduce {t[0].item():.0f}", flush=True)

    if not args.no_destroy:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
