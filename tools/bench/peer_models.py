"""The workloads tools/bench/bench_processes.py trains on both sides: each as a pipelab
experiment (its model, dataset and partition) and as the same modules in PyTorch, block by
block, so that torch.distributed.pipelining cuts the model where pipelab does.

- mlp: 8 x Linear(W, W), ReLU between them (pipelab's `mlp`), batch 256.
- lm: pipelab's `transformer` as a causal language model (head: lm): an embedding (word
  embedding, a linear, a learned position term), 4 post-LN layers (4-head attention with
  q/k/v/joint linears, feed-forward 256 -> 1024 -> 256) and a linear head at every
  position; d_model 256, sequence 128, vocabulary 2000, batch 32, no dropout.
- cnn: pipelab's `resnet` with basic units, architecture 32,2/64,2/128,2 and the CIFAR stem
  (3x3 conv), on 3 x 32 x 32 images, 10 classes, batch 64.

Blocks are pipelab's (one per embedding, layer, residual unit, head); a stage takes the
counts `balance` gives, on both sides. Weights are initialised by each side's own defaults:
the figures are speeds, not losses.
"""
import math
import os

MICRO = 8


class Workload:
    name = ""
    batch = 0

    def describe(self):
        raise NotImplementedError

    def sections(self, steps, data_dir):
        """pipelab's model: and dataset: lines for `steps` mini-batches."""
        raise NotImplementedError

    def balance(self, stages):
        """Blocks per stage for `stages` stages (both sides)."""
        raise NotImplementedError

    def blocks(self):
        """The torch modules of every block, in model order."""
        raise NotImplementedError

    def batch_tensors(self):
        """One mini-batch: inputs and targets."""
        raise NotImplementedError

    def loss(self, output, target):
        import torch.nn.functional as F
        return F.cross_entropy(output, target)


def even(blocks, stages):
    return [blocks // stages] * stages


class Mlp(Workload):
    name, batch, layers = "mlp", 256, 8

    def __init__(self, width=512):
        self.width = width

    def describe(self):
        return f"MLP {self.layers} x Linear({self.width}), batch {self.batch}"

    def sections(self, steps, data_dir):
        sizes = ", ".join([str(self.width)] * (self.layers + 1))
        return (f"model:     {{type: mlp, sizes: [{sizes}]}}\n"
                f"dataset:   {{type: synthetic, samples: {steps * self.batch}, test_samples: {self.batch}, "
                f"shape: [{self.width}], classes: {self.width}}}\n")

    def balance(self, stages):
        return even(self.layers, stages)

    def blocks(self):
        import torch
        out = []
        for i in range(self.layers):
            linear = torch.nn.Linear(self.width, self.width)
            out.append(torch.nn.Sequential(linear, torch.nn.ReLU()) if i < self.layers - 1 else linear)
        return out

    def batch_tensors(self):
        import torch
        return torch.randn(self.batch, self.width), torch.randint(0, self.width, (self.batch,))


class Lm(Workload):
    name, batch = "lm", 32
    layers, d_model, heads, ff, seq, vocab = 4, 256, 4, 1024, 128, 2000

    def describe(self):
        return (f"causal transformer LM, {self.layers} layers, d_model {self.d_model}, sequence {self.seq}, "
                f"vocabulary {self.vocab}, batch {self.batch}")

    def sections(self, steps, data_dir):
        import torch
        path = os.path.join(data_dir, "lm_tokens.pt")
        test_path = os.path.join(data_dir, "lm_test_tokens.pt")
        g = torch.Generator().manual_seed(0)
        # A test file of its own: without one, the dataset holds a fifth of `path` out for
        # testing and an epoch has fewer than `steps` mini-batches.
        for file, count in ((path, steps * self.batch), (test_path, self.batch)):
            x = torch.randint(0, self.vocab, (count, self.seq + 1), generator=g)
            torch.save({"x": x[:, :-1].contiguous(), "y": x[:, 1:].contiguous()}, file)
        return (f"model:     {{type: transformer, head: lm, num_words: {self.vocab}, d_model: {self.d_model}, "
                f"heads: {self.heads}, ff: {self.ff}, layers: {self.layers}, dropout: 0, ff_residual: attention}}\n"
                f"dataset:   {{type: tensors, path: {path}, test_path: {test_path}}}\n")

    def balance(self, stages):
        # embed, 4 layers, head: the embedding and the head together weigh about a layer.
        return {1: [6], 2: [3, 3], 4: [2, 1, 1, 2]}[stages]

    def blocks(self):
        import torch
        from torch import nn

        d, heads, seq = self.d_model, self.heads, self.seq

        class Embed(nn.Module):
            def __init__(self, vocab):
                super().__init__()
                self.embeddings = nn.Embedding(vocab, d)
                self.emb_ff = nn.Linear(d, d)
                self.pos = nn.Linear(seq, d)

            def forward(self, ids):
                return self.emb_ff(self.embeddings(ids)) + (self.pos.weight.t() + self.pos.bias)

        class Layer(nn.Module):
            def __init__(self, ff):
                super().__init__()
                self.q, self.k, self.v, self.joint = (nn.Linear(d, d) for _ in range(4))
                self.attention_norm, self.ff_norm = nn.LayerNorm(d), nn.LayerNorm(d)
                self.ff = nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Linear(ff, d))

            def forward(self, x):
                n, t, _ = x.shape
                h = d // heads

                def split(y):
                    return y.view(n, t, heads, h).transpose(1, 2)

                q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
                scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(h)
                future = torch.ones(t, t, dtype=torch.bool).triu(1)
                scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
                a = self.joint(torch.matmul(torch.softmax(scores, -1), v).transpose(1, 2).contiguous().view(n, t, d))
                attended = self.attention_norm(a + x)
                return self.ff_norm(self.ff(attended) + attended)

        return [Embed(self.vocab)] + [Layer(self.ff) for _ in range(self.layers)] + [nn.Linear(d, self.vocab)]

    def batch_tensors(self):
        import torch
        x = torch.randint(0, self.vocab, (self.batch, self.seq + 1))
        return x[:, :-1].contiguous(), x[:, 1:].contiguous()

    def loss(self, output, target):
        import torch.nn.functional as F
        return F.cross_entropy(output.reshape(-1, output.size(-1)), target.reshape(-1))


class Cnn(Workload):
    name, batch, classes = "cnn", 64, 10
    widths, units = (32, 64, 128), 2

    def describe(self):
        arch = "/".join(f"{w},{self.units}" for w in self.widths)
        return f"ResNet (basic units {arch}, CIFAR stem) on 3x32x32, batch {self.batch}"

    def sections(self, steps, data_dir):
        arch = "/".join(f"{w},{self.units}" for w in self.widths)
        return (f"model:     {{type: resnet, architecture: \"{arch}\", stem: cifar}}\n"
                f"dataset:   {{type: synthetic, samples: {steps * self.batch}, test_samples: {self.batch}, "
                f"shape: [3, 32, 32], classes: {self.classes}}}\n")

    def balance(self, stages):
        return even(2 + len(self.widths) * self.units, stages)  # stem, the units, head

    def blocks(self):
        from torch import nn

        def conv(i, o, k, stride, relu):
            layers = [nn.Conv2d(i, o, k, stride, k // 2, bias=False), nn.BatchNorm2d(o)]
            return nn.Sequential(*(layers + [nn.ReLU()] if relu else layers))

        class Unit(nn.Module):
            def __init__(self, i, width, stride):
                super().__init__()
                self.conv1, self.conv2 = conv(i, width, 3, stride, True), conv(width, width, 3, 1, False)
                self.shortcut = conv(i, width, 1, stride, False) if stride != 1 or i != width else None
                self.relu = nn.ReLU()

            def forward(self, x):
                return self.relu(self.conv2(self.conv1(x)) + (self.shortcut(x) if self.shortcut else x))

        out, i = [conv(3, self.widths[0], 3, 1, True)], self.widths[0]
        for s, width in enumerate(self.widths):
            for j in range(self.units):
                out.append(Unit(i, width, 2 if s > 0 and j == 0 else 1))
                i = width
        out.append(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(i, self.classes)))
        return out

    def batch_tensors(self):
        import torch
        return torch.randn(self.batch, 3, 32, 32), torch.randint(0, self.classes, (self.batch,))


def workload(name, width=512):
    return {"mlp": lambda: Mlp(width), "lm": Lm, "cnn": Cnn}[name]()
