"""PyTorch jobs that the world treats roughly (tests/gpu/torch_hostile.sh):
  spin SECONDS   all-reduces for SECONDS on every rank, then destroy_process_group(); the test
                 truncates the ranks' traces meanwhile: the job must end normally
  ctrl-c         one rank, the process group left alive, then Ctrl-C (SIGINT to itself): Python
                 ends by SIGINT after KeyboardInterrupt; the trace must still end and the alert show
Two ranks may share one GPU: each then claims a host of its own (NCCL_HOSTID)."""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def init():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if int(os.environ.get("LOCAL_WORLD_SIZE", 1)) > torch.cuda.device_count():
        os.environ["NCCL_HOSTID"] = f"rank{local_rank}"
    device = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29573")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    dist.init_process_group("nccl", device_id=torch.device("cuda", device))


def spin(seconds):
    init()
    t = torch.ones(1 << 16, device="cuda")
    end, calls = time.time() + seconds, 0
    while time.time() < end:
        for _ in range(20):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        calls += 20
    dist.destroy_process_group()
    print(f"rank spun {calls} all-reduces", flush=True)


def ctrl_c():
    init()
    t = torch.ones(1 << 16, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print("ready", flush=True)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)


if __name__ == "__main__":
    if sys.argv[1] == "spin":
        spin(float(sys.argv[2]))
    else:
        ctrl_c()
