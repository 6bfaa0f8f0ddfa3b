"""libncclwatch.so must export NCCL API names, dlsym, the CUDA graph entry points it follows, the C
library's signal-action, _exit and exec functions, the tables NCCL looks up in a profiler plugin, and nothing else (no C++ runtime, no fmt), and every NCCL name it exports must be a function of the API
table."""
import re
import subprocess
import sys

shim, table = sys.argv[1], sys.argv[2]
out = subprocess.run(["nm", "-D", "--defined-only", shim], capture_output=True, text=True, check=True).stdout
exported = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
assert "dlsym" in exported, "dlsym must be exported: it hands out wrappers bound to dlopen'ed NCCLs"
exported.remove("dlsym")
# wrap/cuda_graphs.cc: graph capture, instantiation, launch and the lookups that reach them.
CUDA_GRAPH_ENTRIES = {f"cuGraphLaunch{p}" for p in ("", "_ptsz")} | {
    "cuStreamBeginCapture", "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz", "cuStreamBeginCaptureToGraph",
    "cuStreamBeginCaptureToGraph_ptsz", "cuStreamEndCapture", "cuStreamEndCapture_ptsz", "cuGraphInstantiate",
    "cuGraphInstantiate_v2", "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams",
    "cuGraphInstantiateWithParams_ptsz", "cuGraphExecUpdate", "cuGraphExecUpdate_v2", "cuGraphDestroy",
    "cuGraphExecDestroy", "cuGetProcAddress", "cuGetProcAddress_v2"}
cuda = [name for name in exported if name.startswith("cu")]
assert set(cuda) == CUDA_GRAPH_ENTRIES, f"CUDA entry points exported: {sorted(set(cuda) ^ CUDA_GRAPH_ENTRIES)} differ"
exported = [name for name in exported if name not in CUDA_GRAPH_ENTRIES]
# process/signal_exports.cc and exit/image_end_exports.cc: the ways to set a signal's action (the
# shim's handler stays in front of the application's) and the ways an image ends without exit().
C_LIBRARY_ENTRIES = {"sigaction", "signal", "bsd_signal", "sysv_signal", "__sysv_signal",
                     "_exit", "_Exit", "execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve"}
libc = [name for name in exported if not name.startswith(("nccl", "pnccl"))]
assert set(libc) == C_LIBRARY_ENTRIES, f"C library functions exported: {sorted(set(libc) ^ C_LIBRARY_ENTRIES)} differ"
exported = [name for name in exported if name not in C_LIBRARY_ENTRIES]
# profiler/profiler_plugin.cc: what NCCL looks up in its profiler plugin (data, not API functions).
PROFILER_TABLES = {"ncclProfiler_v5", "ncclProfiler_v6", "ncclProfiler_v7"}
assert PROFILER_TABLES <= set(exported), f"profiler plugin tables missing: {PROFILER_TABLES - set(exported)}"
exported = [name for name in exported if name not in PROFILER_TABLES]
bad = [name for name in exported if not re.match(r"^p?nccl[A-Z]", name)]
assert not bad, f"non-NCCL symbols exported: {bad}"
known = set(re.findall(r"^NCCLWATCH_(?:TRACED|TRACED_AS|UNTRACED)\(\w+, (\w+),", open(table).read(), re.M))
unknown = [name for name in exported if name not in known]
assert not unknown, f"exported names missing from the API table: {unknown}"
wrapped = set(re.findall(r"^NCCLWATCH_TRACED(?:_AS)?\(\w+, (\w+),", open(table).read(), re.M))
unwrapped = sorted(wrapped - set(exported))
assert not unwrapped, f"the API table's traced functions must all have a wrapper: {unwrapped}"
assert "ncclCommInitRankConfig" in exported and "ncclCommDestroy" in exported, exported
undefined = subprocess.run(["nm", "-D", "--undefined-only", shim], capture_output=True, text=True, check=True).stdout
foreign = [s for s in undefined.split() if s.startswith(("_ZN3fmt", "_ZN4absl"))]
assert not foreign, f"fmt/abseil must be header-only or static, found {foreign}"
# It needs nothing beyond glibc and the C++ runtime (what the manylinux policy guarantees), so that
# it preloads into any process. (Linking the C++ runtime in, for glibc alone, cost 0.1-0.15 us per
# graph launch on an H200: not done.) Sanitizer runtimes are the sanitizer builds' own.
needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                    subprocess.run(["readelf", "-d", shim], capture_output=True, text=True, check=True).stdout)
allowed = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
           "ld-linux-aarch64.so.1", "libstdc++.so.6", "libgcc_s.so.1"}
foreign_libs = [n for n in needed if n not in allowed and not n.startswith(("libasan", "libtsan", "libubsan", "libclang_rt"))]
assert not foreign_libs, f"the shim needs more than glibc and the C++ runtime: {foreign_libs}"
print(f"dlsym and {len(exported)} exported names, all NCCL API; needs {', '.join(needed)}")
