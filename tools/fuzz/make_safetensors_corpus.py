#!/usr/bin/env python3
"""Seed corpus for safetensors_fuzzer: files written by the safetensors library itself
(every dtype pipelab reads, scalars, empty tensors, metadata, a model's state dict) when
it is installed, plus hand-built headers at the format's edges (no tensors, padding).

  python3 tools/fuzz/make_safetensors_corpus.py OUT_DIR
"""
import json
import os
import struct
import sys


def hand_built():
    def file(header, data=b""):
        text = json.dumps(header).encode()
        return struct.pack("<Q", len(text)) + text + data

    yield "empty", file({})
    yield "metadata_only", file({"__metadata__": {"format": "pt"}})
    yield "one_f32", file({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)
    yield "zero_size", file({"e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}})
    padded = json.dumps({"b": {"dtype": "BOOL", "shape": [], "data_offsets": [0, 1]}}).encode() + b"   "
    yield "padded", struct.pack("<Q", len(padded)) + padded + b"\1"


def from_library():
    try:
        import torch
        from safetensors.torch import save
    except ImportError:
        return
    dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
              torch.int16, torch.int8, torch.uint8, torch.bool]
    yield "dtypes", save({f"t{i}": torch.zeros(2, 3, dtype=d) for i, d in enumerate(dtypes)})
    yield "scalar", save({"s": torch.tensor(1.5)}, metadata={"format": "pt"})
    yield "linear", save(dict(torch.nn.Linear(4, 3).state_dict()))


def main(out):
    os.makedirs(out, exist_ok=True)
    for name, data in list(hand_built()) + list(from_library()):
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
