#!/usr/bin/env python3
"""Writes the TorchScript cases of tests/models/torchscript_model_test.cpp, and the losses the
Python modules give when trained by the loop pipelab runs (full-batch SGD, float64):

  python3 tests/models/torchscript_model.py OUT_DIR

OUT_DIR/data.pt        {"x": [32, 6] float64, "y": [32] class ids}
OUT_DIR/sequential.pt  torch.jit.script of an nn.Sequential
OUT_DIR/children.pt    a module whose forward calls its two children in order
OUT_DIR/not_chain.pt   a module whose forward adds its input back (not its children in order)
OUT_DIR/reversed.pt    a module that calls its children in another order than they are declared
OUT_DIR/train_only.pt  a module that is its children in order in evaluation mode only
OUT_DIR/lstm_child.pt  a module with an nn.LSTM child (its forward returns a tuple)
OUT_DIR/<case>_losses.pt {"losses": the loss of each of STEPS steps, before the step}
"""
import os
import sys
import warnings

import torch
from torch import nn

STEPS = 4


class Children(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.body(x))


class NotChain(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(x + self.body(x))


class Reversed(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(6, 3)
        self.body = nn.Linear(6, 6)

    def forward(self, x):
        return self.head(self.body(x))


class TrainOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        if self.training:
            return self.head(torch.relu(self.body(x)))
        return self.head(self.body(x))


class LstmChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(6, 6, batch_first=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.rnn(x.unsqueeze(1))[0].squeeze(1))


def main(out):
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit's deprecation
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(32, 6, dtype=torch.float64)
    y = torch.randint(0, 3, (32,))
    torch.save({"x": x, "y": y}, os.path.join(out, "data.pt"))
    cases = {
        "sequential": nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3)),
        "children": Children(),
    }
    for name, model in cases.items():
        model = model.double()
        torch.jit.script(model).save(os.path.join(out, name + ".pt"))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for _ in range(STEPS):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            losses.append(loss.item())
            loss.backward()
            optimizer.step()
        torch.save({"losses": torch.tensor(losses, dtype=torch.float64)}, os.path.join(out, name + "_losses.pt"))
    torch.jit.script(NotChain().double()).save(os.path.join(out, "not_chain.pt"))
    for name, model in {"reversed": Reversed(), "train_only": TrainOnly(), "lstm_child": LstmChild()}.items():
        torch.jit.script(model.double()).save(os.path.join(out, name + ".pt"))


if __name__ == "__main__":
    main(sys.argv[1])
