#!/usr/bin/env python3
"""Checks the dynamic symbols of the stand-ins: libnccl.so.2 exports each API
function as a strong pnccl* (T) with a weak nccl* alias (W), like the real
library, and neither library exports anything else (no C++ symbols)."""

import re
import subprocess
import sys

NCCL_API = """GetVersion GetUniqueId GetErrorString GetLastError CommInitRank CommInitRankConfig
CommInitAll CommInitRankScalable CommSplit CommShrink CommFinalize CommDestroy CommAbort CommRevoke
CommCount CommUserRank CommCuDevice CommGetAsyncError AllReduce Broadcast Bcast Reduce AllGather
ReduceScatter AlltoAll Gather Scatter Send Recv GroupStart GroupEnd GroupSimulateEnd MemAlloc MemFree
CommRegister CommDeregister CommWindowRegister CommWindowDeregister RedOpCreatePreMulSum RedOpDestroy
DevCommCreate DevCommDestroy CommSuspend CommResume CommGrow PutSignal Signal WaitSignal""".split()


def defined_symbols(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            symbols[parts[2].split("@")[0]] = parts[1]
    return symbols


def soname(lib):
    out = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    m = re.search(r"Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else None


def main(nccl_lib, cuda_lib):
    errors = []
    nccl = defined_symbols(nccl_lib)
    for name in NCCL_API:
        if nccl.get("pnccl" + name) != "T":
            errors.append(f"pnccl{name}: expected T, got {nccl.get('pnccl' + name)}")
        if nccl.get("nccl" + name) != "W":
            errors.append(f"nccl{name}: expected W, got {nccl.get('nccl' + name)}")
    errors += [f"{lib}: unexpected export {s}" for lib, syms, ok in
               ((nccl_lib, nccl, r"p?nccl[A-Z]"), (cuda_lib, defined_symbols(cuda_lib), r"(cu[A-Z]|hostcuda_)"))
               for s in syms if not re.match(ok, s)]
    if soname(nccl_lib) != "libnccl.so.2":
        errors.append(f"soname of {nccl_lib}: {soname(nccl_lib)}")
    if soname(cuda_lib) != "libcuda.so.1":
        errors.append(f"soname of {cuda_lib}: {soname(cuda_lib)}")
    for e in errors:
        print(e)
    print("ok" if not errors else f"{len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
