"""No file over 600 lines and no function over 120 in shim/, analyzers/, common/ and python/: a file or function past
that does several things, and the next reader pays for it.

Lines are counted as `wc -l` does; functions are measured by lizard (from the first line of the
signature to the closing brace). The test first proves it would catch both: a planted file of 601
lines and a planted function of 121.
Usage: code_size_test.py TREE [TREE ...]"""
import os
import sys

import lizard

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
SOURCE = (".h", ".cc", ".c", ".cpp", ".def", ".py")


def oversized(path, text):
    """The problems of one file, one line each."""
    problems = []
    lines = text.count("\n")
    if lines > MAX_FILE_LINES:
        problems.append(f"{path}: {lines} lines (at most {MAX_FILE_LINES}): split it along its seams")
    for f in lizard.analyze_file.analyze_source_code(path, text).function_list:
        if f.length > MAX_FUNCTION_LINES:
            problems.append(f"{path}:{f.start_line}: {f.name} is {f.length} lines (at most {MAX_FUNCTION_LINES}): "
                            "name its steps")
    return problems


def self_check():
    long_file = "int x;\n" * (MAX_FILE_LINES + 1)
    long_function = "int f(int a) {\n" + "  a += 1;\n" * (MAX_FUNCTION_LINES - 2) + "  return a;\n}\n"
    missed = []
    if not any("601 lines" in p for p in oversized("planted.cc", long_file)):
        missed.append("self-check: a planted file of 601 lines was not reported")
    if not any("f is 121 lines" in p for p in oversized("planted.cc", long_function)):
        missed.append("self-check: a planted function of 121 lines was not reported")
    return missed


problems = self_check()
files = 0
for tree in sys.argv[1:]:
    for top, _, names in os.walk(tree):
        for name in sorted(names):
            if name.endswith(SOURCE):
                path = os.path.join(top, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    problems += oversized(os.path.relpath(path, os.path.dirname(tree.rstrip("/"))), f.read())
                files += 1
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{files} files, none over {MAX_FILE_LINES} lines, no function over {MAX_FUNCTION_LINES} "
      "(and planted ones are caught)")
