"""The shim as NCCL's profiler plugin (NCCLWATCH_PROFILER=1) on the CPU stand-in, which loads the
library NCCL_PROFILER_PLUGIN names as NCCL >= 2.28 does (tests/hostnccl/hostnccl_profiler.h): what
NCCL planned for each op becomes an OpPlan record tied to the op, `latency` names it, and the plugin
stands aside, declines or stays off wherever it should."""
import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import REPORT, SHIM, Job, app, check, main


def records(trace):
    out = subprocess.run([REPORT, "dump", trace], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def plan_key(r):
    return (r["launch_id"], r["op"], r["seq"], r["peer"])


def plans_and_ops(job):
    """Per trace: its op records (collectives and send/recv) and its OpPlan records."""
    out = []
    for trace in job.traces():
        recs = records(trace)
        ops = [r for r in recs if r["type"] == "op" and r["op"] != "ncclGroupEnd"]
        out.append((ops, [r for r in recs if r["type"] == "op_plan"]))
    return out


def each_op_gets_the_plan_nccl_made():
    # The mixed scenario: ungrouped and grouped collectives, a nested group, send/recv, a split.
    # Every op has exactly one plan, the one the stand-in chose for its size (trees and LL below
    # 64 KiB), with NCCL's own count of the communicator's earlier ops of its kind; the v5 table
    # (an NCCL 2.28) gives the same; NCCL_ALGO/NCCL_PROTO forced show as forced.
    for env, expect_algo in (({}, None), ({"HOSTNCCL_PROFILER_VERSION": "5"}, None),
                             ({"NCCL_ALGO": "RING", "NCCL_PROTO": "LL128"}, ("RING", "LL128"))):
        job = Job([app("collectives_app"), "mixed"], nranks=2, env={"NCCLWATCH_PROFILER": "1", **env})
        results = job.run()
        check(all(r.returncode == 0 for r in results), f"{env}: {[r.stderr for r in results]}")
        # Plans only: kernel times are asked for with NCCLWATCH_PROFILER=kernels.
        check(not any(r["type"] == "op_kernel" for t in job.traces() for r in records(t)), f"{env}: no kernel times")
        for ops, plans in plans_and_ops(job):
            by_op = {}
            for p in plans:
                by_op.setdefault(plan_key(p), []).append(p)
            check(len(ops) >= 15 and len(plans) == len(ops), f"{env}: {len(ops)} ops, {len(plans)} plans")
            nccl_seq = {}
            for o in ops:
                got = by_op.get((o["launch_id"], o["op"], o["seq"], o["peer"]), [])
                check(len(got) == 1, f"{env}: op {o['op']} seq {o['seq']} has {len(got)} plans")
                p = got[0]
                check(p["comm_id"] == o["comm_id"] and p["count"] == o["count"] and p["rank"] == o["rank"],
                      f"{env}: the plan names the op's communicator, count and rank: {p} {o}")
                if o["op"] in ("ncclSend", "ncclRecv"):
                    check(p["algo"] == p["proto"] == "" and p["channels"] == 1, f"{env}: send/recv plan {p}")
                    continue
                want = expect_algo or (("TREE", "LL") if o["count"] * 4 < 64 << 10 else ("RING", "SIMPLE"))
                check((p["algo"], p["proto"]) == want and p["warps"] == 8, f"{env}: {o['op']} {o['count']}: {p}")
                # NCCL numbers each communicator's collectives per kind (its seqNumber), from 0.
                kind = (o["comm_id"], o["op"].replace("ncclBcast", "ncclBroadcast"))
                check(p["nccl_seq"] == nccl_seq.get(kind, 0), f"{env}: NCCL's seq {p['nccl_seq']} for {kind}")
                nccl_seq[kind] = p["nccl_seq"] + 1
        code, text, _ = job.report("latency")
        check("nccl plan" in text, f"{env}: latency names the plans\n{text}")
        plan_text = "RING/LL128 1ch" if expect_algo else "TREE/LL 1ch"
        check(plan_text in text, f"{env}: {plan_text}\n{text}")
        code, rows, _ = job.report("latency", "--json")
        check(all(r.get("nccl_plan") for r in rows["rows"] if r["op"] not in ("ncclGroupEnd",)),
              f"{env}: every row but a group's names its plan: {rows['rows']}")


def each_op_gets_its_kernel_time_by_the_gpu_timer():
    # NCCLWATCH_PROFILER=kernels. Every op's "kernel" lasts HOSTNCCL_KERNEL_NS more on the stand-in, which reports each of its
    # channels (KernelCh, channel c starting c us after the first) by its own clock, as NCCL's proxy
    # does with the GPU's timer. Through each table NCCL may take (v7, v6, v5): one op_kernel record
    # per planned channel of every op, each op's span (first start to last stop) at least the delay,
    # and `latency` gives the mean by that clock next to the CUDA events', which bracket the kernel.
    delay_ns = 3_000_000
    for version in ("7", "6", "5"):
        job = Job([app("collectives_app"), "mixed"], nranks=2,
                  env={"NCCLWATCH_PROFILER": "kernels", "HOSTNCCL_KERNEL_NS": str(delay_ns),
                       "HOSTNCCL_PROFILER_VERSION": version, "HOSTNCCL_PROFILER_LOG": "1"})
        results = job.run()
        check(all(r.returncode == 0 and f"(v{version})" in r.stderr for r in results),
              f"v{version}: {[r.stderr for r in results]}")
        for trace in job.traces():
            recs = records(trace)
            plans = {plan_key(r): r for r in recs if r["type"] == "op_plan"}
            channels = {}
            for k in (r for r in recs if r["type"] == "op_kernel"):
                channels.setdefault(plan_key(k), []).append(k)
            check(plans and set(channels) == set(plans), f"v{version}: kernels of {len(channels)} of {len(plans)} planned ops")
            for key, chans in channels.items():
                check(sorted(c["channel"] for c in chans) == list(range(plans[key]["channels"])),
                      f"v{version}: {key}: channels {[c['channel'] for c in chans]} of {plans[key]['channels']}")
                span = max(c["gpu_stop_ns"] for c in chans) - min(c["gpu_start_ns"] for c in chans)
                check(span >= delay_ns, f"v{version}: {key}: span {span} ns")
        code, text, _ = job.report("latency")
        check(code == 0 and "kernel us" in text and "GPU's own timer" in text, f"v{version}: {text}")
        code, rows, _ = job.report("latency", "--json")
        timed = [r for r in rows["rows"] if "nccl_kernel" in r]
        check(timed and all(r["nccl_kernel"]["mean_us"] >= delay_ns / 1e3 for r in timed), f"v{version}: {timed}")
        # The events bracket the launch, the kernel inside it: never shorter, to rounding. (Each op
        # of this scenario runs once: its first call's time is its events' figure.)
        by_events = [(r["mean_us"] or r["first_calls"]["mean_us"], r["nccl_kernel"]["mean_us"])
                     for r in timed if r["timing"] == "gpu"]
        check(by_events and all(events >= 0.99 * kernel for events, kernel in by_events), f"v{version}: {by_events}")


def without_the_setting_nothing_changes():
    # Off by default: NCCL is not pointed at the shim (the stand-in finds no plugin), no plan
    # records, and latency's table is as it always was.
    job = Job([app("collectives_app"), "mixed"], nranks=2, env={"HOSTNCCL_PROFILER_LOG": "1"})
    results = job.run()
    check(all(r.returncode == 0 and "profiler plugin" not in r.stderr for r in results), f"{[r.stderr for r in results]}")
    check(all(not plans for _, plans in plans_and_ops(job)), "no plans")
    code, text, _ = job.report("latency")
    check("nccl plan" not in text, text)


def an_application_plugin_is_left_in_place():
    # The application named a plugin of its own (here one that is not there, and "none"): the shim
    # leaves NCCL_PROFILER_PLUGIN alone, says so once per process, and records no plans.
    for theirs in ("/nonexistent/libnccl-profiler-inspector.so", "none"):
        job = Job([app("collectives_app"), "mixed"], nranks=2,
                  env={"NCCLWATCH_PROFILER": "1", "NCCL_PROFILER_PLUGIN": theirs})
        results = job.run()
        for r in results:
            check(r.returncode == 0, r.stderr)
            said = [line for line in r.stderr.splitlines() if "stands aside" in line]
            check(len(said) == 1 and theirs in said[0], f"{theirs}: said once: {r.stderr}")
        check(all(not plans for _, plans in plans_and_ops(job)), f"{theirs}: no plans")


def recorded_plugin_lines(path):
    try:
        return sorted((json.loads(line) for line in open(path)), key=lambda r: json.dumps(r, sort_keys=True))
    except FileNotFoundError:
        return []


def an_application_plugin_is_chained():
    # The application names a plugin of its own (apps/recording_profiler.cc, standing in for NCCL
    # Inspector), by path and by bare name as NCCL resolves it (libnccl-profiler-<name>.so): the shim
    # points NCCL at itself, says so once, and hands that plugin every event it asked for, each with
    # the parent it made. It sees what it sees without the shim, and the shim records its own plans
    # and kernel times beside it.
    recorder = app("librecording_profiler.so")
    alone = Job([app("collectives_app"), "mixed"], nranks=2, preload=False,
                env={"NCCL_PROFILER_PLUGIN": recorder, "RECORDING_PROFILER_OUT": "/dev/null"})
    alone.env["RECORDING_PROFILER_OUT"] = os.path.join(alone.tmp, "recorded.jsonl")
    check(all(r.returncode == 0 for r in alone.run()), "the job runs with the plugin alone")
    want = recorded_plugin_lines(alone.env["RECORDING_PROFILER_OUT"])
    # One line per communicator: the mixed scenario splits each rank's into another.
    check(len(want) == 4 and all(w["started"].get("KernelCh") and w["started"].get("Coll") for w in want),
          f"alone, the plugin saw the job: {want}")
    named = tempfile.mkdtemp(prefix="ncclwatch-plugin-")
    shutil.copy(recorder, os.path.join(named, "libnccl-profiler-recording.so"))
    for setting, extra in ((recorder, {}), ("recording", {"LD_LIBRARY_PATH": named})):
        job = Job([app("collectives_app"), "mixed"], nranks=2,
                  env={"NCCLWATCH_PROFILER": "kernels", "NCCL_PROFILER_PLUGIN": setting, **extra})
        job.env["RECORDING_PROFILER_OUT"] = os.path.join(job.tmp, "recorded.jsonl")
        results = job.run()
        for r in results:
            check(r.returncode == 0, r.stderr)
            said = [line for line in r.stderr.splitlines() if "every event it asks for" in line]
            check(len(said) == 1 and setting in said[0], f"{setting}: said once: {r.stderr}")
        got = recorded_plugin_lines(job.env["RECORDING_PROFILER_OUT"])
        check(got == want, f"{setting}: the plugin saw what it saw alone:\n{got}\n{want}")
        check(all(g["bad_parents"] == 0 and g["bad_handles"] == 0 and g["started"] == g["stopped"]
                  and g["kernel_stops"] == g["started"]["KernelCh"] for g in got), f"{setting}: {got}")
        for ops, plans in plans_and_ops(job):
            check(ops and len(plans) == len(ops), f"{setting}: a plan per op beside it: {len(ops)} ops, {len(plans)} plans")
        check(all(any(r["type"] == "op_kernel" for r in records(t)) for t in job.traces()), f"{setting}: kernel times")
    # The shim itself under another name is never chained behind itself: it is simply the plugin.
    link = os.path.join(named, "libnccl-profiler-link.so")
    os.symlink(SHIM, link)
    job = Job([app("collectives_app"), "mixed"], nranks=2, env={"NCCLWATCH_PROFILER": "1", "NCCL_PROFILER_PLUGIN": link})
    results = job.run()
    check(all(r.returncode == 0 and "every event" not in r.stderr and "stands aside" not in r.stderr for r in results),
          f"the shim by a link: {[r.stderr for r in results]}")
    check(all(ops and len(plans) == len(ops) for ops, plans in plans_and_ops(job)), "the shim by a link: a plan per op")
    shutil.rmtree(named)


def parents_the_plugin_never_made_are_not_trusted():
    # An NCCL handing back handles that are not the plugin's (one byte into its handle, a pointer
    # elsewhere): no plan is made up from them, and the job runs as ever.
    job = Job([app("collectives_app"), "mixed"], nranks=2,
              env={"NCCLWATCH_PROFILER": "kernels", "HOSTNCCL_PROFILER_HOSTILE": "1"})
    results = job.run()
    check(all(r.returncode == 0 for r in results), f"{[r.stderr for r in results]}")
    per_trace = plans_and_ops(job)
    check(len(per_trace) == 2 and all(ops and not plans for ops, plans in per_trace),
          f"ops recorded, no plans: {[(len(o), len(p)) for o, p in per_trace]}")
    # Its kernel channels name the call's event as their parent, a handle of ours but not a plan.
    check(not any(r["type"] == "op_kernel" for t in job.traces() for r in records(t)), "no kernel times")


def a_process_without_the_shim_declines_the_plugin():
    # A child that inherited NCCL_PROFILER_PLUGIN (our path) but not LD_PRELOAD: NCCL opens the
    # shim as a plain plugin, whose init declines every communicator. The job runs as without it
    # and nothing is traced.
    job = Job([app("collectives_app"), "mixed"], nranks=2, preload=False,
              env={"NCCLWATCH_PROFILER": "1", "NCCL_PROFILER_PLUGIN": SHIM, "HOSTNCCL_PROFILER_LOG": "1"})
    results = job.run()
    check(all(r.returncode == 0 for r in results), f"{[r.stderr for r in results]}")
    check(all("profiler plugin ncclwatch" in r.stderr for r in results), f"the stand-in loaded it: {[r.stderr for r in results]}")
    check(job.traces() == [], f"nothing traced: {job.traces()}")


def a_process_without_the_shim_still_serves_the_chained_plugin():
    # A child of a process that chained the application's plugin inherits NCCL_PROFILER_PLUGIN
    # naming the shim and NCCLWATCH_PROFILER_CHAINED naming theirs, but not LD_PRELOAD: the copy of
    # the shim NCCL opens records nothing, yet hands the application's plugin what it would get alone.
    recorder = app("librecording_profiler.so")
    alone = Job([app("collectives_app"), "mixed"], nranks=2, preload=False, env={"NCCL_PROFILER_PLUGIN": recorder})
    alone.env["RECORDING_PROFILER_OUT"] = os.path.join(alone.tmp, "recorded.jsonl")
    check(all(r.returncode == 0 for r in alone.run()), "the job runs with the plugin alone")
    job = Job([app("collectives_app"), "mixed"], nranks=2, preload=False,
              env={"NCCLWATCH_PROFILER": "1", "NCCL_PROFILER_PLUGIN": SHIM, "NCCLWATCH_PROFILER_CHAINED": recorder})
    job.env["RECORDING_PROFILER_OUT"] = os.path.join(job.tmp, "recorded.jsonl")
    results = job.run()
    check(all(r.returncode == 0 for r in results), f"{[r.stderr for r in results]}")
    want, got = (recorded_plugin_lines(j.env["RECORDING_PROFILER_OUT"]) for j in (alone, job))
    check(len(want) == 4 and got == want, f"the plugin saw what it saw alone:\n{got}\n{want}")
    check(job.traces() == [], f"nothing traced: {job.traces()}")


def the_peer_others_wait_on_is_named():
    # NCCLWATCH_PROFILER=peers: every op's proxy operations (a send to the ring's next rank and a
    # receive from its previous one per channel) become op_proxy records carrying the op's bytes;
    # with rank 2 holding the ring up (the stand-in makes every other rank's receives wait 2 ms on
    # their peer, and rank 2's proxy as long to post its own), `peers` names rank 2 and no other; a
    # fair run names nobody.
    for slow in (None, 2):
        env = {"NCCLWATCH_PROFILER": "peers"}
        if slow is not None:
            env.update({"HOSTNCCL_SLOW_RANK": str(slow), "HOSTNCCL_PEER_WAIT_NS": "2000000"})
        job = Job([app("collectives_app"), "mixed"], nranks=4, env=env)
        results = job.run()
        check(all(r.returncode == 0 for r in results), f"{slow}: {[r.stderr for r in results]}")
        for trace in job.traces():
            recs = records(trace)
            ops = {(r["launch_id"], r["seq"]): r for r in recs if r["type"] == "op" and r["op"] == "ncclAllReduce"}
            proxies = [r for r in recs if r["type"] == "op_proxy"]
            check(proxies and not any(r["type"] == "op_kernel" for r in recs), f"{slow}: proxy records, no kernels")
            for (launch, seq), o in ops.items():
                sent = [p for p in proxies if (p["launch_id"], p["seq"]) == (launch, seq) and p["send"]]
                if o["nranks"] < 2:
                    continue
                check(sent and all(p["remote"] == (o["rank"] + 1) % o["nranks"] for p in sent), f"{slow}: {sent}")
                check(sum(p["bytes"] for p in sent) == o["count"] * 4 // len(sent) * len(sent),
                      f"{slow}: the op's bytes, {o['count'] * 4}: {sent}")
        code, peers, _ = job.report("peers", "--json")
        named = [s["rank"] for s in peers["slow_peers"]]
        check(named == ([] if slow is None else [slow]) and code == (0 if slow is None else 1),
              f"{slow}: named {named} (exit {code})")
        if slow is not None:
            s = peers["slow_peers"][0]
            check(s["others_recv_wait_us_per_step"] >= 1000 and s["own_recv_wait_us_per_step"] < 100, f"{s}")
            check(len(peers["links"]) >= 8, f"links: {peers['links']}")
            code, text, _ = job.report("peers")
            check("SLOW PEER: comm " in text and "rank 2's peers waited on it" in text, text)
            # hang and summary name it too, as a finding that is no hang (exit 0)
            code, hang, _ = job.report("hang", "--json")
            slow_in = [c["slow_peer"]["rank"] for c in hang["comms"] if "slow_peer" in c]
            check(code == 0 and slow_in == [2] and "rank 2's peers waited on it" in hang["verdict"], (code, hang["verdict"]))
            code, summary, _ = job.report("summary", "--json")
            check(len(summary["slow_peers"]) == 1 and "rank 2's" in summary["slow_peers"][0], summary["slow_peers"])
        # The html's per-peer heatmap: a cell per rank and peer that exchanged data, the slow rank's
        # row marked (and no other), the world's receives from the ring's previous rank coloured.
        page_path = os.path.join(job.trace_dir, "report.html")
        job.report("html", "-o", page_path)
        page = open(page_path, encoding="utf-8").read()
        maps = re.findall(r'<svg class="peermap" data-comm="(\w+)".*?</svg>', page, re.S)
        world = re.search(r'<svg class="peermap"[^>]*data-ranks="4".*?</svg>', page, re.S)
        check(len(maps) == 3 and world, f"{slow}: peer maps {maps}")  # the world and its two halves
        cells = re.findall(r'<rect class="cell" data-rank="(\d+)" data-peer="(\d+)"[^>]*fill="([^"]+)"', world.group(0))
        pairs = {(int(r), int(p)) for r, p, _ in cells}
        check(all(((r + 1) % 4 in (p_ for r_, p_ in pairs if r_ == r)) for r in range(4)) and len(cells) == len(pairs),
              f"{slow}: cells {cells}")
        marked = re.findall(r'class="rowlabel straggler">rank (\d+) ◀', world.group(0))
        check(marked == ([] if slow is None else [str(slow)]), f"{slow}: marked {marked}")


def each_link_moves_at_the_rate_its_sends_took():
    # The stand-in's sends move 100 kB/s once their first step has waited three times as long for the
    # GPU (a queued kernel): `peers` gives each rank's send link that rate, from the first step's data ready
    # for the network on (a reading from the operations' start would give at most a quarter of it).
    gbps = 0.0001  # slow enough that a step's sleep dwarfs its overhead, under the sanitizers too
    job = Job([app("collectives_app"), "mixed"], nranks=4,
              env={"NCCLWATCH_PROFILER": "peers", "HOSTNCCL_LINK_GBPS": str(gbps)})
    results = job.run()
    check(all(r.returncode == 0 for r in results), [r.stderr for r in results])
    for trace in job.traces():
        sends = [r for r in records(trace) if r["type"] == "op_proxy" and r["send"]]
        check(sends and all(r["start_ns"] < r["moving_ns"] <= r["stop_ns"] for r in sends), sends[:3])
    code, peers, _ = job.report("peers", "--json")
    sends = [link for link in peers["links"] if link["direction"] == "send"]
    check(len(sends) >= 4 and all(0.7 * gbps <= link["send_gbps"] <= 1.05 * gbps for link in sends),
          f"want {gbps} GB/s: {[(link['rank'], link['peer'], link['send_gbps']) for link in sends]}")
    check(all(link["send_gbps"] is None for link in peers["links"] if link["direction"] == "recv"), peers["links"])
    code, csv_text, _ = job.report("peers", "--csv")
    check("send_gbps" in csv_text.splitlines()[0], csv_text)
    # The export's peers table holds the same links, rate and all.
    try:
        import duckdb
    except ImportError:
        print("the export's peers table not checked: no duckdb for this python3 (scripts/bootstrap installs it)")
        return
    out = tempfile.mkdtemp(prefix="nw-export-")
    p = subprocess.run([REPORT, "export", job.trace_dir, "-o", out], capture_output=True, text=True)
    check(p.returncode == 0, p.stderr)
    table = duckdb.sql(f"SELECT comm_id, rank, peer, direction, bytes, send_gbps FROM "
                       f"read_parquet('{out}/peers/*/*/*.parquet') ORDER BY ALL").fetchall()
    want = sorted((link["comm"], link["rank"], link["peer"], link["direction"], link["bytes"], link["send_gbps"])
                  for link in peers["links"])
    check(len(table) == len(want) and all(t[:5] == w[:5] and (t[5] is None) == (w[5] is None) and
                                          (t[5] is None or abs(t[5] - w[5]) <= 1e-12) for t, w in zip(table, want)),
          (table, want))
    shutil.rmtree(out)


main({f.__name__: f for f in (each_op_gets_the_plan_nccl_made, each_op_gets_its_kernel_time_by_the_gpu_timer,
                              the_peer_others_wait_on_is_named, each_link_moves_at_the_rate_its_sends_took,
                              without_the_setting_nothing_changes,
                              an_application_plugin_is_left_in_place, an_application_plugin_is_chained,
                              parents_the_plugin_never_made_are_not_trusted,
                              a_process_without_the_shim_declines_the_plugin,
                              a_process_without_the_shim_still_serves_the_chained_plugin)})
