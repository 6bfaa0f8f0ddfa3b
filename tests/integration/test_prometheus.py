"""ncclwatch's rules and dashboard on a real Prometheus (Debian's prometheus and
prometheus-node-exporter, started on localhost by the test and stopped by it): the shim's live files
of a hung and of a straggling job on the CPU stand-in, and the report's series of simulated jobs of
4,096 ranks, scraped through the textfile collector; each alert read back from Prometheus' HTTP API
names the rank the job was made to have, and every dashboard panel's query runs there."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

from harness import BUILD, REPORT, Job, app, check, main, skip
from test_live_metrics import SAMPLE, free_port, node_exporter

SOURCE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DASHBOARD = os.path.join(SOURCE, "analyzers", "share", "grafana", "ncclwatch-dashboard.json")
# Seconds, short for a test: Prometheus scrapes and evaluates every second.
RULE_SETTINGS = ("--hang-after", "5", "--teardown-after", "5", "--straggler-after", "10",
                 "--idle-after", "5", "--idle-min-mib", "64")
ALERT_DEADLINE_S = 60
# The panels of GPU memory, empty for jobs that measure none (host timing, simulated jobs).
MEMORY_PANELS = {"GPU memory per communicator rank", "NCCL GPU memory per process"}


class Prometheus:
    """node-exporter over `textfiles` and a Prometheus scraping it every `scrape_s` seconds, with
    ncclwatch's rules for that interval."""

    def __init__(self, textfiles, scrape_s=1):
        self.rate_interval = f"{4 * scrape_s}s"  # Grafana's $__rate_interval: four scrapes
        binary = shutil.which("prometheus")
        if not binary:
            skip("prometheus is not installed (scripts/bootstrap installs it)")
        self.tmp = tempfile.mkdtemp(prefix="ncclwatch-prometheus-")
        rules = os.path.join(self.tmp, "ncclwatch.rules.yml")
        with open(rules, "w") as f:
            f.write(subprocess.run([REPORT, "rules", *RULE_SETTINGS, "--scrape-interval", str(scrape_s)], capture_output=True, text=True, check=True).stdout)
        self.exporter, exporter_url = node_exporter(textfiles)
        target = urllib.parse.urlparse(exporter_url).netloc
        config = os.path.join(self.tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"global:\n  scrape_interval: {scrape_s}s\n  evaluation_interval: 1s\n"
                    f"rule_files: [{json.dumps(rules)}]\n"
                    "scrape_configs:\n  - job_name: ncclwatch\n"
                    f"    static_configs: [{{targets: [{json.dumps(target)}]}}]\n")
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = open(os.path.join(self.tmp, "prometheus.log"), "w")
        self.proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={self.tmp}/data",
                                      f"--web.listen-address={self.url[len('http://'):]}", "--log.level=warn"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/-/ready", timeout=2).read()
                break
            except OSError:
                check(self.proc.poll() is None and time.time() < deadline, f"prometheus did not start: {self.logs()}")
                time.sleep(0.2)

    def logs(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-3000:]

    def api(self, path, **params):
        url = f"{self.url}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        reply = json.loads(urllib.request.urlopen(url, timeout=10).read())
        check(reply.get("status") == "success", (path, params, reply))
        return reply["data"]

    def firing(self, alertname=None):
        return [a["labels"] for a in self.api("alerts")["alerts"]
                if a["state"] == "firing" and (alertname is None or a["labels"]["alertname"] == alertname)]

    def wait_for_alert(self, alertname, job_id, started):
        """The firing `alertname` alerts of `job_id`, once there are any, and when they came."""
        while time.time() - started < ALERT_DEADLINE_S:
            got = [a for a in self.firing(alertname) if a.get("job_id") == job_id]
            if got:
                return got, time.time() - started
            time.sleep(0.5)
        scrapes = [(r["metric"]["__name__"], r["value"][1]) for r in
                   self.query("up or scrape_duration_seconds or scrape_samples_scraped")]
        scrapes += [t["lastError"] for t in self.api("targets")["activeTargets"] if t["lastError"]]
        raise AssertionError(f"{alertname} for {job_id} did not fire within {ALERT_DEADLINE_S} s; firing: "
                             f"{self.firing()}; last scrape: {scrapes}; prometheus: {self.logs()}")

    def query(self, expr):
        return self.api("query", query=expr)["result"]

    def stop(self):
        for proc in (self.proc, self.exporter):
            proc.kill()
            proc.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def panels_data(prom, job_id):
    """{panel title: number of series its queries return} for `job_id`, every query run on
    Prometheus as Grafana would send it."""
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    out = {}
    for panel in dashboard["panels"]:
        out[panel["title"]] = 0
        for target in panel["targets"]:
            expr = target["expr"].replace("$job_id", job_id).replace("$__rate_interval", prom.rate_interval)
            out[panel["title"]] += len(prom.query(expr))
    return out


def dashboard_is_grafana_provisioning_json():
    # What Grafana's file provisioning loads: a dashboard model with a uid, a job variable fed from
    # the series, and panels on its 24-column grid, none overlapping, each with Prometheus queries.
    with open(DASHBOARD) as f:
        d = json.load(f)
    check(d["uid"] == "ncclwatch" and isinstance(d["schemaVersion"], int) and d["title"], d.keys())
    variables = {v["name"]: v for v in d["templating"]["list"]}
    check(variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus", variables)
    check("label_values(ncclwatch_ops_issued_total, job_id)" in json.dumps(variables["job_id"]["query"]), variables)
    cells, ids = set(), set()
    for p in d["panels"]:
        check(p["id"] not in ids and p["type"] in ("timeseries", "table") and p["title"] and p["targets"], p)
        ids.add(p["id"])
        g = p["gridPos"]
        check(g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"])
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                check((x, y) not in cells, f"{p['title']} overlaps another panel at {(x, y)}")
                cells.add((x, y))
        for t in p["targets"]:
            check(t["datasource"]["uid"] == "${datasource}" and 'job_id="$job_id"' in t["expr"], (p["title"], t))
    provisioning = open(os.path.join(os.path.dirname(DASHBOARD), "provisioning.yaml")).read()
    check("apiVersion: 1" in provisioning and "type: file" in provisioning, provisioning)


def live_job(textfiles, argv, nranks, job_id, env=None):
    job = Job(argv, nranks=nranks, timeout=120)
    job.env.update({"NCCLWATCH_METRICS_FILE": os.path.join(textfiles, f"{job_id}-%p.prom"), "NCCLWATCH_METRICS_SEC": "0.5",
                    "NCCLWATCH_JOB": job_id, "NCCLWATCH_STALL_SEC": "1", **(env or {})})
    return job


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def live_hang_and_straggler_fire_through_prometheus():
    # Rank 1 of 2 skips the 3rd of 5 all-reduces and both then wait 90 s; in a job of its own the
    # last of 3 ranks sleeps 20 ms before each of 1,500 all-reduces. Both jobs' live files are
    # scraped through node-exporter, and each alert must fire, on its rank, within 60 s.
    textfiles = tempfile.mkdtemp(prefix="ncclwatch-textfiles-")
    with Prometheus(textfiles) as prom:
        hung = live_job(textfiles, [app("collectives_app"), "skip", "90000"], 2, "e2e-hang")
        slow = live_job(textfiles, [app("collectives_app"), "straggler-long", "1500"], 3, "e2e-straggler",
                        {"NCCLWATCH_SAMPLE": "1"})
        started = time.time()
        procs = hung.start() + slow.start()
        try:
            hang, hang_s = prom.wait_for_alert("NcclHangSuspected", "e2e-hang", started)
            check([(a["rank"], a["severity"]) for a in hang] == [("1", "critical")], hang)
            straggler, straggler_s = prom.wait_for_alert("NcclStraggler", "e2e-straggler", started)
            check([a["rank"] for a in straggler] == ["2"], straggler)
            # What its peers wait for it, per all-reduce: the injected 20 ms (the stand-in's GPU).
            waits = {r["metric"]["rank"]: float(r["value"][1])
                     for r in prom.query('ncclwatch:rank_wait_caused_seconds{job_id="e2e-straggler"}')}
            check(15e-3 <= waits["2"] <= 25e-3 and max(waits["0"], waits["1"]) < 5e-3, waits)
            stalled = prom.wait_for_alert("NcclCommunicatorStalled", "e2e-hang", started)[0]
            # Nothing else: the straggling job is no hang, the hung one no straggler.
            check(not [a for a in prom.firing("NcclHangSuspected") if a["job_id"] != "e2e-hang"], prom.firing())
            check(not [a for a in prom.firing("NcclStraggler") if a["job_id"] != "e2e-straggler"], prom.firing())
            for job_id in ("e2e-hang", "e2e-straggler"):
                panels = panels_data(prom, job_id)
                print(f"{job_id}: series per panel {panels}")
                # The live files carry no latencies (bus bandwidth) and the jobs register nothing.
                empty = {t for t, n in panels.items() if not n}
                check(empty == {"Bus bandwidth by size", "NCCL resources held", "GPU memory per communicator rank"},
                      f"{job_id}: panels without data: {empty}")
            print(f"NcclHangSuspected after {hang_s:.1f} s, NcclStraggler after {straggler_s:.1f} s "
                  f"(wait caused {waits['2'] * 1e3:.1f} ms), NcclCommunicatorStalled on {len(stalled)} comm(s)")
        finally:
            stop(procs)


def live_idle_communicator_memory_fires_through_prometheus():
    # Two ranks: world all-reduces every 10 ms for 30 s; a split runs one all-reduce and then idles,
    # holding what the stand-in gives it (96 MiB at init, 8 MiB at its first all-reduce). With
    # --idle-after 5 --idle-min-mib 64 the alert must fire on the split's two ranks alone, giving
    # its 104 MiB, and the dashboard's memory panels show both communicators and both processes.
    textfiles = tempfile.mkdtemp(prefix="ncclwatch-textfiles-")
    with Prometheus(textfiles) as prom:
        job = live_job(textfiles, [app("collectives_app"), "idle-comm", "30000"], 2, "e2e-idle",
                       {"HOSTNCCL_COMM_MIB": "96", "HOSTNCCL_SETUP_MIB": "8", "NCCLWATCH_TIMING": "gpu"})
        started = time.time()
        procs = job.start()
        try:
            idle, idle_s = prom.wait_for_alert("NcclIdleCommunicatorMemory", "e2e-idle", started)
            time.sleep(2)  # both ranks' alerts, and no other
            idle = [a for a in prom.firing("NcclIdleCommunicatorMemory") if a["job_id"] == "e2e-idle"]
            held = {(r["metric"]["comm"], r["metric"]["rank"]): float(r["value"][1])
                    for r in prom.query('ncclwatch_communicator_gpu_memory_bytes{job_id="e2e-idle"}')}
            check(len(held) == 4, f"world and split on 2 ranks: {held}")
            idle_comms = {a["comm"] for a in idle}
            check(len(idle_comms) == 1 and sorted(a["rank"] for a in idle) == ["0", "1"], idle)
            side = idle_comms.pop()
            check(all(v == 104 * 2**20 for (comm, _), v in held.items() if comm == side), held)
            check(all(v == 104 * 2**20 for (comm, _), v in held.items() if comm != side), f"world: 96 + 8 MiB: {held}")
            per_process = [float(r["value"][1]) for r in prom.query('ncclwatch_process_nccl_gpu_memory_bytes{job_id="e2e-idle"}')]
            check(per_process == [208 * 2**20] * 2, f"each process: world's and the split's 104 MiB: {per_process}")
            panels = panels_data(prom, "e2e-idle")
            check(panels["GPU memory per communicator rank"] == 4 and panels["NCCL GPU memory per process"] == 2, panels)
            print(f"NcclIdleCommunicatorMemory after {idle_s:.1f} s on the split's ranks, 104 MiB each; world (busy) not")
        finally:
            stop(procs)


def gen_job(scenario, folder):
    subprocess.run([os.path.join(BUILD, "tests", "analyzers", "gen_job"), scenario, folder], check=True,
                   stdout=subprocess.DEVNULL)
    return subprocess.run([REPORT, "metrics", folder], capture_output=True, text=True, check=True).stdout


RAMPED = ("ncclwatch_collective_gpu_seconds_total", "ncclwatch_collectives_timed_total")


def ramped(text, share):
    """The metrics as the job had them `share` of the way through: the straggler counters grown."""
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1) in RAMPED:
            line = line[:line.rindex(" ") + 1] + repr(float(m.group(3)) * share)
        out.append(line)
    return "\n".join(out) + "\n"


LIVE_FAMILIES = ("ncclwatch_build_info", "ncclwatch_communicators", "ncclwatch_communicators_created_total",
                 "ncclwatch_resources_held", "ncclwatch_trace_lost_records_total", "ncclwatch_ops_issued_total",
                 "ncclwatch_ops_completed_total", "ncclwatch_collective_gpu_seconds_total",
                 "ncclwatch_collectives_timed_total", "ncclwatch_stalls_total", "ncclwatch_stalled",
                 "ncclwatch_p2p_ops_issued_total")


def node_scrape(text, host, ranks):
    """What node-exporter serves for one node of the job: the families the shim's live files write,
    for the node's processes ({host}) and its ranks ({rank}), scraped through a real node-exporter.
    Returns (ncclwatch series, bytes of the ncclwatch lines, HELP and TYPE included)."""
    keep, family = [], None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            family = line.split()[2]
        if family not in LIVE_FAMILIES:
            continue
        m = SAMPLE.match(line)
        if line.startswith("#") or family == "ncclwatch_build_info" or (
                m and (f'host="{host}"' in line or any(f'rank="{r}"' in line for r in ranks))):
            keep.append(line)
    folder = tempfile.mkdtemp(prefix="ncclwatch-node-")
    with open(os.path.join(folder, "node.prom"), "w") as f:
        f.write("\n".join(keep) + "\n")
    exporter, url = node_exporter(folder)
    try:
        served = [l for l in urllib.request.urlopen(url, timeout=10).read().decode().splitlines() if "ncclwatch_" in l]
    finally:
        exporter.kill()
        exporter.wait()
        shutil.rmtree(folder, ignore_errors=True)
    return sum(1 for l in served if not l.startswith("#")), sum(len(l) + 1 for l in served)


def fleet_of_4096_ranks_fires_through_prometheus():
    # Two simulated jobs of 4,096 ranks (8 per host): in one rank 1234 stops after 12 of 24
    # all-reduces, in the other rank 777 starts each 20 ms late. Their `ncclwatch-report metrics`
    # series are scraped through node-exporter, the straggler counters growing over 20 s as the job
    # would have them; each alert fires on its rank alone.
    textfiles = tempfile.mkdtemp(prefix="ncclwatch-textfiles-")
    work = tempfile.mkdtemp(prefix="ncclwatch-fleet-")
    texts = {s: gen_job(s, os.path.join(work, s)) for s in ("ranks4096_hang", "ranks4096_straggler")}
    # A node of the job: ranks 4088-4095 (the longest rank labels), their 8 processes.
    series, scraped = node_scrape(texts["ranks4096_straggler"], "node511", [str(r) for r in range(4088, 4096)])
    print(f"4,096 ranks, one communicator, 8 ranks per node: {series} series and {scraped} bytes per node's scrape")
    check(8 * 6 <= series <= 8 * 12 and scraped < 16384, (series, scraped))
    done = threading.Event()
    started = time.time()

    def publish(name, text):
        path = os.path.join(textfiles, name + ".prom")
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)

    # Each file holds 41,000 series, which node-exporter takes most of a second to read on a busy
    # 2-core machine: the files are rewritten only when they change (the straggler's, once a second)
    # and scraped every 3 s, else scrapes time out and the series go stale.
    publish("ranks4096_hang", texts["ranks4096_hang"])

    def write():
        while not done.is_set():
            publish("ranks4096_straggler", ramped(texts["ranks4096_straggler"], min(1.0, (time.time() - started) / 20)))
            done.wait(1.0)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with Prometheus(textfiles, scrape_s=3) as prom:
            hang, hang_s = prom.wait_for_alert("NcclHangSuspected", "ranks4096-hang", started)
            check([a["rank"] for a in hang] == ["1234"], [a["rank"] for a in hang][:10])
            straggler, straggler_s = prom.wait_for_alert("NcclStraggler", "ranks4096-straggler", started)
            check([a["rank"] for a in straggler] == ["777"], [a["rank"] for a in straggler][:10])
            time.sleep(3)  # a few more evaluations: nothing else joins them
            check(sorted(a["rank"] for a in prom.firing("NcclHangSuspected")) == ["1234"], "hang alerts")
            check(sorted(a["rank"] for a in prom.firing("NcclStraggler")) == ["777"], "straggler alerts")
            wait = prom.query('ncclwatch:rank_wait_caused_seconds{job_id="ranks4096-straggler", rank="777"}')
            check(len(wait) == 1 and 19e-3 <= float(wait[0]["value"][1]) <= 21e-3, wait)
            # Every panel has data, but those of what the job never had: resources (none registered)
            # and, in the straggling job, ranks behind their peers.
            for job_id, never in (("ranks4096-hang", set()), ("ranks4096-straggler", {"Ranks behind their peers"})):
                panels = panels_data(prom, job_id)
                print(f"{job_id}: series per panel {panels}")
                empty = {t for t, n in panels.items() if not n}
                # Simulated jobs measure no memory (gen_job writes no GPU memory figures).
                check(empty == {"NCCL resources held"} | MEMORY_PANELS | never,
                      f"{job_id}: panels without data: {empty}")
            print(f"NcclHangSuspected after {hang_s:.1f} s, NcclStraggler after {straggler_s:.1f} s")
    finally:
        done.set()
        writer.join()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(textfiles, ignore_errors=True)


if __name__ == "__main__":
    main({f.__name__: f for f in (dashboard_is_grafana_provisioning_json, live_hang_and_straggler_fire_through_prometheus,
                                  live_idle_communicator_memory_fires_through_prometheus,
                                  fleet_of_4096_ranks_fires_through_prometheus)})
