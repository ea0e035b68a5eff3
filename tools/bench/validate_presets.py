#!/usr/bin/env python3
"""Benchmark (not a test): what each cluster preset derives for one whole GPU, against published
single-GPU training throughput.

For every row of tools/bench/published_throughput.yaml (a zoo model, a GPU's preset, a
precision, the batch the publication ran and its images per second) it writes the experiment
(the model at 224 x 224, 1,000 classes, `single`, SGD with momentum, that batch; fp16 rows with
run.amp: fp16) and asks `pipelab simulate EXP --cluster PRESET` for its samples per second.
Goal (docs/simulate.md, "Presets against published single-GPU throughput"): every row within
20%. No training runs: the profile is made from shapes, so the script takes a minute or two.

    tools/bench/validate_presets.py [--pipelab build/pipelab] [--markdown table.md]
        [--cluster PRESET=FILE ...]

`--cluster v100_sxm2=mine.yaml` prices that preset's rows with a cluster file instead (to try
rates before a preset takes them).
"""
import argparse
import os
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_commands import run, write_table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "tools/bench/published_throughput.yaml")


def experiment(model, row):
    """The experiment of one row, as a YAML mapping."""
    return {
        "model": model,
        "dataset": {"type": "synthetic", "samples": row["batch"], "shape": [3, 224, 224], "classes": 1000},
        "partition": {"stages": 1},
        "scheme": {"type": "single"},
        "optimizer": {"type": "sgd", "lr": 0.01, "momentum": 0.9},
        "run": {"epochs": 1, "batch_size": row["batch"], "amp": "fp16" if row["precision"] == "fp16" else "none"},
    }


def samples_per_second(pipelab, exp, cluster):
    """What `simulate` derives for the experiment on `cluster`, in samples per second."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "exp.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(exp, f)
        md = os.path.join(tmp, "out.md")
        run([pipelab, "simulate", path, "--cluster", cluster, "--markdown", md])
        rows = [line for line in open(md) if line.startswith("|") and not line.startswith("|--")]
    header = [c.strip() for c in rows[0].strip("|\n").split("|")]
    first = [c.strip() for c in rows[1].strip("|\n").split("|")]
    return float(first[header.index("samples/s")].replace(",", ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipelab", default=os.path.join(ROOT, "build/pipelab"))
    parser.add_argument("--table", default=TABLE, help="the published rows (YAML)")
    parser.add_argument("--markdown", default="", help="also write the table to this file")
    parser.add_argument("--cluster", action="append", default=[], metavar="PRESET=FILE",
                        help="price PRESET's rows with a cluster file instead")
    args = parser.parse_args()
    override = dict(item.split("=", 1) for item in args.cluster)
    table = yaml.safe_load(open(args.table))
    lines = ["| model | GPU (preset), precision | batch | published images/s | derived | error | source |",
             "|---|---|--:|--:|--:|--:|---|"]
    errors = []
    for row in table["rows"]:
        cluster = override.get(row["preset"], row["preset"])
        derived = samples_per_second(args.pipelab, experiment(table["models"][row["model"]], row), cluster)
        error = derived / row["images_per_second"] - 1
        errors.append(error)
        lines.append(f"| {row['model']} | `{row['preset']}`, {row['precision']} | {row['batch']} | "
                     f"{row['images_per_second']:,} | {derived:,.0f} | {error:+.0%} | {row['source']} |")
        print(lines[-1], flush=True)
    within = sum(abs(e) <= 0.2 for e in errors)
    summary = (f"{within} of {len(errors)} within 20%; median |error| "
               f"{sorted(abs(e) for e in errors)[len(errors) // 2]:.0%}")
    print(summary)
    write_table(args.markdown, lines + ["", summary])


if __name__ == "__main__":
    main()
