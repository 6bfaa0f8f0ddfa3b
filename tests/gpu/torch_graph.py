"""A one-GPU PyTorch job that captures all-reduces into a CUDA graph (global capture mode,
PyTorch's default) between eager ones, then replays it: under the shim it must run as without it."""
import os, torch, torch.distributed as dist
local = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
x = torch.ones(1 << 20, device="cuda")
for _ in range(20):
    dist.all_reduce(x)
torch.cuda.synchronize()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        dist.all_reduce(x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(4):
        dist.all_reduce(x)
for _ in range(10):
    g.replay()
torch.cuda.synchronize()
for _ in range(20):
    dist.all_reduce(x)
torch.cuda.synchronize()
print("graph ok", x[0].item())
dist.destroy_process_group()
