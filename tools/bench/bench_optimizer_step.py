#!/usr/bin/env python3
"""The optimizer's update against AdamW's on one model, and basis rotation's refresh apart:
`pipelab run` on one stage (`single`, the sequential executor, one thread) with AdamW, basis
rotation refreshing every T steps, and basis rotation refreshing once (T longer than the run),
in interleaved rounds; each run's update time is its metrics/costs.json `update` (the traced
epoch's mean over its updates, refreshes included). The model is the depth study's cpu-mini
one (docs/basis-rotation-depth.md: a 14-layer causal Transformer of width 32, 84 rotated
matrices) on synthetic words, so no data is needed; `--model llama` the Llama of
experiments/text/imdb_llama.yaml on synthetic words; `--file` takes another experiment.

    tools/bench/bench_optimizer_step.py [--pipelab build/pipelab] [--model transformer|llama] [--file F] [--steps 40]
                                        [--rounds 3] [--every 10] [--cluster CALIBRATED.yaml]

Printed: each optimizer's median update (ms) and training step, the update's ratio to
AdamW's, and the refresh's share of basis rotation's update ((every T - once) / every T).
With `--cluster` (a `pipelab calibrate` of this machine), each step also as `simulate` derives
it from the optimizer's priced work (OptimizerFactory::step_cost), beside the measured one.
LibTorch's threads spin: run it alone.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODELS = {"transformer": """
model:     {type: transformer, head: lm, num_words: 2000, d_model: 32, heads: 2, ff: 64, layers: 14, dropout: 0.0,
            ff_residual: attention, embedding_std: 0.02}
dataset:   {type: synthetic, samples: 4096, test_samples: 64, tokens: {vocabulary: 2000, length: 32}}
partition: {stages: 1}
scheme:    {type: single}
optimizer: {type: adamw, lr: 0.003}
run:       {epochs: 1, batch_size: 32, seed: 0, threads: 1, progress: false}
""",
    # The Llama of experiments/text/imdb_llama.yaml (wider matrices: 64 x 176 MLPs) on synthetic words.
    "llama": """
model:      {type: llama, vocab: 2000, hidden: 64, intermediate: 176, layers: 6, heads: 4, kv_heads: 2,
             rope_theta: 10000, norm_eps: 1.0e-5}
dataset:    {type: synthetic, samples: 4096, test_samples: 64, tokens: {vocabulary: 2000, length: 64}}
partition:  {stages: 1}
scheme:     {type: single}
optimizer:  {type: adamw, lr: 0.003, weight_decay: 0.01}
run:        {epochs: 1, batch_size: 32, seed: 0, threads: 1, progress: false}
"""}

OPTIMIZERS = {
    "adamw": "{type: adamw, lr: 0.003, betas: [0.9, 0.999], weight_decay: 0.01}",
    "basis_rotation": "{type: basis_rotation, lr: 0.003, betas: [0.9, 0.999], weight_decay: 0.01, "
                      "precondition_frequency: EVERY}",
    "basis_rotation, one refresh": "{type: basis_rotation, lr: 0.003, betas: [0.9, 0.999], weight_decay: 0.01, "
                                   "precondition_frequency: 1000000000}",
    "muon": "{type: muon, lr: 0.003, weight_decay: 0.01, adjust_lr: match_rms_adamw, "
            "fallback: {type: adamw, lr: 0.003, betas: [0.9, 0.999], weight_decay: 0.01}}",
}


def run_once(a, optimizer, out):
    cmd = [a.pipelab, "run", a.file, "--quiet", "--overwrite", "--set", f"run.output={out}",
           "--set", "scheme={type: single}", "--set", "partition.stages=1", "--set", "run.executor=sequential",
           "--set", "run.threads=1", "--set", f"run.max_steps={a.steps}", "--set", "run.epochs=1",
           "--set", f"optimizer={optimizer}"]
    subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "metrics", "costs.json")) as f:
        costs = json.load(f)
    return costs["stages"][0]["update"], costs["step_seconds"]


def simulated_step(a, optimizer, tmp):
    """The step `pipelab simulate --cluster` derives for the same run (one stage, `single`)."""
    out = os.path.join(tmp, "sim.json")
    cmd = [a.pipelab, "simulate", a.file, "--cluster", a.cluster, "--json", out, "--set", "scheme={type: single}",
           "--set", "partition.stages=1", "--set", "run.threads=1", "--set", f"optimizer={optimizer}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        figures = json.load(f)
    entries = figures if isinstance(figures, list) else figures.get("schemes", [figures])
    return float(entries[0]["step_seconds"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pipelab", default="build/pipelab")
    ap.add_argument("--file", help="an experiment (not a sweep); default: --model's")
    ap.add_argument("--model", choices=sorted(MODELS), default="transformer",
                    help="transformer: the depth study's cpu-mini model (default); llama: imdb_llama.yaml's Llama")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--every", type=int, default=10, help="basis rotation's precondition_frequency")
    ap.add_argument("--cluster", help="also the step `pipelab simulate --cluster` derives (a calibration of this "
                                      "machine): each optimizer's step over AdamW's, measured and derived")
    a = ap.parse_args()
    update = {k: [] for k in OPTIMIZERS}
    step = {k: [] for k in OPTIMIZERS}
    with tempfile.TemporaryDirectory() as tmp:
        if not a.file:
            a.file = os.path.join(tmp, "model.yaml")
            with open(a.file, "w") as f:
                f.write(MODELS[a.model])
        for r in range(a.rounds):
            for name, optimizer in OPTIMIZERS.items():
                u, s = run_once(a, optimizer.replace("EVERY", str(a.every)), os.path.join(tmp, f"{r}"))
                update[name].append(u)
                step[name].append(s)
                print(f"round {r + 1}: {name}: update {1e3 * u:.2f} ms, step {1e3 * s:.1f} ms", file=sys.stderr)
        derived = {k: simulated_step(a, o.replace("EVERY", str(a.every)), tmp) for k, o in OPTIMIZERS.items()} \
            if a.cluster else {}
    med = {k: statistics.median(v) for k, v in update.items()}
    print(f"{a.steps} steps, {a.rounds} rounds, one thread")
    print("| optimizer | update (ms) | over AdamW's | training step (ms) |")
    print("|---|--:|--:|--:|")
    for k in OPTIMIZERS:
        print(f"| {k} | {1e3 * med[k]:.2f} | {med[k] / med['adamw']:.2f} | {1e3 * statistics.median(step[k]):.1f} |")
    if derived:
        measured = {k: statistics.median(v) for k, v in step.items()}
        print(f"| optimizer | step over AdamW's, measured | derived ({a.cluster}) | update - AdamW's (ms), measured "
              "| derived |")
        print("|---|--:|--:|--:|--:|")
        for k in OPTIMIZERS:
            print(f"| {k} | {measured[k] / measured['adamw']:.2f} | {derived[k] / derived['adamw']:.2f} | "
                  f"{1e3 * (med[k] - med['adamw']):.2f} | {1e3 * (derived[k] - derived['adamw']):.2f} |")
    every, once = med["basis_rotation"], med["basis_rotation, one refresh"]
    print(f"refresh every {a.every} steps: {100 * (every - once) / every:.1f}% of basis rotation's update")


if __name__ == "__main__":
    main()
