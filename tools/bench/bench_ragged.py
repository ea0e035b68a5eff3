#!/usr/bin/env python3
"""Llama against the transformer, and ragged text against fixed windows, on this CPU
(docs/models-and-data.md, "Ragged text"). Synthetic token data (no corpus needed), one
thread, one epoch of 64 steps of 32 rows; rounds interleave the runs and each ratio is taken
within its round, the median over rounds reported.

- block: a 4-layer width-128 `llama` (SwiGLU 344, 4 query heads over 2 key/value heads) and
  the `transformer` language model of about the same size (4 layers, ff 512), on 64-token
  windows: samples/s of llama over the transformer's.
- ragged: the llama on documents of 8 to 64 tokens (mean 36), `collate: pad` and `pack`,
  against the same model on fixed 64-token windows, in one micro-batch (`single`) and, padded,
  in 4 micro-batches of 8 rows (1F1B on 2 stages, the sequential executor: the rows sorted
  longest first, each micro-batch cut to its own longest): each run's step time, and its
  predicted tokens a second (every position of a window predicts; a padded or packed row's predicted
  positions are its documents' tokens, from the run log's data line) over the windows'.

  python3 tools/bench/bench_ragged.py [--pipelab build/pipelab] [--rounds 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

LLAMA = "{type: llama, vocab: 2000, hidden: 128, intermediate: 344, layers: 4, heads: 4, kv_heads: 2}"
TRANSFORMER = "{type: transformer, head: lm, num_words: 2000, d_model: 128, heads: 4, ff: 512, layers: 4, dropout: 0.0}"
SAMPLES = 2048
DATA = "{{type: synthetic, tokens: {{vocabulary: 2000, length: 64{}}}, samples: %d, test_samples: 64{}}}" % SAMPLES
SINGLE = "scheme: {type: single}"
FLUSH = "scheme: {type: pipedream_flush, chunks: 4}\npartition: {stages: 2}"  # 4 micro-batches of 8 rows
RUNS = {
    "llama windows": (LLAMA, DATA.format("", ""), SINGLE),
    "transformer windows": (TRANSFORMER, DATA.format("", ""), SINGLE),
    "llama pad": (LLAMA, DATA.format(", min_length: 8", ", collate: pad"), SINGLE),
    "llama pack": (LLAMA, DATA.format(", min_length: 8", ", collate: pack"), SINGLE),
    "llama windows 1F1B": (LLAMA, DATA.format("", ""), FLUSH),
    "llama pad 1F1B": (LLAMA, DATA.format(", min_length: 8", ", collate: pad"), FLUSH),
}


def run(pipelab, tmp, name, model, data, scheme):
    """Trains one epoch; returns (rows a second, seconds a step of 32 rows, the run's folder)."""
    out = os.path.join(tmp, name.replace(" ", "_"))
    path = out + ".yaml"
    with open(path, "w") as f:
        f.write(f"model: {model}\ndataset: {data}\n{scheme}\n"
                "optimizer: {type: adamw, lr: 0.001}\n"
                f"run: {{epochs: 1, batch_size: 32, seed: 0, threads: 1, executor: sequential, progress: false, "
                f"output: {out}}}\n")
    done = subprocess.run([pipelab, "run", path, "--quiet"], env=dict(os.environ, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stdout}\n{done.stderr}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    rows = summary["samples_per_second_last_epoch"]
    return rows, 32 / rows, out


def tokens_per_row(out):
    """Predicted tokens per row of the training split, from the run log's data line: a padded
    row holds one piece (the pieces' mean), a packed row its share of 64 (the rows' use)."""
    with open(os.path.join(out, "log.txt")) as f:
        line = next((l for l in f if l.startswith("data: ")), "")
    train = line.split("; test:")[0]
    used = re.search(r"([\d.]+)% of them used", train)
    if used:
        return 64 * float(used.group(1)) / 100
    return float(re.search(r"([\d.]+) on average", train).group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipelab", default="build/pipelab")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    ratios = {"llama / transformer samples/s": [], "pad / windows step": [], "pack / windows step": [],
              "pad / windows predicted tokens/s": [], "pack / windows predicted tokens/s": [],
              "1F1B, 4 micro-batches: pad / windows step": [],
              "1F1B, 4 micro-batches: pad / windows predicted tokens/s": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            got = {name: run(a.pipelab, tmp, f"{name} {r}", *spec) for name, spec in RUNS.items()}
            ratios["llama / transformer samples/s"].append(got["llama windows"][0] / got["transformer windows"][0])
            ratios["pad / windows step"].append(got["llama pad"][1] / got["llama windows"][1])
            ratios["pack / windows step"].append(got["llama pack"][1] / got["llama windows"][1])
            for collate in ("pad", "pack"):
                rows = tokens_per_row(got[f"llama {collate}"][2])
                step = got[f"llama {collate}"][1] / got["llama windows"][1]
                ratios[f"{collate} / windows predicted tokens/s"].append(rows / 64 / step)
                if r == 0:
                    print(f"  {collate}: {rows:.1f} predicted tokens a row (windows: 64)")
            rows = tokens_per_row(got["llama pad"][2])
            step = got["llama pad 1F1B"][1] / got["llama windows 1F1B"][1]
            ratios["1F1B, 4 micro-batches: pad / windows step"].append(step)
            ratios["1F1B, 4 micro-batches: pad / windows predicted tokens/s"].append(rows / 64 / step)
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in ratios.items()), flush=True)
    print("\nmedian over rounds:")
    for k, v in ratios.items():
        print(f"  {k}: {statistics.median(v):.3f}  (rounds: {', '.join(f'{x:.3f}' for x in v)})")


if __name__ == "__main__":
    main()
