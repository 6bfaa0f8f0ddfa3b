"""NCCLWATCH_METRICS_FILE on real multi-process runs (CPU stand-in): the file a running job
rewrites, scraped through a real prometheus-node-exporter textfile collector while the job runs,
and its last word at exit agreeing with `ncclwatch-report metrics` on the job's traces."""
import collections
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from harness import Job, app, check, main, REPORT

SAMPLE = re.compile(r'^(ncclwatch_[a-z0-9_]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """[(name, {labels}, value)] of the ncclwatch samples in `text`."""
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def pick(samples, name, **labels):
    return [v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_exporter(textfile_dir):
    exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if not exporter:
        print("prometheus-node-exporter is not installed (scripts/bootstrap installs it): skipped")
        sys.exit(77)
    port = free_port()
    proc = subprocess.Popen([exporter, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                             "--collector.textfile", f"--collector.textfile.directory={textfile_dir}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Its log goes to the pipe; read only if it exits early (a few lines: the pipe never fills).
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return proc, url
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"node-exporter exited: {proc.stderr.read()}")
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("node-exporter never answered")


def scrape(url):
    return urllib.request.urlopen(url, timeout=5).read().decode()


def live_metrics_through_node_exporter():
    # Rank 1 skips the 3rd of 5 all-reduces: rank 0's stream stalls while both wait 3 s.
    # Neither destroys its communicator.
    job = Job([app("collectives_app"), "skip", "3000"], nranks=2)
    textfiles = os.path.join(job.tmp, "textfiles")
    os.makedirs(textfiles)
    job.env.update({"NCCLWATCH_METRICS_FILE": os.path.join(textfiles, "ncclwatch-%h-%p.prom"),
                    "NCCLWATCH_METRICS_SEC": "0.2", "NCCLWATCH_STALL_SEC": "0.5"})
    exporter, url = node_exporter(textfiles)
    try:
        procs = job.start()
        scrapes = []
        while any(p.poll() is None for p in procs):
            text = scrape(url)
            check("node_textfile_scrape_error 0" in text, text[-2000:])
            scrapes.append(parse(text))
            time.sleep(0.1)
        outs = [(p.returncode, p.stderr.read()) for p in procs]
        final_scrape = parse(scrape(url))
    finally:
        exporter.kill()
        exporter.wait()
    for rank, (rc, err) in enumerate(outs):
        check(rc == 0, f"rank {rank}: exit {rc}: {err}")
        check("metrics file" not in err, err)
    pids = {str(p.pid) for p in procs}
    # While the job ran: both processes alive with one communicator, then rank 0 stalled at seq 3.
    alive = [s for s in scrapes if all(pick(s, "ncclwatch_communicators", pid=pid, state="alive") == [1] for pid in pids)]
    check(alive, f"no scrape showed both processes' communicator alive: {scrapes[-1:]}")
    rank0 = [s for s in scrapes if pick(s, "ncclwatch_ops_issued_total", rank="0") == [5]]
    check(rank0, "rank 0's 5 issued all-reduces never showed")
    stalled = [s for s in scrapes if pick(s, "ncclwatch_stalled", rank="0") == [1]]
    check(stalled, "the stall of rank 0 never showed while the job ran")
    # Rank 1's 4 calls pair with rank 0's first 4 (seqs, not intentions, meet): rank 0's 5th waits.
    check(pick(stalled[-1], "ncclwatch_ops_completed_total", rank="0") == [4], stalled[-1])
    check(pick(stalled[-1], "ncclwatch_stalls_total", rank="0") == [1], stalled[-1])
    check(pick(stalled[-1], "ncclwatch_stalled", rank="1") == [0], stalled[-1])
    # No temporary file is left beside the finished files.
    check(sorted(os.listdir(textfiles)) == sorted(f"ncclwatch-{socket.gethostname()}-{pid}.prom" for pid in pids),
          os.listdir(textfiles))
    # The last word at exit: the communicators leaked, as the report of the traces says.
    offline = parse(subprocess.run([REPORT, "metrics", job.trace_dir], capture_output=True, text=True,
                                   check=True).stdout)
    for pid in pids:
        check(pick(final_scrape, "ncclwatch_communicators", pid=pid, state="leaked") == [1], final_scrape)
        check(pick(offline, "ncclwatch_communicators", pid=pid, state="leaked") == [1], offline)
        check(pick(final_scrape, "ncclwatch_communicators_created_total", pid=pid) ==
              pick(offline, "ncclwatch_communicators_created_total", pid=pid) == [1], (final_scrape, offline))
    for rank, issued in (("0", 5), ("1", 4)):
        check(pick(final_scrape, "ncclwatch_ops_issued_total", rank=rank) ==
              pick(offline, "ncclwatch_ops_issued_total", rank=rank) == [issued], (rank, final_scrape, offline))


def released_communicators_keep_their_counters():
    # Both ranks make two communicators, run every kind of op on them and destroy them: the last
    # write at exit still counts their ops (counters outlive what they count), as the traces do.
    job = Job([app("collectives_app"), "mixed"], nranks=2)
    files = os.path.join(job.tmp, "textfiles")
    os.makedirs(files)
    job.env.update({"NCCLWATCH_METRICS_FILE": os.path.join(files, "m-%p.prom"), "NCCLWATCH_METRICS_SEC": "0.1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: exit {r.returncode}: {r.stderr}")
    live = [s for f in os.listdir(files) for s in parse(open(os.path.join(files, f)).read())]
    offline = parse(subprocess.run([REPORT, "metrics", job.trace_dir], capture_output=True, text=True, check=True).stdout)
    issued = lambda samples: sorted((l["comm"], l["rank"], v) for n, l, v in samples if n == "ncclwatch_ops_issued_total")  # noqa: E731
    check(len(issued(live)) == 4 and issued(live) == issued(offline), (issued(live), issued(offline)))
    check(sum(pick(live, "ncclwatch_communicators", state="destroyed")) == 4, live)
    check(not pick(live, "ncclwatch_communicators", state="alive"), live)


def memory_and_point_to_point_series_agree_with_the_traces():
    # set-up-memory (collectives_app): world holds 96 MiB when made and 32 MiB more after its set-up
    # calls, and is left alive; a split (104 MiB) is destroyed; world runs one send and one receive.
    # While it runs (it lingers 0.8 s) the live file gives world's memory; the file left at exit and the report give none (the memory went with the process);
    # both count the point-to-point calls, as the report of the traces does.
    job = Job([app("collectives_app"), "set-up-memory", "800"], nranks=2)
    files = os.path.join(job.tmp, "textfiles")
    os.makedirs(files)
    job.env.update({"NCCLWATCH_METRICS_FILE": os.path.join(files, "m-%p.prom"), "NCCLWATCH_METRICS_SEC": "0.1",
                    "NCCLWATCH_TIMING": "gpu", "HOSTNCCL_COMM_MIB": "96", "HOSTNCCL_SETUP_MIB": "8"})
    procs = job.start()
    seen, seen_process = {}, collections.defaultdict(set)
    while any(p.poll() is None for p in procs):
        for f in os.listdir(files):
            try:
                for n, labels, v in parse(open(os.path.join(files, f)).read()):
                    if n == "ncclwatch_communicator_gpu_memory_bytes":
                        seen[(labels["comm"], labels["rank"])] = max(v, seen.get((labels["comm"], labels["rank"]), 0))
                    if n == "ncclwatch_process_nccl_gpu_memory_bytes":
                        seen_process[labels["pid"]].add(v)
            except (FileNotFoundError, KeyError):
                pass
        time.sleep(0.05)
    for rank, p in enumerate(procs):
        check(p.returncode == 0, f"rank {rank}: exit {p.returncode}: {p.stderr.read()}")
    live = [s for f in os.listdir(files) for s in parse(open(os.path.join(files, f)).read())]
    offline = parse(subprocess.run([REPORT, "metrics", job.trace_dir], capture_output=True, text=True, check=True).stdout)
    series = lambda samples, name: sorted((l["comm"], l["rank"], v) for n, l, v in samples if n == name)  # noqa: E731
    check(128 * 2**20 in seen.values(), f"world's 128 MiB never showed while the job ran: {seen}")
    check(not series(live, "ncclwatch_communicator_gpu_memory_bytes") and
          not series(offline, "ncclwatch_communicator_gpu_memory_bytes"), (live, offline))
    # Per process: live, what its alive communicators hold (world's 128 MiB once the split is
    # gone); the report, the most they held at once (world's 128 and the split's 104 MiB).
    pids = sorted(str(p.pid) for p in procs)
    check(sorted(seen_process) == pids and all(128 * 2**20 in v and max(v) <= 232 * 2**20 for v in seen_process.values()),
          f"live per-process memory: {dict(seen_process)}")
    check(not [s for s in live if s[0] == "ncclwatch_process_nccl_gpu_memory_bytes"], "none in the files left at exit")
    peaks = sorted((l["pid"], v) for n, l, v in offline if n == "ncclwatch_process_nccl_gpu_memory_peak_bytes")
    check(peaks == [(pid, 232 * 2**20) for pid in pids], f"the report's per-process peaks: {peaks}")
    p2p = series(live, "ncclwatch_p2p_ops_issued_total")
    check(sorted(v for _, _, v in p2p) == [0, 0, 2, 2] and p2p == series(offline, "ncclwatch_p2p_ops_issued_total"),
          (p2p, series(offline, "ncclwatch_p2p_ops_issued_total")))


def straggler_series_show_the_injected_wait():
    # The last of 3 ranks sleeps 20 ms before each of 10 all-reduces: its peers' collectives wait for
    # it on the (stand-in's) GPU. The straggler series count the 9 launches past each rank's first, and
    # the peers' mean exceeds the late rank's by the sleep; the report of the traces writes the same.
    job = Job([app("collectives_app"), "straggler"], nranks=3)
    files = os.path.join(job.tmp, "textfiles")
    os.makedirs(files)
    job.env.update({"NCCLWATCH_METRICS_FILE": os.path.join(files, "m-%p.prom"), "NCCLWATCH_METRICS_SEC": "0.1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: exit {r.returncode}: {r.stderr}")
    live = [s for f in os.listdir(files) for s in parse(open(os.path.join(files, f)).read())]
    offline = parse(subprocess.run([REPORT, "metrics", job.trace_dir], capture_output=True, text=True, check=True).stdout)

    def means(samples):
        seconds = {l["rank"]: v for n, l, v in samples if n == "ncclwatch_collective_gpu_seconds_total"}
        launches = {l["rank"]: v for n, l, v in samples if n == "ncclwatch_collectives_timed_total"}
        check(sorted(launches.items()) == [("0", 9), ("1", 9), ("2", 9)], launches)
        return {rank: seconds[rank] / launches[rank] for rank in launches}

    for source, samples in (("live", live), ("offline", offline)):
        mean = means(samples)
        for peer in ("0", "1"):
            wait_ms = (mean[peer] - mean["2"]) * 1e3
            check(15 <= wait_ms <= 25, f"{source}: rank {peer} waited {wait_ms:.2f} ms per all-reduce for rank 2: {mean}")
    live_mean, offline_mean = means(live), means(offline)
    for rank in live_mean:
        check(abs(live_mean[rank] - offline_mean[rank]) <= 1e-5, (rank, live_mean, offline_mean))


def unwritable_metrics_file_costs_only_the_metrics():
    job = Job([app("collectives_app"), "mixed"], nranks=2)
    target = os.path.join(job.tmp, "no-such-folder", "m.prom")
    job.env.update({"NCCLWATCH_METRICS_FILE": target, "NCCLWATCH_METRICS_SEC": "0.1"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: exit {r.returncode}: {r.stderr}")
        lines = [l for l in r.stderr.splitlines() if "metrics file" in l]
        check(len(lines) == 1 and target in lines[0], f"rank {rank}: not named once: {r.stderr!r}")
    rc, out, err = job.report("hang", "--json")
    check(rc == 0 and len(job.traces()) == 2, (rc, err))


def entry_state(path):
    """What a folder entry is, without following it: kind, owner, device, inode, and its bytes or target."""
    st = os.lstat(path)
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            body = f.read()
    else:
        body = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    return stat.S_IFMT(st.st_mode), st.st_uid, st.st_rdev, st.st_ino, body


def metrics_file_that_is_not_ours_is_left_alone():
    # As root, NCCLWATCH_METRICS_FILE=/dev/null turned /dev/null into a regular file holding
    # Prometheus text (a temporary file renamed over it). Only a regular file of our own, or
    # nothing, is replaced; anything else is left as it is and named once on stderr.
    folder = tempfile.mkdtemp(prefix="ncclwatch-metrics-")
    other = os.path.join(folder, "someone-elses.txt")
    with open(other, "w") as f:
        f.write("not the shim's\n")
    refused = {}  # path -> a word the notice must say
    refused[os.path.join(folder, "fifo.prom")] = "FIFO"
    os.mkfifo(os.path.join(folder, "fifo.prom"))
    refused[os.path.join(folder, "link.prom")] = "symbolic link"
    os.symlink(other, os.path.join(folder, "link.prom"))
    refused[os.path.join(folder, "folder.prom")] = "directory"
    os.mkdir(os.path.join(folder, "folder.prom"))
    if os.geteuid() == 0:
        foreign = os.path.join(folder, "foreign.prom")
        with open(foreign, "w") as f:
            f.write("# nobody's metrics\n")
        os.chown(foreign, 65534, 65534)
        refused[foreign] = "owned by uid 65534"
        try:
            os.mknod(os.path.join(folder, "null.prom"), stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's
            refused[os.path.join(folder, "null.prom")] = "character device"
        except OSError as e:
            print(f"no device node in {folder} ({e}): that case is skipped")
    else:
        print("not root: the file owned by another user and the device node are skipped")
    ours = os.path.join(folder, "ours.prom")  # a regular file of our own is replaced as before
    with open(ours, "w") as f:
        f.write("# stale\n")
    before = {p: entry_state(p) for p in [*refused, other]}

    def run(target):
        job = Job([app("collectives_app"), "mixed"], nranks=1,
                  env={"NCCLWATCH_METRICS_FILE": target, "NCCLWATCH_METRICS_SEC": "0.1"})
        return target, job.run()[0]

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run, [*refused, ours]))
    for target, r in results:
        check(r.returncode == 0, f"{target}: exit {r.returncode}: {r.stderr}")
        said = [line for line in r.stderr.splitlines() if target in line]
        if target == ours:
            check(not said, f"our own file was refused: {r.stderr!r}")
            continue
        check(len(said) == 1 and refused[target] in said[0], f"{target}: not named once, with why: {r.stderr!r}")
    for path, state in before.items():
        check(entry_state(path) == state, f"{path} was changed: {state} -> {entry_state(path)}")
    check("ncclwatch_communicators" in open(ours).read(), "our own file was not rewritten")
    left = sorted(os.listdir(folder))
    check(left == sorted(os.path.basename(p) for p in [*refused, other, ours]), f"temporary files left: {left}")


if __name__ == "__main__":
    main({f.__name__: f for f in (live_metrics_through_node_exporter, released_communicators_keep_their_counters,
                                  straggler_series_show_the_injected_wait,
                                  memory_and_point_to_point_series_agree_with_the_traces,
                                  unwritable_metrics_file_costs_only_the_metrics,
                                  metrics_file_that_is_not_ours_is_left_alone)})
