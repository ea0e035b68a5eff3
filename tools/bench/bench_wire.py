#!/usr/bin/env python3
"""Bytes that really cross between processes with each boundary codec: `pipelab launch --nproc 2`
over Gloo's TCP transport (`run.executor.backend: gloo`, as between machines) on one machine,
counted by the kernel on the loopback interface (/proc/net/dev, both directions), against the
same run without compression. Linux only; nothing else should use the loopback meanwhile.

    tools/bench/bench_wire.py [--pipelab build/pipelab] [--width 512] [--steps 8,24]

Each run trains an MLP of 8 Linear(W, W) layers on 2 stages (GPipe, 8 micro-batches of 32
rows) for 2 epochs, once with each of two step counts per epoch: the difference is what the
extra training steps sent, without the set-up's and the evaluation's bytes. The loopback
counts each byte twice (sent and received), so it is halved. Printed per codec: those bytes
per training step, that over the uncompressed run's, and what the run itself reports
(bytes_forward_per_step + bytes_backward_per_step: the messages' tensors, no framing).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CODECS = [
    ("none", None),
    ("cast bf16", "{type: cast, dtype: bf16}"),
    ("sort_quant SQ16", "{type: sort_quant, q: 12, s: 4}"),
    ("sort_quant SQ8", "{type: sort_quant, q: 6, s: 2}"),
    ("uniform 4-bit", "{type: uniform, bits: 4}"),
    ("topk 10%", "{type: topk, fraction: 0.1}"),
    ("fixpoint 8-bit", "{type: fixpoint, bits: 8}"),
]


def loopback_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                fields = rest.split()
                return int(fields[0]) + int(fields[8])  # received + sent
    sys.exit("bench_wire.py: no loopback interface in /proc/net/dev")


def experiment(width, steps):
    sizes = ", ".join([str(width)] * 9)
    return f"""
model:     {{type: mlp, sizes: [{sizes}]}}
dataset:   {{type: synthetic, samples: {steps * 256}, test_samples: 256, shape: [{width}], classes: {width}}}
partition: {{stages: 2}}
scheme:    {{type: gpipe, chunks: 8}}
optimizer: {{type: sgd, lr: 0.01}}
run:       {{epochs: 2, batch_size: 256, seed: 1, threads: 1, progress: false, trace: false,
             executor: {{type: distributed, backend: gloo}}}}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipelab", default="build/pipelab")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--steps", default="8,24", help="two step counts per epoch")
    args = ap.parse_args()
    few, many = (int(v) for v in args.steps.split(","))
    print(f"pipelab launch --nproc 2, backend gloo; 8 x Linear({args.width}), 2 stages, 2 epochs of {few} and of "
          f"{many} steps; loopback bytes counted by the kernel")
    print(f"{'codec':<18} {'wire B/step':>12} {'vs none':>8} {'run says B/step':>16}")
    plain = None
    for name, codec in CODECS:
        sent, says = [], 0
        for steps in (few, many):
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "e.yaml")
                with open(path, "w") as f:
                    f.write(experiment(args.width, steps))
                out = os.path.join(tmp, "run")
                cmd = [args.pipelab, "launch", "--nproc", "2", path, "--quiet", "--set", f"run.output={out}"]
                if codec:
                    cmd += ["--set", f"compression={{activations: {codec}, gradients: {codec}}}"]
                before = loopback_bytes()
                subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
                sent.append(loopback_bytes() - before)
                with open(os.path.join(out, "summary.json")) as f:
                    s = json.load(f)
                says = s["bytes_forward_per_step"]["final"] + s["bytes_backward_per_step"]["final"]
        per_step = (sent[1] - sent[0]) / 2 / (2 * (many - few))
        plain = plain or per_step
        print(f"{name:<18} {per_step:>12,.0f} {per_step / plain:>8.3f} {says:>16,.0f}")


if __name__ == "__main__":
    main()
