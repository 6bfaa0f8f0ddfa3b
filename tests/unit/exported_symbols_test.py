"""libncclwatch.so must export NCCL API names and dlsym and nothing else (no C++ runtime, no
fmt), and every NCCL name it exports must be a function of the API table."""
import re
import subprocess
import sys

shim, table = sys.argv[1], sys.argv[2]
out = subprocess.run(["nm", "-D", "--defined-only", shim], capture_output=True, text=True, check=True).stdout
exported = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
assert "dlsym" in exported, "dlsym must be exported: it hands out wrappers bound to dlopen'ed NCCLs"
exported.remove("dlsym")
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
print(f"dlsym and {len(exported)} exported names, all NCCL API")
