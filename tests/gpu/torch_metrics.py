"""A PyTorch job that does all-reduces for a few seconds and ends without destroying its process
group: the live metrics file (NCCLWATCH_METRICS_FILE) is sampled meanwhile by metrics_live.sh."""
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
x = torch.ones(1 << 20, device="cuda")
deadline = time.time() + float(os.environ.get("RUN_SECONDS", "4"))
issued = 0
while time.time() < deadline:
    for _ in range(50):
        dist.all_reduce(x)
        issued += 1
    torch.cuda.synchronize()
    time.sleep(0.05)
print(f"rank {rank}: {issued} all-reduces", flush=True)
