#!/usr/bin/env python3
"""Seed corpus for pt_reader_fuzzer: the data.pkl of real torch.save outputs (state dicts,
parameters, views sharing a storage, every dtype pipelab reads, nested containers), written
as files of the pickle alone (the fuzzer wraps them in an archive) plus a few whole .pt files.

  python3 tools/fuzz/make_corpus.py OUT_DIR
"""
import io
import os
import sys
import zipfile

import torch


def objects():
    lin = torch.nn.Linear(3, 2)
    seq = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2))
    base = torch.arange(16, dtype=torch.float32)
    yield "state_dict", lin.state_dict()
    yield "conv_bn", seq.state_dict()
    yield "parameter", torch.nn.Parameter(torch.ones(2, 2))
    yield "views", {"a": base[:4], "b": base[4:].view(3, 4), "t": base.view(4, 4).t()}
    yield "dtypes", [torch.zeros(2, dtype=d) for d in (torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                                        torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
                                                        torch.complex64)]
    yield "nested", {"x": torch.randn(2), "y": [1, 2.5, "s", None, True, (3, 4)], "z": {"k": {"j": torch.ones(1)}}}
    yield "scalars", (1, -70000, 1 << 40, 3.25, "text", b"bytes", None, False)
    yield "empty", {"e": torch.zeros(0, 3)}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "corpus"
    os.makedirs(out, exist_ok=True)
    for name, obj in objects():
        buf = io.BytesIO()
        torch.save(obj, buf)
        raw = buf.getvalue()
        with open(os.path.join(out, name + ".pt"), "wb") as f:
            f.write(raw)
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
            with open(os.path.join(out, name + ".pkl"), "wb") as f:
                f.write(z.read(pkl))
    print(f"corpus: {len(os.listdir(out))} files in {out}")


if __name__ == "__main__":
    main()
