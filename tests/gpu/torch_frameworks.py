"""Jobs built from framework code (FSDP2, DeviceMesh, torch.compile), each writing the truth the
reports are held against into OUT (a JSON file per rank, OUT.rank<N>.json).

    torchrun --nproc-per-node 2 torch_frameworks.py fsdp2 OUT      # CUPTI's NCCL kernel durations
    torchrun --nproc-per-node 4 torch_frameworks.py mesh OUT       # the mesh groups' names and ranks
    torchrun --nproc-per-node 2 torch_frameworks.py compiled OUT   # functional all-reduces in CUDA graphs
    torchrun --nproc-per-node 2 torch_frameworks.py roles OUT      # ranks in different roles, nobody late
    torchrun --nproc-per-node 2 torch_frameworks.py raises OUT     # rank 1 raises at step 5

On a machine with fewer GPUs than ranks, the ranks share them, each claiming a host of its own
(NCCL_HOSTID), so NCCL goes through its network transport.
"""
import datetime
import gc
import json
import os
import statistics
import sys
import tempfile

import torch
import torch.distributed as dist

STEPS = 8


def write_truth(out, truth):
    with open(f"{out}.rank{dist.get_rank()}.json", "w") as f:
        json.dump(truth, f, indent=1)


def kernel_op(name):
    """The NCCL op a CUPTI kernel name runs ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(...)")."""
    for op in ("AllGather", "ReduceScatter", "AllReduce", "Broadcast", "Reduce", "SendRecv"):
        if name.startswith(("ncclDevKernel_" + op, "ncclKernel_" + op)):
            return op
    return None


def fsdp2(out):
    """FSDP2 over eight equal blocks: every all-gather and every reduce-scatter has one size, the
    backward's all-gathers (prefetch stream) and reduce-scatters (reduce stream) interleave on the
    one communicator. The truth: CUPTI's durations of NCCL's kernels over the profiled steps."""
    from torch.distributed.fsdp import fully_shard
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    dim = 512
    blocks = [torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
              for _ in range(8)]
    model = torch.nn.Sequential(*blocks).cuda()
    for block in blocks:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, dim, device="cuda")

    def step():
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    for _ in range(3):  # connection set-up, the allocator's warm-up
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
    trace = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(trace)
    durations = {}
    for event in json.load(open(trace))["traceEvents"]:
        op = kernel_op(event.get("name", "")) if event.get("cat") == "kernel" else None
        if op:
            durations.setdefault(op, []).append(event["dur"])
    write_truth(out, {"kernel_us": {op: {"median": statistics.median(d), "count": len(d)} for op, d in durations.items()},
                      "steps_profiled": STEPS})


def mesh(out):
    """A 2x2 DeviceMesh (dims dp, tp) on 4 ranks: all-reduces on each dim's group."""
    from torch.distributed.device_mesh import init_device_mesh

    device_mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    t = torch.ones(1 << 16, device="cuda")
    groups = {}
    for dim in ("dp", "tp"):
        group = device_mesh[dim].get_group()
        groups[dim] = {"desc": getattr(group, "group_desc", None), "name": group.group_name,
                       "ranks": dist.get_process_group_ranks(group)}
    for _ in range(STEPS):
        dist.all_reduce(t, group=device_mesh["tp"].get_group())
        dist.all_reduce(t, group=device_mesh["dp"].get_group())
    torch.cuda.synchronize()
    write_truth(out, {"world_size": dist.get_world_size(), "groups": groups})


def compiled(out):
    """torch.compile(mode="reduce-overhead") of a step with a functional all-reduce: after the
    warm-up, the all-reduce runs inside a CUDA graph replay."""
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD

    def step(x):
        return funcol.all_reduce(x * 2, "sum", group) + 1

    compiled_step = torch.compile(step, mode="reduce-overhead")
    x = torch.ones(1 << 16, device="cuda")
    for _ in range(4 * STEPS):
        y = compiled_step(x)
    torch.cuda.synchronize()
    write_truth(out, {"calls": 4 * STEPS, "result": y[0].item()})
    # NCCL's teardown waits until no CUDA graph holds work of the communicator: the compiled
    # step's graphs go first (KEEP_GRAPHS=1 keeps them, and destroy_process_group waits).
    if os.environ.get("KEEP_GRAPHS") != "1":
        del compiled_step, y
        torch._dynamo.reset()
        gc.collect()


def roles(out):
    """Ranks that play different roles, none of them late: a reduce to rank 0, broadcasts from
    rotating roots, a send and a receive in opposite orders on the two ranks, and a subgroup."""
    rank, world = dist.get_rank(), dist.get_world_size()
    pair = dist.new_group(ranks=[0, 1], group_desc="pair")
    x = torch.ones(1 << 16, device="cuda")
    y = torch.empty_like(x)
    for step in range(3 * STEPS):
        dist.reduce(x, dst=0)
        dist.broadcast(x, src=step % world)
        if rank == 0:
            dist.send(x, 1)
            dist.recv(y, 1)
        elif rank == 1:
            dist.recv(y, 0)
            dist.send(x, 0)
        dist.all_reduce(y, group=pair)
        x.div_(world)
    torch.cuda.synchronize()
    write_truth(out, {"steps": 3 * STEPS})


def raises(out):
    """Rank 1 raises an exception at step 5; rank 0 goes on and waits in its next all-reduce."""
    t = torch.ones(1 << 16, device="cuda")
    write_truth(out, {"raises_at_step": 5, "exception": "RuntimeError", "message": "injected failure at step 5"})
    for step in range(1, 3 * STEPS):
        if dist.get_rank() == 1 and step == 5:
            raise RuntimeError("injected failure at step 5")
        dist.all_reduce(t)
        torch.cuda.synchronize()


def main():
    mode, out = sys.argv[1], sys.argv[2]
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if int(os.environ.get("LOCAL_WORLD_SIZE", 1)) > torch.cuda.device_count():
        os.environ["NCCL_HOSTID"] = f"rank{local_rank}"
    device = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=torch.device("cuda", device), timeout=datetime.timedelta(seconds=60))
    {"fsdp2": fsdp2, "mesh": mesh, "compiled": compiled, "roles": roles, "raises": raises}[mode](out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
