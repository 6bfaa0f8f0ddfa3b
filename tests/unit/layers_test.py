"""The folders of a tree (shim/, analyzers/) include only what its LAYERS allows.

LAYERS names each folder on a line of its own, bottom to top, with the folders it may include:
    trace: process comms
A line may also name a file at the top of the tree (analyzers' main.cc: reports). Every
`#include "..."` of every file under the tree must then
  - spell its folder, from the tree: "trace/trace_writer.h", and name a file that is there;
  - inside its own folder, name a sibling, never the folder's front door (that is for the others);
  - across folders, name a folder its own line allows, and only that folder's front door,
    <folder>/<folder>.h (a folder's other headers are its own business).
The table must name only folders of lines above (so it has no cycle), every folder of shim/ must
have a line and a front door, and every folder a line allows must really be included (the table
says what the code does, no more).

Unless --stamp is given, the test first proves it would catch a violation: in temporary copies of
the tree it plants an include of a folder that is not allowed, one of another folder's inner header,
one of a folder's own front door, and a LAYERS line that names a folder above it, and fails unless
each is reported. With --stamp FILE (the build's rule, in the tree's meson.build), it checks the real folder
only and writes FILE when it passes, and with --depfile DEP the files and folders it read, so the
build checks again when any of them changes.
Usage: layers_test.py TREE [--stamp FILE [--depfile DEP]]"""
import os
import re
import shutil
import sys
import tempfile

SOURCE = (".h", ".cc", ".c", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def read_layers(shim):
    """[(folder, [folders it may include])] in the file's order, and the problems of the table."""
    layers, problems, seen = [], [], set()
    with open(os.path.join(shim, "LAYERS")) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            folder, colon, allowed = line.partition(":")
            folder, allowed = folder.strip(), allowed.split()
            if not colon or not folder:
                problems.append(f"LAYERS line {number}: expected 'folder: folders it may include'")
                continue
            for other in allowed:
                if other not in seen:
                    problems.append(f"LAYERS line {number}: {folder} may include {other}, which is not on a line "
                                    "above it (the table must go bottom to top: no cycle)")
            layers.append((folder, allowed))
            seen.add(folder)
    return layers, problems


def check(shim, read=None):
    """Every violation under `shim`, one line each; `read` collects the paths it read."""
    read = [] if read is None else read
    read.append(os.path.join(shim, "LAYERS"))
    layers, problems = read_layers(shim)
    allowed = dict(layers)
    used = {folder: set() for folder in allowed}
    for folder in allowed:
        if os.path.isfile(os.path.join(shim, folder)):
            continue  # a file at the top of the tree: no front door of its own
        if not os.path.isfile(os.path.join(shim, folder, folder + ".h")):
            problems.append(f"{folder}/: no front door {folder}/{folder}.h")
    for top, _, names in os.walk(shim):
        read.append(top)
        for name in sorted(names):
            if not name.endswith(SOURCE):
                continue
            path = os.path.relpath(os.path.join(top, name), shim).replace(os.sep, "/")
            folder = path.split("/", 1)[0] if "/" in path else path
            if folder not in allowed:
                problems.append(f"{path}: not in a folder of LAYERS")
                continue
            read.append(os.path.join(shim, path))
            with open(os.path.join(shim, path), encoding="utf-8", errors="replace") as f:
                text = f.read()
            for spelled in INCLUDE.findall(text):
                target = spelled.split("/", 1)[0] if "/" in spelled else ""
                door = f"{target}/{target}.h"
                if target not in allowed or not os.path.isfile(os.path.join(shim, spelled)):
                    problems.append(f'{path}: #include "{spelled}": spell the folder from {tree_name}/, '
                                    'e.g. "trace/trace_writer.h", and name a file that is there')
                elif target == folder:
                    if spelled == door and path != door:
                        problems.append(f'{path}: #include "{spelled}": its own front door; include the '
                                        "sibling it uses")
                elif target not in allowed[folder]:
                    problems.append(f'{path}: #include "{spelled}": {folder}/ may not include {target}/ '
                                    f"(LAYERS: {folder}: {' '.join(allowed[folder]) or 'nothing'})")
                elif spelled != door:
                    problems.append(f'{path}: #include "{spelled}": inside {target}/; include its front door '
                                    f'"{door}"')
                else:
                    used[folder].add(target)
    for folder, others in layers:
        for other in others:
            if other not in used[folder] and other in allowed:
                problems.append(f"LAYERS: {folder} may include {other}, but nothing in {folder}/ does: "
                                "take it off the line")
    return problems


def planted(shim, plant):
    """The violations in a copy of `shim` after `plant(copy, layers)` changed it."""
    with tempfile.TemporaryDirectory(prefix="shim-layers-") as scratch:
        copy = os.path.join(scratch, "shim")
        shutil.copytree(shim, copy)
        plant(copy, read_layers(copy)[0])
        return check(copy)


def append(path, text):
    with open(path, "a") as f:
        f.write(text)


def first_source(shim, folder):
    return sorted(n for n in os.listdir(os.path.join(shim, folder)) if n.endswith(SOURCE))[0]


def self_check(shim):
    """Plants each kind of violation in a copy; returns what went unreported."""
    layers, _ = read_layers(shim)
    folders = [f for f, _ in layers if os.path.isdir(os.path.join(shim, f))]
    bottom, top = folders[0], folders[-1]
    user, lower = next((f, others[0]) for f, others in layers if others and f in folders)
    inner = next(n for n in sorted(os.listdir(os.path.join(shim, lower)))
                 if n.endswith(".h") and n != lower + ".h")
    plants = [
        (f"{bottom}/ including {top}/", f"{bottom}/ may not include {top}/",
         lambda copy, _: append(os.path.join(copy, bottom, first_source(copy, bottom)), f'\n#include "{top}/{top}.h"\n')),
        (f"{user}/ including {lower}/{inner}", f'inside {lower}/; include its front door',
         lambda copy, _: append(os.path.join(copy, user, first_source(copy, user)), f'\n#include "{lower}/{inner}"\n')),
        (f"{lower}/ including its own front door", "its own front door",
         lambda copy, _: append(os.path.join(copy, lower, inner), f'\n#include "{lower}/{lower}.h"\n')),
        (f"LAYERS letting {bottom} include {top}", "not on a line above it",
         lambda copy, _: open(os.path.join(copy, "LAYERS"), "w").write(
             open(os.path.join(shim, "LAYERS")).read().replace(f"\n{bottom}:", f"\n{bottom}: {top}", 1))),
    ]
    missed = []
    for what, expected, plant in plants:
        if not any(expected in problem for problem in planted(shim, plant)):
            missed.append(f"self-check: {what} (planted in a copy) was not reported")
    return missed


def option(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


shim, stamp, depfile = sys.argv[1].rstrip("/"), option("--stamp"), option("--depfile")
tree_name = os.path.basename(os.path.abspath(shim))
read = []
problems = check(shim, read) + ([] if stamp else self_check(shim))
if problems:
    print("\n".join(f"{tree_name}/{p}" if not p.startswith("self-check") else p for p in problems))
    sys.exit(1)
layers, _ = read_layers(shim)
print(f"{tree_name}/: {len(layers)} folders, each including only what LAYERS allows, through front doors"
      + ("" if stamp else " (and planted violations are caught)"))
if stamp:
    open(stamp, "w").write("ok\n")
if stamp and depfile:
    escaped = (os.path.abspath(p).replace(" ", "\\ ") for p in read)
    open(depfile, "w").write(f"{stamp}: " + " ".join(escaped) + "\n")
