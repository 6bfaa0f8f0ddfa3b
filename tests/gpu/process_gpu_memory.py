"""This process's GPU memory as nvidia-smi lists it (MiB), the independent truth the memory checks
compare the shim with; None where nvidia-smi does not list it (not in every container: its pids
are the host's)."""
import os
import subprocess


def process_memory_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        pid, _, used = line.partition(",")
        if pid.strip() == str(os.getpid()):
            return int(used.strip())
    return None
