#!/usr/bin/env python3
"""Hostile-input probe: feeds pipelab malformed experiment files, data files and .pt files,
runs it as a user would, and sorts each outcome:

  clear     exit 2, the message names the file (or the --set) and says how to fix it
  unclear   any other failure: exit 1, or a message without the file or without a fix
  crash     killed by a signal (SIGSEGV, SIGABRT, ...)
  hang      still running after --timeout seconds
  accepted  exit 0, for inputs that are merely unusual (accepted-broken: for broken ones)

  python3 tools/probe/hostile_inputs.py --pipelab build/pipelab [--out /tmp/probe] [--only configs,data,pt]

Prints a table of counts per category and every non-clear case, and writes probe.json.
The .pt cases need python3 with torch (real torch.save outputs, then mutated).
"""
import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import zipfile

BASE = """model:     {type: mlp, sizes: [8, 16, 3]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 3}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 16, seed: 0, progress: false}
"""


def config_cases():
    """(name, yaml text, expect_reject)."""
    lines = BASE.splitlines()
    cases = []
    for i, line in enumerate(lines):  # each section missing
        section = line.split(':')[0]
        # partition and scheme have defaults (one stage, single); the others are required.
        cases.append((f"missing-{section}", "\n".join(lines[:i] + lines[i + 1:]), section not in ("partition",)))
    edits = {
        "unknown-key": ("optimizer: {type: sgd, lr: 0.1}", "optimizer: {type: sgd, lr: 0.1, momentun: 0.9}"),
        "bad-name": ("type: gpipe", "type: gpipee"),
        "negative-lr": ("lr: 0.1", "lr: -0.1"),
        "string-lr": ("lr: 0.1", "lr: fast"),
        "list-lr": ("lr: 0.1", "lr: [0.1]"),
        "zero-batch": ("batch_size: 16", "batch_size: 0"),
        "huge-batch": ("batch_size: 16", "batch_size: 100000"),
        "float-epochs": ("epochs: 1", "epochs: 1.5"),
        "huge-epochs": ("epochs: 1", "epochs: 99999999999999999999"),
        "too-many-stages": ("stages: 2", "stages: 9"),
        "zero-stages": ("stages: 2", "stages: 0"),
        "bad-balance": ("stages: 2}", "stages: 2, balance: [1, 1, 1]}"),
        "bad-balance-name": ("stages: 2}", "stages: 2, balance: nope}"),
        "chunks-zero": ("chunks: 2", "chunks: 0"),
        "chunks-huge": ("chunks: 2", "chunks: 1000"),
        "bad-device": ("progress: false", "progress: false, devices: [tpu:0]"),
        "missing-gpu": ("progress: false", "progress: false, devices: ['cuda:7']"),
        "devices-count": ("progress: false", "progress: false, devices: [cpu, cpu, cpu]"),
        "bad-dtype": ("progress: false", "progress: false, dtype: float16"),
        "bad-amp": ("progress: false", "progress: false, amp: fp8"),
        "amp-float64": ("progress: false", "progress: false, amp: bf16, dtype: float64"),
        "bad-executor": ("progress: false", "progress: false, executor: warp"),
        "mlp-input-mismatch": ("sizes: [8, 16, 3]", "sizes: [9, 16, 3]"),
        "mlp-one-size": ("sizes: [8, 16, 3]", "sizes: [8]"),
        "classes-mismatch": ("classes: 3}", "classes: 1}"),
        "shape-empty": ("shape: [8]", "shape: []"),
        "shape-negative": ("shape: [8]", "shape: [-8]"),
        "bad-lr-schedule": ("run:", "lr_schedule: {type: cosine, warmup_epochs: -1}\nrun:"),
        "unknown-lr-schedule": ("run:", "lr_schedule: {type: cyclic}\nrun:"),
        "unknown-section": ("run:", "runn: {}\nrun:"),
        "duplicate-section": ("run:", "optimizer: {type: adam, lr: 0.001}\nrun:"),
        "merge-key": ("optimizer: {type: sgd, lr: 0.1}", "base: &b {type: sgd, lr: 0.1}\noptimizer: {<<: *b}"),
        "init-missing": ("run:", "init: {from: /nonexistent/w.pt}\nrun:"),
        "init-folder": ("run:", "init: {from: /tmp}\nrun:"),
        "tensors-missing": ("dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 3}",
                            "dataset: {type: tensors, path: /nonexistent/d.pt}"),
        "mnist-missing": ("dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 3}",
                          "dataset: {type: mnist}\nmodel_: {}"),
        "interlocking-bad-heads": ("scheme:    {type: gpipe, chunks: 2}", "scheme: {type: interlocking, heads: fc_conv9}"),
        "interlocking-conv-heads": ("scheme:    {type: gpipe, chunks: 2}",
                                    "scheme: {type: interlocking, heads: conv8_bn_gbpl_fc}"),
        "interlocking-fp16": ("scheme:    {type: gpipe, chunks: 2}", "scheme: {type: interlocking}"),
        "tab-indent": ("run:       {", "run:\t{"),
        "unclosed-brace": ("optimizer: {type: sgd, lr: 0.1}", "optimizer: {type: sgd, lr: 0.1"),
        "null-model": ("model:     {type: mlp, sizes: [8, 16, 3]}", "model: ~"),
        "list-root": (None, "- a\n- b\n"),
        "scalar-root": (None, "hello\n"),
        "empty-file": (None, ""),
        "binary-garbage": (None, "\x00\x01\x02\xff\xfe"),
        "unicode-key": ("run:", "rün: {}\nrun:"),
    }
    for name, (old, new) in edits.items():
        text = new if old is None else BASE.replace(old, new, 1)
        if name == "interlocking-fp16":
            text = text.replace("progress: false", "progress: false, amp: fp16")
        cases.append((name, text, name not in ("huge-batch", "tab-indent")))
    return cases


def classify(proc, timed_out, names, expect_reject):
    out = (proc.stdout or "") + (proc.stderr or "") if proc else ""
    if timed_out:
        return "hang", out
    if proc.returncode < 0:
        return "crash", out
    if proc.returncode == 0:
        return ("accepted" if not expect_reject else "accepted-broken"), out
    named = any(n and n in out for n in names)
    fix = any(w in out for w in ("Fix:", "download", "is it ", "extract"))
    if proc.returncode == 2 and named and fix:
        return "clear", out
    return "unclear", out


def run(pipelab, args, timeout, cwd):
    try:
        p = subprocess.run([pipelab] + args, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                           errors="replace")
        return p, False
    except subprocess.TimeoutExpired:
        return None, True


def probe_configs(pipelab, out, timeout):
    results = []
    for name, text, reject in config_cases():
        path = os.path.join(out, f"cfg-{name}.yaml")
        with open(path, "w", errors="replace") as f:
            f.write(text)
        proc, hung = run(pipelab, ["run", path, "--quiet", "--set", f"run.output={out}/runs/{name}"], timeout, out)
        results.append(("configs", name) + classify(proc, hung, [path, os.path.basename(path)], reject))
    # A folder where a file is expected.
    proc, hung = run(pipelab, ["run", out, "--quiet"], timeout, out)
    results.append(("configs", "folder-as-file") + classify(proc, hung, [out], True))
    return results


def mutate(data, rng, n):
    data = bytearray(data)
    for _ in range(n):
        k = rng.randrange(4)
        if k == 0 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif k == 1 and data:
            del data[rng.randrange(len(data)):][:rng.randrange(1, 64)]
        elif k == 2:
            at = rng.randrange(len(data) + 1)
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
        elif data:
            data = data[:rng.randrange(len(data))]
    return bytes(data)


def pt_bytes():
    """Real torch.save outputs: a state dict of this probe's MLP, and a tensors dataset."""
    import io
    import torch
    g = torch.Generator().manual_seed(0)
    state = {"fc1.linear.weight": torch.randn(16, 8, generator=g), "fc1.linear.bias": torch.zeros(16),
             "fc2.linear.weight": torch.randn(3, 16, generator=g), "fc2.linear.bias": torch.zeros(3)}
    data = {"x": torch.randn(64, 8, generator=g), "y": torch.randint(3, (64,), generator=g)}
    out = []
    for obj in (state, data):
        buf = io.BytesIO()
        torch.save(obj, buf)
        out.append(buf.getvalue())
    return out


def repickle(raw, rng):
    """The same archive with its data.pkl mutated (the zip stays valid)."""
    src = zipfile.ZipFile(__import__("io").BytesIO(raw))
    buf = __import__("io").BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename.endswith("data.pkl"):
                data = mutate(data, rng, rng.randrange(1, 4))
            dst.writestr(item, data)
    return buf.getvalue()


def probe_pt(pipelab, out, timeout, count):
    rng = random.Random(1)
    results = []
    try:
        state, data = pt_bytes()
    except Exception as e:  # no torch
        print(f"skipping .pt probes: {e}", file=sys.stderr)
        return results
    for i in range(count):
        base = state if i % 2 == 0 else data
        blob = repickle(base, rng) if i % 3 else mutate(base, rng, rng.randrange(1, 6))
        path = os.path.join(out, f"pt-{i}.pt")
        with open(path, "wb") as f:
            f.write(blob)
        if base is state:
            args = ["run", os.path.join(out, "cfg-base.yaml"), "--quiet", "--set", f"init.from={path}",
                    "--set", f"run.output={out}/runs/pt{i}"]
        else:
            args = ["run", os.path.join(out, "cfg-base.yaml"), "--quiet", "--set",
                    f"dataset={{type: tensors, path: {path}}}", "--set", f"run.output={out}/runs/pt{i}"]
        proc, hung = run(pipelab, args, timeout, out)
        # A mutation may leave a valid file (a changed weight, a renamed key): accepting it is fine.
        results.append(("pt", f"pt-{i}") + classify(proc, hung, [path, "cfg-base.yaml"], False))
    return results


def probe_data(pipelab, out, timeout):
    """Broken dataset files in the formats pipelab reads (idx, CIFAR binary, IMDB text)."""
    results = []
    root = os.path.join(out, "data")

    def case(name, dataset, make):
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        make(root)
        proc, hung = run(pipelab, ["run", os.path.join(out, "cfg-base.yaml"), "--quiet", "--set", f"dataset={dataset}",
                                   "--set", f"run.data_dir={root}", "--set", "model={type: mlp, sizes: [784, 16, 10]}",
                                   "--set", f"run.output={out}/runs/{name}"], timeout, out)
        results.append(("data", name) + classify(proc, hung, [root, "run.data_dir", "dataset"], True))

    def idx(path, magic, dims, payload):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload)

    def mnist(images=(2051, [10, 28, 28], 7840), labels=(2049, [10], 10), name="mnist"):
        def make(r):
            for split, n in (("train", 10), ("t10k", 10)):
                m, d, k = images
                idx(f"{r}/{name}/{split}-images-idx3-ubyte", m, d, bytes(k))
                m, d, k = labels
                idx(f"{r}/{name}/{split}-labels-idx1-ubyte", m, d, bytes(k))
        return make

    case("mnist-absent", "{type: mnist}", lambda r: None)
    case("mnist-bad-magic", "{type: mnist}", mnist(images=(1234, [10, 28, 28], 7840)))
    case("mnist-truncated", "{type: mnist}", mnist(images=(2051, [10, 28, 28], 100)))
    case("mnist-count-mismatch", "{type: mnist}", mnist(labels=(2049, [7], 7)))
    case("mnist-huge-dims", "{type: mnist}", mnist(images=(2051, [4000000000, 28, 28], 10)))
    case("mnist-label-range", "{type: mnist}", lambda r: (mnist()(r), idx(f"{r}/mnist/train-labels-idx1-ubyte", 2049, [10], bytes([200] * 10))))
    case("cifar-absent", "{type: cifar10}", lambda r: None)
    case("cifar-short", "{type: cifar10}", lambda r: (os.makedirs(f"{r}/cifar10/cifar-10-batches-bin"),
                                                       open(f"{r}/cifar10/cifar-10-batches-bin/test_batch.bin", "wb").write(bytes(100))))
    case("imdb-absent", "{type: imdb}", lambda r: None)
    case("imdb-empty-dirs", "{type: imdb}", lambda r: [os.makedirs(f"{r}/imdb/aclImdb/{s}/{c}") for s in ("train", "test") for c in ("pos", "neg")])
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipelab", required=True)
    ap.add_argument("--out", default="/tmp/pipelab-probe")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--pt-count", type=int, default=120)
    ap.add_argument("--only", default="configs,data,pt")
    args = ap.parse_args()
    pipelab = os.path.abspath(args.pipelab)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    with open(os.path.join(args.out, "cfg-base.yaml"), "w") as f:
        f.write(BASE)
    only = args.only.split(",")
    results = []
    if "configs" in only:
        results += probe_configs(pipelab, args.out, args.timeout)
    if "data" in only:
        results += probe_data(pipelab, args.out, args.timeout)
    if "pt" in only:
        results += probe_pt(pipelab, args.out, args.timeout, args.pt_count)
    counts = {}
    for cat, name, outcome, _ in results:
        counts.setdefault(cat, {}).setdefault(outcome, 0)
        counts[cat][outcome] += 1
    print("| inputs | cases | clear | unclear | crash | hang | accepted (fine) | accepted (should fail) |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    for cat, c in counts.items():
        print(f"| {cat} | {sum(c.values())} | " + " | ".join(str(c.get(k, 0)) for k in
                                                          ("clear", "unclear", "crash", "hang", "accepted")) +
              f" | {c.get('accepted-broken', 0)} |")
    for cat, name, outcome, text in results:
        if outcome not in ("clear", "accepted"):
            last = [l for l in text.strip().splitlines() if l.strip()][-1:] or [""]
            print(f"  {outcome:8} {cat}/{name}: {last[0][:200]}")
    with open(os.path.join(args.out, "probe.json"), "w") as f:
        json.dump([{"category": c, "case": n, "outcome": o, "output": t[-2000:]} for c, n, o, t in results], f, indent=1)


if __name__ == "__main__":
    main()
