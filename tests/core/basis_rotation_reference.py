#!/usr/bin/env python3
"""An independent float64 reference of basis rotation (Jung, Shin and Lee, ICML 2026; the
algorithm as docs/schemes.md "Basis rotation" states it) for tests/core/basis_rotation_test.cpp.

  python3 tests/core/basis_rotation_reference.py OUT.pt

For each case "<rows>x<cols>_<geometry>_<source>" OUT.pt holds "<case>.w0" (the starting
weight), "<case>.g<k>" (the gradient of step k) and "<case>.w<k+1>" (the weight after step k),
all float64. Hyperparameters: lr 0.01, betas (0.9, 0.999), covariance decay beta2, eps 1e-8,
weight decay 0.01, a refresh every 5 steps, 12 steps.
"""
import sys

import torch

SHAPES = [(6, 4), (3, 5), (4, 4)]
STEPS = 12
LR, BETA1, BETA2, EPS, DECAY, EVERY = 0.01, 0.9, 0.999, 1e-8, 0.01, 5


class Matrix:
    """One rotated weight: its moments, covariances and bases."""

    def __init__(self, shape, geometry, source):
        rows, cols = shape
        both = geometry == "bi"
        self.left = both or rows < cols
        self.right = both or rows >= cols
        self.source = source
        self.m = torch.zeros(shape, dtype=torch.float64)
        self.v = torch.zeros(shape, dtype=torch.float64)
        self.cov_left = torch.zeros(rows, rows, dtype=torch.float64) if self.left and source == "2nd" else None
        self.cov_right = torch.zeros(cols, cols, dtype=torch.float64) if self.right and source == "2nd" else None
        self.u = None  # left basis
        self.w = None  # right basis

    def to_rotated(self, x):
        if self.u is not None:
            x = self.u.T @ x
        if self.w is not None:
            x = x @ self.w
        return x

    def from_rotated(self, x):
        if self.w is not None:
            x = x @ self.w.T
        if self.u is not None:
            x = self.u @ x
        return x

    def has_bases(self):
        return (not self.left or self.u is not None) and (not self.right or self.w is not None)

    def first_bases(self, lookahead):
        if self.source == "1st":
            u, _, vh = torch.linalg.svd(lookahead, full_matrices=True)
            if self.left:
                self.u = u
            if self.right:
                self.w = vh.T
            return
        if self.left:
            self.u = eigenvectors_largest_first(self.cov_left)
        if self.right:
            self.w = eigenvectors_largest_first(self.cov_right)

    def power_step(self, lookahead):
        """Sorts each side's columns by their estimated eigenvalue (v permuted along), then
        one multiplication by the statistic and a QR; both sides from the old bases."""
        rows, cols = lookahead.shape
        old_u = self.u if self.u is not None else torch.eye(rows, dtype=torch.float64)
        old_w = self.w if self.w is not None else torch.eye(cols, dtype=torch.float64)
        new_u = new_w = None
        if self.source == "1st":
            if self.left:
                order = torch.argsort(((lookahead @ old_w) ** 2).sum(0), descending=True)
                self.v = self.v[:, order]
                new_u = torch.linalg.qr(lookahead @ old_w[:, order], mode="complete")[0]
            if self.right:
                order = torch.argsort(((lookahead.T @ old_u) ** 2).sum(0), descending=True)
                self.v = self.v[order, :]
                new_w = torch.linalg.qr(lookahead.T @ old_u[:, order], mode="complete")[0]
        else:
            if self.left:
                order = torch.argsort(torch.diag(old_u.T @ self.cov_left @ old_u), descending=True)
                self.v = self.v[order, :]
                new_u = torch.linalg.qr(self.cov_left @ old_u[:, order])[0]
            if self.right:
                order = torch.argsort(torch.diag(old_w.T @ self.cov_right @ old_w), descending=True)
                self.v = self.v[:, order]
                new_w = torch.linalg.qr(self.cov_right @ old_w[:, order])[0]
        if self.left:
            self.u = new_u
        if self.right:
            self.w = new_w

    def step(self, weight, g, t):
        if self.source == "2nd":
            if self.left:
                self.cov_left = torch.lerp(self.cov_left, g @ g.T, 1 - BETA2)
            if self.right:
                self.cov_right = torch.lerp(self.cov_right, g.T @ g, 1 - BETA2)
        if t % EVERY == 0 or not self.has_bases():
            lookahead = BETA1 * self.m + (1 - BETA1) * g
            if self.has_bases():
                self.power_step(lookahead)
            else:
                self.first_bases(lookahead)
        g_rot = self.to_rotated(g)
        self.m = self.m * BETA1 + g * (1 - BETA1)
        m_rot = self.to_rotated(self.m)
        self.v = self.v * BETA2 + g_rot.square() * (1 - BETA2)
        direction = self.from_rotated(m_rot / (self.v.sqrt() + EPS))
        scale = LR * (1 - BETA2 ** t) ** 0.5 / (1 - BETA1 ** t)
        weight = weight - LR * DECAY * weight
        return weight - scale * direction


def eigenvectors_largest_first(cov):
    jitter = 1e-30 * torch.eye(cov.shape[0], dtype=torch.float64)
    return torch.flip(torch.linalg.eigh(cov + jitter)[1], [1])


def main():
    torch.manual_seed(0)
    out = {}
    for shape in SHAPES:
        for geometry in ("bi", "uni"):
            for source in ("2nd", "1st"):
                case = f"{shape[0]}x{shape[1]}_{geometry}_{source}"
                w = torch.randn(shape, dtype=torch.float64)
                out[f"{case}.w0"] = w.clone()
                state = Matrix(shape, geometry, source)
                for k in range(STEPS):
                    g = torch.randn(shape, dtype=torch.float64)
                    out[f"{case}.g{k}"] = g.clone()
                    w = state.step(w, g, k + 1)
                    out[f"{case}.w{k + 1}"] = w.clone()
    torch.save(out, sys.argv[1])


if __name__ == "__main__":
    main()
