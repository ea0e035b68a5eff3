#!/usr/bin/env python3
"""Benchmark (not a test): Seq1F1B against 1F1B (pipedream_flush) on a causal language model,
threaded executor, 4 stage threads of 1 intra-op thread each (--stages), the same micro-batch
count.

Per round (rounds interleave the schemes): each scheme trains 2 epochs of random token
windows (the last one traced, so metrics/costs.json holds its mean step and each stage's host
peak); then `pipelab simulate` replays each run's own costs (its prediction of that run) and
pipedream_flush's costs under seq1f1b (the prediction of a run not made). Prints per round the
step times, the per-stage peaks, their ratios, and the simulator's errors; then the medians.

Goals (issue: sequence-level pipelines): seq1f1b's peak activation memory at most 0.6x
pipedream_flush's at k = 4; simulate within 10% of both. Run it alone: another busy process
skews every figure.

    tools/bench/bench_sequence.py [--pipelab build/pipelab] [--rounds 3] [--segments 4]
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MODEL = ("{type: transformer, head: lm, num_words: 512, d_model: 64, heads: 4, ff: 256, layers: 6, "
         "dropout: 0.0, ff_residual: attention}")


def experiment(data: Path, stages: int) -> str:
    return f"""
model:     {MODEL}
dataset:   {{type: tensors, path: {data}, classes: 512}}
partition: {{stages: {stages}}}
scheme:    {{type: pipedream_flush, chunks: 4}}
optimizer: {{type: sgd, lr: 0.01}}
run:       {{epochs: 2, batch_size: 32, seed: 0, trace: true, progress: false,
            executor: {{type: threaded, intra_op_threads: 1}}}}
"""


def write_windows(path: Path, n: int, length: int) -> None:
    import torch
    g = torch.Generator().manual_seed(0)
    x = torch.randint(512, (n, length), generator=g)
    torch.save({"x": x, "y": torch.roll(x, -1, 1)}, path)


def run(pipelab: str, args: list) -> str:
    done = subprocess.run([pipelab, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"pipelab {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def costs_of(folder: Path) -> dict:
    return json.loads((folder / "metrics/costs.json").read_text())


def activations(costs: dict) -> list:
    # The host peak less the two gradients of the stage's weights (which both schemes hold).
    return [s["peak_activation_bytes"] - 2 * s["parameter_bytes"] for s in costs["stages"]]


def predicted_step(report: str) -> float:
    """The step of the simulate table's one row (scheme, devices, stages, units, step, ...)."""
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 4 and cells[0] in ("seq1f1b", "pipedream_flush"):
            return float(cells[4]) / 1e3
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipelab", default="build/pipelab")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--stages", type=int, default=4, help="stage threads (4 oversubscribes a 2-core machine)")
    o = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pipelab-seq-"))
    write_windows(tmp / "lm.pt", 256, o.length)
    (tmp / "e.yaml").write_text(experiment(tmp / "lm.pt", o.stages))
    schemes = {"pipedream_flush": "{type: pipedream_flush, chunks: 4}",
               "seq1f1b": f"{{type: seq1f1b, chunks: 4, segments: {o.segments}}}"}
    rows = []
    for r in range(o.rounds):
        got = {}
        for name, section in schemes.items():
            out = tmp / f"{name}-{r}"
            sets = ["--set", f"scheme={section}", "--set", f"run.output={out}"]
            run(o.pipelab, ["run", str(tmp / "e.yaml"), "--quiet", "--overwrite", *sets])
            costs = costs_of(out)
            own = run(o.pipelab, ["simulate", str(tmp / "e.yaml"), *sets, "--costs", str(out / "metrics/costs.json")])
            got[name] = {"step": costs["step_seconds"], "act": activations(costs), "own": predicted_step(own)}
        flush = tmp / f"pipedream_flush-{r}"
        cross = run(o.pipelab, ["simulate", str(tmp / "e.yaml"), "--set", f"scheme={schemes['seq1f1b']}",
                                "--costs", str(flush / "metrics/costs.json")])
        got["cross"] = predicted_step(cross)
        rows.append(got)
        f, s = got["pipedream_flush"], got["seq1f1b"]
        ratio = [a / b for a, b in zip(s["act"], f["act"])]
        print(f"round {r}: step flush {f['step']*1e3:.1f} ms, seq1f1b {s['step']*1e3:.1f} ms "
              f"(ratio {s['step']/f['step']:.3f}); activation peak ratio per stage "
              + " ".join(f"{x:.2f}" for x in ratio)
              + f"; simulate own: flush {100*(f['own']/f['step']-1):+.1f}%, seq1f1b {100*(s['own']/s['step']-1):+.1f}%"
              + f"; seq1f1b from flush's costs {100*(got['cross']/s['step']-1):+.1f}%", flush=True)
    med = statistics.median
    f = [g["pipedream_flush"] for g in rows]
    s = [g["seq1f1b"] for g in rows]
    print("\nmedians over rounds:")
    print(f"  step seq1f1b / pipedream_flush: {med(b['step'] / a['step'] for a, b in zip(f, s)):.3f}")
    for st in range(len(f[0]["act"])):
        print(f"  stage {st} activation peak seq1f1b / pipedream_flush: "
              f"{med(b['act'][st] / a['act'][st] for a, b in zip(f, s)):.3f} "
              f"({med(b['act'][st] for b in s) / 2**20:.1f} / {med(a['act'][st] for a in f) / 2**20:.1f} MiB)")
    print(f"  simulate, own costs: pipedream_flush {100*med(a['own']/a['step']-1 for a in f):+.1f}%, "
          f"seq1f1b {100*med(b['own']/b['step']-1 for b in s):+.1f}%")
    print(f"  simulate, seq1f1b from pipedream_flush's costs: "
          f"{100*med(g['cross']/g['seq1f1b']['step']-1 for g in rows):+.1f}%")


if __name__ == "__main__":
    main()
