"""A job whose all-reduces the advice report costs: two ranks (one process each, sharing a GPU when
each sets its own NCCL_HOSTID) run 8 B, 64 KiB and 4 MiB all-reduces, 10 warm-up calls and then
200 timed back to back per size, under whatever NCCL_ALGO/NCCL_PROTO the run sets. The job's own
CUDA events around each size's 200 calls are the truth: rank 0 writes the mean us per call by size
to OUT (JSON: {"bytes": us}).
    torch_forced.py RANK PORT OUT"""
import json
import sys

import torch
import torch.distributed as dist

rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                        device_id=torch.device("cuda:0"))
means = {}
for elements in (2, 1 << 14, 1 << 20):
    buffer = torch.ones(elements, device="cuda")
    for _ in range(10):
        dist.all_reduce(buffer)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(200):
        dist.all_reduce(buffer)
    end.record()
    torch.cuda.synchronize()
    means[elements * 4] = begin.elapsed_time(end) * 1e3 / 200
if rank == 0:
    json.dump(means, open(out, "w"))
dist.destroy_process_group()
print("done")
