"""No two modules of a folder depend on each other, directly or around a loop: module = a .h and
its .cc; a dependency = one's file including the other's header. Usage: include_cycles_test.py DIR..."""
import os
import re
import sys


def cycles_in(folder):
    deps = {}
    for name in os.listdir(folder):
        if not name.endswith((".h", ".cc")):
            continue
        module = name.rsplit(".", 1)[0]
        for included in re.findall(r'^#include "([A-Za-z0-9_]+)\.h"', open(os.path.join(folder, name)).read(), re.M):
            if included != module:
                deps.setdefault(module, set()).add(included)
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(deps.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path)
        path.pop()
        state[node] = "done"

    for node in sorted(deps):
        if node not in state:
            visit(node, [])
    return found


problems = [f"{folder}: {' -> '.join(c)}" for folder in sys.argv[1:] for c in cycles_in(folder)]
print("\n".join(problems) if problems else f"no include cycles in {', '.join(sys.argv[1:])}")
sys.exit(1 if problems else 0)
