#!/usr/bin/env python3
"""Where a pipelab step's time goes, per executor, from the traced epoch's actions
(metrics/actions.csv: one row per action each device ran, host start and end).

    tools/bench/time_breakdown.py FILE [--pipelab build/pipelab] [--executors threaded,sequential,launch]
                                  [--rounds N] [--set key=value ...]
    tools/bench/time_breakdown.py --workload lm|cnn|mlp --schedule gpipe|1f1b|interleaved|zb|zbv [--steps 4]
                                  [--rounds N]

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
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_processes import SCHEDULES, experiment as peer_experiment  # noqa: E402
from peer_models import workload  # noqa: E402
from traced_runs import simulated_step, spread, train  # noqa: E402

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
    """Seconds per step in each category and in each action kind, summed over devices."""
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
    return {k: v / steps for k, v in seconds.items()}, {k: v / steps for k, v in by_kind.items()}


def measured_step(out):
    """The traced epoch's seconds per step (costs.json, which the trace wrote)."""
    with open(os.path.join(out, "metrics", "costs.json")) as f:
        return float(json.load(f)["step_seconds"])


def one_round(a, tmp, executors):
    """Each executor's figures in one round: the step, ideal / step, the categories and the
    kinds (seconds per step, summed over devices), contention against this round's
    sequential run."""
    results = {}
    for ex in executors:
        out = os.path.join(tmp, ex)
        shutil.rmtree(out, ignore_errors=True)
        train(a.pipelab, a.experiment, ex, out, a.overrides)
        cats, kinds = breakdown(out)
        results[ex] = {"step": measured_step(out), "cats": cats, "kinds": kinds}
    ideal = simulated_step(a.pipelab, a.experiment, os.path.join(tmp, "sequential", "metrics", "costs.json"),
                           a.overrides)
    alone = results["sequential"]["cats"].get("compute", 0)
    for r in results.values():
        r["ideal"] = ideal / r["step"]
        r["cats"]["contention"] = r["cats"].get("compute", 0) - alone
    return ideal, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", nargs="?", help="experiment file (or --workload and --schedule)")
    ap.add_argument("--workload", choices=["mlp", "lm", "cnn"], help="a workload of bench_processes.py")
    ap.add_argument("--schedule", choices=sorted(SCHEDULES), help="with --workload: the schedule")
    ap.add_argument("--steps", type=int, default=4, help="with --workload: steps per epoch")
    ap.add_argument("--rounds", type=int, default=1, help="rounds (every executor in turn, then the next round); "
                    "figures are medians, [min, max] beside them")
    ap.add_argument("--pipelab", default="build/pipelab")
    ap.add_argument("--executors", default="sequential,threaded,launch")
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    a = ap.parse_args()
    if bool(a.experiment) == bool(a.workload and a.schedule):
        ap.error("give an experiment file, or --workload and --schedule")
    executors = a.executors.split(",")
    if "sequential" not in executors:
        executors.insert(0, "sequential")  # the uncontended compute and the ideal
    rounds = []
    with tempfile.TemporaryDirectory(prefix="pipelab-breakdown-") as tmp:
        if a.workload:
            scheme, stages, _, _ = SCHEDULES[a.schedule]
            a.experiment = os.path.join(tmp, f"{a.workload}-{a.schedule}.yaml")
            with open(a.experiment, "w") as f:
                f.write(peer_experiment(workload(a.workload), a.steps, scheme, stages, "threaded", tmp))
        for _ in range(a.rounds):
            rounds.append(one_round(a, tmp, executors))
    ideals = [ideal for ideal, _ in rounds]
    cats = [c for c in ["compute", "collectives", "sends", "receives", "between actions", "other", "contention"]
            if any(r[ex]["cats"].get(c, 0) != 0 for _, r in rounds for ex in executors)]
    name = f"{a.workload} {a.schedule}" if a.workload else a.experiment
    print(f"{name}: ms per step, summed over devices (the traced epoch), {a.rounds} round(s); ideal step "
          f"{spread(ideals, 1e3)} ms")
    print(f"{'executor':<11} {'step':>22} {'ideal/step':>18} " + " ".join(f"{c:>22}" for c in cats))
    for ex in executors:
        got = [r[ex] for _, r in rounds]
        print(f"{ex:<11} {spread([g['step'] for g in got], 1e3, 1):>22} {spread([g['ideal'] for g in got]):>18} " +
              " ".join(f"{spread([g['cats'].get(c, 0) for g in got], 1e3, 1):>22}" for c in cats))
    print("\nper action kind, ms per step summed over devices (medians):")
    kinds = sorted({k for _, r in rounds for ex in executors for k in r[ex]["kinds"]})
    print(f"{'executor':<11} " + " ".join(f"{k:>9}" for k in kinds))
    for ex in executors:
        print(f"{ex:<11} " + " ".join(f"{statistics.median(r[ex]['kinds'].get(k, 0) for _, r in rounds) * 1e3:>9.2f}"
                                       for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
