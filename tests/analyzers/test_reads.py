"""How each report reads a job: under strace, every trace file is opened once and read at most
1.25 times its size (the clock sampling reads a bounded prefix, the main pass the rest; no report
reads a file twice). A sparse file's holes are never read: "its data" is what its extents hold.
Skipped where strace is missing."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_harness import REAL, REPORT, check, run_case, tempdir  # noqa: E402

SKIP = 77  # meson's "skipped"

# A pair larger than the sampling's prefix (FSDP2, 2.1 MB each) and one smaller (23 KB each).
JOBS = ["fsdp2", "straggler"]
REPORTS = [["summary"], ["leaks"], ["latency"], ["hang"], ["html", "-o", "{out}/r.html"],
           ["timeline", "-o", "{out}/t.json"], ["export", "-o", "{out}/export"], ["metrics"], ["dump"]]
# openat(AT_FDCWD, "x.nwt", ...) = 3</x.nwt>, and pread64(3</x.nwt>, ..., 4096, 0) = 4096
OPEN = re.compile(r'openat\([^"]*"([^"]+\.nwt)"[^)]*\)\s*=\s*(\d+)')
READ = re.compile(r'(?:pread64|read)\(\d+<([^>]+\.nwt)>,.*\)\s*=\s*(\d+)')


def data_bytes(path):
    """The bytes a file's data extents hold (SEEK_DATA/SEEK_HOLE)."""
    with open(path, "rb") as f:
        fd, size, at, total = f.fileno(), os.fstat(f.fileno()).st_size, 0, 0
        while at < size:
            try:
                begin = os.lseek(fd, at, os.SEEK_DATA)
            except OSError:
                break
            end = os.lseek(fd, begin, os.SEEK_HOLE)
            total += end - begin
            at = end
    return total


def reads_of(args, job_dir):
    out = tempdir()
    log = os.path.join(out, "strace")
    argv = [a.format(out=out) for a in args]
    # -ff: one log per thread, so that no call is split by another thread's
    p = subprocess.run(["strace", "-ff", "-y", "-s", "0", "-e", "trace=openat,read,pread64", "-o", log,
                        REPORT, *argv, job_dir], capture_output=True, text=True, timeout=300)
    check(p.returncode in (0, 1), (argv, p.returncode, p.stderr[-2000:]))
    opens, read = {}, {}
    for thread_log in (os.path.join(out, n) for n in os.listdir(out) if n.startswith("strace.")):
        with open(thread_log) as f:
            for line in f:
                if m := OPEN.search(line):
                    name = os.path.basename(m.group(1))
                    opens[name] = opens.get(name, 0) + 1
                elif m := READ.search(line):
                    name = os.path.basename(m.group(1))
                    read[name] = read.get(name, 0) + int(m.group(2))
    return opens, read


def test_each_trace_opened_once_and_read_once():
    if not shutil.which("strace"):
        print("skipped: no strace")
        sys.exit(SKIP)
    for name in JOBS:
        job_dir = os.path.join(REAL, name)
        sizes = {f: data_bytes(os.path.join(job_dir, f)) for f in os.listdir(job_dir) if f.endswith(".nwt")}
        for args in REPORTS:
            opens, read = reads_of(args, job_dir)
            for f, size in sizes.items():
                check(opens.get(f) == 1, (name, args[0], f, "opened", opens.get(f)))
                check(size <= read.get(f, 0) <= 1.25 * size, (name, args[0], f, "read", read.get(f), "of", size))
            print(f"{name} {args[0]}: " + ", ".join(f"{f} opened {opens[f]}x, read {read[f] / sizes[f]:.2f}x"
                                                    for f in sorted(sizes)))


if __name__ == "__main__":
    run_case(globals())
