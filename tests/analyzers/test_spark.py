"""The export on a cluster's engine: Spark (PySpark in local mode, its own Parquet reader) runs every
query of python/ncclwatch/queries unchanged over an export, and answers what DuckDB answers."""
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

from report_harness import GEN, REAL, REPORT, check, run_case, tempdir  # noqa: E402

import ncclwatch  # noqa: E402


def export(inputs, out):
    p = subprocess.run([REPORT, "export", *inputs, "-o", out], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, (inputs, p.stdout, p.stderr))


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def normalized(records):
    """Rows as tuples with None for NaN (pandas' null), in one order."""
    out = []
    for r in records:
        out.append(tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r))
    return sorted(out, key=lambda t: tuple((v is None, str(v)) for v in t))


def test_queries_run_unchanged_on_spark():
    if not shutil.which("java"):
        raise AssertionError("no java: scripts/bootstrap installs Debian's OpenJDK for this test")
    from pyspark.sql import SparkSession

    # A folder named like a glob (exp[1] matched the folder exp1, which holds another job here), and
    # a trace whose file name holds what engines take apart (its tables' files percent-encoded).
    root = tempdir()
    out = os.path.join(root, "exp[1]")
    export([os.path.join(REAL, "skip")], os.path.join(root, "exp1"))
    for name in sorted(os.listdir(REAL)):
        export([os.path.join(REAL, name)], out)
    hostile = tempdir()
    first = sorted(os.listdir(os.path.join(REAL, "skip")))[0]
    shutil.copy(os.path.join(REAL, "skip", first), os.path.join(hostile, "a\\b %x[1]{y}.nwt"))
    export([hostile], out)
    for i in range(10):
        d = tempdir()
        subprocess.run([GEN, "fleet", d, str(i)], check=True, stdout=subprocess.DEVNULL)
        export([d], out)
    spark = (SparkSession.builder.master("local[2]").appName("ncclwatch-test")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.execution.arrow.pyspark.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.memory", "1g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        ncclwatch.spark_views(spark, out)
        for name in ncclwatch.queries():
            text = ncclwatch.query(name)
            duck = ncclwatch.sql(out, text)
            sparked = spark.sql(text).toPandas()
            check(list(sparked.columns) == list(duck.columns), (name, list(sparked.columns), list(duck.columns)))
            a = normalized(duck.itertuples(index=False, name=None))
            b = normalized(sparked.itertuples(index=False, name=None))
            check(len(a) == len(b) and len(a) > 0, (name, len(a), len(b)))
            for x, y in zip(a, b):
                check(all(same(u, v) for u, v in zip(x, y)), (name, x, y))
            print(f"{name}: {len(a)} rows, the same on Spark and DuckDB")
    finally:
        spark.stop()


if __name__ == "__main__":
    run_case(globals())
