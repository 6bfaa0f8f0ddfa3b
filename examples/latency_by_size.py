"""A notebook's first look at a job's traces with ncclwatch.load and pandas:
    PYTHONPATH=python python3 examples/latency_by_size.py ncclwatch/job-...   (or a folder of *.nwt)
Prints per op and size the GPU time percentiles and nccl-tests' bus bandwidth of the steady state
(each rank's first call of an op and size on a communicator left out: NCCL connects on it), and
plots busbw against size into busbw.png when matplotlib is installed."""
import sys

import ncclwatch

job = ncclwatch.load(sys.argv[1] if len(sys.argv) > 1 else "ncclwatch")
ops = job.ops[job.ops.gpu_us.notna()].sort_values("host_begin_ns")
first = ops.duplicated(["file", "comm_id", "rank", "op", "bytes"], keep="first")
steady = ops[first]  # every call but each rank's first of its kind
factor = {"ncclAllReduce": lambda n: 2 * (n - 1) / n, "ncclAllGather": lambda n: (n - 1) / n,
          "ncclReduceScatter": lambda n: (n - 1) / n, "ncclAlltoAll": lambda n: (n - 1) / n}
table = steady.groupby(["op", "bytes", "nranks"]).gpu_us.describe(percentiles=[0.5, 0.9, 0.99])
table["busbw_GBps"] = [b / (p50 * 1e3) * factor.get(op, lambda n: 1.0)(n)
                       for (op, b, n), p50 in zip(table.index, table["50%"])]
print(table[["count", "50%", "90%", "99%", "max", "busbw_GBps"]].round(2).to_string())
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
for op, rows in table.reset_index().groupby("op"):
    plt.semilogx(rows["bytes"], rows["busbw_GBps"], marker="o", base=2, label=op)
plt.xlabel("bytes")
plt.ylabel("bus bandwidth (GB/s)")
plt.legend()
plt.savefig("busbw.png", dpi=120)
print("busbw.png written")
