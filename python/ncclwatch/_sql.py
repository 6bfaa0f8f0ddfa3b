"""SQL over the Parquet tables `ncclwatch-report export` writes (docs/schema.md): DuckDB here, Spark
on a cluster, with the same views and the same queries.

    import ncclwatch
    ncclwatch.sql("export/", "SELECT host, count(*) FROM ops GROUP BY host")   # a pandas DataFrame
    ncclwatch.sql("export/", ncclwatch.query("late_hosts"))

    ncclwatch sql export/ "SELECT ..."                # or: python -m ncclwatch sql ...
    ncclwatch sql export/ --query late_ranks
    ncclwatch sql --list

On Spark, spark_views(spark, "hdfs:///ncclwatch/export") makes the same views; then
spark.sql(ncclwatch.query("late_hosts")).show().

Every table is one folder of Hive-style partitions, <table>/job=<job>/host=<host>/*.parquet. The
partition values are read as text on both engines (a job named 20261201 stays "20261201").
"""
import argparse
import os
import sys

TABLES = ("ops", "comms", "processes", "resources", "stalls", "environment", "notices")
QUERIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "queries")
# Views over the tables that the named questions share (queries/views/<name>.sql, each a SELECT),
# made on both engines by the same statement.
VIEWS = os.path.join(QUERIES, "views")


def _derived_views():
    """(name, CREATE statement) of each view of queries/views, in name order."""
    for name in sorted(os.listdir(VIEWS)):
        if name.endswith(".sql"):
            with open(os.path.join(VIEWS, name)) as f:
                yield name[:-4], f"CREATE OR REPLACE TEMP VIEW {name[:-4]} AS\n{f.read()}"


def queries():
    """The named questions of the queries/ folder: {name: first comment line}."""
    found = {}
    for name in sorted(os.listdir(QUERIES)):
        if name.endswith(".sql"):
            with open(os.path.join(QUERIES, name)) as f:
                first = f.readline()
            found[name[:-4]] = first.lstrip("- ").strip()
    return found


def query(name):
    """The SQL text of a named question (queries/<name>.sql)."""
    path = os.path.join(QUERIES, name + ".sql")
    if not os.path.exists(path):
        raise ValueError(f"no query named {name!r}; there are: {', '.join(queries())}")
    with open(path) as f:
        return f.read()


def _check_export(export_dir):
    missing = [t for t in TABLES if not os.path.isdir(os.path.join(export_dir, t))]
    if len(missing) == len(TABLES):
        raise ValueError(f"{export_dir}: not an export (no {', '.join(TABLES)} folders): "
                         "write one with `ncclwatch-report export TRACES -o " + export_dir + "`")
    return [t for t in TABLES if t not in missing]


def connect(export_dir):
    """A DuckDB connection with a view per table of the export, and the shared views (last_starts,
    steady_gpu_calls)."""
    import duckdb

    con = duckdb.connect()
    for table in _check_export(export_dir):
        files = os.path.join(export_dir, table, "*", "*", "*.parquet").replace("'", "''")
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{files}', hive_partitioning = true, "
                    "hive_types = {'job': VARCHAR, 'host': VARCHAR}, union_by_name = true)")
    for _, statement in _derived_views():
        con.execute(statement)
    return con


def sql(export_dir, text):
    """The answer to one SQL statement over the export, as a pandas DataFrame (DuckDB)."""
    con = connect(export_dir)
    try:
        return con.sql(text).df()
    finally:
        con.close()


def spark_views(spark, export_dir):
    """The same views on Spark (a SparkSession): a temporary view per table of the export, and the
    shared ones."""
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    for table in TABLES:
        path = export_dir.rstrip("/") + "/" + table
        # mergeSchema: exports of a later schema version (columns added at the end) read beside older ones.
        spark.read.option("basePath", path).option("mergeSchema", "true").parquet(path).createOrReplaceTempView(table)
    for _, statement in _derived_views():
        spark.sql(statement)


def main(argv=None, prog="ncclwatch sql"):
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("export", nargs="?", help="the folder `ncclwatch-report export -o` wrote")
    parser.add_argument("statement", nargs="?", help="one SQL statement over the views " + ", ".join(TABLES) +
                        ", last_starts, steady_gpu_calls")
    parser.add_argument("--query", help="a named question of queries/ instead of a statement (see --list)")
    parser.add_argument("--list", action="store_true", help="the named questions")
    parser.add_argument("--csv", action="store_true", help="comma-separated rows instead of a table")
    args = parser.parse_args(argv)
    if args.list:
        for name, what in queries().items():
            print(f"{name:24} {what}")
        return 0
    if not args.export or bool(args.statement) == bool(args.query):
        parser.print_usage(sys.stderr)
        print(f"{prog}: give an export folder and either a statement or --query NAME", file=sys.stderr)
        return 2
    try:
        import duckdb  # noqa: F401
    except ImportError:
        print(f"{prog}: needs DuckDB: pip install duckdb", file=sys.stderr)
        return 2
    try:
        text = query(args.query) if args.query else args.statement
        con = connect(args.export)
        result = con.sql(text)
        if result is None:
            return 0
        if args.csv:
            result.df().to_csv(sys.stdout, index=False)
        else:
            import pandas as pd

            with pd.option_context("display.max_rows", 200, "display.max_columns", 50, "display.width", 200):
                print(result.df().to_string(index=False))
    except (ValueError, duckdb.Error) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    return 0


