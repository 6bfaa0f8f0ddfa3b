"""ncclwatch-report on synthetic jobs (written by gen_job, following trace_format.h exactly):
what each report says, its exit status, and what it names on stderr."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

REPORT = os.environ["NCCLWATCH_REPORT"]
GEN = os.environ["NCCLWATCH_GEN_JOB"]


CREATED = []


def tempdir():
    d = tempfile.mkdtemp(prefix="ncclwatch-analyzers-")
    CREATED.append(d)
    return d


def job(scenario):
    d = tempdir()
    subprocess.run([GEN, scenario, d], check=True, stdout=subprocess.DEVNULL)
    return d


def report(*args):
    p = subprocess.run([REPORT, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1, 2), f"crashed: {p.returncode}\n{p.stderr}"
    return p


def report_json(*args):
    p = report(*args, "--json")
    return p.returncode, json.loads(p.stdout), p.stderr


def comm(out, name):
    found = [c for c in out["comms"] if c.get("name") == name]
    assert len(found) == 1, out["comms"]
    return found[0]


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def test_count_mismatch_and_missing_rank():
    d = job("count_mismatch_then_stop")
    rc, out, _ = report_json("hang", d)
    check(rc == 1, rc)
    w = comm(out, "world")
    mm = w["mismatches"]
    check([(m["seq"], m["field"], m["ranks"], m["value"], m["expected"]) for m in mm] ==
          [(3, "count", [1], 1 << 19, 1 << 20)], mm)
    check(w["missing"] and [(m["rank"], m["first_missing_seq"]) for m in w["missing"]] == [(1, 6)], w["missing"])
    check(w["last_seq_completed_by_all"] == 5, w["last_seq_completed_by_all"])
    check(sorted(e["rank"] for e in w["incomplete"]) == [0, 2, 3], w["incomplete"])
    check(len(w["stalls"]) == 3 and all(s["seq"] == 6 for s in w["stalls"]), w["stalls"])
    check("rank(s) 1" in out["verdict"] and "seq 6" in out["verdict"], out["verdict"])
    text = report("hang", d)
    check(text.returncode == 1 and "mismatch at seq 3: count" in text.stdout and "rank 1 never issued seq 6" in text.stdout,
          text.stdout)
    # The summary says the same in one screen.
    rc, s, _ = report_json("summary", d)
    check(rc == 1 and s["mismatched_seqs"] == 1 and s["missing"] == 1 and s["stall_records"] == 3, s)


def test_silent_mismatch_flagged_by_summary():
    d = job("silent_mismatch")
    rc, s, _ = report_json("summary", d)
    check(rc == 1, (rc, s))
    check(s["mismatched_seqs"] == 2 and s["missing"] == 0 and s["leaked_communicators"] == 0, s)
    check("seq 4" in s["first_look"], s["first_look"])
    rc, out, _ = report_json("hang", d)
    w = comm(out, "world")
    fields = [(m["seq"], m["field"]) for m in w["mismatches"]]
    check(fields == [(4, "count"), (9, "datatype")], fields)
    # Two ranks disagree: the tie goes to the group holding rank 0, so rank 1 is the one named.
    check(all(m["ranks"] == [1] for m in w["mismatches"]), w["mismatches"])
    check(w["mismatches"][1]["value"] == "bfloat16" and w["mismatches"][1]["expected"] == "float32", w["mismatches"])
    text = report("summary", d)
    check(text.returncode == 1 and "MISMATCHES" in text.stdout, text.stdout)


def check_skip(nranks):
    d = job(f"skip_interleaved_{nranks}")
    rc, out, _ = report_json("hang", d)
    check(rc == 1, rc)
    w = comm(out, "world")
    check([(m["rank"], m["first_missing_seq"]) for m in w["missing"]] == [(1, 10)], w["missing"])
    div = w["divergence"]
    check(len(div) == 1, div)
    e = div[0]
    check((e["rank"], e["from_seq"], e["to_seq"]) == (1, 6, 10), e)
    check(e["departed"] and e["likely_seq"] == 7, e)
    check("between \"side\" seq 1 and 2" in e["reason"], e["reason"])
    side = comm(out, "side")
    check([d["rank"] for d in side["divergence"]] == [1], side["divergence"])
    check("rank 1 departed" in out["verdict"], out["verdict"])
    check("seqs 6..10" in out["verdict"], out["verdict"])


def test_skip_names_the_stretch_4_ranks():
    check_skip(4)


def test_skip_names_the_stretch_2_ranks():
    check_skip(2)


def test_straggler_named_across_skewed_hosts():
    d = job("straggler")
    rc, out, _ = report_json("hang", d)
    check(rc == 0, (rc, out["verdict"]))
    w = comm(out, "world")
    flagged = [r for r in w["stragglers"]["ranks"] if r["far_more_than_chance"]]
    check([r["rank"] for r in flagged] == [2], w["stragglers"])
    check(4.0 < flagged[0]["mean_late_ms"] < 6.0, flagged)
    check("rank 2 arrived last" in out["verdict"], out["verdict"])
    hosts = {h["host"]: h for h in out["clock"]["hosts"]}
    # node1's wall clock was 37 ms ahead: the alignment takes it back.
    check(abs(hosts["node1"]["shift_us"] + 37000) < 50, hosts)
    check(all(w_["rank"] == 2 for w_ in w["stragglers"]["worst"]), w["stragglers"]["worst"])


def test_timeline_one_slice_per_op():
    d = job("straggler")
    out = os.path.join(d, "timeline.json")
    p = report("timeline", d, "-o", out)
    check(p.returncode == 0, p.stderr)
    with open(out) as f:
        t = json.load(f)
    slices = [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "nccl"]
    check(len(slices) == 4 * 60, len(slices))
    check(all({"seq", "bytes", "comm"} <= set(e["args"]) for e in slices), slices[0])
    check(sorted({e["args"]["seq"] for e in slices}) == list(range(1, 61)), "seqs")
    check("ends of the same collectives" in t["otherData"]["clock_alignment"], t["otherData"])
    # Aligned clocks: the ends of seq 10 coincide on all four ranks, though node1's wall clock is off.
    ends = [e["ts"] + e["dur"] for e in slices if e["args"]["seq"] == 10]
    check(max(ends) - min(ends) < 50, ends)
    names = [e for e in t["traceEvents"] if e.get("name") == "process_name"]
    check(len(names) == 4, names)
    inits = [e for e in t["traceEvents"] if e.get("name", "").startswith("ncclCommInitRank")]
    check(len(inits) == 4, inits)


def test_latency_rows_and_bandwidth():
    d = job("clean")
    rc, out, _ = report_json("latency", d)
    check(rc == 0, rc)
    rows = {(r["op"], r["bytes"]): r for r in out["rows"]}
    ar = rows[("ncclAllReduce", 4 << 20)]
    check(ar["calls"] == 8 and ar["samples"] == 16 and ar["timing"] == "gpu", ar)
    check(ar["p50_us"] <= ar["p90_us"] <= ar["p99_us"] <= ar["max_us"], ar)
    check(abs(ar["busbw_gbps"] - ar["algbw_gbps"] * 2 * (2 - 1) / 2) < 1e-9, ar)
    # all-gather: sendcount 2^18 floats x 2 ranks = 2 MiB, factor (n-1)/n
    ag = rows[("ncclAllGather", 2 << 20)]
    check(abs(ag["busbw_gbps"] - ag["algbw_gbps"] * 0.5) < 1e-9, ag)
    check(abs(ag["algbw_gbps"] - (2 << 20) / (ag["mean_us"] * 1e-6) / 1e9) < 1e-6, ag)
    bc = rows[("ncclBroadcast", 1 << 18)]
    check(bc["busbw_gbps"] == bc["algbw_gbps"], bc)
    check(len(out["communicators"]) == 1 and abs(out["communicators"][0]["init_ms_max"] - 0.3) < 1e-6, out["communicators"])
    csv = report("latency", "--csv", d)
    lines = csv.stdout.strip().split("\n")
    check(lines[0].startswith("comm,op,bytes,nranks,calls,p50_us") and len(lines) == 1 + len(out["rows"]), lines)
    rc, s, _ = report_json("summary", d)
    check(rc == 0 and s["slowest_ops"] and s["mismatched_seqs"] == 0, s)


def test_host_timing_latency():
    d = job("host_timing")
    rc, out, _ = report_json("latency", d)
    check(rc == 0 and [r["timing"] for r in out["rows"]] == ["host"], out["rows"])
    check(abs(out["rows"][0]["p50_us"] - 5.0) < 0.2, out["rows"])
    rc, h, _ = report_json("hang", d)
    check(rc == 0 and comm(h, "world")["last_seq_completed_by_all"] == 10, h)


def test_environment_differences():
    d = job("env_diff")
    rc, s, _ = report_json("summary", d)
    env = {e["key"]: e for e in s["environment"]}
    check(set(env) == {"NCCL_ALGO", "nccl_version"}, env)
    versions = {v["value"]: v["ranks"] for v in env["nccl_version"]["values"]}
    check(versions == {"2.28.9": [0, 1], "2.21.5": [2]}, versions)
    algo = {v["value"]: v["ranks"] for v in env["NCCL_ALGO"]["values"]}
    check(algo == {"Tree": [1], "(unset)": [0, 2]}, algo)
    rc, h, _ = report_json("hang", d)
    check(len(h["environment"]) == 2 and "NCCL_ALGO" in h["verdict"], h["verdict"])


def test_absent_rank_named():
    d = job("count_mismatch_then_stop")
    for f in os.listdir(d):
        if "-1002-" in f:  # rank 2's trace
            os.remove(os.path.join(d, f))
    rc, out, _ = report_json("hang", d)
    w = comm(out, "world")
    check(rc == 1 and w["absent_ranks"] == [2], w["absent_ranks"])
    check(sorted(w["ranks"]) == [0, 1, 3], w["ranks"])
    check("rank(s) 2" in out["verdict"] and "no trace" in out["verdict"], out["verdict"])


def bad_files(d):
    paths = {}
    paths["garbage"] = os.path.join(d, "garbage.nwt")
    with open(paths["garbage"], "wb") as f:
        f.write(os.urandom(10000))
    paths["empty"] = os.path.join(d, "empty.nwt")
    open(paths["empty"], "wb").close()
    paths["newer"] = os.path.join(d, "newer.nwt")
    header = bytearray(4096)
    header[0:8] = b"NCCLWTCH"
    struct.pack_into("<III", header, 8, 9, 9, 4096)
    with open(paths["newer"], "wb") as f:
        f.write(header)
    return paths


def test_bad_inputs_named_and_skipped():
    d = job("clean")
    paths = bad_files(d)
    rc, out, err = report_json("hang", d)
    check(rc == 0, (rc, err))
    check(comm(out, "world")["last_seq_issued"] == 18, out)
    for what, path in paths.items():
        check(path in err, (what, err))
    check("bad magic" in err and "empty file" in err and "newer ncclwatch" in err, err)
    for sub in (["summary"], ["latency"], ["leaks"]):
        p = report(*sub, d)
        check(p.returncode == 0 and paths["garbage"] in p.stderr, (sub, p.returncode, p.stderr))


def test_only_bad_inputs_exit_2():
    d = tempdir()
    paths = bad_files(d)
    for sub in (["summary"], ["hang"], ["latency"], ["leaks"], ["timeline", "-o", os.path.join(d, "t.json")]):
        p = report(*sub, d)
        check(p.returncode == 2, (sub, p.returncode))
        check(all(path in p.stderr for path in paths.values()), p.stderr)
    p = report("hang", os.path.join(d, "does-not-exist"))
    check(p.returncode == 2 and "no such file" in p.stderr, p.stderr)


def test_truncated_file_keeps_complete_records():
    d = job("count_mismatch_then_stop")
    victim = sorted(f for f in os.listdir(d) if "-1000-" in f)[0]
    path = os.path.join(d, victim)
    with open(path, "rb") as f:
        data = f.read()
    # Cut in the middle of the 4th op record: 3 ops stay complete.
    first_op = None
    off = 4096
    ops = 0
    while off + 8 <= len(data):
        size, typ = struct.unpack_from("<IH", data, off)
        if typ == 11:
            ops += 1
            if ops == 4:
                first_op = off
                break
        off += size
    with open(path, "wb") as f:
        f.write(data[:first_op + 50])
    rc, out, err = report_json("hang", d)
    w = comm(out, "world")
    rank0 = [r for r in w["per_rank"] if r["rank"] == 0][0]
    check(rank0["last_seq"] == 3, rank0)
    check(victim in err, err)
    dump = report("dump", path)
    check(dump.returncode == 0, dump.stderr)
    records = [json.loads(line) for line in dump.stdout.splitlines()]
    check(sum(1 for r in records if r["type"] == "op") == 3, "dump ops")


def test_clean_job_exit_0():
    d = job("clean")
    for sub in ("summary", "hang", "latency", "leaks"):
        p = report(sub, d)
        check(p.returncode == 0, (sub, p.returncode, p.stdout, p.stderr))
    rc, out, _ = report_json("hang", d)
    check(out["verdict"] == "no hang or mismatch found", out["verdict"])


if __name__ == "__main__":
    name = sys.argv[1]
    try:
        globals()["test_" + name]()
    finally:
        for d in CREATED:
            shutil.rmtree(d, ignore_errors=True)
    print("ok", name)
