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
import re
import sys

TABLES = ("ops", "comms", "processes", "resources", "stalls", "environment", "notices", "peers")
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


_DUCKDB_GLOB = re.compile(r"[\[*?]")


def _duckdb_files(table_dir):
    """The DuckDB file list (SQL text) of a table's files, table_dir/job=*/host=*/*.parquet, that
    reads those and no others: the folder's path is no glob (exp[1] read the folder exp1)."""
    if "\\" not in table_dir:
        # Each of DuckDB's glob characters inside brackets matches only itself.
        pattern = os.path.join(_DUCKDB_GLOB.sub(r"[\g<0>]", table_dir), "*", "*", "*.parquet")
        return "'" + pattern.replace("'", "''") + "'"
    # DuckDB's glob takes a backslash for a folder separator and has no escape for it; a path without
    # glob characters is read as it is: the files, listed here.
    files = sorted(os.path.join(table_dir, job, host, name)
                   for job in os.listdir(table_dir) if job.startswith("job=")
                   for host in _listdir(os.path.join(table_dir, job)) if host.startswith("host=")
                   for name in _listdir(os.path.join(table_dir, job, host))
                   if name.endswith(".parquet") and not name.startswith("."))
    if any(_DUCKDB_GLOB.search(f) for f in files):
        raise ValueError(f"{table_dir}: DuckDB cannot read a file whose path holds both a backslash and [, * or ?; "
                         "move or link the export to a plainer path")
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]" if files else "'" + table_dir.replace("'", "''") + "'"


def _listdir(path):
    return os.listdir(path) if os.path.isdir(path) else []


def _hadoop_glob(path):
    """`path` as a Hadoop glob (what Spark's reader takes) matching only itself: its glob characters
    escaped with a backslash."""
    return re.sub(r"([\\\[\]{}*?^!])", r"\\\1", path)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text):
    """Text as a terminal may show it, as the report tool writes it: each control character (C0,
    newlines included; DEL; C1) as \\xNN or \\u00NN, so that no escape sequence from a trace reaches
    the terminal."""
    return _CONTROL.sub(lambda m: (f"\\u{ord(m[0]):04x}" if ord(m[0]) >= 0x80 else f"\\x{ord(m[0]):02x}"), text)


def connect(export_dir):
    """A DuckDB connection with a view per table of the export, and the shared views (last_starts,
    steady_gpu_calls)."""
    import duckdb

    con = duckdb.connect()
    for table in _check_export(export_dir):
        files = _duckdb_files(os.path.join(export_dir, table))
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({files}, hive_partitioning = true, "
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
        # mergeSchema: exports of a later schema version (columns added at the end) read beside older
        # ones. The path is read as a glob: escaped, it names only itself.
        spark.read.option("basePath", path).option("mergeSchema", "true").parquet(_hadoop_glob(path)) \
            .createOrReplaceTempView(table)
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

            # Text cells come from traces: made printable for the terminal (CSV keeps them as they are).
            frame = result.df()
            for column in frame.columns:
                if pd.api.types.is_object_dtype(frame[column]) or pd.api.types.is_string_dtype(frame[column]):
                    frame[column] = frame[column].map(lambda v: printable(v) if isinstance(v, str) else v)
            with pd.option_context("display.max_rows", 200, "display.max_columns", 50, "display.width", 200):
                print(frame.to_string(index=False))
    except (ValueError, duckdb.Error) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    return 0


