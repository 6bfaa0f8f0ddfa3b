"""No module depends on itself around a loop, anywhere under each DIR. Module = a .h and its .cc
(the same path but for the extension); a dependency = one's file including the other's header.
Every folder under DIR is read, however deep. `#include "x.h"` is found as the build finds it:
beside the including file, from DIR (shim/: "trace/trace_writer.h"), or by its name in the one
folder under DIR that holds it (analyzers/: include_directories('model', 'reports')); a name
found nowhere under DIR (a system header) is no dependency.

Before reading the real folders the test proves it would see a cycle: in a temporary copy of each
DIR it plants one (the deepest dependency A -> B of the copy, turned back by B's header including
A's; a pair of new headers in a nested folder where DIR has none) and fails unless that cycle is
found. Usage: include_cycles_test.py DIR..."""
import os
import re
import shutil
import sys
import tempfile

SOURCE = (".h", ".cc", ".c", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def read_tree(root):
    """{path relative to root: text} of every source file under root."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(SOURCE):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    files[os.path.relpath(path, root).replace(os.sep, "/")] = f.read()
    return files


def find_header(files, including, spelled):
    """The file (relative to root) that `#include "spelled"` in `including` names, or None."""
    beside = os.path.normpath(os.path.join(os.path.dirname(including), spelled)).replace(os.sep, "/")
    for candidate in (beside, os.path.normpath(spelled).replace(os.sep, "/")):
        if candidate in files:
            return candidate
    by_name = [path for path in files if path.endswith("/" + spelled)]
    return by_name[0] if len(by_name) == 1 else None


def module(path):
    return path.rsplit(".", 1)[0]


def dependencies(files):
    deps = {}
    for path, text in files.items():
        for spelled in INCLUDE.findall(text):
            header = find_header(files, path, spelled)
            if header and module(header) != module(path):
                deps.setdefault(module(path), set()).add(module(header))
    return deps


def cycles(deps):
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


def plant_cycle(copy):
    """Plants a cycle in the tree at `copy`; returns the two modules it joins."""
    files = read_tree(copy)
    deps = dependencies(files)
    edges = [(a, b) for a in deps for b in deps[a] if a + ".h" in files and b + ".h" in files]
    if edges:
        # The deepest edge: a cycle that only a reading of nested folders can see.
        a, b = max(sorted(edges), key=lambda e: min(e[0].count("/"), e[1].count("/")))
        with open(os.path.join(copy, b + ".h"), "a") as f:
            f.write(f'\n#include "{a}.h"\n')
        return a, b
    nested = os.path.join(copy, "planted", "deeper")
    os.makedirs(nested)
    for name, other in (("a", "b"), ("b", "a")):
        with open(os.path.join(nested, name + ".h"), "w") as f:
            f.write(f'#pragma once\n#include "{other}.h"\n')
    return "planted/deeper/a", "planted/deeper/b"


def self_check(root):
    """An empty string when a cycle planted in a copy of `root` is caught, else why not."""
    with tempfile.TemporaryDirectory(prefix="include-cycles-") as scratch:
        copy = os.path.join(scratch, os.path.basename(os.path.normpath(root)))
        shutil.copytree(root, copy)
        a, b = plant_cycle(copy)
        if any(a in cycle and b in cycle for cycle in cycles(dependencies(read_tree(copy)))):
            return ""
        return f"{root}: a cycle planted between {a} and {b} in a copy went unnoticed"


roots = sys.argv[1:]
problems = [why for why in map(self_check, roots) if why]
problems += [f"{root}: {' -> '.join(c)}" for root in roots for c in cycles(dependencies(read_tree(root)))]
print("\n".join(problems) if problems else f"no include cycles under {', '.join(roots)} (and a planted one is caught)")
sys.exit(1 if problems else 0)
