#!/usr/bin/env python3
"""An independent float64 reference of basis rotation under PipeDream's 1F1B with weight
stashing, for tests/schemes/basis_rotation_pipeline_test.cpp.

  python3 basis_rotation_pipeline_reference.py init DIR
      writes DIR/mlp_init.pt and DIR/transformer_init.pt: random float64 weights under
      pipelab's names (the zoo's mlp; a `sequential` language model: an embedding, two
      transformer encoder layers and a linear head to the next word's logits), which the runs
      start from (`init: {from: ...}`)
  python3 basis_rotation_pipeline_reference.py train RUN_DIR
      trains the run's model from its init file on the micro-batches the run dumped
      (batches.safetensors) and writes RUN_DIR/reference.pt: the weights the run should end with

What PipeDream with stashing computes (docs/schemes.md, PipeDream): micro-batch i's forward and
backward on stage s both read the weights stage s had after its first max(0, i - (P - 1 - s))
updates, so micro-batch i's gradient is the exact gradient of the loss under that mix of
versions, and every stage applies it as its (i + 1)-th update. The gradients come from
Python's autograd; each matrix's update is tests/core/basis_rotation_reference.py's Matrix
with the run's lr, betas, eps, weight decay and refresh period, every other parameter's the
run's fallback AdamW, written out here (torch.optim's AdamW arithmetic, by hand).
"""
import os
import sys

import torch
import yaml
from safetensors.torch import load_file
from torch import nn
from torch.func import functional_call

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core"))
import basis_rotation_reference as rotation  # noqa: E402

MLP_SIZES = [6, 5, 5, 4, 3]
VOCAB, WIDTH = 12, 8


def mlp():
    layers = []
    for i in range(len(MLP_SIZES) - 1):
        layers += [nn.Linear(MLP_SIZES[i], MLP_SIZES[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1]).double()


def mlp_names(python_name):
    """Python's "2.weight" -> the zoo mlp's "fc2.linear.weight"."""
    index, what = python_name.split(".")
    return f"fc{int(index) // 2 + 1}.linear.{what}"


def mlp_block(python_name):
    return int(python_name.split(".")[0]) // 2


def transformer():
    return nn.Sequential(
        nn.Embedding(VOCAB, WIDTH),
        nn.TransformerEncoderLayer(WIDTH, 2, 16, dropout=0.0, batch_first=True),
        nn.TransformerEncoderLayer(WIDTH, 2, 16, dropout=0.0, batch_first=True),
        nn.Linear(WIDTH, VOCAB)).double()


CASES = {  # model type -> (Python model, Python name -> pipelab's, Python name -> block)
    "mlp": (mlp, mlp_names, mlp_block),
    "sequential": (transformer, lambda n: n, lambda n: int(n.split(".")[0])),
}


def write_init(out):
    torch.manual_seed(0)
    for name, (make, rename, _) in (("mlp", CASES["mlp"]), ("transformer", CASES["sequential"])):
        model = make()
        state = {rename(k): v.detach().clone() for k, v in model.state_dict().items()}
        torch.save(state, os.path.join(out, f"{name}_init.pt"))


class AdamW:
    """torch.optim.AdamW's update of one tensor, by hand, with the settings of `section` (the
    run's fallback optimizer)."""

    def __init__(self, shape, section):
        self.m = torch.zeros(shape, dtype=torch.float64)
        self.v = torch.zeros(shape, dtype=torch.float64)
        self.lr, self.betas = float(section["lr"]), [float(b) for b in section["betas"]]
        self.eps, self.decay = float(section["eps"]), float(section["weight_decay"])

    def step(self, weight, g, t):
        lr, (b1, b2), eps, decay = self.lr, self.betas, self.eps, self.decay
        weight = weight * (1 - lr * decay)
        self.m = self.m * b1 + g * (1 - b1)
        self.v = self.v * b2 + g * g * (1 - b2)
        denom = self.v.sqrt() / (1 - b2 ** t) ** 0.5 + eps
        return weight - lr / (1 - b1 ** t) * self.m / denom


def stage_of_blocks(balance):
    out = []
    for stage, count in enumerate(balance):
        out += [stage] * count
    return out


def train(run):
    with open(os.path.join(run, "config.yaml")) as f:
        config = yaml.safe_load(f)
    make, rename, block = CASES[config["model"]["type"]]
    model = make()
    stages = int(config["partition"]["stages"])
    stage_of = stage_of_blocks(config["partition"]["balance"])
    init = torch.load(config["init"]["from"], weights_only=True)
    names = [n for n, _ in model.named_parameters()]
    # versions[name][k]: the parameter after its stage's first k updates
    versions = {n: [init[rename(n)].clone()] for n in names}
    o = config["optimizer"]
    geometry, source = o.get("rotation_geometry", "bi"), o.get("approx_source", "2nd")
    # The run's hyperparameters, into the per-matrix reference's.
    rotation.LR, (rotation.BETA1, rotation.BETA2) = float(o["lr"]), [float(b) for b in o["betas"]]
    rotation.EPS, rotation.DECAY = float(o["eps"]), float(o["weight_decay"])
    rotation.EVERY = int(o["precondition_frequency"])
    state = {n: rotation.Matrix(tuple(versions[n][0].shape), geometry, source) if versions[n][0].dim() == 2
             else AdamW(versions[n][0].shape, o["fallback"]) for n in names}
    batches = load_file(os.path.join(run, "batches.safetensors"))
    steps = sorted({int(k.split(".")[0][4:]) for k in batches})
    for i in steps:
        x, y = batches[f"step{i}.mb0.x"], batches[f"step{i}.mb0.y"]
        params = {}
        for n in names:
            s = stage_of[block(n)]
            params[n] = versions[n][max(0, i - (stages - 1 - s))].clone().requires_grad_(True)
        logits = functional_call(model, params, (x,))
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        grads = torch.autograd.grad(loss, [params[n] for n in names])
        for n, g in zip(names, grads):
            versions[n].append(state[n].step(versions[n][-1], g, i + 1))
    torch.save({rename(n): versions[n][-1] for n in names}, os.path.join(run, "reference.pt"))


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    if sys.argv[1] == "init":
        write_init(sys.argv[2])
    else:
        train(sys.argv[2])
