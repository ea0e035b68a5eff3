#!/usr/bin/env python3
"""Writes, for each YAML model case of tests/models/sequential_model_test.cpp, the state dict
of the Python nn.Sequential with the same layers (random weights, float64) and its eval-mode
logits on a random input:

  python3 tests/models/sequential_model.py OUT_DIR

OUT_DIR/<case>.pt holds the state dict, OUT_DIR/<case>_io.pt {"x": input, "logits": output}.
The three wrappers below are the Python side of pipelab's layers that are not plain
nn.Sequential members: a residual block, a recurrent layer's output, self-attention.
"""
import os
import sys

import torch
from torch import nn


class Residual(nn.Sequential):
    def forward(self, x):
        return x + super().forward(x)


class LSTMOutput(nn.LSTM):
    def forward(self, x):
        return super().forward(x)[0]


class GRUOutput(nn.GRU):
    def forward(self, x):
        return super().forward(x)[0]


class SelfAttention(nn.MultiheadAttention):
    def forward(self, x):
        return super().forward(x, x, x, need_weights=False)[0]


def vision():
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
        nn.Sequential(nn.MaxPool2d(2), nn.Flatten()),
        Residual(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64)),
        nn.Linear(64, 10)), torch.randn(2, 3, 8, 8, dtype=torch.float64)


def text():
    return nn.Sequential(
        nn.Embedding(20, 8),
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        LSTMOutput(8, 8, batch_first=True),
        GRUOutput(8, 6, num_layers=2, batch_first=True, bidirectional=True),
        SelfAttention(12, 2, batch_first=True),
        nn.Flatten(), nn.Linear(72, 3)), torch.randint(0, 20, (2, 6))


def signal():
    return nn.Sequential(
        nn.Conv1d(4, 8, 3), nn.GroupNorm(2, 8), nn.SiLU(), nn.AvgPool1d(2), nn.LeakyReLU(0.1),
        nn.AdaptiveAvgPool1d(4), nn.Flatten(), nn.Dropout(0.3), nn.Linear(32, 5), nn.Tanh(),
        nn.Linear(5, 3), nn.Sigmoid()), torch.randn(2, 4, 16, dtype=torch.float64)


def main(out):
    os.makedirs(out, exist_ok=True)
    for name, make in {"vision": vision, "text": text, "signal": signal}.items():
        torch.manual_seed(0)
        model, x = make()
        model = model.double().eval()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        # Away from the default init (ones, zeros), so that a tensor loaded into the wrong place shows.
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.rand_like(p) * 0.1)
            logits = model(x)
        torch.save(model.state_dict(), os.path.join(out, name + ".pt"))
        torch.save({"x": x, "logits": logits}, os.path.join(out, name + "_io.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
