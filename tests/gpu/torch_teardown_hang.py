"""The job of the CUDA-graph teardown hang: 3 eager all-reduces, a 4th captured into a CUDA graph,
10 replays (REPLAYS_RANK1 for rank 1), then destroy_process_group(), which on real NCCL (2.28.9, two ranks sharing one GPU)
enters ncclCommFinalize and never returns, with or without the shim. Each rank prints the
wall-clock time it called destroy_process_group(), for the check to compare with the trace.
Two ranks may share one GPU: each then claims a host of its own (NCCL_HOSTID)."""
import os, sys, time
import torch, torch.distributed as dist

local_rank = int(os.environ.get("LOCAL_RANK", 0))
if torch.cuda.device_count() < int(os.environ.get("WORLD_SIZE", 1)):
    os.environ["NCCL_HOSTID"] = f"rank{local_rank}"
torch.cuda.set_device(local_rank % torch.cuda.device_count())
dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank % torch.cuda.device_count()))
x = torch.ones(1 << 20, device="cuda")
for _ in range(3):
    dist.all_reduce(x)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    dist.all_reduce(x)
# REPLAYS_RANK1: how many times rank 1 replays (default 10, as rank 0): fewer leaves rank 0's last
# replay waiting for it.
replays = int(os.environ.get("REPLAYS_RANK1", 10)) if dist.get_rank() == 1 else 10
for _ in range(replays):
    g.replay()
print(f"rank {dist.get_rank()} replayed {replays}", flush=True)
torch.cuda.synchronize()
print(f"rank {dist.get_rank()} destroy_process_group at {time.time():.3f}", flush=True)
dist.destroy_process_group()
print(f"rank {local_rank} destroyed at {time.time():.3f}", flush=True)
