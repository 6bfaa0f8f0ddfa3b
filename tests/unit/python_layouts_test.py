"""shim/site/python_layouts.h against each installed CPython's own headers: a probe compiled with
that version's headers prints every offset the Python site reader uses; the shim's table must
say the same. Versions whose headers (with the internal ones) are not installed are listed as
not checked; at least one must be."""
import glob
import os
import subprocess
import sys
import tempfile


def blocks(text):
    """{minor: {name: value}} from 'name value' lines, a block per 'minor N' line."""
    out, current = {}, None
    for line in text.splitlines():
        name, value = line.split()
        if name == "minor":
            current = out.setdefault(int(value), {})
        current[name] = int(value)
    return out


def include_dirs():
    """{(3, minor): include dir} of every CPython 3 here that has its headers."""
    pythons = [sys.executable] + sorted(glob.glob(os.path.join(os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")),
                                                                "versions", "3.*", "bin", "python3")))
    pythons += [f"/usr/bin/python3.{m}" for m in range(9, 20)]
    found = {}
    for python in pythons:
        if not os.path.exists(python):
            continue
        out = subprocess.run([python, "-c", "import sys, sysconfig; print(*sys.version_info[:2], sysconfig.get_paths()['include'])"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            continue
        major, minor, include = out.stdout.split(maxsplit=2)
        include = include.strip()
        if os.path.exists(os.path.join(include, "Python.h")) and os.path.isdir(os.path.join(include, "internal")):
            found.setdefault((int(major), int(minor)), include)
    return found


def main():
    dump, compiler = sys.argv[1], os.environ.get("CC", "cc")
    probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_layouts_probe.c")
    table = blocks(subprocess.run([dump], capture_output=True, text=True, check=True).stdout)
    checked, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for (major, minor), include in sorted(include_dirs().items()):
            if minor not in table:
                print(f"3.{minor}: not in the table (no Python site for it)")
                continue
            exe = os.path.join(tmp, f"probe{minor}")
            build = subprocess.run([compiler, "-I", include, "-I", os.path.join(include, "internal"), probe, "-o", exe],
                                   capture_output=True, text=True)
            if build.returncode != 0:
                failures.append(f"3.{minor}: the probe does not compile against {include}:\n{build.stderr[-2000:]}")
                continue
            truth = blocks(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)[minor]
            differ = {k: (table[minor].get(k), v) for k, v in truth.items() if table[minor].get(k) != v}
            if differ:
                failures.append(f"3.{minor}: shim table vs headers {differ}")
            checked.append(f"3.{minor}")
    print("checked against headers:", ", ".join(checked) or "none")
    if failures or not checked:
        print("\n".join(failures) or "no CPython headers found to check against")
        sys.exit(1)


if __name__ == "__main__":
    main()
