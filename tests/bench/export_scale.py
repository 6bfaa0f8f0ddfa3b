"""The export at scale: a synthetic job (bench_report: RANKS x OPS all-reduces, 1 in 32 GPU-timed, as
the shim samples by default) exported to Parquet, the per-rank lateness and busbw-per-size queries
answered by DuckDB, beside the C++ reports' own time on the same job; and their answers compared
(every rank's times last and mean lateness, the busbw row's samples and median).

    export_scale.py [--ranks 256] [--ops 400000] [--dir DIR]   (the README's figures: ~11 GB of traces)

In the test suite it runs at 16 ranks x 100,000 ops; figures are printed, and only the answers are
asserted (a timed assertion would fail on a busy machine, not on a slow export)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import ncclwatch  # noqa: E402

REPORT = os.environ.get("NCCLWATCH_REPORT", os.path.join(ROOT, "build", "analyzers", "ncclwatch-report"))
BENCH = os.environ.get("NCCLWATCH_BENCH_REPORT", os.path.join(ROOT, "build", "tests", "analyzers", "bench_report"))


def timed(args):
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"{args[:2]} failed ({p.returncode}): {p.stderr}")
    return time.monotonic() - t, p.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--ops", type=int, default=100000)
    parser.add_argument("--dir", help="where to write the traces and the export (default: a temporary folder)")
    args = parser.parse_args()
    work = args.dir or tempfile.mkdtemp(prefix="ncclwatch-export-scale-")
    traces, out = os.path.join(work, "traces"), os.path.join(work, "export")
    try:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        # bench_report writes the job, then times hang and latency on it (the page cache warm).
        p = subprocess.run([BENCH, "--ranks", str(args.ranks), "--ops", str(args.ops), "--sample", "32", "--dir", traces,
                            "--keep"], capture_output=True, text=True, check=True)
        print(p.stdout.strip())
        seconds, text = timed([REPORT, "export", traces, "-o", out])
        print(text.strip())
        ops = args.ranks * args.ops
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
        print(f"export: {ops / seconds / 1e6:.1f} M ops/s with the process's start, {size / 1e6:.0f} MB of Parquet "
              f"({size / ops:.1f} bytes per op)")
        con = ncclwatch.connect(out)
        answers = {}
        for name in ("late_ranks", "busbw_per_size"):
            t = time.monotonic()
            answers[name] = con.sql(ncclwatch.query(name)).df().to_dict("records")
            print(f"duckdb {name}: {time.monotonic() - t:.2f} s, {len(answers[name])} rows")
        for report in ("hang", "latency"):
            t, text = timed([REPORT, report, "--json", traces])
            answers[report] = json.loads(text)
            print(f"ncclwatch-report {report} --json: {t:.2f} s")
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    stragglers = answers["hang"]["comms"][0]["stragglers"]
    cpp = {r["rank"]: (r["times_last"], r["mean_late_ms"]) for r in stragglers["ranks"]}
    sql = {r["rank"]: (r["times_last"], r["mean_late_ms"]) for r in answers["late_ranks"]}
    differ = [k for k in set(cpp) | set(sql) if k not in cpp or k not in sql or cpp[k][0] != sql[k][0]
              or abs(cpp[k][1] - sql[k][1]) > 1e-9 * max(1, abs(cpp[k][1]))]
    assert not differ and len(cpp) == args.ranks, ("lateness differs", differ[:5], len(cpp))
    gpu = [r for r in answers["latency"]["rows"] if r["timing"] == "gpu"]
    assert len(gpu) == 1 and len(answers["busbw_per_size"]) == 1, (gpu, answers["busbw_per_size"])
    mine = answers["busbw_per_size"][0]
    assert mine["samples"] == gpu[0]["samples"], (mine, gpu[0])
    assert abs(mine["p50_us"] - gpu[0]["p50_us"]) <= 0.02 * gpu[0]["p50_us"], (mine, gpu[0])  # 1.6 % histogram buckets
    print(f"agree: {len(cpp)} ranks' lateness over {stragglers['seqs_judged']} seqs; busbw p50 {mine['p50_us']:.3f} us "
          f"(sql) against {gpu[0]['p50_us']:.3f} us (report's histogram), {mine['samples']} samples")


if __name__ == "__main__":
    main()
