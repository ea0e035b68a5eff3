#!/usr/bin/env python3
"""What tests/core/muon_test.cpp compares pipelab's Muon with: torch.optim.Muon itself,
float32 on the CPU, 4 steps, for several shapes, every adjust_lr_fn, Nesterov on and off.

  python3 tests/core/muon_reference.py OUT.pt

OUT.pt holds, for each case "<rows>x<cols>_<adjust>_<nesterov|plain>": "<case>.w0" (the
starting weight), "<case>.g<k>" (the gradient of step k) and "<case>.w<k+1>" (the weight
after step k), plus "<case>.buffer" (the momentum buffer after the last step).
"""
import sys

import torch

SHAPES = [(4, 2), (2, 4), (7, 5), (64, 32), (33, 65), (1, 1), (1, 3), (3, 1)]
MODES = ["original", "match_rms_adamw", "spectral_unclamped"]
STEPS = 4


def main():
    if not hasattr(torch.optim, "Muon"):
        sys.exit(f"torch {torch.__version__} has no torch.optim.Muon")
    out = {}
    torch.manual_seed(0)
    for rows, cols in SHAPES:
        for mode in MODES:
            for nesterov in (True, False):
                case = f"{rows}x{cols}_{mode}_{'nesterov' if nesterov else 'plain'}"
                w = torch.nn.Parameter(torch.randn(rows, cols))
                out[f"{case}.w0"] = w.detach().clone()
                opt = torch.optim.Muon([w], lr=0.02, weight_decay=0.1, momentum=0.95, nesterov=nesterov,
                                       adjust_lr_fn=mode)
                for k in range(STEPS):
                    g = torch.randn(rows, cols)
                    out[f"{case}.g{k}"] = g.clone()
                    w.grad = g
                    opt.step()
                    out[f"{case}.w{k + 1}"] = w.detach().clone()
                out[f"{case}.buffer"] = opt.state[w]["momentum_buffer"].clone()
    torch.save(out, sys.argv[1])


if __name__ == "__main__":
    main()
