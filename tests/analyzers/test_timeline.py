"""ncclwatch-report timeline: tracks that never overlap, arrows between ranks, filters, gzip."""
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from report_harness import REAL, REPORT, check, job, run_case, tempdir  # noqa: E402


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


if __name__ == "__main__":
    run_case(globals())
