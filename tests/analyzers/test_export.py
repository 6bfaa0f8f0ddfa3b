"""ncclwatch-report export: Parquet tables that an independent reader (DuckDB) reads with the types
docs/schema.md gives, whose answers (the queries of python/ncclwatch/queries) are the C++ reports'
answers on the same traces, written the same way twice; and `ncclwatch sql` over them."""
import filecmp
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

from report_harness import GEN, REAL, REPORT, check, report, run_case, tempdir  # noqa: E402

import ncclwatch  # noqa: E402

LAUNCHER = os.path.join(ROOT, "scripts", "ncclwatch")
TABLES = ("ops", "comms", "processes", "resources", "stalls", "environment", "notices", "peers")


def export(*inputs, out=None, extra=()):
    out = out or tempdir()
    p = subprocess.run([REPORT, "export", *inputs, "-o", out, *extra], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, (inputs, p.returncode, p.stdout, p.stderr))
    return out


def rows(out, text):
    return ncclwatch.sql(out, text).to_dict("records")


def null(v):
    """A null cell as a DataFrame gives it: None, <NA> (integers) or NaN."""
    import pandas as pd

    return v is None or bool(pd.isna(v))


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def real_folders():
    return sorted(os.path.join(REAL, d) for d in os.listdir(REAL))


def test_real_traces_agree_with_leaks():
    for folder in real_folders():
        out = export(folder)
        leaks = json.loads(report("leaks", "--json", folder).stdout)
        want = {(l["comm"], l["rank"], l["pid"], l["created_at"]) for l in leaks["leaks"] if l["kind"] == "communicator"}
        got = {(r["comm_id"], r["rank"], r["pid"], r["site"]) for r in rows(out, "SELECT * FROM comms WHERE leaked")}
        check(got == want, (folder, got, want))
        every = {(c["comm"], c["rank"], c["pid"], c["state"]) for c in leaks["communicators"]}
        got = {(r["comm_id"], r["rank"], r["pid"], r["state"]) for r in rows(out, "SELECT * FROM comms")}
        check(got == every, (folder, got, every))
        # The question as the queries folder asks it: the same communicators.
        leaked = rows(out, ncclwatch.query("leaked_comms"))
        check({r["comm_id"] for r in leaked} == {l[0] for l in want}, (folder, leaked))


def memory_rows(folder):
    """`memory --json`'s communicators (its default thresholds), by (pid, comm id, comm rank)."""
    memory = json.loads(report("memory", "--json", folder).stdout)
    return {(c["pid"], c["comm"], c["rank"]): c for c in memory["communicators"]}


def check_memory_agrees(folder, out):
    """The comms table's memory columns are `memory`'s on the same traces, and idle_comms names the
    communicators it finds idle, with their ranks, bytes and longest idle stretch."""
    want = memory_rows(folder)
    comms = rows(out, "SELECT * FROM comms")
    for r in comms:
        m = want.get((r["pid"], r["comm_id"], r["rank"]))
        if m is None:
            check(null(r["held_bytes"]) and null(r["idle_ms"]) and null(r["memory_from"]), (folder, r))
            continue
        check((r["held_bytes"], r["memory_from"], r["memory_ambiguous"], r["set_up_calls"]) ==
              (m["held_bytes"], m["from"], m["shared_gpu"], m["set_up_calls"]), (folder, r, m))
        check(r["suspended"] == (m["suspended"] == "yes") and close(r["idle_ms"], m["idle_s"] * 1e3, 1e-9),
              (folder, r, m))
        check(r["peak_held_bytes"] == max(p["held_bytes"] for p in m["readings"]), (folder, r, m))
    check(sum(1 for r in comms if not null(r["held_bytes"])) == len(want), (folder, len(want)))
    idle = {}
    for m in want.values():
        if m["idle"]:
            idle.setdefault(m["comm"], []).append(m)
    got = {r["comm_id"]: r for r in rows(out, ncclwatch.query("idle_comms"))}
    check(sorted(got) == sorted(idle), (folder, got, idle))
    for comm, ranks in idle.items():
        r = got[comm]
        check(r["ranks_idle"] == len(ranks) and r["held_bytes"] == sum(m["held_bytes"] for m in ranks),
              (folder, r, ranks))
        check(close(r["max_idle_ms"], max(m["idle_s"] for m in ranks) * 1e3, 1e-9), (folder, r, ranks))
    return got


def test_real_traces_agree_with_memory():
    idle = 0
    for folder in real_folders():
        idle += len(check_memory_agrees(folder, export(folder)))
    check(idle >= 1, "no real trace has an idle communicator")  # skip_timed's default_pg: 84 s on 920 MiB


def test_memory_columns_and_idle_comms():
    # A crafted 2-rank job (craft_trace.MEMORY_JOB_COMMS): what each communicator rank held, when it
    # last ran an op, and for how long since, as the job's records make them; idle_comms names the
    # two idle on 256 MiB or more for 60 s or more, largest first, and not `busy` (520 MiB, 10 s
    # since its last op), `suspended` (400 MiB at its peak, 16 MiB since its suspend) or `small`.
    import craft_trace

    mib, s = 1 << 20, 1_000_000_000
    d = tempdir()
    for rank in (0, 1):
        with open(os.path.join(d, f"node0-{4242 + rank}-1.nwt"), "wb") as f:
            f.write(craft_trace.memory_and_idle_comms(rank))
    out = export(d)
    got = {(r["name"], r["rank"]): r for r in rows(out, "SELECT c.*, p.clock_offset_ns FROM comms c JOIN processes p "
                                                        "USING (trace)")}
    check(len(got) == 12, sorted(got))

    made = {name: 5_100_000_000 + i * s // 10 + 300_000 for i, (name, *_) in enumerate(craft_trace.MEMORY_JOB_COMMS)}
    end = craft_trace.MEMORY_JOB_END_S * s
    # name: held MiB, peak MiB, set-up calls, from, suspended, last op (s), idle stretch (ns) on rank 0
    want = {"busy": (520, 520, 1, "ncclCommMemStats", False, 150, 10 * s),
            "idle_destroyed": (300, 300, 0, "free_memory_change", False, 10, 90 * s),
            "unused": (1024, 1024, 0, "ncclCommMemStats", False, None, end - made["unused"]),
            "small": (64, 64, 0, "ncclCommMemStats", False, None, end - made["small"]),
            "suspended": (16, 400, 0, "free_memory_change", True, 7, 153 * s),
            "unmeasured": (None, None, 0, None, False, 12, None)}
    for (name, rank), r in got.items():
        held, peak, set_ups, source, suspended, last_op, idle_ns = want[name]
        if name == "idle_destroyed" and rank == 1:
            idle_ns -= 5 * s  # destroyed 5 s sooner
        mine = tuple(None if null(r[k]) else r[k] for k in ("held_bytes", "peak_held_bytes", "set_up_calls",
                                                             "memory_from", "suspended"))
        in_bytes = [None if v is None else (v + rank) * mib for v in (held, peak)]  # rank r's: r MiB more
        check(mine == (*in_bytes, set_ups, source, suspended), (name, rank, mine, r))
        check(r["memory_ambiguous"] == (name == "idle_destroyed" and rank == 1), (name, rank, r))
        if last_op is None:
            check(null(r["last_op_ns"]), (name, rank, r))
        else:  # on the export's clock: the process's monotonic clock shifted by its offset
            check(r["last_op_ns"] - r["clock_offset_ns"] == last_op * s, (name, rank, r))
        check(null(r["idle_ms"]) if idle_ns is None else close(r["idle_ms"], idle_ns / 1e6, 1e-12), (name, rank, r))
    idle = rows(out, ncclwatch.query("idle_comms"))
    check([(r["name"], r["ranks_idle"], r["held_bytes"], r["ranks_until_end"]) for r in idle] ==
          [("unused", 2, 2049 * mib, 2), ("idle_destroyed", 2, 601 * mib, 0)], idle)
    check(close(idle[0]["max_idle_ms"], (end - made["unused"]) / 1e6, 1e-12) and idle[1]["max_idle_ms"] == 90000, idle)
    # What `memory` says of the same traces, and the question listed with its description.
    check_memory_agrees(d, out)
    check(ncclwatch.queries()["idle_comms"].startswith("Communicators idle on GPU memory"), ncclwatch.queries())


def test_real_traces_agree_with_latency():
    compared = 0
    for folder in real_folders():
        out = export(folder)
        latency = json.loads(report("latency", "--json", folder).stdout)
        sql = {(r["comm_id"], r["op"], r["bytes"]): r for r in rows(out, ncclwatch.query("busbw_per_size"))}
        # The same rows: the report's GPU-timed rows of single ops (a group is a row of its own there).
        gpu_rows = {(r["comm"], r["op"], r["bytes"]) for r in latency["rows"]
                    if r["timing"] == "gpu" and r["busbw_gbps"] is not None and r["op"] != "ncclGroupEnd"}
        check(set(sql) == gpu_rows, (folder, sorted(sql), sorted(gpu_rows)))
        for row in latency["rows"]:
            if row["timing"] != "gpu" or (row["comm"], row["op"], row["bytes"]) not in gpu_rows:
                continue
            mine = sql.get((row["comm"], row["op"], row["bytes"]))
            check(mine, (folder, row, sorted(sql)))
            check(mine["samples"] == row["samples"], (folder, row, mine))
            # The report's percentiles come from a histogram of 1.6 % buckets.
            check(close(mine["p50_us"], row["p50_us"], 0.02), (folder, row, mine))
            check(close(mine["busbw_gbps"], row["busbw_gbps"], 0.02), (folder, row, mine))
            compared += 1
    check(compared >= 4, f"only {compared} GPU-timed rows compared")


def test_loaded_ops_are_the_exports_rows():
    # ncclwatch.load's ops and the export's, on every real job: the same rows, and the same GPU
    # times and timing kinds (both from the tool's one pairing of ops and timings). On FSDP2 a
    # reduce-scatter's start event fires while the all-gather before it still runs: its time is
    # the kernel's own from the all-gather's end, not twice as long.
    compared = 0
    for folder in real_folders():
        exported = ncclwatch.sql(export(folder), "SELECT * FROM ops WHERE op != 'ncclGroupEnd'")
        loaded = ncclwatch.load(folder, symbolize=False).ops
        check(len(exported) == len(loaded), (folder, len(exported), len(loaded)))
        key = ("pid", "comm_id", "rank", "seq", "op", "launch_id", "stream", "count")
        mine = {tuple(r[k] for k in key): r for r in loaded.to_dict("records")}
        for r in exported.to_dict("records"):
            got = mine.get(tuple(r[k] for k in key))
            check(got is not None and got["timing"] == r["timing"], (folder, r, got))
            both_timed = r["timing"] in ("gpu", "gpu_upper_bound")
            check(not both_timed or got["gpu_end_ns"] - got["gpu_begin_ns"] == r["gpu_end_ns"] - r["gpu_begin_ns"],
                  (folder, r, got))
            check(both_timed == (got["gpu_us"] == got["gpu_us"]), (folder, r, got))  # NaN where untimed
            compared += both_timed
    check(compared >= 1000, f"only {compared} GPU-timed ops compared")
    fsdp = ncclwatch.load(os.path.join(REAL, "fsdp2"), symbolize=False).ops
    medians = fsdp[fsdp["timing"] == "gpu"].groupby("op")["gpu_us"].median()
    check(close(medians["ncclReduceScatter"], medians["ncclAllGather"], 0.05), medians)


def test_real_busbw_is_the_jobs_own_cuda_event_time():
    # A PyTorch job on an H200 (two ranks sharing it, NCCL over sockets): all-reduces of 1 KiB to
    # 128 MiB, 20 each, that the job itself timed with CUDA events on its stream (rank 0's median of
    # calls 2..20, cuda_events.json). The export's median GPU time per size is that time.
    folder = os.path.join(REAL, "torch_sizes")
    with open(os.path.join(folder, "cuda_events.json")) as f:
        truth = {int(size): ms * 1e3 for size, ms in json.load(f)["median_ms"].items()}
    got = {r["bytes"]: r["p50_us"] for r in rows(export(folder), ncclwatch.query("busbw_per_size"))}
    check(sorted(got) == sorted(truth), (got, truth))
    for size, us in truth.items():
        check(close(got[size], us, 0.02), (size, got[size], us))


def test_real_traces_agree_with_hang():
    judged = 0
    for folder in real_folders():
        out = export(folder)
        hang = json.loads(report("hang", "--json", folder).stdout)
        late = {(r["comm_id"], r["rank"]): r for r in rows(out, ncclwatch.query("late_ranks"))}
        stalls = rows(out, "SELECT comm_id, seq, state, time_ns FROM stalls")
        last_seq = {r["comm_id"]: r["last"] for r in rows(out, "SELECT comm_id, max(seq) AS last FROM ops WHERE peer IS NULL "
                                                              "GROUP BY comm_id")}
        on_gpu = {(c["comm"], r["rank"]) for c in hang["comms"] if (c.get("stragglers") or {}).get("measured_on") == "gpu_start"
                  for r in c["stragglers"]["ranks"]}
        check(set(late) == on_gpu, (folder, sorted(late), sorted(on_gpu)))
        for c in hang["comms"]:
            if c["last_seq_issued"]:
                check(last_seq.get(c["comm"]) == c["last_seq_issued"], (folder, c["comm"], last_seq, c["last_seq_issued"]))
            check(sum(1 for s in stalls if s["comm_id"] == c["comm"]) == c["stall_records"], (folder, c["comm"], stalls))
            for s in c["stalls"]:
                check({"comm_id": c["comm"], "seq": s["seq"], "state": s["state"], "time_ns": s["time_ns"]} in stalls,
                      (folder, s, stalls))
            st = c.get("stragglers") or {}
            if st.get("measured_on") != "gpu_start":
                continue
            for r in st["ranks"]:
                mine = late.get((c["comm"], r["rank"]))
                check(mine and mine["times_last"] == r["times_last"] and mine["seqs_judged"] == st["seqs_judged"],
                      (folder, r, mine))
                check(close(mine["mean_late_ms"], r["mean_late_ms"], 1e-6), (folder, r, mine))
                judged += 1
    check(judged >= 2, f"only {judged} ranks' lateness compared")


def test_fleet_names_the_late_host():
    # 50 jobs exported one by one into one folder; node2 was planted late in 35 of them, and node0's
    # clock runs 6 ms ahead (the export aligns each job's hosts).
    out = tempdir()
    for i in range(50):
        d = tempdir()
        subprocess.run([GEN, "fleet", d, str(i)], check=True, stdout=subprocess.DEVNULL)
        export(d, out=out)
    late = rows(out, ncclwatch.query("late_hosts"))
    check(late[0]["host"] == "node2" and late[0]["jobs_latest"] == 35 and late[0]["jobs"] == 50, late)
    check(all(r["jobs_latest"] == 5 for r in late[1:]) and len(late) == 4, late)
    versions = rows(out, ncclwatch.query("busbw_by_nccl_version"))
    check({(r["nccl_version"], r["bytes"], r["jobs"]) for r in versions} ==
          {(v, b, 25) for v in ("2.27.7", "2.28.9") for b in (1 << 18, 1 << 22)}, versions)
    # Every job's id is its processes' NCCLWATCH_JOB, a partition of its own.
    jobs = rows(out, "SELECT count(DISTINCT job) AS n, count(*) AS processes FROM processes")
    check(jobs == [{"n": 50, "processes": 400}], jobs)


def schema_of_docs():
    """{table: [(column, type, nullable)]} from docs/schema.md's tables."""
    with open(os.path.join(ROOT, "docs", "schema.md")) as f:
        text = f.read()
    tables, table = {}, None
    for line in text.splitlines():
        m = re.match(r"^### `(\w+)`", line)
        if m:
            table = m.group(1)
            tables[table] = []
            continue
        m = re.match(r"^\| `(\w+)` \| (\w+) \| (yes|no) \|", line)
        if m and table:
            tables[table].append((m.group(1), m.group(2), m.group(3) == "yes"))
    return tables


def test_types_are_the_documented_ones():
    out = export(os.path.join(REAL, "teardown_hang"), os.path.join(REAL, "graph_replays"))
    documented = schema_of_docs()
    check(sorted(documented) == sorted(TABLES), sorted(documented))
    con = ncclwatch.connect(out)
    for table in TABLES:
        types = [(name, kind) for name, kind, *_ in con.execute(f"DESCRIBE {table}").fetchall()]
        check(types[:-2] == [(n, t) for n, t, _ in documented[table]] and
              sorted(types[-2:]) == [("host", "VARCHAR"), ("job", "VARCHAR")], (table, types, documented[table]))
        files = os.path.join(out, table, "*", "*", "*.parquet")
        nullable = [(name, repetition == "OPTIONAL") for name, repetition in con.execute(
            f"SELECT DISTINCT name, repetition_type FROM parquet_schema('{files}') WHERE name <> 'schema'").fetchall()]
        check(sorted(nullable) == sorted((n, null) for n, _, null in documented[table]), (table, nullable))
    # Every file names the schema's version.
    footer = con.execute("SELECT DISTINCT decode(value) FROM parquet_kv_metadata('" + out + "/*/*/*/*.parquet') "
                         "WHERE decode(key) = 'ncclwatch.schema_version'").fetchall()
    check(footer == [("1",)], footer)


def test_exports_are_the_same_bytes_and_replace_in_place():
    folder = os.path.join(REAL, "graph_replays")
    a, b = export(folder), export(folder)
    export(folder, out=a)  # again into the same folder: replaced, nothing left beside
    listing = []
    for root, _, files in os.walk(a):
        for f in files:
            path = os.path.join(root, f)
            rel = os.path.relpath(path, a)
            listing.append(rel)
            check(filecmp.cmp(path, os.path.join(b, rel), shallow=False), f"{rel} differs between two exports")
    # A file per trace of every table, and nothing else (no temporary file left).
    check(len(listing) == 2 * len(TABLES) and all(p.endswith(".parquet") and not os.path.basename(p).startswith(".")
                                                   for p in listing), listing)
    # The replays are rows of their own, flagged, with their graph.
    replays = rows(a, "SELECT count(*) AS n, min(graph) AS g FROM ops WHERE replayed")
    captured = rows(a, "SELECT count(*) AS n FROM ops WHERE captured AND seq = 0")
    check(replays[0]["n"] > 0 and replays[0]["g"] >= 1 and captured[0]["n"] > 0, (replays, captured))


def test_each_spelling_of_the_commands_answers_the_same():
    # `ncclwatch export` is `ncclwatch-report export`; `ncclwatch-report sql` (the C++ tool handing
    # over to the Python package) and the package's own entry point answer as `ncclwatch sql`.
    folder = os.path.join(REAL, "straggler")
    a = export(folder)
    b = os.path.join(tempdir(), "out")
    p = subprocess.run([LAUNCHER, "export", folder, "-o", b], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, p.stderr)
    for root, _, files in os.walk(a):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), a)
            check(filecmp.cmp(os.path.join(a, rel), os.path.join(b, rel), shallow=False), f"{rel} differs")
    entry_point = ("import sys; from ncclwatch._cli import report_main; sys.argv[0] = 'ncclwatch-report'; "
                   "sys.exit(report_main())")
    answers = []
    for command in ([LAUNCHER, "sql"], [REPORT, "sql"], [sys.executable, "-c", entry_point, "sql"]):
        p = subprocess.run(command + [a, "--query", "late_ranks", "--csv"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
        check(p.returncode == 0, (command, p.stderr))
        answers.append(p.stdout)
    check(answers[0].count("\n") == 2 and answers[0] == answers[1] == answers[2], answers)
    p = subprocess.run([REPORT, "sql", a, "SELEC nothing"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and p.stderr.startswith("ncclwatch-report sql:") and "syntax error" in p.stderr.lower(),
          p.stderr)


def test_nodes_export_their_own_traces_into_one_folder():
    # Each host's traces exported on their own, all at once, into one folder: no file collides, and
    # the tables hold what one export of the whole job holds (times aside: each host's export is on
    # its own clock).
    job = tempdir()
    subprocess.run([GEN, "fleet", job, "3"], check=True, stdout=subprocess.DEVNULL)
    by_host = {}
    for name in sorted(os.listdir(job)):
        by_host.setdefault(name.split("-")[0], []).append(os.path.join(job, name))
    check(len(by_host) == 4, by_host)
    shared, whole = tempdir(), export(job)
    exports = [subprocess.Popen([REPORT, "export", *files, "-o", shared], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
               for files in by_host.values()]
    check(all(p.wait(timeout=120) == 0 for p in exports), [p.stderr.read() for p in exports])

    def listing(root):
        return sorted(os.path.relpath(os.path.join(r, f), root) for r, _, fs in os.walk(root) for f in fs)

    check(listing(shared) == listing(whole), (listing(shared), listing(whole)))
    text = "SELECT job, host, trace, comm_id, rank, seq, op, bytes, timing FROM ops ORDER BY ALL"
    check(rows(shared, text) == rows(whole, text), "the nodes' exports hold other ops than the job's")
    times = "init_begin_ns, created_ns, finalized_ns, release_begin_ns, release_end_ns, last_op_ns"

    def comms(out):  # nulls as None: NaN (a null DOUBLE) equals nothing
        return [{k: None if null(v) else v for k, v in r.items()}
                for r in rows(out, f"SELECT * EXCLUDE ({times}) FROM comms ORDER BY ALL")]

    check(comms(shared) == comms(whole), "comms differ")


def test_bad_inputs_named():
    empty = tempdir()
    p = report("export", empty, "-o", os.path.join(tempdir(), "out"))
    check(p.returncode == 2 and ("no usable" in p.stderr.lower() or "no trace" in p.stderr.lower()), p.stderr)
    a_file = os.path.join(tempdir(), "file")
    open(a_file, "w").close()
    p = report("export", os.path.join(REAL, "skip"), "-o", a_file)
    check(p.returncode == 2 and a_file in p.stderr, p.stderr)
    # Damaged traces beside good ones: one of a format no longer read, named and left out; one cut
    # in the middle (its process killed mid-write), exported as far as it goes.
    mixed = tempdir()
    skip = os.path.join(REAL, "skip")
    first, second = sorted(os.listdir(skip))
    os.symlink(os.path.join(skip, first), os.path.join(mixed, first))
    with open(os.path.join(skip, second), "rb") as f:
        data = f.read()
    with open(os.path.join(mixed, second), "wb") as f:
        f.write(data[:len(data) * 7 // 10])
    os.symlink(os.path.join(HERE, "corpus", "truncated.nwt"), os.path.join(mixed, "truncated.nwt"))
    out = tempdir()
    p = report("export", mixed, "-o", out)
    check(p.returncode == 0 and "truncated.nwt" in p.stderr, (p.returncode, p.stderr))
    ops = {r["trace"]: r["n"] for r in rows(out, "SELECT trace, count(*) AS n FROM ops GROUP BY trace")}
    whole = {r["trace"]: r["n"] for r in rows(export(skip), "SELECT trace, count(*) AS n FROM ops GROUP BY trace")}
    check(sorted(ops) == [first, second] and ops[first] == whole[first] and 0 < ops[second] < whole[second], (ops, whole))
    # Text that is not UTF-8 in a trace (a host, a communicator's name cut mid-character) is made
    # valid, as every report makes it: every table still reads.
    out = export(os.path.join(HERE, "corpus", "host_not_utf8.nwt"), os.path.join(HERE, "corpus", "comm_name_cut_mid_character.nwt"))
    for table in TABLES:
        rows(out, f"SELECT * FROM {table}")
    names = rows(out, "SELECT name FROM comms WHERE name IS NOT NULL")
    check(names and any("\ufffd" in r["name"] for r in names), names)  # the cut character, replaced
    # ncclwatch sql: a folder that is no export, and SQL that does not parse, named.
    sql = [LAUNCHER, "sql"]
    p = subprocess.run(sql + [empty, "SELECT 1"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "not an export" in p.stderr, p.stderr)
    p = subprocess.run(sql + [out, "SELEC nothing"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "syntax error" in p.stderr.lower(), p.stderr)
    p = subprocess.run(sql + [out, "--query", "no_such"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "late_hosts" in p.stderr, p.stderr)
    p = subprocess.run(sql + [out, "--query", "late_ranks", "--csv"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.startswith("job,comm_id,rank,host,times_last"), (p.stdout, p.stderr))


def test_hostile_names_and_paths_read_back():
    # Trace file names an engine takes apart: a backslash (DuckDB's glob read it as a folder: its rows
    # vanished), a byte that is not UTF-8 (every query over the export failed), glob characters, a
    # leading dot (a hidden file), names that percent-encoding could confuse, and one too long for a
    # file name once encoded. Then exports into folders named like globs: exp[1] read exp1.
    import craft_trace

    names = [b"a\\b", b"bad\xff", b".hidden", b"x[1]*?{a,b}", b"%41", b"A", b"e=1", b"n" * 120 + b"\\" * 120]
    traces = tempdir().encode()
    for i, name in enumerate(names):
        with open(os.path.join(traces, name + b".nwt"), "wb") as f:
            f.write(craft_trace.leaked_comm_named(b"tp" + craft_trace.ESCAPES + b"%d" % i))
    want = {(name + b".nwt").decode("utf-8", "replace"): 1 for name in names}
    for folder in ("exp[1]", "e*x", "e\\x"):
        out = os.path.join(tempdir(), folder)
        export(traces.decode("utf-8", "surrogateescape"), out=out)
        # A folder the unescaped glob also matches holds a job of its own.
        export(os.path.join(REAL, "skip"), out=os.path.join(os.path.dirname(out), {"exp[1]": "exp1", "e*x": "eAx"}.get(folder, "e/x")))
        for table in TABLES:
            got = {r["trace"]: r["n"] for r in rows(out, f"SELECT trace, count(*) AS n FROM {table} GROUP BY trace")}
            if table in ("ops", "comms", "processes"):
                check(got == want, (folder, table, got, want))
            else:
                check(set(got) <= set(want), (folder, table, got))
        # The table's files: one per trace, names no engine takes apart.
        files = os.listdir(os.path.join(out, "ops", os.listdir(os.path.join(out, "ops"))[0], "host=node0"))
        check(len(files) == len(names) and all(re.fullmatch(r"[A-Za-z0-9_%-][A-Za-z0-9._%-]*\.parquet", f) and len(f) < 240
                                               for f in files), files)
        # ncclwatch sql's table shows a trace's text made printable; --csv keeps it.
        p = subprocess.run([LAUNCHER, "sql", out, "SELECT name FROM comms ORDER BY name"], capture_output=True,
                           timeout=60)
        check(p.returncode == 0 and b"\x1b" not in p.stdout and b"\\x1b]0;owned\\x07" in p.stdout, (p.stdout, p.stderr))
        p = subprocess.run([LAUNCHER, "sql", out, "SELECT name FROM comms ORDER BY name", "--csv"], capture_output=True,
                           timeout=60)
        check(p.returncode == 0 and b"\x1b]0;owned\x07" in p.stdout, (p.stdout, p.stderr))


def test_huge_counts_never_wrap():
    # Counts whose size in bytes passes 2^64 (2^62 floats) or BIGINT (2^64 - 1): written as the size
    # wrapped (0) or as a negative number. The size saturates in the reports, and is null in the export.
    import craft_trace

    d = tempdir()
    with open(os.path.join(d, "huge.nwt"), "wb") as f:
        f.write(craft_trace.huge_counts((1 << 62, (1 << 64) - 1, (1 << 61) - 1, 1024)))
    out = export(d)
    got = [(r["count"], r["bytes"]) for r in rows(out, "SELECT count, bytes FROM ops ORDER BY seq")]
    got = [tuple(None if v != v or v is None else int(v) for v in r) for r in got]  # NaN: pandas' null
    check(got == [(1 << 62, None), (None, None), ((1 << 61) - 1, ((1 << 61) - 1) * 4), (1024, 4096)], got)
    latency = json.loads(report("latency", "--json", d).stdout)
    sizes = sorted(r["bytes"] for r in latency["rows"])
    check(sizes == [4096, ((1 << 61) - 1) * 4, (1 << 64) - 1], sizes)  # 2^62 floats and 2^64 - 1: past 2^64
    # ncclwatch.load's ops: the same sizes, saturated.
    loaded = ncclwatch.load(d, symbolize=False).ops.sort_values("seq")
    check(loaded["bytes"].tolist() == [(1 << 64) - 1, (1 << 64) - 1, ((1 << 61) - 1) * 4, 4096], loaded["bytes"].tolist())


def test_writer_edge_cases_read_back():
    # Files of the writer's edge cases (parquet_cases.cc), read by DuckDB against values computed here.
    import duckdb

    d = tempdir()
    subprocess.run([os.environ["NCCLWATCH_PARQUET_CASES"], d], check=True)
    con = duckdb.connect()
    got = con.execute(f"SELECT * FROM '{d}/rows.parquet' ORDER BY i").fetchall()
    check(len(got) == 300000, len(got))
    groups = con.execute(f"SELECT count(*) FROM parquet_metadata('{d}/rows.parquet') GROUP BY row_group_id").fetchall()
    check(len(groups) == 3, groups)  # 131,072 rows a group
    # Integer columns' statistics per row group: what an engine skips row groups by.
    stats = con.execute(f"SELECT row_group_id, path_in_schema, stats_min_value, stats_max_value, stats_null_count "
                        f"FROM parquet_metadata('{d}/rows.parquet') WHERE path_in_schema IN ('i', 'neg32', 'ni') "
                        "ORDER BY 1, 2").fetchall()
    check(stats[:3] == [(0, "i", "0", "131071", 0), (0, "neg32", "-131071", "0", 0),
                        (0, "ni", str(-2**63), str(131070 * 1000000007), 65536)] and
          stats[6] == (2, "i", "262144", "299999", 0), stats)
    for r in (0, 1, 2, 5, 7, 14, 99, 100, 131071, 131072, 262143, 299999):
        want = (r, -r, r / 3, r % 3 == 0, f"s{r % 1000}", None if r % 7 == 0 else ("é x" if r % 5 == 0 else "x"),
                None if r % 2 else (-2**63 if r == 0 else r * 1000000007), (2**31 - 1 if r == 1 else r) if r % 2 else None,
                0.5 * r if r % 4 == 0 else None, None if r % 3 == 2 else r % 2 == 0,
                '日本語 "quoted", comma' if r % 100 == 0 else "") + tuple(r * c for c in range(11, 17))
        check(got[r] == want, (r, got[r], want))
    sums = con.execute(f"SELECT sum(i), count(DISTINCT s), count(ns), count(ni), count(n32), count(nd), count(nb), "
                       f"sum(c16) FROM '{d}/rows.parquet'").fetchall()[0]
    n = 300000
    check(sums == (n * (n - 1) // 2, 1000, n - (n + 6) // 7, (n + 1) // 2, n // 2, (n + 3) // 4,
                   n - (n + 0) // 3, 16 * n * (n - 1) // 2), sums)
    check(con.execute(f"SELECT count(*) FROM '{d}/empty.parquet'").fetchall() == [(0,)], "empty")
    nulls = con.execute(f"SELECT * FROM '{d}/nulls.parquet'").fetchall()
    check(nulls == [(0, 0, 0.0, False, "", None, None, None, None, None, "") + (0,) * 6] * 5, nulls)


if __name__ == "__main__":
    run_case(globals())
