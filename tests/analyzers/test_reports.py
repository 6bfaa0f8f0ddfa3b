"""ncclwatch-report on synthetic jobs (written by gen_job, following trace_format.h exactly):
what each report says, its exit status, and what it names on stderr. The hostile-input cases at
the end use traces crafted byte by byte (craft_trace.py)."""
import csv
import glob
import io
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import craft_trace  # noqa: E402

from report_harness import GEN, REAL, REPORT, check, job, report, report_json, run_case, tempdir  # noqa: E402


def comm(out, name):
    found = [c for c in out["comms"] if c.get("name") == name]
    assert len(found) == 1, out["comms"]
    return found[0]


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
    flagged = [r for r in w["stragglers"]["ranks"] if r["finding"]]
    check([r["rank"] for r in flagged] == [2] and w["stragglers"]["measured_on"] == "gpu_start", w["stragglers"])
    # rank 2 computes 5 ms longer before every op
    check(4.5 < flagged[0]["typical_late_ms"] < 5.5 and 4.0 < flagged[0]["mean_late_ms"] < 6.0, flagged)
    check("rank 2 started last on the GPU" in out["verdict"], out["verdict"])
    rc, s, _ = report_json("summary", d)
    check(s["stragglers"] == [flagged[0]["text"]] and s["first_look"] == out["verdict"], (s["stragglers"], s["first_look"]))
    hosts = {h["host"]: h for h in out["clock"]["hosts"]}
    # node1's wall clock was 37 ms ahead: the alignment takes it back.
    check(abs(hosts["node1"]["shift_us"] + 37000) < 50, hosts)
    check(all(w_["rank"] == 2 for w_ in w["stragglers"]["worst"]), w["stragglers"]["worst"])


# Traces of real PyTorch jobs on two H200s (tests/gpu/torch_numbers.sh, trimmed, local paths
# replaced): the shapes synthetic jobs cannot promise, such as a host running ahead of its GPU.


def test_real_straggler_lateness_is_the_sleep():
    # Rank 1 slept 20 ms before each of 120 all-reduces of 4 MiB; rank 0's host ran ahead.
    d = os.path.join(REAL, "straggler")
    rc, out, _ = report_json("hang", d)
    found = [(c, r) for c in out["comms"] for r in c["stragglers"]["ranks"] if r["finding"]]
    check(len(found) == 1 and found[0][1]["rank"] == 1, found)
    c, r = found[0]
    check(c["stragglers"]["measured_on"] == "gpu_start" and 15.0 <= r["typical_late_ms"] <= 25.0, r)
    rc, s, _ = report_json("summary", d)
    check(s["stragglers"] == [r["text"]] and s["first_look"] == out["verdict"], (s["stragglers"], s["first_look"]))
    # The first all-reduce set up NCCL's connections: kept out of the 4 MiB row's figures.
    rc, lat, _ = report_json("latency", d)
    row = next(x for x in lat["rows"] if x["op"] == "ncclAllReduce" and x["bytes"] == 4 << 20 and x["timing"] == "gpu")
    check(row["first_calls"]["max_us"] > 50_000 and row["p50_us"] < 1_000, row)


def check_real_skip(folder):
    d = os.path.join(REAL, folder)
    rc, out, _ = report_json("hang", d)
    check(rc == 1, rc)
    div = [x for c in out["comms"] for x in c["divergence"] if x["rank"] == 1]
    check(any(x["from_seq"] <= 7 <= x["to_seq"] for x in div), div)
    check(all(x.get("likely_seq", 7) == 7 for x in div), div)
    check("rank 1 departed" in out["verdict"] and "likely" not in out["verdict"], out["verdict"])


def test_real_fsdp2_times_each_op_alone():
    # FSDP2 (fully_shard) over 8 equal blocks, two ranks sharing one H200 (tests/gpu/torch_frameworks.sh),
    # on NCCL 2.28.9 (fsdp2) and 2.30.7 built from source (fsdp2_nccl230): the backward drives the
    # one communicator from two streams, all-gathers (prefetch) and reduce-scatters interleaved;
    # each start event fired while the op before still ran. The truth: CUPTI's NCCL kernel medians
    # from torch.profiler in the same run (truth.json).
    for name, nccl in (("fsdp2", "22809"), ("fsdp2_nccl230", "23007")):  # NCCL_VERSION_CODE
        d = os.path.join(REAL, name)
        truth = json.load(open(os.path.join(d, "truth.json")))["kernel_us"]
        rc, lat, _ = report_json("latency", d)
        for op in ("AllGather", "ReduceScatter"):
            rows = [r for r in lat["rows"] if r["op"] == "nccl" + op]
            check(len(rows) == 1 and rows[0]["timing"] == "gpu", (name, rows))
            check(abs(rows[0]["p50_us"] / truth[op]["median"] - 1) <= 0.10, (name, op, rows[0]["p50_us"], truth[op]))
        rc, s, _ = report_json("summary", d)
        check(s["first_look"].startswith("nothing") and not s["stragglers"], (name, s["first_look"]))
        check(any(l["version"] == nccl for l in s["nccl_libraries"]), (name, s["nccl_libraries"]))


def test_real_ranks_in_different_roles_are_not_stragglers():
    # Two ranks sharing one H200 (tests/gpu/torch_frameworks.py roles): a reduce to rank 0,
    # broadcasts from rotating roots, a send and a receive in opposite orders, a subgroup. Start
    # events alone made rank 0 "last at 32 of 34 collectives, 2.28 ms late" on one communicator
    # (its GPU was still in its receive), though its peer lost nothing waiting.
    d = os.path.join(REAL, "roles")
    rc, out, _ = report_json("hang", d)
    found = [(c["comm"], r) for c in out["comms"] for r in c["stragglers"]["ranks"] if r["finding"]]
    check(not found and out["verdict"] == "no hang or mismatch found", (found, out["verdict"]))
    rc, s, _ = report_json("summary", d)
    check(s["first_look"].startswith("nothing"), s["first_look"])


def test_real_mesh_counts_the_jobs_ranks():
    # A 2x2 DeviceMesh (dims dp, tp) on 4 ranks sharing one H200 (tests/gpu/torch_frameworks.py mesh):
    # every op runs on the mesh's 2-rank groups, none on the world communicator they were split from.
    d = os.path.join(REAL, "mesh")
    truth = json.load(open(os.path.join(d, "truth.json")))
    rc, s, _ = report_json("summary", d)
    check(s["traces"] == 4 and s["ranks"] == truth["world_size"] == 4, (s["traces"], s["ranks"]))
    # Named as PyTorch knows them (the truth: each mesh dim's group_desc, printed by the job).
    rc, lat, _ = report_json("latency", d)
    by_size = {}
    for c in lat["communicators"]:
        by_size.setdefault(c["nranks"], set()).add(c.get("name"))
    check(by_size == {4: {"default_pg"}, 2: {g["desc"] for g in truth["groups"].values()}}, by_size)


def test_real_exception_exit_is_named():
    # Rank 1 raised RuntimeError at step 5 and exited with status 1 while rank 0 waited in its next
    # all-reduce; torchrun then ended rank 0 (tests/gpu/torch_frameworks.py raises, one H200).
    d = os.path.join(REAL, "raises")
    truth = json.load(open(os.path.join(d, "truth.json")))
    rc, hang, _ = report_json("hang", d)
    said = f"its process exited with status 1 after {truth['exception']}: {truth['message']} (raised at torch_frameworks.py:"
    check(said in hang["verdict"] and "rank(s) 1 never issued seq 5" in hang["verdict"], hang["verdict"])
    rc, s, _ = report_json("summary", d)
    check([e["rank"] for e in s["bad_endings"] if "status 1" in e["ended"]] == [1], s["bad_endings"])
    rc, leaks, _ = report_json("leaks", d)
    check(not any(c["state"].endswith("_hung") for c in leaks["communicators"]), [c["state"] for c in leaks["communicators"]])


def test_real_skip_names_the_stretch_not_a_wrong_seq():
    # Rank 1 skipped its 7th world all-reduce; nothing in the traces singles out seq 7.
    check_real_skip("skip")


def test_real_skip_with_every_seq_timed_names_no_stalled_seq():
    # The same job with the first 16 launches of each shape GPU-timed (H200, two ranks sharing
    # it): seq 10, where rank 0 stalled until PyTorch's abort, starts 84 s late on the GPU; that
    # is the hang's own wait, not the departure, and must not be singled out.
    check_real_skip("skip_timed")


def test_real_init_hang_names_who_never_joined():
    # Real NCCL on one H200 (tests/gpu/init_hang.sh): each process made a one-rank communicator,
    # then rank 0 entered ncclCommInitRank of a two-rank one that rank 1 never called; SIGTERM
    # ended both.
    d = os.path.join(REAL, "init_hang")
    rc, out, _ = report_json("hang", d)
    check(rc == 1, rc)
    check("rank(s) 0 entered ncclCommInitRank and never returned, waiting for rank(s) 1 of 2, which never called it"
          in out["verdict"], out["verdict"])
    stuck = [c for c in out["comms"] if c["init_never_returned"]]
    check(len(stuck) == 1 and stuck[0]["init_never_returned"] == [0] and stuck[0]["absent_ranks"] == [1], stuck)
    rc, leaks, _ = report_json("leaks", d)
    states = sorted(c["state"] for c in leaks["communicators"])
    check(states == ["init_hung", "leaked", "leaked"], states)
    rc, s, _ = report_json("summary", d)
    check(s["first_look"] == out["verdict"], s["first_look"])


def test_real_teardown_hang_is_looked_at_first():
    # Real NCCL 2.28.9 on one H200, two ranks sharing it (tests/gpu/torch_teardown_hang.sh): after
    # 3 eager all-reduces and 10 replays of a CUDA graph holding a 4th, destroy_process_group()
    # entered ncclCommFinalize on both ranks and never returned; each was sent SIGTERM 5.10 s after
    # it printed the time it called destroy_process_group().
    d = os.path.join(REAL, "teardown_hang")
    rc, leaks, _ = report_json("leaks", d)
    hung = [c for c in leaks["communicators"] if c["state"] == "finalize_hung"]
    check(rc == 1 and len(hung) == 2 and len(leaks["communicators"]) == 2, leaks["communicators"])
    for c in hung:
        check(c["teardown_call"] == "ncclCommFinalize" and c["teardown_until"] == "SIGTERM" and
              abs(c["teardown_inside_s"] - 5.10) < 0.1, c)
    check([h["ranks"] for h in leaks["teardown_hangs"]] == [[0, 1]], leaks["teardown_hangs"])
    check(leaks["remedies"][0].startswith("a teardown that never returns"), leaks["remedies"])
    rc, s, _ = report_json("summary", d)
    check(s["first_look"].startswith("teardown hung: ncclCommFinalize entered on rank(s) 0,1 of comm ") and
          "(5.1 s until SIGTERM)" in s["first_look"], s["first_look"])


def test_real_kill_during_teardown_is_not_a_hang():
    # Real NCCL 2.30.7 (built from source) on one H200, two ranks sharing it
    # (tests/gpu/torch_teardown_hang.sh): both entered ncclCommFinalize from destroy_process_group()
    # and were sent SIGTERM by the test's shell, their parent, 0.32 s later (truth.json).
    d = os.path.join(REAL, "teardown_killed")
    truth = json.load(open(os.path.join(d, "truth.json")))
    rc, leaks, _ = report_json("leaks", d)
    comms = leaks["communicators"]
    check(rc == 0 and [c["state"] for c in comms] == ["ended_in_teardown"] * 2 and not leaks["teardown_hangs"], comms)
    for c in comms:
        check(c["teardown_call"] == "ncclCommFinalize" and c["teardown_until"] == "SIGTERM" and
              abs(c["teardown_inside_s"] - truth["inside_s"][str(c["rank"])]) < 0.05, (c, truth))
    rc, s, _ = report_json("summary", d)
    sent = f"was killed by SIGTERM, sent by pid {truth['sender_pid']} ({truth['sender']}, its parent, uid 0)"
    check([e["ended"] for e in s["bad_endings"]] == [sent] * 2, s["bad_endings"])
    check(all(e["signal"]["sender_pid"] == truth["sender_pid"] and not e["signal"]["handled"] for e in s["bad_endings"]),
          s["bad_endings"])
    check(s["first_look"].startswith("nothing") and any(l["version"] == truth["nccl"] for l in s["nccl_libraries"]),
          (s["first_look"], s["nccl_libraries"]))
    text = report("leaks", d).stdout
    check(text.count("killed during ncclCommFinalize: 0.3 s inside") == 2 and "_hung" not in text, text)
    dump = report("dump", glob.glob(os.path.join(d, "*.nwt"))[0]).stdout
    check('"type":"signal"' in dump.replace(" ", "") and '"sender_name":"bash"' in dump.replace(" ", ""), dump[-600:])


def test_real_graph_replays_name_the_missing_replay():
    # Real NCCL 2.28.9 on one H200, two ranks sharing it (tests/gpu/graph_replays.sh): 3 eager
    # all-reduces, a 4th captured in torch.cuda.graph, 10 replays on rank 0 and 9 on rank 1.
    d = os.path.join(REAL, "graph_replays")
    rc, hang, _ = report_json("hang", d)
    world = max(hang["comms"], key=lambda c: c["last_seq_issued"])
    missing = world["missing"]
    check(rc == 1 and len(missing) == 1 and missing[0]["rank"] == 1 and missing[0]["first_missing_seq"] == 13 and
          missing[0]["graph"] == 1 and missing[0]["replay"] == 10, missing)
    check("replay 10 of CUDA graph 1" in hang["verdict"], hang["verdict"])
    rc, latency, _ = report_json("latency", d)
    replays = [r for r in latency["rows"] if r["timing"] == "gpu_graph_replay"]
    check(len(replays) == 1 and replays[0]["op"] == "ncclAllReduce" and replays[0]["bytes"] == 4 << 20, replays)


def test_real_torch_ring_counts_the_whole_run():
    # Format 4 from PyTorch 2.11 on one H200 (tests/gpu/torch_ring.sh, paths replaced): 3 cycles of
    # 4 new_group()s 1.2 s apart, never destroyed, then 20,000 all-reduces of 64 B and 1 MiB in a
    # 1 MiB trace, whose ring kept the newest 11,890 ops.
    d = os.path.join(REAL, "torch_ring")
    rc, lat, _ = report_json("latency", d)
    world = {r["bytes"]: r for r in lat["rows"] if r["op"] == "ncclAllReduce" and r["calls"] > 1}
    check(sorted(world) == [64, 1 << 20], sorted(world))
    for r in world.values():
        check(r["calls"] == 10000 and r["calls_in_window"] == 5945 and r["timing"] == "gpu" and 1 < r["p50_us"] < 10, r)
    check(not lat["window"]["complete"] and lat["window"]["ops_kept"] < lat["window"]["ops_counted"], lat["window"])
    rc, hang, _ = report_json("hang", d)
    world_comm = max(hang["comms"], key=lambda c: c["last_seq_issued"])
    check(rc == 0 and world_comm["last_seq_issued"] == 20000 and world_comm["mismatches"] == [], hang["verdict"])
    rc, leaks, _ = report_json("leaks", d)
    piles = leaks["pile_ups"]
    # Named by PyTorch's own function: as symbolized where libtorch_cuda.so is at hand, else as the
    # shim read it from the dynamic symbols at the call.
    check(rc == 1 and len(piles) == 1 and (piles[0]["made"], piles[0]["bursts"]) == (12, 3) and
          "(libtorch_cuda.so)" in piles[0]["created_at"], piles)
    check(sorted({c["state"] for c in leaks["communicators"]}) == ["released_at_exit"] and len(leaks["communicators"]) == 13,
          leaks["communicators"][:2])
    rc, s, _ = report_json("summary", d)
    check("piling up" in s["first_look"] and s["window"]["processes_wrapped"] == 1, s["first_look"])


def test_real_torch_python_sites():
    # PyTorch 2.11 under torchrun on one H200, Python 3.12 (tests/gpu/torch_python_site.py --mode
    # lazy --no-destroy, paths replaced): the world made at its first all-reduce (line 25), 12
    # groups made at their first use (line 37, in warm_up) over 3 cycles and never destroyed.
    d = os.path.join(REAL, "torch_python_site")
    rc, leaks, _ = report_json("leaks", d)
    lines = sorted((c["python_site"][0]["line"], c["python_site"][0]["function"]) for c in leaks["communicators"])
    check(lines == [(25, "<module>")] + [(37, "warm_up")] * 12, lines)
    check(all(c["python_site"][0]["file"].endswith("/tests/gpu/torch_python_site.py") and
              c["created_at"].startswith(f"torch_python_site.py:{c['python_site'][0]['line']} (") and
              "(libtorch_cuda.so)" in c["created_at"] for c in leaks["communicators"]), leaks["communicators"][0])
    callers = {f["line"] for c in leaks["communicators"] for f in c["python_site"][1:]}
    check(callers == {44}, f"warm_up's caller, the loop at line 44: {callers}")
    piles = leaks["pile_ups"]
    check(rc == 1 and len(piles) == 1 and piles[0]["made"] == 12 and piles[0]["created_at"].startswith("torch_python_site.py:37 (warm_up)"),
          piles)
    rc, s, _ = report_json("summary", d)
    check("made at torch_python_site.py:37 (warm_up)" in s["first_look"], s["first_look"])


def test_unknown_report_is_refused():
    # A typo must not be read as a folder (which would analyse whatever ./ncclwatch holds).
    p = report("lekas", tempdir())
    check(p.returncode == 2 and p.stdout == "" and "did you mean 'leaks'" in p.stderr, (p.returncode, p.stdout, p.stderr))
    p = report("--version")
    check(p.returncode == 0 and "trace format" in p.stdout, p.stdout)
    # What --version says it reads is what it reads: every corpus file of a format in that range is
    # read, and each older one is refused, naming its format.
    oldest, newest = map(int, re.search(r"reads formats (\d+) to (\d+)", p.stdout).groups())
    check(f"trace format {newest}," in p.stdout, p.stdout)
    seen = set()
    for path in glob.glob(os.path.join(CORPUS, "*.nwt")) + glob.glob(os.path.join(REAL, "*", "*.nwt")):
        version = struct.unpack_from("<I", open(path, "rb").read(16), 8)[0]
        d = report("dump", path)
        if version < oldest:
            check(d.returncode == 2 and f"trace format {version}, older than this reader reads ({oldest} to {newest})" in d.stderr,
                  (path, d.returncode, d.stderr))
        elif version <= newest:
            check("trace format" not in d.stderr, (path, version, d.returncode, d.stderr[-300:]))
        seen.add(version)
    check({oldest - 1, newest} <= seen, f"the corpus holds a file on each side of the range: {sorted(seen)}")
    p = report("--help")
    check(p.returncode == 0 and "Examples" in p.stdout and "Exit status" in p.stdout, p.stdout)
    # Every report takes --json; dump takes a job folder as well as files.
    d = job("clean")
    p = report("dump", d)
    check(p.returncode == 0 and p.stdout.count('"type":"file_header"') == 2, p.stdout[:300])
    out = os.path.join(d, "t.json")
    p = report("timeline", "--json", d, "-o", out)
    check(p.returncode == 0 and "traceEvents" in json.load(open(out)), p.stderr)


def test_launcher_folder_reads_its_newest_job():
    # `ncclwatch run` writes ./ncclwatch/job-<id>: two jobs must never read as one.
    root = tempdir()
    older, newer = os.path.join(root, "job-100"), os.path.join(root, "job-200")
    subprocess.run([GEN, "clean", older], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([GEN, "straggler", newer], check=True, stdout=subprocess.DEVNULL)
    os.utime(older, (1_000_000_000, 1_000_000_000))
    rc, s, err = report_json("summary", root)
    check(s["traces"] == 4 and "job-200, the newest of 2 jobs" in err, (s["traces"], err))
    rc, s, err = report_json("summary", "--all", root)
    check(s["traces"] == 6 and "all 2 jobs" in err, (s["traces"], err))
    # A later job none of whose processes called NCCL (an empty folder) never hides the real one.
    os.makedirs(os.path.join(root, "job-300"))
    rc, s, err = report_json("summary", root)
    check(rc == 0 and s["traces"] == 4 and "job-200, the newest of 2 jobs" in err and "1 job folder(s)" in err,
          (rc, s.get("traces"), err))
    # Any other tree is not swept: a folder's own trace files only.
    tree = tempdir()
    subprocess.run([GEN, "clean", os.path.join(tree, "somewhere", "deep")], check=True, stdout=subprocess.DEVNULL)
    p = report("summary", tree)
    check(p.returncode == 2 and "subfolders are not searched" in p.stderr, (p.returncode, p.stderr))


def test_timeline_one_slice_per_op():
    d = job("straggler")
    out = os.path.join(d, "timeline.json")
    p = report("timeline", d, "-o", out)
    check(p.returncode == 0, p.stderr)
    with open(out) as f:
        t = json.load(f)
    slices = [e for e in t["traceEvents"] if e.get("ph") == "X" and "seq" in e.get("args", {})]
    check(len(slices) == 4 * 60, len(slices))
    check(all({"seq", "bytes", "comm"} <= set(e["args"]) for e in slices), slices[0])
    check(sorted({e["args"]["seq"] for e in slices}) == list(range(1, 61)), "seqs")
    check("ends of the same collectives" in t["otherData"]["clock_alignment"], t["otherData"])
    # Aligned clocks: the ends of seq 10 coincide on all four ranks, though node1's wall clock is off.
    ends = [e["ts"] + e["dur"] for e in slices if e["args"]["seq"] == 10]
    check(max(ends) - min(ends) < 50, ends)
    names = [e for e in t["traceEvents"] if e.get("name") == "process_name"]
    check(len(names) == 4, names)
    check(all(re.fullmatch(r"rank \d \(node\d pid \d+\)", e["args"]["name"]) for e in names), names)
    check(not t["otherData"]["tracks"].endswith("J"), t["otherData"])
    inits = [e for e in t["traceEvents"] if e.get("name", "").startswith("ncclCommInitRank")]
    check(len(inits) == 4, inits)


def test_latency_rows_and_bandwidth():
    d = job("clean")
    rc, out, _ = report_json("latency", d)
    check(rc == 0, rc)
    rows = {(r["op"], r["bytes"]): r for r in out["rows"]}
    ar = rows[("ncclAllReduce", 4 << 20)]
    # Each rank's first call is apart: 2 first calls, 14 steady samples.
    check(ar["calls"] == 8 and ar["samples"] == 14 and ar["first_calls"]["samples"] == 2 and ar["timing"] == "gpu", ar)
    check(ar["p50_us"] <= ar["p90_us"] <= ar["p99_us"] <= ar["max_us"], ar)
    check(abs(ar["busbw_gbps"] - ar["algbw_gbps"] * 2 * (2 - 1) / 2) < 1e-9, ar)
    # bandwidth from the median, as nccl-tests reports a typical iteration
    check(abs(ar["algbw_gbps"] - (4 << 20) / (ar["p50_us"] * 1e-6) / 1e9) < 0.01 * ar["algbw_gbps"], ar)
    # all-gather: sendcount 2^18 floats x 2 ranks = 2 MiB, factor (n-1)/n
    # One call per rank: all of it is first calls, so no steady state and no bandwidth to claim.
    ag = rows[("ncclAllGather", 2 << 20)]
    check(ag["calls"] == 1 and ag["first_calls"]["samples"] == 2 and ag["p50_us"] is None and ag["busbw_gbps"] is None, ag)
    bc = rows[("ncclBroadcast", 1 << 18)]
    check(bc["busbw_gbps"] is None and bc["first_calls"]["max_us"] > 0, bc)
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
    # enqueue times are not op times: no bandwidth from them
    check(out["rows"][0]["algbw_gbps"] is None and out["rows"][0]["busbw_gbps"] is None, out["rows"])
    text = report("latency", d).stdout
    check("host (enqueue time)" in text, text)
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
    struct.pack_into("<III", header, 8, 1000, 1000, 4096)  # a format far ahead of any reader
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


# --format text|json|csv: one spelling across the reports with tables ---------------------------

def report_csv(*args):
    """(exit status, rows as csv.reader reads them, header first): the bytes as written, with no
    newline translation, so that a CR inside a field reaches the reader."""
    p = run_raw(list(args))
    check(0 <= p.returncode < 3 and p.stdout, (args, p.returncode, p.stderr))
    return p.returncode, list(csv.reader(io.StringIO(p.stdout.decode("utf-8"), newline="")))


def as_dicts(rows):
    header, body = rows[0], rows[1:]
    check(all(len(r) == len(header) for r in body), rows)
    return [dict(zip(header, r)) for r in body]


def hang_findings_from_json(out):
    """(comm, finding, first seq, last seq) for each finding of `hang --json`, as the CSV names them."""
    found = []
    for c in out["comms"]:
        if c["absent_count"]:
            found.append((c["comm"], "absent_rank", "", ""))
        found += [(c["comm"], "missing_rank", str(m["first_missing_seq"]), str(m["first_missing_seq"])) for m in c["missing"]]
        found += [(c["comm"], "never_completed", str(m["from_seq"]), str(m["to_seq"])) for m in c["incomplete"]]
        found += [(c["comm"], "mismatch", str(m["seq"]), str(m["seq"])) for m in c["mismatches"]]
        if c.get("mismatches_not_detailed"):
            found.append((c["comm"], "mismatch_not_detailed", "", ""))
        found += [(c["comm"], "divergence", str(d["from_seq"]), str(d["to_seq"])) for d in c["divergence"]]
        found += [(c["comm"], "stall", str(s["seq"]), str(s["seq"])) for s in c["stalls"]]
        found += [(c["comm"], "p2p_unmatched", "", "") for _ in c["p2p_unmatched"]]
        found += [(c["comm"], "straggler", "", "") for r in c["stragglers"]["ranks"] if r["finding"]]
    found += [("", "environment", "", "") for _ in out["environment"]]
    return found


def test_csv_tables_agree_with_json():
    for scenario in ("clean", "count_mismatch_then_stop", "skip_interleaved_4", "straggler", "env_diff", "html_demo"):
        d = job(scenario)
        # hang: one row per finding, in hang --json's order, with its seqs and exit status
        rc_json, out, _ = report_json("hang", d)
        rc, rows = report_csv("hang", "--format", "csv", d)
        check(rows[0] == ["comm", "name", "finding", "first_seq", "last_seq", "ranks", "detail"], rows[0])
        found = [(r["comm"], r["finding"], r["first_seq"], r["last_seq"]) for r in as_dicts(rows)]
        check(rc == rc_json and found == hang_findings_from_json(out), (scenario, rc, rc_json, found))
        names = {c["comm"]: c.get("name", "") for c in out["comms"]}
        check(all(r["name"] == names.get(r["comm"], "") and r["detail"] for r in as_dicts(rows)), (scenario, rows))
        missing = [(r["ranks"], r["first_seq"]) for r in as_dicts(rows) if r["finding"] == "missing_rank"]
        check(missing == [(str(m["rank"]), str(m["first_missing_seq"])) for c in out["comms"] for m in c["missing"]], missing)
        # leaks: one row per leaked rank instance (and unreleased resource), as leaks --json lists them
        rc_json, out, _ = report_json("leaks", d)
        rc, rows = report_csv("leaks", "--format", "csv", d)
        leaks = as_dicts(rows)
        check(rc == rc_json and len(leaks) == len(out["leaks"]), (scenario, rc, rc_json, len(leaks), len(out["leaks"])))
        for row, leak in zip(leaks, out["leaks"]):
            check((row["kind"], row["comm"], row["rank"], row["state"], row["host"], row["pid"], row["trace"]) ==
                  ("communicator", leak["comm"], str(leak["rank"]), leak["state"], leak["host"], str(leak["pid"]),
                   leak["trace"]), (row, leak))
        # latency: the same rows as latency --json
        _, out, _ = report_json("latency", d)
        rc, rows = report_csv("latency", "--format", "csv", d)
        lat = as_dicts(rows)
        check(rc == 0 and [(r["comm"], r["op"], r["bytes"], r["calls"], r["timing"]) for r in lat] ==
              [(r["comm"], r["op"], str(r["bytes"]), str(r["calls"]), r["timing"]) for r in out["rows"]], (scenario, lat))
    # What each scenario is known to hold, so that agreeing on nothing cannot pass.
    _, rows = report_csv("hang", "--format", "csv", job("count_mismatch_then_stop"))
    kinds = [r["finding"] for r in as_dicts(rows)]
    check(kinds.count("mismatch") == 1 and kinds.count("missing_rank") == 1 and kinds.count("stall") == 3, kinds)
    mismatch = next(r for r in as_dicts(rows) if r["finding"] == "mismatch")
    check((mismatch["first_seq"], mismatch["ranks"]) == ("3", "1") and "count" in mismatch["detail"], mismatch)
    _, rows = report_csv("hang", "--format", "csv", job("skip_interleaved_4"))
    div = [(r["name"], r["first_seq"], r["last_seq"], r["ranks"]) for r in as_dicts(rows) if r["finding"] == "divergence"]
    check(("world", "6", "10", "1") in div, div)
    _, rows = report_csv("leaks", "--format", "csv", job("html_demo"))
    check(rows[1:] and {r["state"] for r in as_dicts(rows)} == {"leaked"}, rows)


def test_csv_hostile_name_round_trips():
    d = tempdir()
    hostile = 'tp,"world"\r\nrank,0'
    with open(os.path.join(d, "t.nwt"), "wb") as f:
        f.write(craft_trace.leaked_comm_named(hostile.encode()))
    for args in (["leaks", "--format", "csv", d], ["leaks", "--format", "csv", "--no-symbols", d]):
        rc, rows = report_csv(*args)
        leaks = as_dicts(rows)
        check(rc == 1 and len(leaks) == 1, (rc, rows))
        check(leaks[0]["name"] == hostile and leaks[0]["kind"] == "communicator" and leaks[0]["state"] == "leaked",
              leaks[0])
    rc, out, _ = report_json("leaks", d)
    check(out["leaks"][0]["name"] == hostile and leaks[0]["comm"] == out["leaks"][0]["comm"], out["leaks"][0])


def test_format_conflicts_refused():
    d = job("count_mismatch_then_stop")
    for sub in ("summary", "leaks", "latency", "hang"):
        # --format json is --json; --format text the default
        check(report(sub, "--format", "json", d).stdout == report(sub, "--json", d).stdout, sub)
        check(report(sub, "--format", "text", d).stdout == report(sub, d).stdout, sub)
        p = report(sub, "--json", "--format", "json", d)
        check(p.returncode == report(sub, "--json", d).returncode and json.loads(p.stdout), (sub, p.returncode, p.stderr))
        p = report(sub, "--json", "--format", "csv", d)
        check(p.returncode == 2 and p.stdout == "" and "--json and --format csv" in p.stderr and
              "different output formats" in p.stderr, (sub, p.returncode, p.stdout[:200], p.stderr))
        p = report(sub, "--format", "xml", d)
        check(p.returncode == 2 and p.stdout == "", (sub, p.returncode))
    for args in (["--csv", "--json"], ["--csv", "--format", "text"], ["--csv", "--format", "json"]):
        p = report("latency", *args, d)
        check(p.returncode == 2 and p.stdout == "" and "different output formats" in p.stderr, (args, p.stderr))
    # The summary is no table: refused, naming the reports that have one, before reading anything.
    for args in (["summary", "--format", "csv", d], ["--format", "csv", d]):
        p = report(*args)
        check(p.returncode == 2 and p.stdout == "" and all(r in p.stderr for r in ("leaks", "latency", "hang")),
              (args, p.returncode, p.stderr))
    p = report("--help")
    check("--format csv" in p.stdout, p.stdout)


def test_latency_csv_alias_byte_identical():
    for d in (job("clean"), job("host_timing"), os.path.join(REAL, "straggler")):
        alias, spelled = run_raw(["latency", "--csv", d]), run_raw(["latency", "--format", "csv", d])
        check(alias.returncode == spelled.returncode == 0 and alias.stdout == spelled.stdout, (d, alias.stdout, spelled.stdout))
        check(alias.stdout.startswith(b"comm,op,bytes,nranks,calls,p50_us,p90_us,p99_us,max_us,algbw_gbps,busbw_gbps,"
                                      b"first_call_max_us,timing\n"), alias.stdout[:200])


# Hostile input: what a report must survive -----------------------------------------------------

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def run_raw(args, timeout=60):
    """The report's bytes, unchecked: the tests below judge the exit status themselves."""
    return subprocess.run([REPORT, *args], capture_output=True, timeout=timeout)


def check_survived(p, what):
    """Exited on its own with a status of the contract: no abort, no signal, no uncaught exception."""
    check(0 <= p.returncode < 3 and b"terminate called" not in p.stderr,
          (what, p.returncode, p.stderr.decode(errors="replace")[-2000:]))


def check_all_reports(path, what, dump_file):
    """Every report on `path` exits 0..2; what claims to be JSON parses (and so is valid UTF-8)."""
    outputs = {}
    timeline = os.path.join(tempdir(), "timeline.json")
    for sub in (["summary"], ["summary", "--json"], ["leaks"], ["leaks", "--json"], ["hang", "--json"],
                ["latency", "--json"], ["timeline", "-o", timeline], ["metrics"]):
        p = run_raw([*sub, path])
        check_survived(p, (what, sub))
        if sub == ["metrics"] and p.returncode == 0 and shutil.which("promtool"):
            promtool = subprocess.run(["promtool", "check", "metrics"], input=p.stdout, capture_output=True)
            check(promtool.returncode == 0, (what, promtool.stdout, promtool.stderr))
        if "--json" in sub:
            outputs[sub[0]] = json.loads(p.stdout.decode("utf-8"))
    with open(timeline, "rb") as f:
        json.loads(f.read().decode("utf-8"))
    p = run_raw(["dump", dump_file])
    check_survived(p, (what, "dump"))
    for line in p.stdout.decode("utf-8").splitlines():
        json.loads(line)
    return outputs


def test_not_utf8_never_aborts():
    root = tempdir().encode()
    # A trace folder whose name holds a Latin-1 byte (a file name is bytes, not text).
    latin1 = os.path.join(root, b"job\xe9")
    os.mkdir(latin1)
    with open(os.path.join(latin1, b"r\xe9.nwt"), "wb") as f:
        f.write(craft_trace.leaked_comm_named(b"world"))
    # A communicator name cut in the middle of a character ("w\xc3" of "w\xc3\xb6rld").
    cut = os.path.join(root, b"cut")
    os.mkdir(cut)
    with open(os.path.join(cut, b"a.nwt"), "wb") as f:
        f.write(craft_trace.leaked_comm_named("w\u00f6rld".encode()[:2]))
    # Two flipped bytes in the file header's host field.
    host = os.path.join(root, b"host")
    os.mkdir(host)
    data = bytearray(craft_trace.leaked_comm_named(b"world"))
    data[craft_trace.HOST_OFFSET + 1:craft_trace.HOST_OFFSET + 3] = b"\xff\xfe"
    with open(os.path.join(host, b"a.nwt"), "wb") as f:
        f.write(data)

    out = check_all_reports(latin1, "latin-1 folder", os.path.join(latin1, b"r\xe9.nwt"))
    check(out["leaks"]["leaks"][0]["trace"].endswith("job\ufffd/r\ufffd.nwt"), out["leaks"]["leaks"][0]["trace"])
    out = check_all_reports(cut, "name cut mid-character", os.path.join(cut, b"a.nwt"))
    check(out["leaks"]["leaks"][0]["name"] == "w\ufffd", out["leaks"]["leaks"][0])
    out = check_all_reports(host, "host bytes flipped", os.path.join(host, b"a.nwt"))
    check(out["leaks"]["leaks"][0]["host"] == "n\ufffd\ufffde0", out["leaks"]["leaks"][0])


def control_characters_in(data):
    """The control characters of `data` (bytes) a terminal would act on: C0 but the newline, DEL,
    C1 (U+0080..U+009F) and bytes that are not UTF-8 (a terminal may take them as C1)."""
    text = data.decode("utf-8", "surrogateescape")
    return sorted({ch for ch in text if (ord(ch) < 0x20 and ch != "\n") or 0x7F <= ord(ch) <= 0x9F or
                   0xDC80 <= ord(ch) <= 0xDCFF})


def test_control_characters_escaped_in_text():
    # Two ranks whose host, communicator name, call site, NCCL path and a setting hold terminal
    # escape sequences, a newline that forges a line, DEL and C1's CSI; beside them a trace whose
    # file name holds them. The text reports showed them raw: the reader's terminal was retitled.
    d = tempdir().encode()
    for rank in (0, 1):
        with open(os.path.join(d, b"r%d.nwt" % rank), "wb") as f:
            f.write(craft_trace.control_characters(rank=rank))
    with open(os.path.join(d, b"bad" + craft_trace.ESCAPES.replace(b"\n", b"") + b"\xff.nwt"), "wb") as f:
        f.write(b"not a trace")
    texts = [["summary"], ["leaks"], ["leaks", "--no-symbols"], ["hang"], ["latency"], ["advice"]]
    for sub in texts:
        p = run_raw([*sub, d])
        check_survived(p, sub)
        check(not control_characters_in(p.stdout) and not control_characters_in(p.stderr),
              (sub, control_characters_in(p.stdout), control_characters_in(p.stderr), p.stdout[-3000:], p.stderr))
        check(b"not an ncclwatch trace" in p.stderr and b"bad\\x1b]0;owned\\x07" in p.stderr,
              (sub, p.stderr))
    leaks = run_raw(["leaks", d]).stdout.decode()
    escaped = "\\x1b]0;owned\\x07\\x1b[31m\\x0aFAKE: all clear\\x7f\\u009b2J"
    check(f'"tp{escaped}"' in leaks and f"train.py:7 (main{escaped})" in leaks, leaks)
    check(not any(line.startswith("FAKE") for line in leaks.splitlines()), leaks)
    hang = run_raw(["hang", d]).stdout.decode()
    check(f"Ring{escaped}0" in hang and f"tp{escaped}" in hang, hang)
    # JSON and CSV keep the text itself (their writers escape it for their readers).
    rc, out, _ = report_json("leaks", d)
    check(out["leaks"][0]["name"] == "tp" + craft_trace.ESCAPES.decode(), out["leaks"][0])
    check(out["leaks"][0]["host"] == "node" + craft_trace.ESCAPES[:40].decode(), out["leaks"][0])
    rows = list(csv.DictReader(io.StringIO(run_raw(["leaks", "--format", "csv", d]).stdout.decode(), newline="")))
    check(rows[0]["name"] == "tp" + craft_trace.ESCAPES.decode(), rows)


def test_flipped_bytes_never_crash():
    d = job("clean")
    original = open(os.path.join(d, sorted(os.listdir(d))[0]), "rb").read()
    # Flips land in the bytes a reader interprets: the header's fields (not its zero padding) and
    # the records.
    meaningful = list(range(0, craft_trace.HOST_OFFSET + 64)) + list(range(craft_trace.HEADER_BYTES, len(original)))
    rng = random.Random(20240611)
    mutant = os.path.join(tempdir(), "mutant.nwt")
    failures = []
    for trial in range(300):
        data = bytearray(original)
        flips = [(rng.choice(meaningful), rng.randrange(1, 256)) for _ in range(2)]
        for at, bits in flips:
            data[at] ^= bits
        with open(mutant, "wb") as f:
            f.write(data)
        for sub in (["leaks", "--json", mutant], ["dump", mutant]):
            p = run_raw(sub, timeout=30)
            if p.returncode < 0 or p.returncode >= 3 or b"terminate called" in p.stderr:
                failures.append((trial, flips, sub[0], p.returncode, p.stderr.decode(errors="replace")[-300:]))
    check(not failures, f"{len(failures)} of 600 runs crashed, e.g. {failures[:3]}")


def module_trace(folder, module_path):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "t.nwt")
    with open(path, "wb") as f:
        f.write(craft_trace.leaked_comm_in_module(module_path))
    return path


def strace_works():
    """strace is installed and may trace here (containers often forbid ptrace)."""
    if not shutil.which("strace"):
        return False
    return subprocess.run(["strace", "-qq", "-o", os.devnull, "true"], capture_output=True).returncode == 0


def opened_paths(args, wanted):
    """Runs the report under strace; the open calls that name `wanted`."""
    log = os.path.join(tempdir(), "strace.log")
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", log, REPORT, *args],
                   capture_output=True, timeout=60)
    with open(log) as f:
        return [line for line in f if wanted in line]


def test_module_paths_not_regular_files():
    d = tempdir()
    fifo = os.path.join(d, "module.fifo")
    os.mkfifo(fifo)
    not_elf = os.path.join(d, "notes.txt")
    with open(not_elf, "w") as f:
        f.write("not a program\n" * 100)
    cases = {"fifo": fifo, "device": "/dev/zero", "directory": d, "not_elf": not_elf}
    for what, module_path in cases.items():
        folder = os.path.join(d, what)
        module_trace(folder, module_path.encode())
        for sub in (["leaks"], ["leaks", "--json"]):
            try:
                p = subprocess.run([REPORT, *sub, folder], capture_output=True, text=True, timeout=20)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{what}: `{' '.join(sub)}` still running after 20 s (it opened {module_path})")
            check(p.returncode == 1, (what, sub, p.returncode, p.stderr))
            # The frame is named by its module and offset, not by anything read from that path.
            name = os.path.basename(module_path)
            check(f"{name}+0x1234" in p.stdout, (what, sub, p.stdout))
        # Reports that show no call sites never open module files.
        for sub in (["summary"], ["hang"], ["latency"], ["leaks", "--no-symbols"],
                    ["timeline", "-o", os.path.join(d, "t.json")]):
            check_survived(run_raw([*sub, folder], timeout=20), (what, sub))
    if strace_works():
        fifo_folder = os.path.join(d, "fifo")
        for sub in (["summary"], ["hang"], ["latency"], ["leaks", "--no-symbols"]):
            check(not opened_paths([*sub, fifo_folder], fifo), (sub, "opened the module file"))
        opens = opened_paths(["leaks", fifo_folder], fifo)
        check(opens and all("O_NONBLOCK" in o for o in opens), opens)
    # A module that is a real program is still symbolized, through the descriptor opened above.
    nm = shutil.which("nm")
    if nm:
        symbols = subprocess.run([nm, "--defined-only", REPORT], capture_output=True, text=True).stdout.split("\n")
        main = [int(line.split()[0], 16) for line in symbols if line.endswith(" T main")]
        if main:
            folder = os.path.join(d, "program")
            os.makedirs(folder)
            base = 0x7f0000000000
            with open(os.path.join(folder, "t.nwt"), "wb") as f:
                f.write(craft_trace.leaked_comm_in_module(REPORT.encode(), base=base, offset=main[0] + 1))
            p = subprocess.run([REPORT, "leaks", folder], capture_output=True, text=True, timeout=20)
            check("created at main" in p.stdout, p.stdout)


# Bounded memory, with room for a sanitizer runtime's own (shadow memory, TSan's history).
RSS_LIMIT_MB = 1200 if os.environ.get("NCCLWATCH_TEST_SANITIZER") else 300


def run_measured(args):
    """Runs the report as the only child of a fresh process; returns (result, max RSS in MB)."""
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True); "
            "sys.stdout.buffer.write(b'%d %d\\n' % (p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
            "sys.stdout.buffer.write(b'%d\\n' % len(p.stdout)); sys.stdout.buffer.write(p.stderr)")
    p = subprocess.run([sys.executable, "-c", code, REPORT, *args], capture_output=True, timeout=120)
    first, second, stderr = p.stdout.split(b"\n", 2)
    rc, rss_kb = map(int, first.split())
    return rc, rss_kb / 1024, int(second), stderr.decode(errors="replace")


def test_huge_nranks_bounded():
    d = tempdir()
    path = os.path.join(d, "ranks.nwt")
    with open(path, "wb") as f:
        f.write(craft_trace.huge_nranks(comms=50, nranks=1 << 20))
    for sub in (["hang", "--json"], ["summary", "--json"], ["hang"], ["latency", "--json"], ["leaks", "--json"]):
        rc, rss_mb, out_bytes, err = run_measured([*sub, d])
        check(rc in (0, 1), (sub, rc, err))
        check(rss_mb < RSS_LIMIT_MB, (sub, f"max RSS {rss_mb:.0f} MB from a {os.path.getsize(path)} B file"))
        check(out_bytes < 1 << 20, (sub, f"{out_bytes} B of output"))
        check(path in err and "1048576" in err and "nranks" in err, (sub, err))
    # The implausible size is taken as unknown.
    rc, out, _ = report_json("leaks", d)
    check(len(out["leaks"]) == 50 and all(e["nranks"] == -1 for e in out["leaks"]), out["leaks"][0])
    # A plausible but large size: absent ranks are counted, listed only in part.
    with open(path, "wb") as f:
        f.write(craft_trace.huge_nranks(comms=50, nranks=200000))
    rc, rss_mb, out_bytes, err = run_measured(["hang", "--json", d])
    check(rc == 1 and rss_mb < RSS_LIMIT_MB and out_bytes < 1 << 20, (rc, rss_mb, out_bytes, err))
    rc, out, _ = report_json("hang", d)
    c = out["comms"][0]
    check(c["absent_count"] == 199999 and c["absent_ranges"] == [[1, 199999]], {k: c[k] for k in c if "absent" in k})
    check(c["absent_ranks"][:3] == [1, 2, 3], c["absent_ranks"][:3])


def test_seq_jumps_bounded():
    d = tempdir()
    path = os.path.join(d, "jumps.nwt")
    with open(path, "wb") as f:
        f.write(craft_trace.seq_jumps(records=256))
    rc, rss_mb, out_bytes, err = run_measured(["hang", "--json", d])
    check(rc in (0, 1) and rss_mb < RSS_LIMIT_MB, (rc, f"max RSS {rss_mb:.0f} MB from a {os.path.getsize(path)} B file", err))
    check(path in err and "seq" in err, err)
    # The divergence pass reads two ranks' files again: their seqs must not size its tables either.
    d = tempdir()
    for rank in (0, 1):
        with open(os.path.join(d, f"r{rank}.nwt"), "wb") as f:
            f.write(craft_trace.divergence_seq_jumps(rank, records=200))
    rc, rss_mb, out_bytes, err = run_measured(["hang", "--json", d])
    check(rc in (0, 1) and rss_mb < RSS_LIMIT_MB, (rc, f"max RSS {rss_mb:.0f} MB", err))


def test_init_all_call_site_copies_bounded():
    # One 400 KB ncclCommInitAll call site, 2000 communicators made by it: each keeps what the shim
    # could have written (64 frames, short names), not 2000 copies of the record's claims.
    d = tempdir()
    with open(os.path.join(d, "init_all.nwt"), "wb") as f:
        f.write(craft_trace.init_all_ends(ends=2000))
    for sub in (["summary"], ["leaks", "--json"]):
        rc, rss_mb, out_bytes, err = run_measured([*sub, d])
        check(rc == 1 and rss_mb < RSS_LIMIT_MB, (sub, rc, f"max RSS {rss_mb:.0f} MB", err))
    rc, out, _ = report_json("leaks", d)
    check(len(out["leaks"]) == 2000 and all(len(e["stack"]) == 64 and len(e["name"]) == 1024 for e in out["leaks"]),
          out["leaks"][0])


def test_header_only_trace_named():
    header_only = os.path.join(CORPUS, "header_only.nwt")
    timeline = os.path.join(tempdir(), "t.json")
    for sub in (["summary"], ["leaks"], ["leaks", "--json"], ["hang"], ["latency"], ["timeline", "-o", timeline]):
        p = report(*sub, header_only)
        check(p.returncode == 2, (sub, p.returncode, p.stdout))
        check(header_only in p.stderr and "no records" in p.stderr, (sub, p.stderr))
    dump = report("dump", header_only)
    check(dump.returncode == 2 and "no records" in dump.stderr, (dump.returncode, dump.stderr))
    check([json.loads(line)["type"] for line in dump.stdout.splitlines()] == ["file_header"], dump.stdout)
    # Beside usable traces it is named, and the job is judged on the others.
    d = job("clean")
    shutil.copy(header_only, os.path.join(d, "died-early.nwt"))
    for sub in ("summary", "leaks"):
        p = report(sub, d)
        check(p.returncode == 0 and "died-early.nwt" in p.stderr and "no records" in p.stderr, (sub, p.returncode, p.stderr))


# Hostile files in a shared trace folder: what is no regular file, a reference past anything the
# file holds, a ring larger than its chunks, a sparse file. Each must cost a named problem and
# bounded memory and time, never a hang.

def run_within(args, seconds):
    """Runs the report as the only child of a fresh process, killed after `seconds`; returns (exit
    status, None when it had to be killed; max RSS in MB; stderr)."""
    code = ("import resource, subprocess, sys\n"
            "try:\n"
            "    p = subprocess.run(sys.argv[2:], capture_output=True, timeout=float(sys.argv[1]))\n"
            "    rc, err = p.returncode, p.stderr\n"
            "except subprocess.TimeoutExpired as e:\n"
            "    rc, err = -1000, e.stderr or b''\n"
            "sys.stdout.buffer.write(b'%d %d\\n' % (rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + err)")
    p = subprocess.run([sys.executable, "-c", code, str(seconds), REPORT, *args], capture_output=True,
                       timeout=seconds + 60)
    first, stderr = p.stdout.split(b"\n", 1)
    rc, rss_kb = map(int, first.split())
    return (None if rc == -1000 else rc), rss_kb / 1024, stderr.decode(errors="replace")


def every_report(out_dir):
    """Every report and output format (timeline and html write into `out_dir`)."""
    return [["summary"], ["summary", "--json"], ["leaks"], ["leaks", "--json"], ["leaks", "--format", "csv"],
            ["latency"], ["latency", "--json"], ["latency", "--csv"], ["hang"], ["hang", "--json"],
            ["hang", "--format", "csv"], ["timeline", "-o", os.path.join(out_dir, "t.json")],
            ["html", "-o", os.path.join(out_dir, "r.html")], ["metrics"], ["dump"]]


def test_fifo_inputs_named_never_waited_on():
    # A FIFO among a job's traces and one named on the command line: opening either to read would
    # wait for a writer that never comes.
    d = job("clean")
    good = os.path.join(d, sorted(os.listdir(d))[0])
    in_folder = os.path.join(d, "stuck.nwt")
    os.mkfifo(in_folder)
    named = os.path.join(tempdir(), "named.nwt")
    os.mkfifo(named)
    for sub in every_report(tempdir()):
        inputs = [named, good] if sub == ["dump"] else [d, named]
        try:
            p = subprocess.run([REPORT, *sub, *inputs], capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"`{' '.join(sub)}` still waiting after 10 s: it opened a FIFO to read")
        # The readable traces are used: the clean job is judged clean.
        check(p.returncode == (2 if sub == ["dump"] else 0), (sub, p.returncode, p.stderr))
        check(f"{named}: not a regular file (a FIFO)" in p.stderr, (sub, p.stderr))
        if sub == ["dump"]:
            check('"type":"process_end"' in p.stdout, p.stdout[-500:])
        else:
            check(f"{in_folder}: not a regular file (a FIFO)" in p.stderr, (sub, p.stderr))


def test_ref_indices_bounded_by_the_file():
    # Four 5 KB traces whose communicator and thread references name index 2^24 - 1: tables sized
    # by the largest index took ~850 MB per file read.
    d = tempdir()
    for i in range(4):
        with open(os.path.join(d, f"r{i}.nwt"), "wb") as f:
            f.write(craft_trace.largest_ref_index())
    for sub in (["leaks", "--json"], ["summary"], ["hang", "--json"], ["dump"]):
        inputs = [os.path.join(d, "r0.nwt")] if sub == ["dump"] else [d]
        rc, rss_mb, err = run_within([*sub, *inputs], 20)
        check(rc in (0, 1), (sub, rc, err))
        check(rss_mb < RSS_LIMIT_MB, (sub, f"max RSS {rss_mb:.0f} MB from four 5 KB files"))
    # The one ring op still names its communicator and thread.
    dump = report("dump", os.path.join(d, "r0.nwt"))
    ops = [json.loads(line) for line in dump.stdout.splitlines() if '"type":"op"' in line]
    check(len(ops) == 1 and ops[0]["comm_id"] == "a11ce00000000001" and ops[0]["tid"] == 4242, ops)


def sparse_supported(path):
    """Whether the folder of `path` keeps holes (so that a test may make a file of gigabytes in a few KB)."""
    with open(path, "wb") as f:
        f.write(b"x")
        f.seek(64 << 20)
        f.write(b"x")
    sparse = os.stat(path).st_blocks * 512 < 1 << 20
    os.unlink(path)
    if not sparse:
        print("skipped: this file system fills holes in", os.path.dirname(path))
    return sparse


def test_ring_claims_bounded_by_its_chunks():
    # One ring chunk of 2^20 slots (64 MiB, sparse: only its last slot written) claiming a ring 4096
    # times its size: visiting every position the ring claims took over 20 s.
    path = os.path.join(tempdir(), "ring.nwt")
    if not sparse_supported(path):
        return
    before, hole, after = craft_trace.ring_claiming_more_chunks_parts(slots=1 << 20)
    with open(path, "wb") as f:
        f.write(before)
        f.seek(hole, os.SEEK_CUR)
        f.write(after)
    for sub in (["leaks", "--json"], ["summary"], ["hang", "--json"], ["latency", "--json"], ["dump"]):
        rc, rss_mb, err = run_within([*sub, path], 10)
        check(rc is not None, (sub, "still running after 10 s"))
        check(rc in (0, 1) and rss_mb < RSS_LIMIT_MB, (sub, rc, f"max RSS {rss_mb:.0f} MB", err))
    dump = report("dump", path)
    ops = [json.loads(line) for line in dump.stdout.splitlines() if '"type":"op"' in line]
    check(len(ops) == 1 and ops[0]["comm_id"] == "a11ce00000000001", ops)
    rc, out, _ = report_json("leaks", path)
    check(rc == 0 and [c["state"] for c in out["communicators"]] == ["destroyed"], out)


def test_sparse_file_bounded_by_its_data():
    # Sparse files of 4 GiB: a trace followed by a hole (as `truncate -s 4G` leaves it), and one whose
    # last records lie past a 4 GiB hole (a copy that makes a trace sparse keeps records after holes).
    d = tempdir()
    if not sparse_supported(os.path.join(d, "probe")):
        return
    comm_id = 0xA11CE00000000001
    leaked = os.path.join(d, "leaked.nwt")
    with open(leaked, "wb") as f:
        f.write(craft_trace.leaked_comm_named(b"world"))
        f.truncate(4 << 30)
    destroyed = os.path.join(d, "destroyed.nwt")
    with open(destroyed, "wb") as f:
        f.write(craft_trace.file_header() + craft_trace.process() + craft_trace.comm_created(1, 0xC0FFEE, comm_id))
        f.seek(4 << 30, os.SEEK_CUR)
        f.write(craft_trace.comm_destroyed(2, 0xC0FFEE, comm_id) + craft_trace.exit_records())
    for path in (leaked, destroyed):
        for sub in (["leaks", "--json"], ["summary"], ["hang", "--json"], ["dump"]):
            rc, rss_mb, err = run_within([*sub, path], 10)
            check(rc is not None, (path, sub, "still running after 10 s"))
            check(rc in (0, 1) and rss_mb < RSS_LIMIT_MB, (path, sub, rc, f"max RSS {rss_mb:.0f} MB", err))
    rc, out, err = report_json("leaks", leaked)
    check(rc == 1 and [c["state"] for c in out["communicators"]] == ["leaked"], (out, err))
    rc, out, err = report_json("leaks", destroyed)
    check(rc == 0 and [c["state"] for c in out["communicators"]] == ["destroyed"], (out, err))


if __name__ == "__main__":
    run_case(globals())
