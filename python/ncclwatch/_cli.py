"""The commands of the Python package: `ncclwatch`, the launcher (scripts/ncclwatch) installed
inside the package, run with the package's shim and report tool; `ncclwatch-report`, the report
tool installed inside the package."""
import os
import sys

from . import report_path, shim_path


def main():
    if sys.argv[1:2] == ["sql"]:  # SQL over an export: here, in this Python (its DuckDB)
        from ._sql import main as sql_main

        return sql_main(sys.argv[2:])
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "ncclwatch")
    if not os.path.exists(launcher):  # a source tree: the launcher of its scripts/
        launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "ncclwatch")
    env = dict(os.environ)
    try:
        env.setdefault("NCCLWATCH_SHIM", shim_path())
        env["PATH"] = os.path.dirname(report_path()) + os.pathsep + env.get("PATH", "")
    except FileNotFoundError as e:
        print(f"ncclwatch: {e}", file=sys.stderr)
        return 2
    os.execve(launcher, [launcher] + sys.argv[1:], env)


def report_main():
    if sys.argv[1:2] == ["sql"]:  # in this Python, whose DuckDB the user installed
        from ._sql import main as sql_main

        return sql_main(sys.argv[2:], prog="ncclwatch-report sql")
    try:
        report = report_path()
    except FileNotFoundError as e:
        print(f"ncclwatch-report: {e}", file=sys.stderr)
        return 2
    os.execv(report, [report] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
