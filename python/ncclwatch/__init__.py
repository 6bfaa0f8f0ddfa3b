"""ncclwatch from Python: the traces of a job as pandas DataFrames (load), and where the shim and
the report tool are (shim_path, report_path) for job scripts that set LD_PRELOAD themselves.

    import ncclwatch
    job = ncclwatch.load("ncclwatch/job-20261201-101500")
    job.ops.groupby(["op", "bytes"]).gpu_us.median()

and SQL over many jobs' exports (ncclwatch-report export; DuckDB): sql, query, queries, connect,
spark_views (the same views on Spark).
"""
import os

from .loader import Job, load, trace_files  # noqa: F401
from ._sql import connect, queries, query, spark_views, sql  # noqa: F401

__all__ = ["Job", "load", "trace_files", "sql", "query", "queries", "connect", "spark_views", "shim_path", "report_path", "__version__"]

# The project's version (meson.build, pyproject.toml, the launcher and the report tool say the same:
# the wheel's test checks it).
__version__ = "0.1.0"


def report_path():
    """ncclwatch-report, the analyzers: $NCCLWATCH_REPORT, else the one installed in this package (a
    wheel), else the build of the source tree this package is in. It knows where the rest is."""
    if os.environ.get("NCCLWATCH_REPORT"):
        return os.environ["NCCLWATCH_REPORT"]
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "bin", "ncclwatch-report"),
                      os.path.join(here, "..", "..", "build", "analyzers", "ncclwatch-report")):
        if os.path.exists(candidate):
            return os.path.normpath(candidate)
    raise FileNotFoundError("ncclwatch-report not found: set NCCLWATCH_REPORT or build ncclwatch (./scripts/build)")


def shim_path():
    """The shim to preload: LD_PRELOAD=<this> your_program ($NCCLWATCH_SHIM, else the one installed
    with the report tool, as `ncclwatch-report where shim` finds it)."""
    if os.environ.get("NCCLWATCH_SHIM"):
        return os.environ["NCCLWATCH_SHIM"]
    import subprocess
    where = subprocess.run([report_path(), "where", "shim"], capture_output=True, text=True)
    if where.returncode != 0 or not where.stdout.strip():
        raise FileNotFoundError(where.stderr.strip() or "libncclwatch.so not found: set NCCLWATCH_SHIM")
    return where.stdout.strip()
