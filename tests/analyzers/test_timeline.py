"""ncclwatch-report timeline: tracks that never overlap, arrows between ranks, filters, gzip."""
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from report_harness import REAL, REPORT, check, job, run_case, tempdir  # noqa: E402
import craft_trace as ct  # noqa: E402


def timeline(path, *args, name="t.json"):
    out = os.path.join(tempdir(), name)
    p = subprocess.run([REPORT, "timeline", path, "-o", out, *args], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, (args, p.returncode, p.stderr))
    opener = gzip.open if name.endswith(".gz") else open
    with opener(out, "rt") as f:
        return json.load(f)


def op_slices(t):
    return [e for e in t["traceEvents"] if e.get("ph") == "X" and "seq" in e.get("args", {})]


def check_no_overlap(t, what):
    """On every track, each slice starts after the previous one ended or lies inside it."""
    tracks = {}
    for e in t["traceEvents"]:
        if e.get("ph") == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    check(tracks, what)
    for key, slices in tracks.items():
        slices.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for begin, end, name in slices:
            while open_ends and open_ends[-1] <= begin + 1e-3:
                open_ends.pop()
            if open_ends and end > open_ends[-1] + 1e-3:
                raise AssertionError(f"{what}: {name} [{begin}, {end}] cuts into a slice ending at {open_ends[-1]} "
                                     f"on track {key}")
            open_ends.append(end)


def track_names(t):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "thread_name"}


def test_tracks_never_overlap():
    # Enqueue slices on thread tracks, GPU execution on stream tracks (the old timeline put both on
    # the stream's track, where host-timed slices cut into GPU-timed ones on real traces).
    expected = {"host_timing": {"host enqueue"}, "straggler": {"GPU execution"}}
    for path, kinds in ((job("host_timing"), expected["host_timing"]), (job("straggler"), expected["straggler"]),
                        (os.path.join(REAL, "straggler"), {"host enqueue", "GPU execution"}),
                        (os.path.join(REAL, "skip"), {"host enqueue", "GPU execution"})):
        t = timeline(path)
        check_no_overlap(t, path)
        names = track_names(t)
        seen = {kind for e in op_slices(t) for kind in ("host enqueue", "GPU execution") if kind in names[(e["pid"], e["tid"])]}
        check(seen == kinds, (path, seen))


def test_flows_link_each_collective_rank_to_rank():
    d = job("straggler")  # 4 ranks, 60 GPU-timed all-reduces
    t = timeline(d)
    starts = {e["id"]: e for e in t["traceEvents"] if e.get("ph") == "s"}
    ends = {e["id"]: e for e in t["traceEvents"] if e.get("ph") == "f"}
    check(len(starts) == len(ends) == 3 * 60, (len(starts), len(ends)))
    check(set(starts) == set(ends), "every arrow that starts ends")
    slices = {(e["pid"], e["tid"], e["ts"]): e for e in op_slices(t)}
    rank_of = {e["pid"]: int(e["args"]["name"].split()[1]) for e in t["traceEvents"] if e.get("name") == "process_name"}
    for i, s in starts.items():
        f = ends[i]
        a, b = slices[(s["pid"], s["tid"], s["ts"])], slices[(f["pid"], f["tid"], f["ts"])]
        check(a["args"]["seq"] == b["args"]["seq"] and rank_of[f["pid"]] == rank_of[s["pid"]] + 1, (a, b))
    check(not [e for e in timeline(d, "--no-flows")["traceEvents"] if e.get("ph") in ("s", "f")], "--no-flows")


def test_filters_and_gzip():
    d = job("straggler")
    everything = timeline(d)
    packed = timeline(d, name="t.json.gz")
    key = lambda e: json.dumps(e, sort_keys=True)  # noqa: E731  (events come in any order of the files)
    check(sorted(map(key, packed["traceEvents"])) == sorted(map(key, everything["traceEvents"])), "gzip holds the same events")
    two = timeline(d, "--ranks", "0,2-2")
    ranks = sorted(e["args"]["name"].split()[1] for e in two["traceEvents"] if e.get("name") == "process_name")
    check(ranks == ["0", "2"], ranks)
    check(len(op_slices(two)) == 2 * 60, len(op_slices(two)))
    check(two["otherData"]["ranks_shown"] == 2, two["otherData"])
    check(len(op_slices(timeline(d, "--comm", "world"))) == 4 * 60, "by name")
    check(len(op_slices(timeline(d, "--comm", "a11ce00000000001"))) == 4 * 60, "by id")
    check(not op_slices(timeline(d, "--comm", "other")), "another communicator: no op slice")
    ts = sorted(e["ts"] for e in op_slices(everything))
    lo, hi = ts[len(ts) // 4] / 1e6, ts[len(ts) // 2] / 1e6
    window = op_slices(timeline(d, "--from", str(lo), "--to", str(hi)))
    check(window and len(window) < len(ts), (len(window), len(ts)))
    check(all(e["ts"] + e["dur"] >= lo * 1e6 - 1e-3 and e["ts"] <= hi * 1e6 + 1e-3 for e in window), "inside the window")
    for bad in (["--ranks", "x"], ["--ranks", "3-1"], ["--from", "2", "--to", "1"]):
        p = subprocess.run([REPORT, "timeline", d, "-o", os.path.join(tempdir(), "x.json"), *bad], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 2 and "timeline" in p.stderr, (bad, p.returncode, p.stderr))


def test_groups_and_launches_that_never_finished():
    # One rank's file, record by record: a timed all-reduce that completed; a group whose end says
    # no timing follows (its ops are enqueue slices, drawn at once); a timed group that hung (no
    # timing ever came); a timed all-reduce queued behind it on the same stream.
    comm, ms = 0xA11CE00000000001, 1_000_000
    t0 = 6_000 * ms
    body = (ct.comm_created(1, 0xC0FFEE, comm, name=b"world") +
            ct.op(comm, 1, time_ns=t0, launch_id=1, flags=ct.OP_TIMED) + ct.gpu_timing(1, t0 + 1 * ms, t0 + 2 * ms) +
            ct.op(comm, 2, time_ns=t0 + 3 * ms, launch_id=40, group_depth=1) +
            ct.op(comm, 3, time_ns=t0 + 3 * ms, launch_id=40, group_depth=1) +
            ct.group_end(comm, 40, 2, t0 + 4 * ms, timed=False) +
            ct.op(comm, 4, time_ns=t0 + 5 * ms, launch_id=7, group_depth=1) +
            ct.op(comm, 5, time_ns=t0 + 5 * ms, launch_id=7, group_depth=1) +
            ct.group_end(comm, 7, 2, t0 + 6 * ms, timed=True) +
            ct.op(comm, 6, time_ns=t0 + 7 * ms, launch_id=3, flags=ct.OP_TIMED))
    folder = tempdir()
    with open(os.path.join(folder, "rank0.nwt"), "wb") as f:
        f.write(ct.file_header() + ct.process() + body + ct.exit_records(time_ns=t0 + 100 * ms))
    t = timeline(folder)
    names = track_names(t)
    by_seq = {e["args"]["seq"]: e for e in op_slices(t)}
    on_stream = lambda e: "GPU execution" in names[(e["pid"], e["tid"])]  # noqa: E731
    check(sorted(by_seq) == [1, 2, 3, 4, 6], sorted(by_seq))
    check(on_stream(by_seq[1]) and by_seq[1]["dur"] == 1000.0 and "timing" not in by_seq[1]["args"], by_seq[1])
    check(not on_stream(by_seq[2]) and not on_stream(by_seq[3]), "an untimed group's ops are enqueue slices")
    hung = by_seq[4]
    check(on_stream(hung) and hung["name"] == "group of 2: ncclAllReduce" and hung["args"]["timing"] == "never completed",
          f"the timed group that hung is on its stream, to the end: {hung}")
    check(abs(hung["ts"] + hung["dur"] - by_seq[1]["ts"] - 99_000) < 1, f"it lasts to the process's end: {hung}")
    behind = by_seq[6]
    check(on_stream(behind) and behind["args"]["timing"] == "never started" and behind["ts"] >= hung["ts"] + hung["dur"],
          f"the launch queued behind it never started: {behind}")
    check_no_overlap(t, "crafted groups")


def test_flows_of_many_communicators_never_cross():
    # 400 communicators of 2 ranks, one GPU-timed all-reduce each at the same seq: an arrow must
    # only join the two ranks of its own communicator (ids once came from 16 bits of the comm).
    ms = 1_000_000
    folder = tempdir()
    for rank in range(2):
        body = b""
        for k in range(400):
            comm = 0xC000000000000000 + k * 0x10001
            t = 6_000 * ms + k * ms
            body += ct.comm_created(1 + k, 0x1000 + k, comm, rank=rank) + ct.op(comm, 1, rank=rank, time_ns=t,
                                                                             launch_id=1 + k, flags=ct.OP_TIMED)
            body += ct.gpu_timing(1 + k, t + 100_000, t + 200_000)
        with open(os.path.join(folder, f"rank{rank}.nwt"), "wb") as f:
            f.write(ct.file_header(pid=100 + rank) + ct.process() + body + ct.exit_records(time_ns=7_000 * ms))
    t = timeline(folder)
    slices = {(e["pid"], e["tid"], e["ts"]): e for e in op_slices(t)}
    key = lambda e: (e["cat"], e["name"], e["id"])  # noqa: E731  (what a trace viewer pairs flow events by)
    starts = [e for e in t["traceEvents"] if e.get("ph") == "s"]
    ends = {key(e): e for e in t["traceEvents"] if e.get("ph") == "f"}
    check(len(starts) == 400 and len(ends) == 400 and len({key(e) for e in starts}) == 400, (len(starts), len(ends)))
    for s in starts:
        f = ends[key(s)]
        a, b = slices[(s["pid"], s["tid"], s["ts"])], slices[(f["pid"], f["tid"], f["ts"])]
        check(a["args"]["comm"] == b["args"]["comm"] == s["cat"] and a["pid"] != b["pid"], (s, f, a, b))


def test_bad_filters_and_outputs_are_refused():
    d = job("straggler")
    for bad in (["--from", "nan"], ["--to", "inf"], ["--from", "1e300"]):
        p = subprocess.run([REPORT, "timeline", d, "-o", os.path.join(tempdir(), "x.json"), *bad], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 2 and "not a time in seconds" in p.stderr, (bad, p.returncode, p.stderr))
    if os.path.exists("/dev/full"):  # every write fails with ENOSPC: a disk that is full
        p = subprocess.run([REPORT, "timeline", d, "-o", "/dev/full"], capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and "writing /dev/full failed" in p.stderr, (p.returncode, p.stderr))


def test_comm_filter_by_hex_looking_name():
    # A communicator named like a short hex id is found by its name.
    folder = tempdir()
    comm = 0xA11CE00000000001
    with open(os.path.join(folder, "r.nwt"), "wb") as f:
        f.write(ct.file_header() + ct.process() + ct.comm_created(1, 0xC0FFEE, comm, name=b"beef") +
                ct.op(comm, 1) + ct.exit_records())
    check(len(op_slices(timeline(folder, "--comm", "beef"))) == 1, "by a name that looks like hex")
    check(len(op_slices(timeline(folder, "--comm", "0xa11ce00000000001"))) == 1, "by id with 0x")


if __name__ == "__main__":
    run_case(globals())
