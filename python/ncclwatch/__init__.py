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


def _find(env, installed, in_build):
    """$env, else the file installed beside this package, else the one of the source tree's build."""
    if os.environ.get(env):
        return os.environ[env]
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, installed), os.path.join(here, "..", "..", "build", in_build)):
        if os.path.exists(candidate):
            return os.path.normpath(candidate)
    raise FileNotFoundError(f"{os.path.basename(installed)} not found: set {env} or build ncclwatch (./scripts/build)")


def shim_path():
    """The shim to preload: LD_PRELOAD=<this> your_program."""
    return _find("NCCLWATCH_SHIM", os.path.join("lib", "libncclwatch.so"), os.path.join("shim", "libncclwatch.so"))


def report_path():
    """ncclwatch-report, the analyzers."""
    return _find("NCCLWATCH_REPORT", os.path.join("bin", "ncclwatch-report"), os.path.join("analyzers", "ncclwatch-report"))
