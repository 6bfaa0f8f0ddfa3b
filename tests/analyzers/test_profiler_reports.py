"""What NCCL's profiler interface told the shim, and the job's settings, as the reports say them:
plans (op_plan) and kernel channels (op_kernel) from the fuzz corpus' hostile shapes, and `advice`
on synthetic jobs whose settings cost something, or nothing."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_harness import check, job, report, report_json, run_case  # noqa: E402

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def test_hostile_plans_are_bounded():
    # The fuzz corpus' hostile_op_plans.nwt (craft_trace.py): names with no NUL and bytes that are
    # not text come out as '?', the 80 ways of one op and size stop at 64, the record of an op kind
    # no API has is left out, and the ordinary plan is named on its row.
    path = os.path.join(CORPUS, "hostile_op_plans.nwt")
    p = report("dump", path)
    plans = [json.loads(line) for line in p.stdout.splitlines() if '"op_plan"' in line]
    check(p.returncode == 0 and len(plans) == 85 and plans[0]["algo"] == "?" * 16 and plans[0]["proto"] == "??31m?AB",
          (p.returncode, len(plans), plans[:1]))
    rc, out, err = report_json("latency", path)
    rows = {r["bytes"]: r for r in out["rows"]}
    check(rc == 0 and rows[64]["nccl_plan"] == "TREE/LL 1ch", (rc, out["rows"]))
    ways = rows[4096]["nccl_plan"].split(", ")
    check(len(ways) == 64 and ways[0] == "????????????????/??31m?AB 4ch 2%", ways[:3])


def test_hostile_kernel_times_are_left_out():
    # The fuzz corpus' hostile_op_kernels.nwt (craft_trace.py): channel records that cannot be a
    # kernel's are named as a problem of the file and left out; 300 ops still waiting for a
    # channel count with the one they have (2 us each), without holding more than the reader keeps
    # open; the two ordinary ops, channels interleaved, are 10 and 30 us: mean 20, max 30.
    path = os.path.join(CORPUS, "hostile_op_kernels.nwt")
    rc, out, err = report_json("latency", path)
    rows = {r["bytes"]: r for r in out["rows"]}
    check(rc == 0 and "cannot be a kernel's" in err and path in err, (rc, err))
    k = rows[4096].get("nccl_kernel")
    check(k and k["ops"] == 2 and abs(k["mean_us"] - 20) < 1e-6 and abs(k["max_us"] - 30) < 1e-6, rows[4096])
    k = rows[64].get("nccl_kernel") if 64 in rows else None
    check(k and k["ops"] == 300 and abs(k["mean_us"] - 2) < 1e-6, out["rows"])
    p = report("dump", path)
    kernels = [json.loads(line) for line in p.stdout.splitlines() if '"op_kernel"' in line]
    check(p.returncode == 0 and len(kernels) == 308 and kernels[0]["gpu_stop_ns"] == 0, (p.returncode, len(kernels)))


def test_hostile_proxy_operations_are_left_out():
    # The fuzz corpus' hostile_op_proxies.nwt (craft_trace.py): the four proxy operations no NCCL
    # reports are named and left out; the send to rank 1 and the receive from rank 3 are links of
    # 4096 bytes; of the sends to rank 2, only the one whose data moved within its span gives the
    # rate: 1 MB over 1 ms, 1 GB/s.
    path = os.path.join(CORPUS, "hostile_op_proxies.nwt")
    rc, out, err = report_json("peers", path)
    check(rc == 0 and "cannot be a proxy operation's" in err and "3 more implausible" in err and path in err, (rc, err))
    links = {(link["peer"], link["direction"]): link for link in out["links"]}
    check(set(links) == {(1, "send"), (3, "recv"), (2, "send")}, links)
    check(links[(1, "send")]["bytes"] == 4096 and links[(1, "send")]["send_gbps"] is None, links[(1, "send")])
    to_2 = links[(2, "send")]
    check(to_2["operations"] == 3 and abs(to_2["send_gbps"] - 1.0) < 1e-9, to_2)


def test_costly_settings_are_advised():
    # costly_settings (gen_job.cc): 4 ranks on two hosts. Each costly setting is named once with
    # the processes and hosts that had it; rank 3 alone logs every call.
    rc, out, err = report_json("advice", job("costly_settings"))
    got = {a["setting"]: a for a in out["advice"]}
    check(rc == 1 and set(got) == {"NCCL_IB_DISABLE", "NCCL_BUFFSIZE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_DEBUG"},
          (rc, got, err))
    check(got["NCCL_IB_DISABLE"]["processes"] == 4 and got["NCCL_IB_DISABLE"]["hosts"] == ["node0", "node1"] and
          "TCP sockets" in got["NCCL_IB_DISABLE"]["why"], got["NCCL_IB_DISABLE"])
    check(got["NCCL_BUFFSIZE"]["value"] == "65536" and "4 MiB" in got["NCCL_BUFFSIZE"]["why"], got["NCCL_BUFFSIZE"])
    check(got["NCCL_DEBUG"]["processes"] == 1 and got["NCCL_DEBUG"]["hosts"] == ["node1"], got["NCCL_DEBUG"])
    check("costs" not in got["NCCL_BUFFSIZE"], got["NCCL_BUFFSIZE"])
    # The summary names them and points at advice; they are not findings of its own.
    d = job("costly_settings")
    rc, s, _ = report_json("summary", d)
    check(rc == 0 and sorted(s["advised_settings"]) == ["NCCL_BUFFSIZE=65536", "NCCL_DEBUG=INFO", "NCCL_IB_DISABLE=1",
                                                     "TORCH_NCCL_ASYNC_ERROR_HANDLING=0"], (rc, s["advised_settings"]))
    check("ncclwatch-report advice" in report("summary", d).stdout, "the summary's text points at advice")
    # The same settings where they cost nothing: InfiniBand off on one host, NCCL's default
    # buffer, a log of init only.
    rc, out, err = report_json("advice", job("one_host_settings"))
    check(rc == 0 and out == {"advice": []}, (rc, out, err))


if __name__ == "__main__":
    run_case(globals())
