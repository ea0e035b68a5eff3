#!/usr/bin/env python3
"""Benchmark (not a test): is the memory `simulate` predicts from shapes what a run holds?

For each model (MLP, ResNet, MobileNetV2, the transformer LM, Llama, RoBERTa), scheme (1F1B =
pipedream_flush, ZB-H1, PipeDream-2BW on 4 stages; 1F1B as 2 pipelines of 2 devices; `dp` over 4
devices) and precision (float32, `run.amp: bf16`), it trains the model on 4 devices of this
machine's CPU with the sequential executor (one thread: the order of
actions is the schedule's, so the bytes held are the same on any machine) for 2 epochs, the
last traced, and reads each device's measured peak (metrics/costs.json `device_peak_bytes`: the
activations, temporaries and gradients LibTorch's allocator reported while the traced epoch
ran; the weights and the optimizer's state were allocated before it). Then `pipelab simulate`
replays the same file from shapes alone (derived costs: `--device-flops 1 --memory-bw 1`, no
measured costs) and its figure for the same bytes (`peak_activation_bytes + gradient_bytes` of
`--json`) is set against it. Goal (docs/simulate.md, "Memory from shapes"): every device within
10%. Memory does not depend on timing, so one round is enough and the machine may be busy.

    tools/bench/validate_memory.py [--pipelab build/pipelab] [--models mlp,llama] [--markdown out.md]
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
            "{type: synthetic, samples: 128, test_samples: 32, shape: [256], classes: 10}"),
    "resnet": ("{type: resnet, depth: 18}",
               "{type: synthetic, samples: 128, test_samples: 32, shape: [3, 32, 32], classes: 10}"),
    "mobilenet_v2": ("{type: mobilenet_v2}",
                     "{type: synthetic, samples: 128, test_samples: 32, shape: [3, 32, 32], classes: 10}"),
    "transformer": ("{type: transformer, head: lm, num_words: 2000, d_model: 128, heads: 4, ff: 512, layers: 4}",
                    "{type: synthetic, samples: 128, test_samples: 32, tokens: {vocabulary: 2000, length: 64}}"),
    "llama": ("{type: llama, vocab: 2000, hidden: 128, intermediate: 384, layers: 4, heads: 4, kv_heads: 2}",
              "{type: synthetic, samples: 128, test_samples: 32, tokens: {vocabulary: 2000, length: 64}}"),
    "roberta": ("{type: roberta, vocab: 2000, hidden: 128, heads: 4, intermediate: 512, layers: 4}", "WORDS"),
}
# Each scheme with its partition: 4 stages, or whole-pipeline replicas (pipelines of 2 devices
# x 2, and data parallelism over 4 devices), whose all-reduced gradients the replay must hold.
SCHEMES = {
    "1f1b": "{type: pipedream_flush, chunks: 4}",
    "zb_h1": "{type: zb_h1, chunks: 4}",
    "1f1b_2x2": ("{type: pipedream_flush, chunks: 4}", "{stages: 2, replicas: 2}"),
    "dp": ("{type: dp, replicas: 4}", "{stages: 1}"),
    # Flushed per epoch, so that the meter sees what the run holds: never flushed (its
    # default), the trace covers the whole run and the meter also sees the optimizer's state
    # made at the first update and the older buffer made at the start (the replay counts them
    # among the static bytes). 2BW's batch_size is its micro-batch's (the others split theirs
    # into `chunks`): micro-batches of 8 as theirs, 8 updates an epoch. With few updates an
    # epoch the meter never sees its steady state: the first update's previous gradient
    # (Optimizer::last_gradient) predates the meter, so an update that meets micro-batches in
    # flight and both gradients comes third at the earliest.
    "2bw": "{type: pipedream_2bw, micro_batches: 2, flush: epoch}",
}
# Examples per `run.batch_size`: 32 split into `chunks`, or each scheme's own.
BATCH_SIZE = {"2bw": 8}
PRECISIONS = {"float32": "none", "bf16": "bf16"}


def words_file(folder):
    """A tensors file of 160 sequences of 64 word ids with a class each (RoBERTa classifies)."""
    import torch
    path = os.path.join(folder, "words.pt")
    g = torch.Generator().manual_seed(0)
    torch.save({"x": torch.randint(2, 2000, (160, 64), generator=g), "y": torch.randint(0, 2, (160,), generator=g)},
               path)
    return path


def experiment(folder, model, dataset, scheme, amp, batch_size):
    scheme, partition = scheme if isinstance(scheme, tuple) else (scheme, "{stages: 4}")
    path = os.path.join(folder, "e.yaml")
    with open(path, "w") as f:
        f.write(f"model:     {model}\ndataset:   {dataset}\npartition: {partition}\nscheme:    {scheme}\n"
                "optimizer: {type: adamw, lr: 0.0001}\n"
                f"run:       {{epochs: 2, batch_size: {batch_size}, seed: 0, executor: sequential, threads: 1, "
                f"amp: {amp}, trace: true, progress: false}}\n")
    return path


def one_cell(pipelab, folder, model, dataset, scheme, amp, batch_size, profile):
    """Per device: (measured, predicted) bytes of activations, temporaries and gradients."""
    path = experiment(folder, model, dataset, scheme, amp, batch_size)
    out = os.path.join(folder, "run")
    run([pipelab, "run", path, "--quiet", "--set", f"run.output={out}"])
    costs = json.load(open(os.path.join(out, "metrics/costs.json")))
    measured = {}
    for stage in costs["stages"]:
        measured[stage["device"]] = max(measured.get(stage["device"], 0), stage["device_peak_bytes"])
    report = os.path.join(folder, "s.json")
    run([pipelab, "simulate", path, "--device-flops", "1", "--memory-bw", "1", "--executor", "sequential",
         "--profile", profile, "--json", report])
    r = json.load(open(report))["schemes"][0]
    predicted = [a + g for a, g in zip(r["peak_activation_bytes"], r["gradient_bytes"])]
    return [(measured[d], predicted[d]) for d in sorted(measured)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipelab", default="build/pipelab")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--profile", default="shapes", choices=["shapes", "measured"],
                        help="simulate's --profile: from shapes on the meta device (the default), or measured "
                             "on this CPU (its kernels' own temporaries included)")
    parser.add_argument("--markdown", help="also write the table here")
    args = parser.parse_args()
    lines = ["| model | scheme | precision | per device: measured -> predicted MiB (error) | worst |",
             "|---|---|---|---|---:|"]
    print(lines[0])
    worst_all = 0.0
    with tempfile.TemporaryDirectory(prefix="pipelab-memory-") as tmp:
        words = words_file(tmp)
        for name in args.models.split(","):
            model, dataset = MODELS[name]
            if dataset == "WORDS":
                dataset = f"{{type: tensors, path: '{words}', test_fraction: 0.2}}"
            for scheme in args.schemes.split(","):
                for precision in args.precisions.split(","):
                    folder = tempfile.mkdtemp(dir=tmp)
                    cells = one_cell(args.pipelab, folder, model, dataset, SCHEMES[scheme], PRECISIONS[precision],
                                     BATCH_SIZE.get(scheme, 32), args.profile)
                    errors = [100 * (p - m) / m for m, p in cells]
                    worst = max(errors, key=abs)
                    worst_all = max(worst_all, abs(worst))
                    devices = "  ".join(f"d{d} {m / 2**20:.2f} -> {p / 2**20:.2f} ({e:+.1f}%)"
                                        for d, ((m, p), e) in enumerate(zip(cells, errors)))
                    lines.append(f"| {name} | {scheme} | {precision} | {devices} | {worst:+.1f}% |")
                    print(lines[-1], flush=True)
    print(f"worst device: {worst_all:.1f}% (goal: 10%)")
    write_table(args.markdown, lines)


if __name__ == "__main__":
    main()
