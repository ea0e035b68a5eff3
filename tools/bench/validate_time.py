#!/usr/bin/env python3
"""Benchmark (not a test): is the predicted time to a target what the run measures?

Sweeps experiments/time/validate_two_devices.yaml (five schemes on 2 devices of this machine,
the threaded executor) with `--time-blocks`: every run records its measured training time to
its target (summary.json time_to_target.test_loss.train_seconds) and the predicted one
(.simulated_seconds: the steps it took, exactly, times the step of its plan replayed with each
block timed here before training). Then each run's plan is replayed again with the costs the
run itself measured in its last epoch (`pipelab simulate config.yaml --costs
metrics/costs.json`, the costs of "a run on those devices"), and the prediction is redone with
that step. Goal (docs/time-to-accuracy.md, "Validation"): every scheme within 15% of the
measured time, and the same order. Run it alone: a second busy process skews every figure.

    PIPELAB_DATA_DIR=/path/to/data tools/bench/validate_time.py [--pipelab build/pipelab] [--rounds 1]
        [--file experiments/time/validate_predictors.yaml]

`--file` sweeps another experiment of the same shape (validate_predictors.yaml: the schemes that
predict or correct weights).
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_commands import run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILE = os.path.join(ROOT, "experiments/time/validate_two_devices.yaml")


def replayed_step(pipelab, folder, batch):
    """Seconds a mini-batch takes when the run's plan is replayed with its own measured costs."""
    with tempfile.NamedTemporaryFile(suffix=".md") as md:
        run([pipelab, "simulate", os.path.join(folder, "config.yaml"), "--costs",
             os.path.join(folder, "metrics/costs.json"), "--markdown", md.name])
        rows = [line for line in open(md.name) if line.startswith("|") and not line.startswith("|--")]
    header = [c.strip() for c in rows[0].strip("|\n").split("|")]
    row = [c.strip() for c in rows[1].strip("|\n").split("|")]
    return batch / float(row[header.index("samples/s")].replace(",", ""))


def one_round(pipelab, out, file):
    run([pipelab, "sweep", file, "--time-blocks", "--set", f"sweep.output={out}"])
    rows = []
    for cell in sorted(os.listdir(out)):
        folder = os.path.join(out, cell)
        summary_path = os.path.join(folder, "summary.json")
        if not os.path.isfile(summary_path):
            continue
        summary = json.load(open(summary_path))
        target = summary["time_to_target"]["test_loss"]
        scheme = cell  # the run id the sweep gives it: type=gpipe,chunks=4
        if target["status"] != "reached":
            rows.append((scheme, None, None, None))
            continue
        blocks_step = summary["simulated"]["step_seconds"]
        batch = blocks_step * summary["simulated"]["samples_per_second"]
        own_step = replayed_step(pipelab, folder, batch)
        rows.append((scheme, target["train_seconds"], target["simulated_seconds"],
                     target["simulated_seconds"] * own_step / blocks_step))
    return rows


def report(rows):
    print("| run | measured | predicted, blocks timed here | error | predicted, the run's own costs | error |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, measured, blocks, own in rows:
        if measured is None:
            print(f"| {name} | not reached | | | | |")
            continue
        e1, e2 = (blocks - measured) / measured, (own - measured) / measured
        print(f"| {name} | {measured:.2f} s | {blocks:.2f} s | {100 * e1:+.1f}% | {own:.2f} s | {100 * e2:+.1f}% |")
    reached = [r for r in rows if r[1] is not None]
    order = [r[0] for r in sorted(reached, key=lambda r: r[1])]
    for i, label in ((2, "blocks timed here"), (3, "the run's own costs")):
        within = all(abs(r[i] - r[1]) <= 0.15 * r[1] for r in reached)
        same = order == [r[0] for r in sorted(reached, key=lambda r: r[i])]
        print(f"{label}: every run within 15%: {'yes' if within else 'no'}; the measured order "
              f"({', '.join(order)}): {'kept' if same else 'not kept'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipelab", default=os.path.join(ROOT, "build/pipelab"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--file", default=FILE, help="the experiment to sweep (default: %(default)s)")
    args = parser.parse_args()
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as out:
            print(f"round {r + 1}:")
            report(one_round(args.pipelab, out, args.file))


if __name__ == "__main__":
    main()
