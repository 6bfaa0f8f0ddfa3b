"""The shim on real multi-process NCCL programs (CPU stand-in): lifetimes, leaks, the exit
alert, crash safety, threads, fork, and an unwritable trace directory."""
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from harness import BUILD, HOSTNCCL_DIR, REPORT as REPORT_BIN, Job, alert_blocks, app, check, main


def comms_by_state(report):
    return collections.Counter(c["state"] for c in report["communicators"])


def leaky_job_reports_exactly_its_leaks(nranks=2):
    job = Job([app("lifecycle_app"), "leaky"], nranks=nranks)
    results = job.run()
    for rank, r in enumerate(results):
        check(r.returncode == 0, f"rank {rank} failed: {r.returncode} {r.stderr}")
        blocks = alert_blocks(r.stderr)
        check(len(blocks) == 1, f"rank {rank}: expected one alert block, got {blocks!r} in {r.stderr!r}")
        block = blocks[0]
        check(block[0].startswith("ncclwatch: 1 communicator(s) never destroyed, 2 NCCL resource(s) never released"),
              f"rank {rank}: first line {block[0]!r}")
        text = "\n".join(block)
        check('"world"' in text and "leaked" in text, f"rank {rank}: world comm not named: {text}")
        check("allocation" in text and "4096 B" in text, f"rank {rank}: allocation missing: {text}")
        check("registration" in text, f"rank {rank}: registration missing: {text}")
        check("leaky" in text or "lifecycle_app" in text, f"rank {rank}: no creation site: {text}")
        check("remedy:" in text, f"rank {rank}: no remedy: {text}")
    check(len(job.traces()) == nranks, f"expected {nranks} trace files, got {job.traces()}")

    code, report, err = job.report("leaks", "--json")
    check(code == 1, f"leaks exit code {code}, stderr {err}")
    kinds = collections.Counter(l["kind"] for l in report["leaks"])
    check(kinds == {"communicator": nranks, "allocation": nranks, "registration": nranks}, f"leak kinds {kinds}")
    comm_leaks = [l for l in report["leaks"] if l["kind"] == "communicator"]
    check(len({l["comm"] for l in comm_leaks}) == 1, "the leaked world comm must have one identity on all ranks")
    check(sorted(l["rank"] for l in comm_leaks) == list(range(nranks)), f"ranks {comm_leaks}")
    check(all(l["api"] == "ncclCommInitRankConfig" and l["state"] == "leaked" and l["nranks"] == nranks
              for l in comm_leaks), f"comm leak fields {comm_leaks}")
    check(all("lifecycle_app" in l["created_at"] or "leaky" in l["created_at"] for l in comm_leaks),
          f"creation site {[l['created_at'] for l in comm_leaks]}")
    allocations = [l for l in report["leaks"] if l["kind"] == "allocation"]
    check(all(l["bytes"] == 4096 for l in allocations), f"allocations {allocations}")
    registrations = [l for l in report["leaks"] if l["kind"] == "registration"]
    check(all(l["comm"] == comm_leaks[0]["comm"] and l["bytes"] == 1024 for l in registrations),
          f"registrations {registrations}")
    states = comms_by_state(report)
    check(states == {"leaked": nranks, "destroyed": nranks, "aborted": nranks}, f"states {states}")
    splits = [c for c in report["communicators"] if c["api"] == "ncclCommSplit"]
    world_id = comm_leaks[0]["comm"]
    check(all(c["parent"] == world_id for c in splits), f"split parent {splits}")
    # Ranks of the same color share the split's identity; different colors do not.
    by_color = collections.defaultdict(set)
    for c in splits:
        by_color[c["rank"] % 2 if nranks > 2 else c["rank"]].add(c["comm"])
    # text report groups the world comm once
    code, text, _ = job.report("leaks")
    check(code == 1 and text.count(world_id) == 1 + nranks, f"text report:\n{text}")


def leaky_job_on_three_ranks():
    leaky_job_reports_exactly_its_leaks(nranks=3)


def clean_job_is_silent():
    job = Job([app("lifecycle_app"), "clean"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
        check("ncclwatch" not in r.stderr, f"rank {rank} printed: {r.stderr!r}")
    code, report, err = job.report("leaks", "--json")
    check(code == 0, f"leaks exit {code}: {err}")
    check(report["leaks"] == [], f"leaks {report['leaks']}")
    check(comms_by_state(report) == {"destroyed": 4}, f"states {comms_by_state(report)}")


def nccl_inside_rtld_local_library_is_traced():
    job = Job([app("local_loader"), app("liblocal_nccl_user.so")], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
        blocks = alert_blocks(r.stderr)
        check(len(blocks) == 1 and blocks[0][0].startswith("ncclwatch: 1 communicator(s) never destroyed"),
              f"rank {rank} alert: {r.stderr!r}")
    code, report, _ = job.report("leaks", "--json")
    check(code == 1 and comms_by_state(report) == {"leaked": 2, "destroyed": 2}, f"report {report}")


def on_leak_fail_changes_only_leaky_exits():
    leaky = Job([app("lifecycle_app"), "leaky"], nranks=2, env={"NCCLWATCH_ON_LEAK": "fail"}).run()
    check(all(r.returncode == 70 for r in leaky), f"leaky exits {[r.returncode for r in leaky]}")
    check(all(alert_blocks(r.stderr) for r in leaky), "fail still prints the alert")
    clean = Job([app("lifecycle_app"), "clean"], nranks=2, env={"NCCLWATCH_ON_LEAK": "fail"}).run()
    check(all(r.returncode == 0 for r in clean), f"clean exits {[r.returncode for r in clean]}")
    off = Job([app("lifecycle_app"), "leaky"], nranks=2, env={"NCCLWATCH_ON_LEAK": "off"})
    results = off.run()
    check(all(r.returncode == 0 and "ncclwatch" not in r.stderr for r in results), "off is silent")
    code, _, _ = off.report("leaks", "--json")
    check(code == 1, "off still records the trace")


def sigkill_loses_no_record():
    job = Job([app("lifecycle_app"), "wait-for-kill"], nranks=2)
    job.start()
    job.wait_for_files(["ready.0", "ready.1"])
    outs = job.signal_all(signal.SIGKILL)
    check(all(code == -signal.SIGKILL for code, _, _ in outs), f"exits {[o[0] for o in outs]}")
    code, report, err = job.report("leaks", "--json")
    check(code == 1, f"leaks exit {code} {err}")
    states = comms_by_state(report)
    check(states == {"leaked": 2, "destroyed": 2}, f"every record before the kill must be there: {states}")
    names = {c["name"] for c in report["communicators"]}
    check(names == {"world", "other"}, f"names {names}")
    code, summary, _ = job.report("summary", "--json")
    check(summary["processes_without_final_record"] == 2, f"summary {summary}")


def sigterm_prints_alert_and_dies_by_sigterm():
    job = Job([app("lifecycle_app"), "wait-for-kill"], nranks=2)
    job.start()
    job.wait_for_files(["ready.0", "ready.1"])
    outs = job.signal_all(signal.SIGTERM)
    for rank, (code, _, err) in enumerate(outs):
        check(code == -signal.SIGTERM, f"rank {rank} exit {code}, must die by SIGTERM")
        blocks = alert_blocks(err)
        check(len(blocks) == 1 and blocks[0][0].startswith("ncclwatch: 1 communicator(s) never destroyed"),
              f"rank {rank} stderr {err!r}")
    code, summary, _ = job.report("summary", "--json")
    check(summary["processes_without_final_record"] == 0, f"the signal path writes the final record: {summary}")


def init_hang_names_who_never_joined():
    # Ranks 0 and 1 wait in the init of "side" for rank 2, which never calls it; the job is then
    # ended by SIGTERM. The reports must say who is stuck in which init, and for whom they wait.
    job = Job([app("lifecycle_app"), "init-hangs"], nranks=3)
    job.start()
    job.wait_for_files(["entering.0", "entering.1", "ready.2"])
    time.sleep(0.5)  # inside the init call
    outs = job.signal_all(signal.SIGTERM)
    check(all(code == -signal.SIGTERM for code, _, _ in outs), f"exits {[o[0] for o in outs]}")
    code, hang, _ = job.report("hang", "--json")
    check(code == 1, f"a hung init is a finding: exit {code}")
    side = [c for c in hang["comms"] if c.get("name") == "side"]
    check(len(side) == 1 and side[0]["init_never_returned"] == [0, 1] and side[0]["absent_ranks"] == [2],
          f"side: {side}")
    check(hang["verdict"].startswith('comm "side"') and "rank(s) 0,1 entered ncclCommInitRankConfig and never returned" in
          hang["verdict"] and "waiting for rank(s) 2 of 3" in hang["verdict"], hang["verdict"])
    code, leaks, _ = job.report("leaks", "--json")
    states = comms_by_state(leaks)
    check(states == {"leaked": 3, "init_hung": 2}, f"world leaked on 3 ranks, side hung in init on 2: {states}")
    code, text, _ = job.report("leaks")
    check("2 init_hung" in text, text)
    code, summary, _ = job.report("summary", "--json")
    check(summary["first_look"] == hang["verdict"] and summary["init_never_returned"] == 2, f"summary: {summary}")


def thirty_two_threads_create_and_destroy():
    job = Job([app("lifecycle_app"), "threads"], nranks=1, timeout=120)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    code, report, _ = job.report("leaks", "--json", "--no-symbols")
    states = comms_by_state(report)
    check(states == {"destroyed": 32 * 20 * 2, "leaked": 1}, f"states {states}")
    check(len({c["comm"] for c in report["communicators"]}) == 32 * 20 * 2 + 1, "identities must be unique")
    blocks = alert_blocks(r.stderr)
    check(len(blocks) == 1 and blocks[0][0].startswith("ncclwatch: 1 communicator(s)"), f"alert {r.stderr!r}")


def forked_child_gets_its_own_trace():
    job = Job([app("lifecycle_app"), "fork"], nranks=1)
    r = job.run()[0]
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    blocks = alert_blocks(r.stderr)
    check(len(blocks) == 1, f"only the child leaks, so one alert: {r.stderr!r}")
    traces = job.traces()
    check(len(traces) == 2, f"parent and child files: {traces}")
    reports = [job.report("leaks", "--json", paths=[t])[1] for t in traces]
    pids = {rep["communicators"][0]["pid"] for rep in reports}
    check(len(pids) == 2, "different pids")
    leaky = [rep for rep in reports if rep["leaks"]]
    check(len(leaky) == 1 and comms_by_state(leaky[0]) == {"leaked": 1}, f"child report {leaky}")
    parent = [rep for rep in reports if not rep["leaks"]][0]
    check(comms_by_state(parent) == {"destroyed": 1}, f"parent report {parent}")
    check(str(leaky[0]["communicators"][0]["pid"]) in blocks[0][0], "the alert names the child's pid")


def unwritable_trace_dir_costs_records_not_the_job():
    job = Job([app("lifecycle_app"), "leaky"], nranks=2, env={"NCCLWATCH_DIR": "/proc/ncclwatch-cannot-write"})
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
        check(r.stderr.count("ncclwatch: cannot write the trace") == 1, f"said once: {r.stderr!r}")
        check(len(alert_blocks(r.stderr)) == 1, "the alert still works")


def hung_destroy_is_reported():
    job = Job([app("lifecycle_app"), "destroy-hangs"], nranks=2)
    job.start()
    job.wait_for_files(["ready.0"])
    import time
    time.sleep(2.5)  # past the 2 s a teardown takes to count as hung
    job.signal_all(signal.SIGTERM)  # the shim's final record says when (a SIGKILL leaves no word of it)
    code, report, _ = job.report("leaks", "--json")
    rank0 = [c for c in report["communicators"] if c["rank"] == 0]
    check(code == 1 and rank0 and rank0[0]["state"] == "destroy_hung", f"rank 0: {rank0}")
    check(any(l["kind"] == "communicator" and l["state"] == "destroy_hung" for l in report["leaks"]), "listed as leak")


def hung_finalize_is_named_with_its_time():
    # Rank 0 enters ncclCommFinalize, which waits for an all-reduce rank 1 never joins; the job is
    # ended by SIGTERM. Not a plain leak: finalize_hung, with the time inside, and the signal.
    job = Job([app("lifecycle_app"), "finalize-hangs"], nranks=2)
    job.start()
    job.wait_for_files(["ready.0"])
    time.sleep(2.5)  # inside ncclCommFinalize, past the 2 s a teardown takes to count as hung
    outs = job.signal_all(signal.SIGTERM)
    alert = outs[0][2]
    check("finalize_hung (ncclCommFinalize entered " in alert and "s before exit, never returned)" in alert, alert)
    check("remedy: a teardown that never returns" in alert and "destroy_process_group" not in alert, alert)
    code, report, _ = job.report("leaks", "--json")
    rank0 = [c for c in report["communicators"] if c["rank"] == 0]
    check(code == 1 and rank0 and rank0[0]["state"] == "finalize_hung", f"rank 0: {rank0}")
    inside = rank0[0]["teardown_inside_s"]
    check(2.2 <= inside <= 30 and rank0[0]["teardown_until"] == "SIGTERM" and rank0[0]["teardown_call"] == "ncclCommFinalize",
          f"rank 0: {rank0[0]}")
    hangs = report["teardown_hangs"]
    check(len(hangs) == 1 and hangs[0]["ranks"] == [0] and hangs[0]["call"] == "ncclCommFinalize", f"{hangs}")
    check("ncclCommFinalize entered on rank(s) 0 of comm" in hangs[0]["text"] and "until SIGTERM)" in hangs[0]["text"],
          hangs[0]["text"])
    code, text, _ = job.report("leaks")
    check("TEARDOWN HUNG: ncclCommFinalize entered on rank(s) 0" in text, text)
    # Rank 1 never issued the all-reduce: that is why rank 0 hangs, and what to look at first.
    code, summary, _ = job.report("summary", "--json")
    code, hang, _ = job.report("hang", "--json")
    check(summary["first_look"] == hang["verdict"], f"summary: {summary['first_look']!r}")


def kill_just_after_entering_teardown_is_not_a_hang():
    # A launcher's kill a moment after the program began tearing down (torchrun ending the ranks
    # once one failed): the call did not hang. Said as cut short, with the time inside, not as hung.
    job = Job([app("lifecycle_app"), "finalize-hangs"], nranks=2)
    job.start()
    job.wait_for_files(["ready.0"])
    time.sleep(0.2)
    outs = job.signal_all(signal.SIGTERM)
    alert = outs[0][2]
    check("finalize_hung" not in alert and "never returned" not in alert, f"no hang, no leak alerted: {alert}")
    code, report, _ = job.report("leaks", "--json")
    rank0 = [c for c in report["communicators"] if c["rank"] == 0]
    check(rank0 and rank0[0]["state"] == "ended_in_teardown" and rank0[0]["teardown_inside_s"] < 2.0 and
          not report["teardown_hangs"], f"rank 0: {rank0} {report['teardown_hangs']}")
    code, text, _ = job.report("leaks")
    check("killed during ncclCommFinalize" in text and "TEARDOWN HUNG" not in text, text)
    code, summary, _ = job.report("summary")
    check("teardown hung" not in summary, summary)


def every_resource_kind_and_end_state():
    job = Job([app("lifecycle_app"), "all-resources"], nranks=2)
    # The exit alert counts what `leaks` lists (one rule, lifecycle_rules.h): the leaked communicator
    # and two resources per rank; the finalized one is a note in both.
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
        text = "\n".join(alert_blocks(r.stderr)[0])
        check(text.startswith("ncclwatch: 1 communicator(s) never destroyed, 2 NCCL resource(s) never released"), text)
        check("note: comm" in text and "finalized but never destroyed" in text and "window" in text and "redop" in text,
              text)
    code, report, _ = job.report("leaks", "--json")
    kinds = collections.Counter(l["kind"] for l in report["leaks"])
    check(code == 1 and kinds == {"communicator": 2, "window": 2, "redop": 2}, f"leak kinds {kinds}")
    states = comms_by_state(report)
    check(states == {"leaked": 2, "destroyed": 4, "finalized": 2, "init_failed": 2}, f"states {states}")
    nonblocking = [c for c in report["communicators"] if c["state"] == "destroyed" and c["name"] == ""]
    check(len(nonblocking) == 2, f"the non-blocking comm (ncclInProgress at init) counts as created: {nonblocking}")
    code, text, _ = job.report("leaks")
    check("finalized" in text, f"the text report mentions the finalized comm:\n{text}")


def communicator_gpu_memory_is_measured():
    # Each stand-in communicator holds 96 MiB of device memory from init to destroy. When made:
    # NCCL's own count (ncclCommMemStats) where the library has it, else the free memory's change
    # across the call; when released, that change; no figure at all in host timing mode.
    mib = 1 << 20
    for env, source in (({}, "ncclCommMemStats"), ({"HOSTNCCL_NO_MEMSTATS": "1"}, "free_memory_change"),
                        ({"NCCLWATCH_TIMING": "host"}, None)):
        job = Job([app("lifecycle_app"), "leaky"], nranks=2, env={"HOSTNCCL_COMM_MIB": "96", **env})
        results = job.run()
        check(all(r.returncode == 0 for r in results), f"{env}: {[r.stderr for r in results]}")
        code, report, _ = job.report("leaks", "--json")
        comms = report["communicators"]
        check(len(comms) == 6, f"{env}: world, half and doomed on 2 ranks: {comms}")
        for c in comms:
            if source is None:
                check(c["gpu_memory"] is None and c["gpu_memory_freed"] is None, f"{env}: no figure in host mode: {c}")
                continue
            check(c["gpu_memory"] == {"bytes": 96 * mib, "from": source}, f"{env}: {c['api']} rank {c['rank']}: {c['gpu_memory']}")
            freed = c["gpu_memory_freed"]
            if c["state"] == "leaked":
                check(freed is None, f"{env}: a leaked communicator freed nothing: {c}")
            else:
                # Released: always the free memory's change (no NCCL call on a communicator in teardown).
                check(freed == {"bytes": 96 * mib, "from": "free_memory_change"}, f"{env}: {c['api']} {c['state']}: freed {freed}")
        alert = "\n".join(alert_blocks(results[0].stderr)[0])
        code, summary, _ = job.report("summary", "--json")
        if source is None:
            check("GPU memory" not in alert and summary["leaked_gpu_memory_bytes"] == 0, f"{env}: {alert}")
        else:
            check("96.0 MiB of GPU memory" in alert, f"{env}: the alert names the memory: {alert}")
            check(summary["leaked_gpu_memory_bytes"] == 2 * 96 * mib, f"{env}: {summary['leaked_gpu_memory_bytes']}")
            code, text, _ = job.report("leaks")
            check("held 96 MiB of GPU memory when made" in text, f"{env}: leaks text\n{text}")


def memory_taken_at_set_up_calls_is_counted():
    # NCCL >= 2.22 connects an algorithm's peers at its first use and 2.29 allocates most buffers
    # then: the stand-in takes HOSTNCCL_SETUP_MIB at a communicator's first op of each kind. The
    # set-up-memory scenario's world (96 MiB when made) runs four new op shapes, one of them
    # setting up nothing new (all-reduce at a second size) and one a send/receive group (two kinds);
    # a split runs one all-reduce and is destroyed. Each reading names its call, the communicator
    # holds 96 + 4 * 8 MiB, the alert and the reports say so, and the destroyed split's 104 MiB is
    # what its destroy gave back.
    mib = 1 << 20
    for env, source in (({}, "ncclCommMemStats"), ({"HOSTNCCL_NO_MEMSTATS": "1"}, "free_memory_change"),
                        ({"NCCLWATCH_TIMING": "host"}, None)):
        job = Job([app("collectives_app"), "set-up-memory"], nranks=2,
                  env={"HOSTNCCL_COMM_MIB": "96", "HOSTNCCL_SETUP_MIB": "8", "NCCLWATCH_TIMING": "gpu", **env})
        results = job.run()
        check(all(r.returncode == 0 for r in results), f"{env}: {[r.stderr for r in results]}")
        code, report, _ = job.report("leaks", "--json")
        comms = {(c["state"], c["rank"]): c for c in report["communicators"]}
        check(len(comms) == 4, f"{env}: world and split on 2 ranks: {list(comms)}")
        alert = "\n".join(alert_blocks(results[0].stderr)[0])
        code, summary, _ = job.report("summary", "--json")
        if source is None:
            check(all(c["set_up_calls"] == [] and c["gpu_memory_held"] is None for c in comms.values()),
                  f"{env}: no reading in host mode: {comms}")
            check("GPU memory" not in alert and summary["gpu_memory_peak"] is None, f"{env}: {alert} {summary['gpu_memory_peak']}")
            continue
        for rank in (0, 1):
            world, split = comms[("leaked", rank)], comms[("destroyed", rank)]
            calls = [(c["op"], c["count"], c["taken_bytes"] // mib) for c in world["set_up_calls"]]
            check(calls == [("ncclAllReduce", 1024, 8), ("ncclAllReduce", 512, 0), ("ncclGroupEnd", 2, 16),
                            ("ncclAllGather", 128, 8)], f"{env}: rank {rank}'s set-up calls on world: {calls}")
            held = [c["held_bytes"] and c["held_bytes"] // mib for c in world["set_up_calls"]]
            check(held == ([104, 104, 120, 128] if source == "ncclCommMemStats" else [None] * 4), f"{env}: NCCL's counts {held}")
            check(world["gpu_memory"] == {"bytes": 96 * mib, "from": source}, f"{env}: made: {world['gpu_memory']}")
            check(world["gpu_memory_held"] == {"bytes": 128 * mib, "from": source}, f"{env}: held: {world['gpu_memory_held']}")
            check(split["gpu_memory_held"]["bytes"] == split["gpu_memory_freed"]["bytes"] == 104 * mib,
                  f"{env}: the split held what its destroy gave back: {split}")
        check("128.0 MiB of GPU memory" in alert, f"{env}: the alert gives what the communicator holds now: {alert}")
        check(summary["leaked_gpu_memory_bytes"] == 2 * 128 * mib, f"{env}: {summary['leaked_gpu_memory_bytes']}")
        peak = summary["gpu_memory_peak"]
        check(peak and peak["bytes"] == 232 * mib and peak["held_at_exit_bytes"] == 128 * mib and peak["unreleased_communicators"] == 1,
              f"{env}: world and split held 232 MiB at once, world's 128 MiB to the end: {peak}")
        code, text, _ = job.report("leaks")
        check("held 128 MiB of GPU memory: 96 MiB when made, 32 MiB more at 4 set-up call(s)" in text, f"{env}: leaks text\n{text}")
        code, text, _ = job.report("summary")
        check("GPU MEMORY: NCCL held up to 232 MiB on rank" in text and "128 MiB of it still held at exit by 1 communicator(s)" in text,
              f"{env}: summary text\n{text}")


def check_memory_chart(job):
    # The html page of the idle-comm job: one step line per rank through 96, 192 (the split made),
    # 200 and 208 MiB (each one's set-up all-reduce), 104 after the first destroy and 0 after the
    # second; the split's two ranks named idle with their bytes and line, the remedy after.
    mib = 1 << 20
    page = os.path.join(job.tmp, "report.html")
    code, _, err = job.report("html", "-o", page, "--idle-after", "2", "--idle-min-mib", "64")
    html = open(page).read()
    section = html[html.index('<h2 id="memory">'):]
    section = section[:section.index("<h2", 4)]
    lines = re.findall(r'<polyline class="memory" data-series="([^"]+)"', section)
    check(code == 0 and sorted(lines) == ["rank 0", "rank 1"], f"html (idle is no finding, as in the summary): exit {code}, memory lines {lines}\n{err}")
    for rank in lines:
        held = [float(n) if unit == "MiB" else float(n) / mib for n, unit in re.findall(rf"<title>{rank}: ([0-9.]+) (MiB|B) at", section)]
        check(held == [96, 192, 200, 208, 104, 0], f"html: {rank}'s memory over time {held}")
    check("The most: 208 MiB on rank" in section, section[:600])
    idle_rows = re.findall(r'<tr><td>(?:<b>[^<]*</b> )?<code>[0-9a-f]{16}</code></td><td class=n>([01])/2</td>', section)
    check(sorted(idle_rows) == ["0", "1"] and section.count("collectives_app.cc") >= 2 and "208 MiB</b>" in section and
          "ncclCommSuspend" in section, f"html: the split's ranks named idle: {idle_rows}\n{section[-2000:]}")
    code, _, _ = job.report("html", "-o", page)
    html = open(page).read()
    check("No idle communicator (no op for 60 s or more while holding 256 MiB or more)" in html, "html: defaults name none")


def idle_communicators_are_named_with_their_memory():
    # idle-comm (collectives_app): world all-reduces every 10 ms for 3 s while a split of it, after
    # one all-reduce, idles holding 104 MiB (96 at init, 8 at its set-up call) until destroyed.
    # `memory --idle-after 2` names the split's two ranks idle for about those 3 s, world not;
    # with the defaults (60 s) nothing is idle.
    mib = 1 << 20
    job = Job([app("collectives_app"), "idle-comm", "3000"], nranks=2,
              env={"HOSTNCCL_COMM_MIB": "96", "HOSTNCCL_SETUP_MIB": "8", "NCCLWATCH_TIMING": "gpu"})
    results = job.run()
    check(all(r.returncode == 0 for r in results), [r.stderr for r in results])
    code, report, _ = job.report("memory", "--json", "--idle-after", "2", "--idle-min-mib", "64")
    check(code == 1, f"an idle communicator is a finding: exit {code}")
    comms = report["communicators"]
    idle = [c for c in comms if c["idle"]]
    check(len(comms) == 4 and all(c["held_bytes"] == c["freed_bytes"] == 104 * mib for c in comms), comms)
    check(sorted(c["rank"] for c in idle) == [0, 1] and all(c["api"] == "ncclCommSplit" for c in idle), idle)
    check(all(2.5 <= c["idle_s"] <= 10 for c in idle), f"idle for the 3 s world ran alone: {idle}")
    check(all(c["idle_s"] < 1 for c in comms if not c["idle"]), comms)
    # Over time: 96 MiB when made, 104 MiB after its one all-reduce (NCCL's count), in that order.
    check(all([(r["point"], r["held_bytes"] // mib) for r in c["readings"]] == [("made", 96), ("set_up", 104)] and
              c["readings"][0]["after_start_s"] <= c["readings"][1]["after_start_s"] for c in comms), comms)
    check(all(p["peak_bytes"] == 208 * mib and p["held_at_end_bytes"] == 0 for p in report["processes"]), report["processes"])
    code, text, _ = job.report("memory", "--idle-after", "2", "--idle-min-mib", "64")
    check("IDLE: 2 communicator rank(s) held 208 MiB with no op for 2 s or more" in text and "until destroyed" in text and
          "ncclCommSuspend" in text and "collectives_app.cc" in text, text)
    code, csv_text, _ = job.report("memory", "--format", "csv")
    lines = csv_text.strip().splitlines()
    check(code == 0 and len(lines) == 5 and lines[0].startswith("host,pid,world_rank,comm,") and ",no," in lines[1], (code, lines))
    code, summary, _ = job.report("summary", "--json")
    check(summary["idle_communicators"] == 0 and summary["gpu_memory_peak"]["bytes"] == 208 * mib, summary)
    check_memory_chart(job)
    # Host timing mode measures nothing: said so, no finding.
    host = Job([app("collectives_app"), "idle-comm", "200"], nranks=2, env={"NCCLWATCH_TIMING": "host"})
    host.run()
    code, text, _ = host.report("memory")
    check(code == 0 and "no GPU memory figures in these traces" in text, (code, text))


def suspend_and_resume_move_the_memory_held():
    # suspend-memory (collectives_app): world holds 96 MiB when made and 8 MiB more at each of two
    # set-up calls; a suspend gives those 16 MiB back, a resume takes them again, a second suspend
    # lasts to the exit. Read by NCCL's count (which keeps the released bytes in its total while
    # suspended: the shim takes them off) and by the free memory alone, the same story.
    mib = 1 << 20
    for env, source in (({}, "ncclCommMemStats"), ({"HOSTNCCL_NO_MEMSTATS": "1"}, "free_memory_change")):
        job = Job([app("collectives_app"), "suspend-memory"], nranks=2,
                  env={"HOSTNCCL_COMM_MIB": "96", "HOSTNCCL_SETUP_MIB": "8", "NCCLWATCH_TIMING": "gpu", **env})
        results = job.run()
        check(all(r.returncode == 0 for r in results), f"{env}: {[r.stderr for r in results]}")
        code, report, _ = job.report("memory", "--json")
        comms = report["communicators"]
        check(len(comms) == 2, f"{env}: world on 2 ranks: {comms}")
        for c in comms:
            points = [(r["point"], r["held_bytes"] // mib) for r in c["readings"]]
            check(points == [("made", 96), ("set_up", 104), ("set_up", 112), ("suspend", 96), ("resume", 112), ("suspend", 96)],
                  f"{env}: rank {c['rank']}: {points}")
            check(c["suspended"] == "yes" and c["held_bytes"] == 96 * mib and c["from"] == source, f"{env}: {c}")
            changes = [r["taken_bytes"] // mib for r in c["readings"][3:]]
            check(changes == [-16, 16, -16], f"{env}: the free memory's changes at suspend, resume, suspend: {changes}")
        check(all(p["peak_bytes"] == 112 * mib and p["held_at_end_bytes"] == 96 * mib for p in report["processes"]), report["processes"])
        code, text, _ = job.report("memory")
        check(text.count("SUSPEND: comm ") == 4 and text.count("gave back 16 MiB (holding 96 MiB after)") == 4 and
              text.count("took back 16 MiB (holding 112 MiB after)") == 2, f"{env}: memory text\n{text}")
        code, leaks, _ = job.report("leaks", "--json")
        check(all(c["suspended"] and c["gpu_memory_held"] == {"bytes": 96 * mib, "from": source} and len(c["set_up_calls"]) == 2
                  for c in leaks["communicators"]), f"{env}: {leaks['communicators']}")
        alert = "\n".join(alert_blocks(results[0].stderr)[0])
        check("96.0 MiB of GPU memory" in alert, f"{env}: the alert gives what the suspended communicator still holds: {alert}")
        code, text, _ = job.report("leaks")
        check("96 MiB of GPU memory while suspended" in text, f"{env}: leaks text\n{text}")



def a_process_own_memory_is_read_through_nvml():
    # NCCL 2.29+ counts only its memory manager's buffers, not the connections made at first use
    # (on an H100, NCCL 2.30.7's count stayed 16 MiB while each rank's memory grew 248 MiB): the
    # stand-in takes HOSTNCCL_SETUP_UNCOUNTED_MIB more at each first op of a kind, outside its count,
    # while another process on the GPU allocates 50 MiB each time ours does (HOSTCUDA_OTHERS_MIB).
    # With NVML (the stand-in's, listing this process's own memory) the shim follows this process's
    # memory: world holds 96 + 4 * (8 + 4) = 144 MiB, the split 108 MiB that its destroy gives back,
    # and the others' allocations count nowhere. Where NVML does not list this process (a container's
    # pid namespace) and others share the GPU, the device's free memory is ambiguous: only NCCL's
    # count moves the figures, and the memory report says so.
    mib = 1 << 20
    standins = os.environ["HOSTNVML_DIR"] + ":" + HOSTNCCL_DIR
    base = {"HOSTNCCL_COMM_MIB": "96", "HOSTNCCL_SETUP_MIB": "8", "HOSTNCCL_SETUP_UNCOUNTED_MIB": "4", "HOSTCUDA_OTHERS_MIB": "50",
            "HOSTNVML_OTHER_PROCESSES": "1", "NCCLWATCH_TIMING": "gpu", "LD_LIBRARY_PATH": standins}
    for hidden in (False, True):
        job = Job([app("collectives_app"), "set-up-memory"], nranks=2, env={**base, **({"HOSTNVML_PID_HIDDEN": "1"} if hidden else {})})
        results = job.run()
        check(all(r.returncode == 0 for r in results), f"hidden={hidden}: {[r.stderr for r in results]}")
        code, report, _ = job.report("memory", "--json")
        comms = {(c["state"], c["rank"]): c for c in report["communicators"]}
        check(len(comms) == 4, f"hidden={hidden}: world and split on 2 ranks: {list(comms)}")
        code, text, _ = job.report("memory")
        alert = "\n".join(alert_blocks(results[0].stderr)[0])
        for rank in (0, 1):
            world, split = comms[("leaked", rank)], comms[("destroyed", rank)]
            points = [(r["point"], r["held_bytes"] // mib, r.get("taken_bytes") and r["taken_bytes"] // mib) for r in world["readings"]]
            if not hidden:
                check(points == [("made", 96, None), ("set_up", 108, 12), ("set_up", 108, 0), ("set_up", 132, 24), ("set_up", 144, 12)],
                      f"rank {rank}: world's memory by this process's own figure: {points}")
                check(world["held_bytes"] == 144 * mib and world["from"] == "process_memory" and world["shared_gpu"] is False, world)
                check(all(r["taken_by"] == "process" for r in world["readings"][1:]), world["readings"])
                check(split["held_bytes"] == split["freed_bytes"] == 108 * mib, f"the split's destroy gave back what it held: {split}")
            else:
                check([(p, held) for p, held, _ in points] == [("made", 96), ("set_up", 104), ("set_up", 104), ("set_up", 120), ("set_up", 128)],
                      f"rank {rank}: ambiguous changes left out, NCCL's count alone: {points}")
                check(world["shared_gpu"] is True and all(r["taken_by"] == "shared_device" for r in world["readings"][1:]), world)
        if not hidden:
            check("144.0 MiB of GPU memory" in alert and "AMBIGUOUS" not in text, f"{alert}\n{text}")
        else:
            check("AMBIGUOUS: on rank(s) 0, 1 other processes used the same GPU" in text, text)


NVSHMEM_PROGRAM = r'''
import ctypes, sys
nvshmem = ctypes.CDLL(sys.argv[1])
nccl = ctypes.CDLL("libnccl.so.2")
assert nvshmem.nvshmem_standin_init() == 0  # the line that started NVSHMEM
class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]
uid = UniqueId()
assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
own = ctypes.c_void_p()
assert nccl.ncclCommInitRank(ctypes.byref(own), 1, uid, 0) == 0  # the program's own, leaked
if sys.argv[2] == "finalize":
    assert nvshmem.nvshmem_standin_finalize() == 0
'''


def communicators_nvshmem_made_get_its_remedy():
    # NVSHMEM makes communicators for its teams (seen on an H200: PyTorch's NVSHMEM symmetric
    # memory made 6); only nvshmem_finalize releases them, so destroy_process_group() is not
    # their remedy. Here a stand-in NVSHMEM library makes 2, the program 1 of its own.
    library = os.path.join(BUILD, "tests", "integration", "libnvshmem_host_standin.so")
    for mode in ("never-finalized", "finalize"):
        job = Job([sys.executable, "-c", NVSHMEM_PROGRAM, library, mode], nranks=1)
        result = job.run()[0]
        check(result.returncode == 0, f"{mode}: {result.stderr}")
        code, report, _ = job.report("leaks", "--json")
        by_nvshmem = [c for c in report["communicators"] if c["made_by_nvshmem"]]
        check(len(by_nvshmem) == 2 and all("libnvshmem_host_standin.so" in c["created_at"] and
                                           c["created_at"].startswith("<string>:5 (<module>)") for c in by_nvshmem),
              f"{mode}: NVSHMEM's two, at the line that started it: {report['communicators']}")
        alert = "\n".join(alert_blocks(result.stderr)[0])
        code, text, _ = job.report("leaks")
        if mode == "finalize":
            check("NVSHMEM" not in alert and report["remedies"] == [lifecycle_remedy("kNcclRemedy")],
                  f"finalized: only the program's own leak: {alert} {report['remedies']}")
            continue
        check(all(c["state"] == "leaked" for c in by_nvshmem), f"{by_nvshmem}")
        check(report["remedies"][0].startswith("NVSHMEM made some of them") and len(report["remedies"]) == 2,
              f"NVSHMEM's remedy, and NCCL's for the program's own: {report['remedies']}")
        check("remedy: NVSHMEM made some of them: finalize NVSHMEM" in alert and "remedy: call ncclCommFinalize" in alert,
              f"the alert gives both remedies: {alert}")
        check(text.count("(by NVSHMEM, for its teams)") == 2 and "remedy: NVSHMEM made some of them" in text, text)
        check(alert.count("(by NVSHMEM, for its teams)") == 2, f"the alert names NVSHMEM's two: {alert}")


def lifecycle_remedy(name):
    header = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common", "ncclwatch",
                               "lifecycle_rules.h")).read()
    return re.search(name + r' = "([^"]*)"', header).group(1)


def groups_remade_each_cycle_are_named_piling_up():
    # Three cycles of 4 splits from one call site, none destroyed (the Megatron pattern).
    job = Job([app("lifecycle_app"), "pile-up"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("leaks", "--json")
    piles = report["pile_ups"]
    check(code == 1 and len(piles) == 1, f"one call site piled up: {piles}")
    pile = piles[0]
    check((pile["made"], pile["not_destroyed"], pile["bursts"], pile["peak_alive"], pile["ranks"]) == (12, 12, 3, 12, [0, 1]),
          f"12 made in 3 bursts, none destroyed, on both ranks: {pile}")
    check("make_parallel_group" in pile["created_at"], f"named by the function that made them: {pile['created_at']}")
    check(report["peak_alive"]["count"] == 13, f"the world and the 12 at once: {report['peak_alive']}")
    code, text, _ = job.report("leaks")
    check("PILING UP: 12 communicators made at" in text, f"leaks text:\n{text}")
    code, summary, _ = job.report("summary", "--json")
    check(code == 1 and summary["piling_up"][0]["made"] == 12 and "piling up" in summary["first_look"],
          f"summary: {summary['piling_up']} {summary['first_look']}")
    # Destroyed only after the last cycle: they still piled up while the program ran.
    job = Job([app("lifecycle_app"), "pile-up", "destroyed-at-end"], nranks=2)
    job.run()
    code, report, _ = job.report("leaks", "--json")
    piles = report["pile_ups"]
    check(len(piles) == 1 and (piles[0]["made"], piles[0]["not_destroyed"], piles[0]["peak_alive"]) == (12, 0, 12) and
          "destroyed only at the end" in piles[0]["text"], f"piled up, destroyed at the end: {piles}")
    # Each cycle's groups destroyed before the next are made: never more than one burst alive.
    job = Job([app("lifecycle_app"), "pile-up", "replaced"], nranks=2)
    job.run()
    code, report, _ = job.report("leaks", "--json")
    check(code == 0 and report["pile_ups"] == [], f"groups replaced each cycle do not pile up: {report['pile_ups']}")
    # The same splits made all at once and kept (a job's fixed set of groups): no pile-up.
    job = Job([app("lifecycle_app"), "all-resources"], nranks=2)
    job.run()
    code, report, _ = job.report("leaks", "--json")
    check(report["pile_ups"] == [], f"no pile-up in a job without one: {report['pile_ups']}")


def resources_out_of_order_are_named():
    job = Job([app("lifecycle_app"), "out-of-order"], nranks=2)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("leaks", "--json")
    found = sorted((o["kind"], o["resource"], o["rank"]) for o in report["order"])
    check(code == 1 and report["leaks"] == [] and found == [
        ("outlived_communicator", "window", 0), ("outlived_communicator", "window", 1),
        ("registered_twice", "registration", 0), ("registered_twice", "registration", 1)],
        f"the window outliving its comm and the buffer registered twice, on each rank, nothing else: {report['order']}")
    twice = [o for o in report["order"] if o["kind"] == "registered_twice"][0]
    check(twice["buffer"] and twice["earlier_handle"] != twice["handle"], f"both registrations named: {twice}")
    code, text, _ = job.report("leaks")
    check("ORDER: window" in text and "ncclCommWindowDeregister" in text and "registered on it" in text, f"text:\n{text}")
    # summary and html read the same typed findings: both say it first, both exit 1.
    code, summary, _ = job.report("summary", "--json")
    check(code == 1 and summary["resources_out_of_order"] == 4 and "out of order" in summary["first_look"],
          f"summary: {summary['first_look']}")
    mib = 1 << 20
    page = os.path.join(job.tmp, "report.html")
    code, _, err = job.report("html", "-o", page)
    html = open(page).read()
    check(code == 1 and summary["first_look"] in html,
          f"html exit {code}, its verdict differs from summary's {summary['first_look']!r}: {err}")


def narrower_communicators_are_named_by_their_world_ranks():
    # Each half (even, odd world ranks) has ranks 0 and 1 of its own: only the world ranks say
    # which half leaked, as people wrote the group (new_group([0, 2])).
    job = Job([app("lifecycle_app"), "halves-leaked"], nranks=4)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
    code, report, _ = job.report("leaks", "--json")
    halves = collections.defaultdict(set)
    for leak in report["leaks"]:
        halves[leak["comm"]].add((leak["rank"], leak["world_rank"]))
    check(code == 1 and sorted(sorted(h) for h in halves.values()) == [[(0, 0), (1, 2)], [(0, 1), (1, 3)]],
          f"each half's own and world ranks: {dict(halves)}")
    code, text, _ = job.report("leaks")
    check("on rank(s) 0,1 (world rank(s) 0,2)" in text and "on rank(s) 0,1 (world rank(s) 1,3)" in text, text)
    mib = 1 << 20
    page = os.path.join(job.tmp, "report.html")
    job.report("html", "-o", page)
    html = open(page).read()
    check("0,1 (world 0,2) of 2" in html and "0,1 (world 1,3) of 2" in html, "html: the halves' world ranks")


def another_build_of_a_module_is_never_used_to_symbolize():
    # The program runs from a copy; its trace records the copy's path and build ID. Symbolized
    # from that copy, the leak names its function; once another program stands at that path (a
    # rebuild, another host's file), `leaks` must not take names from it, and says so.
    job = Job([], nranks=2)
    program = os.path.join(job.tmp, "lifecycle_app")
    shutil.copy(app("lifecycle_app"), program)
    job.argv = [program, "leaky"]
    job.run()
    code, report, _ = job.report("leaks", "--json")
    world = [l for l in report["leaks"] if l["kind"] == "communicator"][0]
    check("init_world" in world["created_at"] and "lifecycle_app" in world["created_at"],
          f"symbolized from the same build: {world['created_at']}")
    shutil.copy(app("collectives_app"), program)
    code, report, err = job.report("leaks", "--json")
    world = [l for l in report["leaks"] if l["kind"] == "communicator"][0]
    check("init_world" not in world["created_at"] and "another build" in err and program in err,
          f"another build is not used: {world['created_at']} / {err}")
    check(all("init_world" not in frame for frame in world["stack"]), f"{world['stack']}")


def library_without_pnccl_aliases_is_resolved():
    env = {"LD_LIBRARY_PATH": os.path.join(BUILD, "tests", "hostnccl", "no-pnccl")}
    job = Job([app("lifecycle_app"), "leaky"], nranks=2, env=env)
    for rank, r in enumerate(job.run()):
        check(r.returncode == 0, f"rank {rank}: {r.returncode} {r.stderr}")
        check(len(alert_blocks(r.stderr)) == 1, f"rank {rank}: {r.stderr!r}")
    out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(env["LD_LIBRARY_PATH"], "libnccl.so.2")],
                         capture_output=True, text=True).stdout
    check("pncclCommInitRank" not in out and "ncclCommInitRank" in out, "the variant must lack pnccl names")
    code, report, _ = job.report("leaks", "--json")
    check(code == 1 and comms_by_state(report) == {"leaked": 2, "destroyed": 2, "aborted": 2}, f"{report}")
    dump = subprocess.run([REPORT_BIN, "dump", job.traces()[0]], capture_output=True, text=True).stdout
    check('"profiling_aliases":"0"' in dump and "no-pnccl" in dump, "the library record says which library, no aliases")


def process_without_nccl_leaves_nothing():
    job = Job(["sh", "-c", "echo hello"], nranks=1)
    r = job.run()[0]
    check(r.returncode == 0 and r.stderr == "", f"stderr {r.stderr!r}")
    check(job.traces() == [] and not os.path.exists(job.trace_dir), "no trace dir for a process without NCCL")


if __name__ == "__main__":
    main({f.__name__: f for f in [
        groups_remade_each_cycle_are_named_piling_up, communicator_gpu_memory_is_measured,
        memory_taken_at_set_up_calls_is_counted, idle_communicators_are_named_with_their_memory,
        suspend_and_resume_move_the_memory_held, a_process_own_memory_is_read_through_nvml, resources_out_of_order_are_named,
        communicators_nvshmem_made_get_its_remedy, narrower_communicators_are_named_by_their_world_ranks,
        another_build_of_a_module_is_never_used_to_symbolize,
        init_hang_names_who_never_joined, leaky_job_reports_exactly_its_leaks, leaky_job_on_three_ranks, clean_job_is_silent,
        nccl_inside_rtld_local_library_is_traced, on_leak_fail_changes_only_leaky_exits, sigkill_loses_no_record,
        sigterm_prints_alert_and_dies_by_sigterm, thirty_two_threads_create_and_destroy,
        forked_child_gets_its_own_trace, unwritable_trace_dir_costs_records_not_the_job, hung_destroy_is_reported,
        hung_finalize_is_named_with_its_time, kill_just_after_entering_teardown_is_not_a_hang, every_resource_kind_and_end_state, library_without_pnccl_aliases_is_resolved,
        process_without_nccl_leaves_nothing]})
