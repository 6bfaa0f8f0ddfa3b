"""A PyTorch job in which rank 1 stops in a Python sleep (a stuck data loader) before its 7th
all-reduce: rank 0 waits in torch.cuda.synchronize(). The live verdict must name rank 1 with the
sleep's line and rank 0 with its wait. Two ranks may share one GPU (NCCL_HOSTID per rank)."""
import datetime
import os
import time

import torch
import torch.distributed as dist


def load_batch(step):
    if dist.get_rank() == 1 and step == 7:
        time.sleep(600)  # the stuck loader


def main():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if int(os.environ.get("LOCAL_WORLD_SIZE", 1)) > torch.cuda.device_count():
        os.environ["NCCL_HOSTID"] = f"rank{local_rank}"
    device = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=torch.device("cuda", device), timeout=datetime.timedelta(seconds=60))
    t = torch.ones(1 << 16, device="cuda")
    for step in range(1, 21):
        load_batch(step)
        dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
