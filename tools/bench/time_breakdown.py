#!/usr/bin/env python3
"""Where a pipelab step's time goes, per executor, from the traced epoch's actions
(metrics/actions.csv: one row per action each device ran, host start and end).

    tools/bench/time_breakdown.py FILE [--pipelab build/pipelab] [--executors threaded,sequential,launch]
                                  [--set key=value ...]
    tools/bench/time_breakdown.py --workload lm|cnn|mlp --schedule gpipe|1f1b|interleaved|zb|zbv [--steps 4]

The second form trains one of bench_processes.py's workloads (peer_models.py: the MLP, the
transformer language model, the CIFAR ResNet) cut as that benchmark cuts it for the schedule.

Each executor trains FILE (run.trace on, one intra-op thread per device) and its last epoch
is split, per device and summed over devices, into:

- compute: F, B, I, W, H, U (the model's own work, and the optimizer);
- collectives: ALLREDUCE;
- sends and receives: SEND_* and RECV_*, where an executor records them (the in-process
  executors and `launch` record compute and collectives only: a receive's wait is then part
  of the next column);
- between actions: a device's time from one action's end to its next one's start: waiting
  for a message (the schedule's bubble, and a message later than the replay's), and
  pipelab's own bookkeeping (picking the next action, the policy's hooks, recording).

Contention is a compute action taking longer than it does alone: the sequential executor
runs one action at a time, so `compute - sequential compute` is what running devices side by
side costs (two threads on two cores share caches and memory bandwidth). The ideal is the
step `pipelab simulate` replays for the schedule with the sequential run's measured stage
costs (docs/simulate.md): every action at its uncontended time, messages free; a measured
step over it is the executor's efficiency against the bubble-limited ideal.
"""
import argparse
import csv
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_processes import SCHEDULES, experiment as peer_experiment  # noqa: E402
from peer_models import workload  # noqa: E402
from traced_runs import simulated_step, train  # noqa: E402

COMPUTE = {"F", "B", "I", "W", "H", "U"}


def category(kind):
    if kind in COMPUTE:
        return "compute"
    if kind == "ALLREDUCE":
        return "collectives"
    if kind.startswith("SEND"):
        return "sends"
    if kind.startswith("RECV"):
        return "receives"
    return "other"


def breakdown(out):
    """Seconds per step in each category, summed over devices; the steps; the devices."""
    with open(os.path.join(out, "metrics", "actions.csv")) as f:
        rows = list(csv.DictReader(f))
    seconds = collections.Counter()
    by_kind = collections.Counter()
    last_end = {}
    steps = sum(1 for r in rows if r["action"] == "U" and r["stage"] == "0")
    for r in rows:
        d, start, end = r["device"], float(r["start"]), float(r["end"])
        seconds[category(r["action"])] += end - start
        by_kind[r["action"]] += end - start
        if d in last_end and start > last_end[d]:
            seconds["between actions"] += start - last_end[d]
        last_end[d] = max(end, last_end.get(d, end))
    steps = max(1, steps)
    return ({k: v / steps for k, v in seconds.items()}, {k: v / steps for k, v in by_kind.items()}, len(last_end))


def measured_step(out):
    """The traced epoch's seconds per step (costs.json, which the trace wrote)."""
    with open(os.path.join(out, "metrics", "costs.json")) as f:
        return float(json.load(f)["step_seconds"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", nargs="?", help="experiment file (or --workload and --schedule)")
    ap.add_argument("--workload", choices=["mlp", "lm", "cnn"], help="a workload of bench_processes.py")
    ap.add_argument("--schedule", choices=sorted(SCHEDULES), help="with --workload: the schedule")
    ap.add_argument("--steps", type=int, default=4, help="with --workload: steps per epoch")
    ap.add_argument("--pipelab", default="build/pipelab")
    ap.add_argument("--executors", default="sequential,threaded,launch")
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    a = ap.parse_args()
    if bool(a.experiment) == bool(a.workload and a.schedule):
        ap.error("give an experiment file, or --workload and --schedule")
    executors = a.executors.split(",")
    if "sequential" not in executors:
        executors.insert(0, "sequential")  # the uncontended compute and the ideal
    results = {}
    with tempfile.TemporaryDirectory(prefix="pipelab-breakdown-") as tmp:
        if a.workload:
            scheme, stages, _, _ = SCHEDULES[a.schedule]
            a.experiment = os.path.join(tmp, f"{a.workload}-{a.schedule}.yaml")
            with open(a.experiment, "w") as f:
                f.write(peer_experiment(workload(a.workload), a.steps, scheme, stages, "threaded", tmp))
        for ex in executors:
            out = os.path.join(tmp, ex)
            train(a.pipelab, a.experiment, ex, out, a.overrides)
            results[ex] = breakdown(out) + (measured_step(out),)
        ideal = simulated_step(a.pipelab, a.experiment, os.path.join(tmp, "sequential", "metrics", "costs.json"),
                           a.overrides)
    alone = results["sequential"][0].get("compute", 0)
    cats = [c for c in ["compute", "collectives", "sends", "receives", "between actions", "other"]
            if any(r[0].get(c, 0) > 0 for r in results.values())]
    name = f"{a.workload} {a.schedule}" if a.workload else a.experiment
    print(f"{name}: ms per step, summed over devices (the traced epoch); ideal step {ideal * 1e3:.2f} ms")
    print(f"{'executor':<11} {'step':>8} {'ideal/step':>10} " + " ".join(f"{c:>15}" for c in cats) +
          f" {'contention':>10}")
    for ex in executors:
        cat, _, devices, step = results[ex]
        contention = cat.get("compute", 0) - alone
        print(f"{ex:<11} {step * 1e3:>8.2f} {ideal / step:>10.2f} " +
              " ".join(f"{cat.get(c, 0) * 1e3:>15.2f}" for c in cats) + f" {contention * 1e3:>10.2f}")
    print("\nper action kind, ms per step summed over devices:")
    kinds = sorted({k for r in results.values() for k in r[1]})
    print(f"{'executor':<11} " + " ".join(f"{k:>9}" for k in kinds))
    for ex in executors:
        print(f"{ex:<11} " + " ".join(f"{results[ex][1].get(k, 0) * 1e3:>9.2f}" for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
