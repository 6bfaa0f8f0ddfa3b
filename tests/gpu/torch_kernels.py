"""Each op's kernel time by two clocks on real NCCL: the shim's, from NCCL's KernelCh events
(NCCLWATCH_PROFILER=kernels: each channel's start and end by the GPU's global timer), and CUPTI's kernel
durations from torch.profiler, the independent truth. Two ranks (one process each, sharing a GPU
when each sets its own NCCL_HOSTID) run all-reduces of 8 B to 64 MiB, an all-gather and a
reduce-scatter, 20 times each; rank 0 profiles all of it and writes CUPTI's NCCL kernels, in launch
order, to OUT (JSON: [[name, duration_us], ...]). profiler_kernels.sh holds them against the trace.
    torch_kernels.py RANK PORT OUT"""
import json
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                        device_id=torch.device("cuda:0"))
buffers = {n: torch.ones(n, device="cuda") for n in (2, 1 << 14, 1 << 18, 1 << 22, 1 << 24)}
gathered, halves = torch.empty(2 << 22, device="cuda"), torch.empty(1 << 22, device="cuda")
torch.cuda.synchronize()


def work():
    for _ in range(20):
        for b in buffers.values():
            dist.all_reduce(b)
        dist.all_gather_into_tensor(gathered, buffers[1 << 22])
        dist.reduce_scatter_tensor(halves, gathered)
    torch.cuda.synchronize()


if rank == 0:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        work()
    trace = f"{out}.chrome.json"
    prof.export_chrome_trace(trace)
    kernels = sorted((e["ts"], e["name"], e["dur"]) for e in json.load(open(trace))["traceEvents"]
                     if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower())
    json.dump([[name, dur] for _, name, dur in kernels], open(out, "w"))
else:
    work()
dist.destroy_process_group()
print("done")
