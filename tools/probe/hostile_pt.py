#!/usr/bin/env python3
"""Writes .pt files whose pickles attack a reader (the classes a hostile-input probe found):
stack underflow on every opcode that pops, containers that contain themselves, deep nesting,
"billion laughs" memo expansion, storages whose sizes or offsets lie, unknown storage types,
odd dict keys, and globals that name os.system / eval. Each is a valid torch.save zip
container around a hand-written pickle.

  python3 tools/probe/hostile_pt.py OUT_DIR
"""
import os
import struct
import sys
import zipfile


def archive(path, pickle, storages=()):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle)
        z.writestr("archive/byteorder", b"little")
        z.writestr("archive/version", b"3\n")
        for key, data in storages:
            z.writestr(f"archive/data/{key}", data)


def s(text):
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def tensor(numel, offset, size, stride, storage="FloatStorage"):
    k = lambda v: b"K" + bytes([v])
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((" + s("storage") + b"ctorch\n" + storage.encode() + b"\n" +
            s("0") + s("cpu") + k(numel) + b"tQ" + k(offset) + b"(" + k(size) + b"t(" + k(stride) + b"t\x89}tR.")


def cases():
    for name, op in [("tuple1", b"\x85"), ("tuple2", b"\x86"), ("tuple3", b"\x87"), ("dup", b"2"), ("binput", b"q\x00"),
                     ("long_binput", b"r\x00\x00\x00\x00"), ("memoize", b"\x94"), ("append", b"a"), ("setitem", b"s"),
                     ("reduce", b"R"), ("newobj", b"\x81"), ("build", b"b"), ("binpersid", b"Q"), ("stack_global", b"\x93"),
                     ("pop", b"0"), ("pop_mark", b"1"), ("appends", b"e"), ("setitems", b"u"), ("stop", b"")]:
        yield f"underflow-{name}", b"\x80\x02" + op + b".", ()
    yield "underflow-below-mark", b"\x80\x02K\x01(\x85.", ()
    yield "self-list", b"\x80\x02]q\x00h\x00a.", ()
    yield "self-dict", b"\x80\x02}q\x00K\x01h\x00s.", ()
    for depth in (1000, 100000, 1000000):
        yield f"nesting-{depth}", b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".", ()
    laughs = b"\x80\x02K\x00q\x00"
    for level in range(30):
        laughs += b"(" + (b"h" + bytes([level % 2])) * 10 + b"lq" + bytes([(level + 1) % 2])
    yield "billion-laughs", laughs + b".", ()
    four = bytes(16)
    yield "storage-size-lies", tensor(100, 0, 4, 1), [("0", four)]
    yield "storage-extent-lies", tensor(4, 0, 10, 1), [("0", four)]
    yield "storage-offset-lies", tensor(4, 3, 2, 1), [("0", four)]
    yield "storage-missing", tensor(4, 0, 4, 1), []
    yield "storage-type-unknown", tensor(4, 0, 4, 1, "FooStorage"), [("0", four)]
    huge = tensor(4, 0, 4, 1).replace(b"(K\x04t", b"(\x8a\x08" + b"\xff" * 7 + b"\x3ft")
    yield "size-overflow", huge, [("0", four)]
    yield "dict-key-list", b"\x80\x02}](K\x01ls.", ()
    yield "dict-key-dict", b"\x80\x02}}K\x01s.", ()
    yield "dict-key-tensor", b"\x80\x02}" + tensor(4, 0, 4, 1)[2:-1] + b"K\x01s.", [("0", four)]
    yield "os-system", b"\x80\x02cposix\nsystem\n(" + s("echo pwned") + b"tR.", ()
    yield "builtins-eval", b"\x80\x02cbuiltins\neval\n(" + s("1+1") + b"tR.", ()
    yield "length-overflow", b"\x80\x02\x8d" + b"\xff" * 8 + b".", ()
    yield "unknown-opcode", b"\x80\x02\xff.", ()
    yield "empty-pickle", b"", ()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "hostile-pt"
    os.makedirs(out, exist_ok=True)
    n = 0
    for name, pickle, storages in cases():
        archive(os.path.join(out, name + ".pt"), pickle, storages)
        n += 1
    print(f"{n} files in {out}")


if __name__ == "__main__":
    main()
