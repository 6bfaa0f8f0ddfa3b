"""`advice` on the CPU stand-in: the job's NCCL settings worth a look, each named with why and where,
and a forced NCCL_ALGO named with what it cost against NCCL's own choice of the same ops, measured
by the kernel clock (NCCLWATCH_PROFILER=kernels) in the traces of a second run without it. The
stand-in makes every "kernel" of the forced run 3 ms slower (HOSTNCCL_KERNEL_NS): that is the
truth the cost must show."""
import json
import subprocess

from harness import REPORT, SANITIZED, Job, app, check, main


def advice(*dirs):
    p = subprocess.run([REPORT, "advice", "--json", *dirs], capture_output=True, text=True)
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else {}, p.stderr


def run(env):
    job = Job([app("collectives_app"), "mixed"], nranks=2, env={"NCCLWATCH_PROFILER": "kernels", **env})
    results = job.run()
    check(all(r.returncode == 0 for r in results), f"{env}: {[r.stderr for r in results]}")
    return job


def forced_algorithm_is_named_with_its_cost():
    forced = run({"NCCL_ALGO": "RING", "HOSTNCCL_KERNEL_NS": "4000000", "NCCL_P2P_DISABLE": "1",
                  "NCCL_LL_THRESHOLD": "0"})
    own = run({"HOSTNCCL_KERNEL_NS": "1000000"})
    code, out, err = advice(forced.trace_dir, own.trace_dir)
    check(code == 1, (code, err))
    by_setting = {a["setting"]: a for a in out["advice"]}
    check(set(by_setting) == {"NCCL_ALGO", "NCCL_P2P_DISABLE", "NCCL_LL_THRESHOLD"}, by_setting)
    check(by_setting["NCCL_P2P_DISABLE"]["processes"] == 2 and "peer-to-peer" in by_setting["NCCL_P2P_DISABLE"]["why"],
          by_setting["NCCL_P2P_DISABLE"])
    check("do not read it" in by_setting["NCCL_LL_THRESHOLD"]["why"], by_setting["NCCL_LL_THRESHOLD"])
    algo = by_setting["NCCL_ALGO"]
    check(algo["value"] == "RING" and algo["cost_measured"] and len(algo["costs"]) >= 5, algo)
    for c in algo["costs"]:
        # 3 ms more per kernel on the forced side, by the CUDA events (what the job paid) and by
        # NCCL's kernel clock beside them (an op whose peer came late from its own slower kernel
        # waits longer still), or by the kernel clock alone for ops inside a group, whose events
        # time the group; small sizes ran trees where NCCL chose for itself.
        beside = c["kernel_added_us_per_call"]
        check((c["clock"] == "events" and beside is not None) or (c["clock"] == "kernel" and beside is None), c)
        check(c["forced_plan"].startswith("RING/") and c["own_plan"].startswith("TREE/") and not c["same_plan"], c)
    # One call per row: on a loaded machine a single row of either clock strays (2405 us by the
    # events beside 2520 by the kernels on CI; under two CPU hogs both, down to -1891): most rows
    # must show the 3 ms, and the median below holds them to 15 %.
    near = [c for c in algo["costs"] if c["added_us_per_call"] >= 2000]
    check(SANITIZED or len(near) >= 0.75 * len(algo["costs"]), f"most rows cost the injected 3 ms: {algo['costs']}")
    check({c["clock"] for c in algo["costs"]} == {"events", "kernel"}, f"both clocks: {algo['costs']}")
    added = sorted(c["added_us_per_call"] for c in algo["costs"])
    # Under a sanitizer the stand-in's own work is too slow and uneven to hold to 15 %, or a single
    # call's row even to its sign (one read -504 us beside the fuzzer): there only the median's sign.
    median = added[len(added) // 2]
    check(median > 0 if SANITIZED else 2550 <= median <= 3450, f"the median cost is the injected 3 ms: {added}")
    # Text says the same, in words.
    text = subprocess.run([REPORT, "advice", forced.trace_dir, own.trace_dir], capture_output=True, text=True).stdout
    check("NCCL_ALGO=RING" in text and "against NCCL's own TREE/LL 1ch" in text and "us per call over" in text
          and "time by CUDA events" in text and "by NCCL's GPU timer" in text, text)


def forced_as_nccl_would_choose_is_not_costed_to_the_setting():
    # NCCL_ALGO=TREE where the stand-in picks trees anyway (below 64 KiB): the two runs differ only
    # by their kernels' injected times, and every row says the plan was NCCL's own choice.
    forced = run({"NCCL_ALGO": "TREE", "HOSTNCCL_KERNEL_NS": "2000000"})
    own = run({})
    code, out, _ = advice(forced.trace_dir, own.trace_dir)
    algo = [a for a in out["advice"] if a["setting"] == "NCCL_ALGO"]
    check(code == 1 and len(algo) == 1 and algo[0]["costs"], out)
    check(all(c["same_plan"] and c["forced_plan"] == c["own_plan"] for c in algo[0]["costs"]), algo[0]["costs"])
    text = subprocess.run([REPORT, "advice", forced.trace_dir, own.trace_dir], capture_output=True, text=True).stdout
    check("not the setting's" in text, text)


def forced_without_a_run_to_compare_says_so():
    forced = run({"NCCL_PROTO": "SIMPLE"})
    code, out, _ = advice(forced.trace_dir)
    proto = [a for a in out["advice"] if a["setting"] == "NCCL_PROTO"]
    check(code == 1 and len(proto) == 1 and proto[0]["costs"] == [] and not proto[0]["cost_measured"], out)
    text = subprocess.run([REPORT, "advice", forced.trace_dir], capture_output=True, text=True).stdout
    check("its cost is not measured" in text, text)


def a_job_with_nothing_to_say_exits_0():
    own = run({})
    code, out, err = advice(own.trace_dir)
    check(code == 0 and out == {"advice": []}, (code, out, err))


main({f.__name__: f for f in (forced_algorithm_is_named_with_its_cost, forced_as_nccl_would_choose_is_not_costed_to_the_setting,
                              forced_without_a_run_to_compare_says_so,
                              a_job_with_nothing_to_say_exits_0)})
