#!/usr/bin/env python3
"""Benchmark (not a test): does `pipelab calibrate` predict models it never saw?

Trains each model (MLP, ResNet-18, a plain CNN, MobileNetV2, a depthwise-separable CNN, the
transformer LM, Llama) on 4 stages of
this CPU (1F1B, 4 micro-batches of 8, sequential executor, one thread, 2 epochs, the last
traced), then, leaving each model out in turn, calibrates the device on the others' runs and
predicts the left-out model's step with `pipelab simulate --cluster` (derived costs from
shapes, the sequential executor's order) against the step its own run measured
(metrics/costs.json `step_seconds`). Beside it, the same runs calibrated with one rate for
every product (`calibrate --one-class`), which is what derived costs assumed before. Goal (docs/simulate.md,
"Calibrated costs"): every left-out model within 10%. Timing: run it alone on the machine.

    tools/bench/validate_calibrate.py [--pipelab build/pipelab] [--models mlp,resnet,...] [--markdown out.md]
        [--runs DIR]

`--runs DIR` keeps the trained runs there and reuses those already there: a change to the fit
or to derived costs is checked again without training.
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_commands import run, write_table  # noqa: E402

MODELS = {
    "mlp": ("{type: mlp, sizes: [256, 1024, 1024, 1024, 1024, 1024, 10]}",
            "{type: synthetic, samples: 256, test_samples: 32, shape: [256], classes: 10}"),
    "resnet": ("{type: resnet, depth: 18}",
               "{type: synthetic, samples: 256, test_samples: 32, shape: [3, 32, 32], classes: 10}"),
    # A plain convolutional network: the one other model whose dense convolutions are as wide
    # as ResNet's, for a left-out ResNet to be predicted from.
    "cnn": ("{type: cnn, channels: [64, 128, 256, 256], hidden: 256, batch_norm: true}",
            "{type: synthetic, samples: 256, test_samples: 32, shape: [3, 32, 32], classes: 10}"),
    "mobilenet_v2": ("{type: mobilenet_v2}",
                     "{type: synthetic, samples: 256, test_samples: 32, shape: [3, 32, 32], classes: 10}"),
    # Depthwise-separable convolutions (as MobileNetV2 and Xception compute them), written with
    # the `sequential` model: the one other model whose depthwise class a left-out MobileNetV2
    # can be predicted from.
    "separable": ("{type: sequential, layers: [conv2d: {out: 32, kernel: 3, padding: 1}, batch_norm, relu, "
                  "block: [conv2d: {out: 32, kernel: 3, padding: 1, groups: 32}, conv2d: {out: 64, kernel: 1}, "
                  "batch_norm, relu], "
                  "block: [conv2d: {out: 64, kernel: 3, padding: 1, groups: 64, stride: 2}, "
                  "conv2d: {out: 128, kernel: 1}, batch_norm, relu], "
                  "block: [conv2d: {out: 128, kernel: 3, padding: 1, groups: 128}, conv2d: {out: 128, kernel: 1}, "
                  "batch_norm, relu], "
                  "block: [adaptive_avg_pool2d: {out: [1, 1]}, flatten, linear: {out: 10}]]}",
                  "{type: synthetic, samples: 256, test_samples: 32, shape: [3, 32, 32], classes: 10}"),
    "transformer": ("{type: transformer, head: lm, num_words: 2000, d_model: 128, heads: 4, ff: 512, layers: 4}",
                    "{type: synthetic, samples: 256, test_samples: 32, tokens: {vocabulary: 2000, length: 64}}"),
    "llama": ("{type: llama, vocab: 2000, hidden: 128, intermediate: 384, layers: 4, heads: 4, kv_heads: 2}",
              "{type: synthetic, samples: 256, test_samples: 32, tokens: {vocabulary: 2000, length: 64}}"),
}


def train(pipelab, folder, name):
    model, dataset = MODELS[name]
    path = os.path.join(folder, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(f"model:     {model}\ndataset:   {dataset}\npartition: {{stages: 4}}\n"
                "scheme:    {type: pipedream_flush, chunks: 4}\noptimizer: {type: adamw, lr: 0.0001}\n"
                "run:       {epochs: 2, batch_size: 32, seed: 0, executor: sequential, threads: 1, "
                "trace: true, progress: false}\n")
    out = os.path.join(folder, f"{name}.run")
    if not os.path.isfile(os.path.join(out, "metrics/costs.json")):
        run([pipelab, "run", path, "--quiet", "--overwrite", "--set", f"run.output={out}"])
    return path, out


def predicted_step(pipelab, experiment, cluster, folder):
    report = os.path.join(folder, "s.json")
    run([pipelab, "simulate", experiment, "--cluster", cluster, "--executor", "sequential", "--json", report])
    return json.load(open(report))["schemes"][0]["step_seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipelab", default="build/pipelab")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--markdown", help="also write the table here")
    parser.add_argument("--runs", help="keep the trained runs in this folder and reuse those there")
    args = parser.parse_args()
    names = args.models.split(",")
    lines = ["| left out | measured step (ms) | calibrated per class | error | one rate for every product | error |",
             "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="pipelab-calibrate-") as scratch:
        tmp = args.runs or scratch
        os.makedirs(tmp, exist_ok=True)
        runs = {name: train(args.pipelab, tmp, name) for name in names}
        print(lines[0], flush=True)
        worst = 0.0
        for left in names:
            cluster = os.path.join(tmp, f"without-{left}.yaml")
            run([args.pipelab, "calibrate", *[runs[n][1] for n in names if n != left], "-o", cluster])
            experiment, out = runs[left]
            measured = json.load(open(os.path.join(out, "metrics/costs.json")))["step_seconds"]
            by_class = predicted_step(args.pipelab, experiment, cluster, tmp)
            one_cluster = cluster + ".one.yaml"
            run([args.pipelab, "calibrate", *[runs[n][1] for n in names if n != left], "-o", one_cluster, "--one-class"])
            one = predicted_step(args.pipelab, experiment, one_cluster, tmp)
            e1, e2 = 100 * (by_class / measured - 1), 100 * (one / measured - 1)
            worst = max(worst, abs(e1))
            lines.append(f"| {left} | {measured * 1e3:.1f} | {by_class * 1e3:.1f} | {e1:+.1f}% | {one * 1e3:.1f} | "
                         f"{e2:+.1f}% |")
            print(lines[-1], flush=True)
    print(f"worst left-out model, calibrated per class: {worst:.1f}% (goal: 10%)")
    write_table(args.markdown, lines)


if __name__ == "__main__":
    main()
