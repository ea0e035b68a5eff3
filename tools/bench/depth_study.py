#!/usr/bin/env python3
"""Convergence against pipeline depth from a sweep of experiments/text/basis_rotation_depth.yaml
(docs/basis-rotation-depth.md): for each optimizer and depth P, the updates and the simulated
time each run took to bring its training loss down to a target, and the two figures Jung, Shin
and Lee (ICML 2026) report: how much longer the deepest pipeline takes than P = 1, and how
many fewer updates basis rotation needs than the best asynchronous baseline at that depth.

    tools/bench/depth_study.py RUNS_DIR [RUNS_DIR ...] [--target LOSS] [--window 50] [--svg FILE]

Several folders (one sweep per seed) are read as one: each cell then shows the mean and the
standard deviation over its runs.

A run's training loss is the mean of the last `window` steps' losses (steps.csv: one
micro-batch's loss per update, too noisy to cross a target once). The target defaults to the
loss AdamW reaches at P = 1 half-way through its run, so that the P = 1 baseline reaches it
with room left and deeper ones may still. Time to target is steps.csv's simulated_time of the
step that reached it: the run's plan replayed on the cluster the sweep was timed on
(`pipelab sweep ... --cluster NAME`); "-" when the sweep had no clock. `--resimulate PIPELAB
--cluster NAME` prices the runs again with today's simulator instead (each run's own
config.yaml through `pipelab simulate --json`: every step of a run is one mini-batch, so one
step time serves them all), for runs timed before a cost the simulator now prices. A run that never
reaches the target shows "> N" (its updates) and counts as N in the ratios, a lower bound.
"""
import argparse
import csv
import math
import json
import os
import subprocess
import sys
import tempfile

import yaml

NAMES = {  # (scheme, optimizer) -> the row's name
    ("pipedream", "adamw"): "AdamW (PipeDream, stashing)",
    ("pipedream", "basis_rotation"): "basis rotation (PipeDream, stashing)",
    ("nesterov_async", "nadam"): "Nesterov look-ahead (AsyncPP, NAdam)",
    ("pipedream_2bw", "muon"): "2BW + Muon",
}
ROTATION = ("pipedream", "basis_rotation")
BASELINE = ("pipedream", "adamw")


def read_runs(root):
    runs = []
    for folder, _, files in os.walk(root):
        # A finished run has its summary.json; one still training is left out.
        if "experiment.yaml" not in files or "summary.json" not in files:
            continue
        with open(os.path.join(folder, "experiment.yaml")) as f:
            e = yaml.safe_load(f)
        with open(os.path.join(folder, "metrics", "steps.csv")) as f:
            rows = list(csv.DictReader(f))
        runs.append({
            "key": (e["scheme"]["type"], e["optimizer"]["type"]),
            "stages": int(e.get("partition", {}).get("stages", 1)),
            "loss": [float(r["loss"]) for r in rows],
            "time": [float(r["simulated_time"]) if r["simulated_time"] not in ("", "null", "nan") else None
                     for r in rows],
            "folder": folder,
        })
    return runs


def resimulate(runs, pipelab, cluster):
    """Each run's step priced again: its config.yaml through `pipelab simulate --cluster`
    (runs of one configuration share one call); its time column becomes step x updates."""
    steps = {}
    for run in runs:
        config = os.path.join(run["folder"], "config.yaml")
        with open(config) as f:
            key = f.read().split("\nrun:", 1)[0]  # model, data, scheme, optimizer, partition
        if key not in steps:
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "sim.json")
                subprocess.run([pipelab, "simulate", config, "--cluster", cluster, "--json", out],
                               check=True, stdout=subprocess.DEVNULL)
                with open(out) as f:
                    figures = json.load(f)
            entries = figures if isinstance(figures, list) else figures.get("schemes", [figures])
            steps[key] = float(entries[0]["step_seconds"])
        run["time"] = [steps[key] * (i + 1) for i in range(len(run["loss"]))]


def smoothed(losses, window):
    """The trailing mean of `window` losses at each step (fewer at the start)."""
    out, total = [], 0.0
    for i, x in enumerate(losses):
        total += x
        if i >= window:
            total -= losses[i - window]
        out.append(total / min(i + 1, window))
    return out


def reached(run, target, window):
    """(updates, simulated seconds) to bring the smoothed loss to `target`; updates None if never."""
    curve = smoothed(run["loss"], window)
    for i in range(window - 1, len(curve)):
        if curve[i] <= target:
            return i + 1, run["time"][i]
    return None, None


def default_target(runs, window):
    base = [r for r in runs if r["key"] == BASELINE and r["stages"] == 1]
    if not base:
        sys.exit("no AdamW run at P = 1 to take the target from: give --target")
    curve = smoothed(base[0]["loss"], window)  # the first folder's (seed's)
    return curve[len(curve) // 2]


def table(runs, target, window):
    depths = sorted({r["stages"] for r in runs})
    keys = [k for k in NAMES if any(r["key"] == k for r in runs)]
    cells = {}
    for r in runs:
        n, t = reached(r, target, window)
        cells.setdefault((r["key"], r["stages"]), []).append(
            {"updates": n, "total": len(r["loss"]), "seconds": t, "final": smoothed(r["loss"], window)[-1]})
    return depths, keys, cells


def mean_std(xs):
    m = sum(xs) / len(xs)
    return m, (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 if len(xs) > 1 else 0.0


def bound(cell):
    """The mean over a cell's runs of the updates to target, a run that never reached it
    counted as its updates."""
    return mean_std([c["updates"] if c["updates"] is not None else c["total"] for c in cell])[0]


def all_reached(cell):
    return all(c["updates"] is not None for c in cell)


def number_text(xs, digits=0):
    m, sd = mean_std(xs)
    return f"{m:.{digits}f} ± {sd:.{digits}f}" if len(xs) > 1 else f"{m:.{digits}f}"


def updates_text(cell):
    hits = [c["updates"] for c in cell if c["updates"] is not None]
    if not hits:
        return f"> {max(c['total'] for c in cell)}"
    text = number_text([c["updates"] if c["updates"] is not None else c["total"] for c in cell])
    if len(hits) < len(cell):
        text += f" ({len(hits)} of {len(cell)} reached; at least)"
    seconds = [c["seconds"] for c in cell if c["seconds"] is not None]
    if seconds and len(seconds) == len(hits):
        text += f", {number_text(seconds, 2)} s"
    return text


def summary_lines(depths, keys, cells):
    lines = []
    for k in keys:
        reached_at = [p for p in depths if (k, p) in cells and all_reached(cells[(k, p)])]
        first = cells.get((k, depths[0]))
        last = cells.get((k, depths[-1]))
        if first and last:
            more = "" if all_reached(last) else "at least "
            lines.append(f"{NAMES[k]}: P = {depths[0]} -> {depths[-1]} takes {more}{bound(last) / bound(first):.2f}x the "
                         f"updates; reaches the target up to P = {max(reached_at) if reached_at else 'none'}")
    # Rotation against each other row at the deepest P it reaches.
    reached_at = [p for p in depths if (ROTATION, p) in cells and all_reached(cells[(ROTATION, p)])]
    if reached_at:
        p = max(reached_at)
        rot = bound(cells[(ROTATION, p)])
        for k in keys:
            if k == ROTATION or (k, p) not in cells:
                continue
            other = cells[(k, p)]
            lower = "" if all_reached(other) else " (at least: not every run reached it)"
            lines.append(f"basis rotation at P = {p}: {100 * (1 - rot / bound(other)):.1f}% fewer updates than "
                         f"{NAMES[k]}{lower}")
    return lines


def markdown(depths, keys, cells, target, window):
    out = [f"Updates to a training loss of {target:.3f} (the mean of the last {window} steps), "
           "then the simulated seconds to it:", "",
           "| optimizer | " + " | ".join(f"P = {p}" for p in depths) + " |",
           "|---|" + "--:|" * len(depths)]
    for k in keys:
        row = []
        for p in depths:
            c = cells.get((k, p))
            row.append(updates_text(c) if c else "–")
        out.append(f"| {NAMES[k]} | " + " | ".join(row) + " |")
    out += ["", f"Final training loss (the mean of the last {window} steps):", "",
            "| optimizer | " + " | ".join(f"P = {p}" for p in depths) + " |",
            "|---|" + "--:|" * len(depths)]
    for k in keys:
        out.append(f"| {NAMES[k]} | " + " | ".join(
            number_text([c["final"] for c in cells[(k, p)]], 3) if (k, p) in cells else "–" for p in depths) + " |")
    return "\n".join(out)


def svg(depths, keys, cells, target, path):
    """Updates to target against P (log2), one line per optimizer; an open marker: not reached."""
    width, height, left, right, top, bottom = 640, 400, 70, 250, 40, 50
    top_value = max(bound(c) for c in cells.values()) * 1.1
    x = lambda p: left + (math.log2(p) - math.log2(depths[0])) / max(1e-9, math.log2(depths[-1] / depths[0])) * (
        width - left - right)
    y = lambda n: height - bottom - n / top_value * (height - top - bottom)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             'font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{left}" y="20" font-size="14">Updates to a training loss of {target:.3f} against pipeline depth</text>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
             f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">stages P</text>',
             f'<text x="16" y="{(top + height - bottom) / 2}" transform="rotate(-90 16 {(top + height - bottom) / 2})" '
             'text-anchor="middle">updates</text>']
    for p in depths:
        parts.append(f'<text x="{x(p):.1f}" y="{height - bottom + 16}" text-anchor="middle">{p}</text>')
    for i in range(5):
        n = top_value * i / 4
        parts.append(f'<text x="{left - 6}" y="{y(n) + 4:.1f}" text-anchor="end">{n:.0f}</text>')
        parts.append(f'<line x1="{left}" y1="{y(n):.1f}" x2="{width - right}" y2="{y(n):.1f}" stroke="#ddd"/>')
    for i, k in enumerate(keys):
        colour = colours[i % len(colours)]
        points = [(p, cells[(k, p)]) for p in depths if (k, p) in cells]
        parts.append('<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>'.format(
            colour, " ".join(f"{x(p):.1f},{y(bound(c)):.1f}" for p, c in points)))
        for p, c in points:
            fill = colour if all_reached(c) else "white"
            parts.append(f'<circle cx="{x(p):.1f}" cy="{y(bound(c)):.1f}" r="4" fill="{fill}" stroke="{colour}"/>')
        ly = top + 20 * i
        parts.append(f'<line x1="{width - right + 12}" y1="{ly}" x2="{width - right + 32}" y2="{ly}" stroke="{colour}" '
                     'stroke-width="2"/>')
        parts.append(f'<text x="{width - right + 38}" y="{ly + 4}">{NAMES[k]}</text>')
    parts.append(f'<text x="{width - right + 12}" y="{top + 20 * len(keys) + 10}">open marker: not reached</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="sweep folders, one per seed")
    ap.add_argument("--target", type=float, help="training loss to reach (default: AdamW's at P = 1 half-way)")
    ap.add_argument("--window", type=int, default=50, help="steps in the trailing mean of the loss")
    ap.add_argument("--svg", help="write the updates-against-depth plot here")
    ap.add_argument("--resimulate", metavar="PIPELAB", help="price each run's step again with this pipelab binary")
    ap.add_argument("--cluster", default="h100_sxm", help="the cluster --resimulate prices for (default h100_sxm)")
    a = ap.parse_args()
    runs = [r for folder in a.runs for r in read_runs(folder)]
    if not runs:
        sys.exit(f"{', '.join(a.runs)}: no finished runs (experiment.yaml, summary.json, metrics/steps.csv)")
    if a.resimulate:
        resimulate(runs, a.resimulate, a.cluster)
    target = a.target if a.target is not None else default_target(runs, a.window)
    depths, keys, cells = table(runs, target, a.window)
    print(markdown(depths, keys, cells, target, a.window))
    print()
    for line in summary_lines(depths, keys, cells):
        print(line)
    if a.svg:
        svg(depths, keys, cells, target, a.svg)
        print(f"wrote {a.svg}")


if __name__ == "__main__":
    main()
