"""A job whose proxy steps the peers report reads: NRANKS ranks (one process each, sharing a GPU when
each sets its own NCCL_HOSTID, so NCCL moves their data over its network transport) run 5 warm-up
and then 60 timed 4 MiB all-reduces. Each rank writes the mean us per call by its own CUDA events
and the bytes of one call to OUT.RANK.json.
    torch_peers.py RANK NRANKS PORT OUT"""
import json
import sys

import torch
import torch.distributed as dist

rank, nranks, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nranks,
                        device_id=torch.device("cuda:0"))
buffer = torch.ones(1 << 20, device="cuda")
for _ in range(5):
    dist.all_reduce(buffer)
begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
begin.record()
for _ in range(60):
    dist.all_reduce(buffer)
end.record()
torch.cuda.synchronize()
json.dump({"us_per_call": begin.elapsed_time(end) * 1e3 / 60, "bytes": buffer.numel() * 4, "calls": 65},
          open(f"{out}.{rank}.json", "w"))
dist.destroy_process_group()
print("done")
