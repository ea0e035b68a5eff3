#!/usr/bin/env python3
"""Offload against recomputation on this CPU (docs/perf.md, "Offloading activations"): each
device's measured memory peak and the step, offloading 0, half or all of every stage's
micro-batches but the last stage's (partition.offload, prefetch 1), against recomputing
those stages (partition.recompute: except_last), for a transformer language model and a
ResNet, under 1F1B (pipedream_flush) and ZB-H1, 4 stages of 8 micro-batches, the sequential
executor on one thread (nothing overlaps here: a copy costs its memcpy, a recomputation its
forward). Rounds interleave the variants; ratios are against the same round's run without
either. The first round's runs with and without offload are replayed by `pipelab simulate`
from their own costs, and its predicted device peaks compared with the measured ones.

  python3 tools/bench/bench_offload.py [--pipelab build/pipelab] [--rounds 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validate_plan import write_lm_tokens  # noqa: E402

MODELS = {"lm": "experiments/plan/validate_lm.yaml", "cnn": "experiments/plan/validate_cnn.yaml"}
SCHEMES = {"1F1B": "{type: pipedream_flush, chunks: 8}", "ZB-H1": "{type: zb_h1, chunks: 8}"}
VARIANTS = {
    "none": [],
    "offload 0.5": ["partition.offload={stages: except_last, fraction: 0.5, prefetch: 1}"],
    "offload 1": ["partition.offload={stages: except_last, fraction: 1, prefetch: 1}"],
    "recompute": ["partition.recompute=except_last"],
}
COMMON = ["partition.stages=4", "run.epochs=1", "run.executor=sequential", "run.threads=1", "run.trace=true",
          "run.progress=false"]


def sets_of(overrides):
    out = []
    for o in overrides:
        out += ["--set", o]
    return out


def run(pipelab, experiment, overrides, out):
    """Trains into `out`; returns (step seconds, max device peak, max host peak) from costs.json."""
    cmd = [pipelab, "run", experiment, "--quiet"] + sets_of(COMMON + overrides + [f"run.output={out}"])
    done = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    with open(os.path.join(out, "metrics", "costs.json")) as f:
        costs = json.load(f)
    stages = costs["stages"]
    return (costs["step_seconds"], max(s["device_peak_bytes"] for s in stages),
            max(s.get("host_peak_bytes", 0) for s in stages))


def predicted_errors(pipelab, experiment, overrides, out):
    """Per device, `simulate`'s predicted peak against the measured one (percent), from the run's costs."""
    cmd = [pipelab, "simulate", experiment, "--executor", "sequential", "--costs",
           os.path.join(out, "metrics", "costs.json")] + sets_of(COMMON + overrides)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    found = re.findall(r"device \d+ \(stages? [\d, ]+\): .*measured [\d.]+ MiB, predicted [\d.]+ MiB: ([+-][\d.]+)%",
                       done.stdout)
    return [float(e) for e in found]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipelab", default="build/pipelab")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    tokens = os.path.join(os.path.dirname(MODELS["lm"]), "lm_tokens.pt")
    if not os.path.exists(tokens):
        write_lm_tokens(tokens)
    figures = {}  # (model, scheme, variant) -> [(step ratio, peak ratio, host MiB)]
    errors = {}  # (model, scheme, variant) -> per device, predicted against measured (%)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for model, experiment in MODELS.items():
                for scheme, section in SCHEMES.items():
                    base = None
                    for variant, extra in VARIANTS.items():
                        out = os.path.join(tmp, f"{model}-{scheme}-{variant.replace(' ', '')}-{r}")
                        overrides = [f"scheme={section}"] + extra
                        step, peak, host = run(a.pipelab, experiment, overrides, out)
                        if base is None:
                            base = (step, peak)
                        figures.setdefault((model, scheme, variant), []).append(
                            (step / base[0], peak / base[1], host / 2**20, peak / 2**20))
                        if variant != "recompute" and r == 0:
                            errors[(model, scheme, variant)] = predicted_errors(a.pipelab, experiment, overrides, out)
                    print(f"round {r + 1}: {model} {scheme} done", file=sys.stderr)
    print(f"| model | schedule | variant | step / none | device peak / none | device peak (MiB) | host peak (MiB) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (model, scheme, variant), rows in figures.items():
        med = [statistics.median(x[i] for x in rows) for i in range(4)]
        print(f"| {model} | {scheme} | {variant} | {med[0]:.3f} | {med[1]:.3f} | {med[3]:.2f} | {med[2]:.2f} |")
    # The replay's error with offload beside its error on the same run without: what offload
    # adds to the prediction is the difference.
    print("\n| model | schedule | variant | simulate's device peaks against measured, per device |")
    print("|---|---|---|---|")
    for (model, scheme, variant), e in errors.items():
        print(f"| {model} | {scheme} | {variant} | {' '.join(f'{x:+.1f}%' for x in e)} |")


if __name__ == "__main__":
    main()
