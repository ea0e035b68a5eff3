#!/usr/bin/env python3
"""Hostile-input probe, fourth round: the surfaces added after tools/probe/hostile_surfaces.py
(models written in YAML or saved as TorchScript, safetensors weights and `init.names`,
`image_folder` JPEGs, codecs, optimizer options, launch environments, plugins, sweeps,
`simulate`'s traffic, `plot --x step`, `--resume` with replicas and codec state, paths that loop
or run through files). Each case is run as a user would and sorted:

  clear     exit 2 with a message that names the file (or key, flag, variable), says how to fix
            it, says what is wrong where a case asks for it, and shows no internal text (source
            paths, INTERNAL ASSERT, stack frames, TorchScript tracebacks, `filesystem error`)
  unclear   any other failure of a broken input
  crash     killed by a signal (a rank too), ranks started before a refusal, or an allocation
            that only the probe's 6 GiB address-space cap stopped
  hang      still running after --timeout seconds (30 for the cases that may loop)
  silent    exit 0 for a broken input, or a promise not kept (a sweep cell without its limit,
            bytes that grow with the micro-batch count, a resume that differs, NaN shown as 0)
  accepted  exit 0 for a valid input
  refused   a valid input that pipelab refuses (the inputs that must work)

  python3 tools/probe/hostile_newest.py --pipelab build/pipelab [--out /tmp/probe4] [--only a,b]
      [--timeout S] [--plugin-dir DIR]

Surfaces: yaml-models, torchscript, weights, images, codecs, options, launch, plugins, sweep,
simulate, plot, resume, paths. TorchScript files and the resume comparison need python3 with
torch, weights numpy and safetensors (else skipped); images use PIL (else one JPEG in bytes).
--plugin-dir holds libmicro_naive.so (examples/plugin) and libdup_gpipe.so (the same source
registering `gpipe`), built there once with g++ when missing (else those cases are skipped).
Prints a table of counts per surface and every case neither clear nor accepted; writes probe.json.
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_newest_base import *  # noqa: E402,F401,F403
import hostile_newest_runs  # noqa: E402


def probe_yaml_models(p):
    s, ids, head = "yaml-models", torch_files(p), ["flatten", "linear: {out: 3}"]
    around = {"vec": (["linear: {out: 16}"], ["linear: {out: 3}"]), "seq": ([], head), "ids": ([], head),
              "img": (["conv2d: {out: 4, kernel: 3, padding: 1}"], head)}
    for line in MODEL_CASES.strip().splitlines():
        name, data, word, layers = line.split(None, 3)
        if data != "ids" or ids:
            before, after = around[data]
            p.bad(s, name, sequential(before + layers.split(" ; ") + after, data), must=[word] if word != "-" else [],
                  timeout=min(p.timeout, 30) if name.startswith("huge") else None)
    p.bad(s, "huge/entries-200000", sequential(["relu"] * 200000 + ["linear: {out: 3}"]), timeout=min(p.timeout, 30))
    p.good(s, "residual/floats-valid", sequential(["linear: {out: 8}", "residual: [linear: {out: 8}, relu]"] + head))


def probe_torchscript(p):
    s = "torchscript"
    if not torch_files(p):
        return
    ts = lambda f: f"{{type: torchscript, file: {f}}}"  # noqa: E731
    for name, (file, must) in {
            "children-out-of-order": ("ooo.pt", ["order"]), "training-forward-differs": ("train.pt", ["train"]),
            "lstm-child-tuple": ("lstm.pt", ["tuple"]), "residual-module": ("res.pt", ["children"]),
            "child-called-twice": ("twice.pt", ["children"]), "unused-child": ("unused.pt", ["children"]),
            "no-children": ("bare.pt", ["child"]), "state-dict-not-script": ("state_dict.pt", ["script"])}.items():
        p.bad(s, name, experiment(ts(p.path(f"torch/{file}"))), names=[file, "model.file"], must=must)
    good = open(p.path("torch/good.pt"), "rb").read()
    for name, data in {"empty-file": b"", "garbage": bytes(range(256)) * 8, "truncated-zip": good[:len(good) // 2],
                       "zip-header-only": good[:30] + bytes(64)}.items():
        p.bad(s, name, experiment(ts(p.write(f"torch/{name}.pt", data, "wb"))), names=[f"{name}.pt"])
    for name, (f, must) in {"fifo": (make_fifo(p, "torch/fifo.pt"), ["fifo", "pipe", "not a regular file"]),
                            "directory": (p.path("torch"), ["folder", "directory"]),
                            "symlink-loop": (p.plant("loops/ts.pt"), LOOP_MUST)}.items():
        p.bad(s, name, experiment(ts(f)), names=[os.path.basename(f)], must=must, timeout=min(p.timeout, 20))
    for name in ("good", "seq", "traced"):
        p.good(s, f"valid/{name}", experiment(ts(p.path(f"torch/{name}.pt"))))
    p.good(s, "valid/one-stage", experiment(ts(p.path("torch/good.pt")), rest=ONE_STAGE))


def probe_weights(p):
    s = "weights"
    try:
        import numpy as np
        from safetensors.numpy import save_file
    except ImportError as e:
        return print(f"skipping weights: {e}", file=sys.stderr)
    rng = np.random.default_rng(0)
    shapes = {"fc1.linear.weight": (16, 8), "fc1.linear.bias": (16,), "fc2.linear.weight": (3, 16),
              "fc2.linear.bias": (3,)}

    def st(name, tensors):
        os.makedirs(p.path("weights"), exist_ok=True)
        save_file(tensors, p.path(f"weights/{name}.safetensors"))
        return p.path(f"weights/{name}.safetensors")

    def mlp(dtype=np.float32, only=None):  # the probe MLP's tensors, all (or only the one named) in dtype
        return {k: rng.standard_normal(sh).astype(dtype if only in (None, k) else np.float32) for k, sh in shapes.items()}

    for name, dtype in {"bool": np.bool_, "i64": np.int64, "i32": np.int32, "i8": np.int8, "u8": np.uint8}.items():
        p.bad(s, f"{name}-into-float", BASE, ["--set", f"init.from={st(name, mlp(dtype))}"], [f"{name}.safetensors"],
              ["dtype", name])
    f = st("bias-bool", mlp(np.bool_, only="fc1.linear.bias"))
    p.bad(s, "one-bool-bias", BASE, ["--set", f"init.from={f}"], ["bias-bool.safetensors"], ["fc1.linear.bias"])
    good = st("good", mlp())
    for name, names in {"drop-every-tensor": "{'.*': ''}", "drop-every-tensor-nonstrict": "{'.*': ''}",
                        "rename-all-away-nonstrict": r"{'(.*)': 'x.\1'}", "two-onto-one": r"{'fc1\.(.*)': 'fc2.\1'}",
                        "bad-regex": "{'(': 'x'}", "group-out-of-range": r"{'(fc1)\.linear\.weight': '\5'}",
                        "names-a-list": "[a, b]", "unknown-preset": "torchvison"}.items():
        init = f"init={{from: {good}, names: {names}, strict: {'false' if 'nonstrict' in name else 'true'}}}"
        must = ["init.names", "rule"] if "drop" in name or "away" in name else ["init.names"]
        p.bad(s, f"rules/{name}", BASE, ["--set", init], ["good.safetensors", "init.names"], must)
    # Valid: docs/weights.md's rules rewrite a name the first pattern matches whole, so a lazy
    # group still takes every digit of `weight.10`.
    seq11, w = sequential(["linear: {out: 16}"] + ["relu"] * 9 + ["linear: {out: 3}"]), mlp()
    f = st("swapped", {"weight.0": w["fc1.linear.weight"], "bias.0": w["fc1.linear.bias"],
                       "weight.10": w["fc2.linear.weight"], "bias.10": w["fc2.linear.bias"]})
    for name, rule in (("anchored-lazy-rewrite", r"(weight|bias)\.(\d+?)"), ("greedy-rewrite", r"(weight|bias)\.(\d+)")):
        p.good(s, f"valid/{name}", seq11, ["--set", f"init={{from: {f}, names: {{'{rule}': '\\2.\\1'}}}}"])
    p.good(s, "valid/pattern-inside-names", BASE, ["--set", f"init={{from: {good}, names: {{'linear': 'nope'}}}}"])
    f = st("prefixed", {"model." + k: v for k, v in w.items()})
    p.good(s, "valid/strip-prefix", BASE, ["--set", rf"init={{from: {f}, names: {{'model\.(.*)': '\1'}}}}"])
    p.good(s, "valid/plain-f32", BASE, ["--set", f"init.from={good}"])


TINY_JPEG = bytes.fromhex(  # 8x8 grey, made once with PIL (quality 50): the images without PIL
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a181616183123251d283a333d3c39"
    "33383740485c4e404457453738506d51575f626768673e4d71797064785c656763ffc0000b080008000801011100ffc4001f000001050101"
    "0101010100000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d010203000411051221314106"
    "13516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a535455"
    "565758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9ba"
    "c2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda0008010100003f002bffd9")
IMG_CFG = ("model: {type: sequential, layers: [flatten, linear: {out: 2}]}\n"
           "dataset: {type: image_folder, path: ROOT, random_resized_crop: 0, resize: 8, center_crop: 8, flip: false}\n"
           + ONE_STAGE.replace("batch_size: 16", "batch_size: 4"))


def jpeg(mode="RGB", size=(12, 10), colour=0, **save):
    try:
        from PIL import Image
    except ImportError:
        return TINY_JPEG if mode == "RGB" else None
    import io
    buf = io.BytesIO()
    Image.new(mode, size, (colour,) * len(mode) if len(mode) > 1 else colour).save(buf, "JPEG", **save)
    return buf.getvalue()


def probe_images(p):
    s, small = "images", jpeg(size=(16, 16))
    at = max(small.find(b"\xff\xc0"), small.find(b"\xff\xc2"))  # the frame header: precision, height, width
    lying = lambda h, w: small[:at + 5] + h.to_bytes(2, "big") + w.to_bytes(2, "big") + small[at + 9:]  # noqa: E731

    def case(name, plant, valid=False):
        """`plant(root, target)` makes the hostile file; it returns False to skip, or another path it used."""
        root = p.path(f"images/{name.replace('/', '-')}")
        shutil.rmtree(root, ignore_errors=True)
        for split, (k, c), i in ((sp, kc, i) for sp in ("train", "val") for kc in enumerate("ab") for i in range(4)):
            os.makedirs(f"{root}/{split}/{c}", exist_ok=True)
            open(f"{root}/{split}/{c}/{i}.jpg", "wb").write(jpeg(colour=40 * k + 10 * i))
        made = plant(root, f"{root}/train/a/hostile.jpg")
        if made is not False and valid:
            p.good(s, name, IMG_CFG.replace("ROOT", root))
        elif made is not False:
            p.bad(s, name, IMG_CFG.replace("ROOT", root), names=[os.path.basename(made or "hostile.jpg")],
                  timeout=min(p.timeout, 30))

    put = lambda data: lambda root, t: False if data is None else open(t, "wb").write(data) and None  # noqa: E731
    for h, w in ((65000, 65000), (20000, 20000), (1, 65000), (0, 0)):
        case(f"header-{h}x{w}", put(lying(h, w)))
    for name, data in {"truncated-half": small[:len(small) // 2], "truncated-no-eoi": small[:-2],
                       "garbage": bytes(range(256)) * 4, "empty": b"", "text": b"not an image\n",
                       "png-named-jpg": b"\x89PNG\r\n\x1a\n" + bytes(64), "soi-only": b"\xff\xd8"}.items():
        case(name, put(data))
    case("symlink-loop", lambda r, t: os.symlink("hostile.jpg", t))
    case("symlink-dangling", lambda r, t: os.symlink("nowhere/x.jpg", t))
    case("class-folder-loop", lambda r, t: os.symlink("loopclass", f"{r}/train/loopclass") or "loopclass")
    case("corrupt-in-val", lambda r, t: open(f"{r}/val/b/0.jpg", "wb").write(b"\xff\xd8garbage") and "0.jpg")
    for name, data in {"cmyk": jpeg("CMYK"), "grey": jpeg("L"), "progressive": jpeg(progressive=True),
                       "wide": jpeg(size=(600, 40))}.items():
        case(f"valid/{name}", put(data), valid=True)


CODEC_CASES = """
one-stage-activations     ONE  {activations: {type: topk, fraction: 0.5}}
one-stage-gradients       ONE  {gradients: {type: topk, fraction: 0.5}}
single-x-replicas         REP  {gradients: {type: topk, fraction: 0.5}}
dp-replicas               DP   {gradients: {type: topk, fraction: 0.5}}
dgl-gradients             DGL  {gradients: {type: topk, fraction: 0.5}}
dgl-gradients-sort_quant  DGL  {gradients: {type: sort_quant, q: 6, s: 2}}
boundary-out-of-range     -    {activations: {type: topk, fraction: 0.5}, boundaries: [5]}
aq_sgd-gradients          -    {gradients: {type: aq_sgd}}
topk-fraction-0           -    {activations: {type: topk, fraction: 0}}
uniform-bits-0            -    {activations: {type: uniform, bits: 0}}
aq_sgd-bits-0             -    {activations: {type: aq_sgd, bits: 0}}
"""  # name, the rest of the experiment (-: two stages of gpipe), compression


def probe_codecs(p):
    s = "codecs"
    rests = {"ONE": ONE_STAGE, "REP": ONE_STAGE.replace("stages: 1", "stages: 1, replicas: 2"), "-": REST,
             "DP": ONE_STAGE.replace("{type: single}", "{type: dp, replicas: 2}"),
             "DGL": REST.replace("{type: gpipe, chunks: 2}", "{type: dgl}")}
    for line in CODEC_CASES.strip().splitlines():
        name, rest, comp = line.split(None, 2)
        p.bad(s, name, experiment("{type: mlp, sizes: [8, 16, 3]}", rest=rests[rest] + f"compression: {comp}\n"),
              must=["compression"])
    p.codec_cache(s, {"codec_cache-a-file": lambda c: open(c, "w").close(),
                      "codec_cache-not-writable": lambda c: os.symlink("/sys/kernel", c),
                      "codec_cache-in-proc": lambda c: os.symlink("/proc/self", c)})
    for name, c in {"uniform": "uniform, bits: 8", "sort_quant": "sort_quant, q: 6, s: 2", "topk": "topk, fraction: 0.5",
                    "topk-ef": "topk, fraction: 0.5, error_feedback: ef", "cast": "cast, dtype: fp16",
                    "topk-ef21": "topk, fraction: 0.5, error_feedback: ef21", "fixpoint": "fixpoint, bits: 8"}.items():
        comp = f"compression: {{activations: {{type: {c}}}, gradients: {{type: {c}}}}}\n"
        p.good(s, f"valid/bf16-{name}", BASE + comp, ["--set", "run.amp=bf16"])
    p.good(s, "valid/bf16-aq_sgd", BASE + "compression: {activations: {type: aq_sgd, bits: 8}}\n",
           ["--set", "run.amp=bf16", "--set", "run.epochs=2"])
    p.good(s, "valid/f32-topk", BASE + "compression: {gradients: {type: topk, fraction: 0.5}}\n")


def probe_options(p):
    s = "options"
    for extra in ("clip_norm_type: 1", "clip_norm_type: inf", "clip_scope: global", "clip_scope: per_stage",
                  "clip_scope: per_tensor", "tied_gradients: separate", "tied_gradients: sum", "clip_grad_norm: 0",
                  "clip_grad_norm: -1", "clip_grad_norm: .nan", "clip_grad_norm: 1, clip_norm_type: 0",
                  "clip_grad_norm: 1, clip_norm_type: two", "clip_grad_norm: 1, clip_scope: everywhere"):
        key, value = extra.split(", ")[-1].split(": ")
        name = f"{key}-{value}" + ("" if "clip_grad_norm" in extra else "-without-clip" if "clip" in key else "-no-ties")
        p.bad(s, name, BASE.replace("lr: 0.1}", f"lr: 0.1, {extra}}}"), must=[key])
    p.good(s, "valid/clip-inf-norm", BASE.replace("lr: 0.1}", "lr: 0.1, clip_grad_norm: 1, clip_norm_type: inf}"))
    for name, line in {"partition-list": "partition: [2]", "partition-scalar": "partition: 2",
                       "partition-stages-0": "partition: {stages: 0}", "partition-unknown-key": "partition: {stagez: 2}",
                       "partition-replicas-0": "partition: {stages: 2, replicas: 0}",
                       "scheme-list": "scheme: [gpipe]"}.items():
        key = line.split(":")[0]
        f = p.cfg(f"{s}-{name}", BASE.replace("partition: {stages: 2}" if key == "partition" else
                                              "scheme:    {type: gpipe, chunks: 2}", line))
        p.expect_error(s, f"schedule/{name}", ["schedule", f], [os.path.basename(f)], must=[key])
    p.expect_error(s, "simulate/partition-list", ["simulate", p.path("cfg/options-partition-list.yaml"), "--device-flops",
                                                  "10"], ["options-partition-list.yaml"], must=["partition"])


def probe_launch(p, plugin):
    s, base = "launch", p.cfg("launch-base", BASE)
    for n in ("1000", "64"):  # must be refused before any rank starts: 3 ranks and the group is killed at once
        seen = []
        rc, out = p.exe(["launch", "--nproc", n, base, "--quiet"], watch=lambda pid: seen.append(len(children_of(pid)))
                        or max(seen) > 2)
        started = max(seen or [0]) > 2
        p.record(s, f"nproc-{n}-on-2-devices", "crash" if started else judge(rc, out, ["--nproc"], True),
                 f"[probe] {max(seen)}+ ranks started before any refusal; all killed\n{out}" if started else out)
    for name, flag, value in (("nproc-3-on-2-devices", "--nproc", "3"), ("nproc-0", "--nproc", "0"),
                              ("nproc-negative", "--nproc", "-1"), ("nproc-text", "--nproc", "two"),
                              ("master-port-99999", "--master-port", "99999"),
                              ("master-port-negative", "--master-port", "-5")):
        nproc = [] if flag == "--nproc" else ["--nproc", "1"]
        p.expect_error(s, name, ["launch", flag, value, base, "--quiet"] + nproc, [flag])
    p.expect_ok(s, "valid/two-ranks", ["launch", "--nproc", "2", base, "--quiet", "--set",
                                       f"run.output={p.path('runs/l2')}"])
    local = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    for name, (env, flags) in {
            "flags-over-env": ({"RANK": "5", "WORLD_SIZE": "2"}, ["--rank", "0", "--world-size", "1"]),
            "flags-over-env-master": ({"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "nowhere", "MASTER_PORT": "1"},
                                      ["--rank", "0", "--world-size", "1"]),
            "world-size-1": (dict(local, RANK="0", WORLD_SIZE="1"), []),
            "slurm-one-task": ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "MASTER_ADDR": "127.0.0.1"}, [])}.items():
        p.good(s, f"valid/{name}", BASE, flags, timeout=min(p.timeout, 30), env=env)
    dist = BASE.replace("progress: false", "progress: false, executor: {type: distributed, timeout_s: 5}")
    local["MASTER_PORT"] = str(29600 + os.getpid() % 300)
    for name, env in {"rank-ge-world": "RANK=2 WORLD_SIZE=2", "rank-text": "RANK=abc WORLD_SIZE=2",
                      "world-size-0": "RANK=0 WORLD_SIZE=0",
                      "master-addr-colons": "RANK=0 WORLD_SIZE=2 MASTER_ADDR=a:b:c",
                      "master-addr-space": "RANK=0 WORLD_SIZE=2 MASTER_ADDR=host~name",
                      "master-addr-256": "RANK=1 WORLD_SIZE=2 MASTER_ADDR=256.1.1.1"}.items():
        env = dict(local, **dict(kv.replace("~", " ").split("=") for kv in env.split()))
        var = "MASTER_ADDR" if "master" in name else "RANK" if name.startswith("rank") else "WORLD_SIZE"
        p.bad(s, f"env/{name}", dist, names=[var], env=env, timeout=min(p.timeout, 40))
    p.bad(s, "flag-master-garbage", dist, ["--rank", "0", "--world-size", "2", "--master", "a:b:c"], ["--master"],
          timeout=min(p.timeout, 40))
    if plugin:
        sets = ["--plugin", p.plant("plug:in/libmicro_naive.so", plugin), "--set", "scheme={type: micro_naive}"]
        for n in ("1", "2"):
            p.expect_ok(s, f"valid/plugin-colon-launch-{n}", ["launch", "--nproc", n, base, "--quiet", "--set",
                                                              f"run.output={p.path('runs/lc' + n)}"] + sets)
        p.good(s, "valid/plugin-colon-run", BASE, sets)


def plugin_libs(p, folder):
    """(libmicro_naive.so, libdup_gpipe.so) in `folder`, built there once when missing."""
    repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
    inc = subprocess.run([sys.executable, "-c", "import torch, os; print(os.path.dirname(torch.__file__))"],
                         capture_output=True, text=True).stdout.strip() + "/include"
    os.makedirs(folder, exist_ok=True)
    for lib, name in (("micro_naive", "micro_naive"), ("dup_gpipe", "gpipe")):
        if not os.path.exists(f"{folder}/lib{lib}.so") and shutil.which("g++"):
            code = open(f"{repo}/examples/plugin/micro_naive.cpp").read().replace('"micro_naive",', f'"{name}",')
            subprocess.run(["nice", "-n", "19", "g++", "-std=c++20", "-O0", "-shared", "-fPIC", "-DFMT_HEADER_ONLY",
                            f"-I{repo}", f"-I{inc}", f"-I{inc}/torch/csrc/api/include", p.write(f"{lib}.cpp", code),
                            "-o", f"{folder}/lib{lib}.so"], capture_output=True)
        if not os.path.exists(f"{folder}/lib{lib}.so"):
            return print(f"skipping the cases that need {folder}/lib{lib}.so (no g++, or the build failed)",
                         file=sys.stderr)
    return f"{folder}/libmicro_naive.so", f"{folder}/libdup_gpipe.so"


def probe_plugins(p, plugin, dup):
    s, ls = "plugins", ["list", "scheme", "--plugin"]
    for name, data in {"not-a-library": b"cmake_minimum_required(VERSION 3.22)\n", "empty-file": b"",
                       "elf-header-only": b"\x7fELF\x02\x01\x01" + bytes(57)}.items():
        p.expect_error(s, name, ls + [p.write(f"plugins/{name}.so", data, "wb")], [f"{name}.so"])
    p.expect_error(s, "missing-file", ls + [p.path("plugins/nope.so")], ["nope.so"])
    p.expect_error(s, "directory", ls + [p.path("plugins")], ["plugins"], must=["folder", "directory"])
    p.expect_error(s, "symlink-loop", ls + [p.plant("loops/plugin.so")], ["plugin.so"], must=LOOP_MUST)
    p.expect_error(s, "fifo", ls + [make_fifo(p, "plugins/fifo.so")], ["fifo.so"], timeout=min(p.timeout, 20))
    p.bad(s, "missing-in-experiment", BASE + "plugins: [nope/libmissing.so]\n", names=["libmissing.so"])
    if not plugin:
        return
    p.expect_error(s, "registers-gpipe", ls + [dup], ["libdup_gpipe.so"], must=["gpipe"])
    p.bad(s, "registers-gpipe-run", BASE, ["--plugin", dup], ["libdup_gpipe.so"], ["gpipe"])
    copy = p.plant("plugins/copy/libmicro_naive.so", plugin)
    p.expect_error(s, "two-copies-one-name", ls + [plugin, "--plugin", copy], [copy], must=["micro_naive"])
    sets = ["--set", "scheme={type: micro_naive, chunks: 2}"]
    p.good(s, "valid/run-with-plugin", BASE, ["--plugin", plugin] + sets)
    p.good(s, "valid/same-file-twice", BASE, ["--plugin", plugin, "--plugin", plugin] + sets)
    p.good(s, "valid/plugins-in-experiment",
           BASE.replace("{type: gpipe, chunks: 2}", "{type: micro_naive, chunks: 2}") + f"plugins: [{plugin}]\n")
    p.good(s, "valid/space-in-path", BASE, ["--plugin", p.plant("plugins/with space/libmicro_naive.so", plugin)] + sets)


SURFACES = ("yaml-models", "torchscript", "weights", "images", "codecs", "options", "launch", "plugins", "sweep",
            "simulate", "plot", "resume", "paths")


def first_lines(text):
    """The probe's notes, then the error line (else the first line) of pipelab's output."""
    lines = [l for l in text.strip().splitlines() if l.strip() and not re.match(r"\[[WE]\d{4} ", l)]
    notes = [l for l in lines if l.startswith("[probe]")]
    error = next((l for l in lines if l not in notes and re.search(r"^(\[rank \d+\] )?(internal )?error|\b[Ee]rror: ", l)),
                 None)
    return [l for l in notes + [error or next((l for l in lines if l not in notes), "")] if l][:2] or [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipelab", required=True)
    ap.add_argument("--out", default="/tmp/pipelab-probe4")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--only", default=",".join(SURFACES))
    ap.add_argument("--plugin-dir", default="/tmp/pipelab-probe-plugins",
                    help="holds libmicro_naive.so and libdup_gpipe.so (built there once when missing)")
    args = ap.parse_args()
    only = args.only.split(",")
    if set(only) - set(SURFACES):
        ap.error(f"unknown surface(s) {sorted(set(only) - set(SURFACES))}; valid: {', '.join(SURFACES)}")
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    p = Probe4(os.path.abspath(args.pipelab), os.path.abspath(args.out), args.timeout)
    p.write("cfg-base.yaml", BASE)
    plugin, dup = (plugin_libs(p, args.plugin_dir) if {"plugins", "launch"} & set(only) else None) or (None, None)
    for name in only:
        fn_name = "probe_" + name.replace("-", "_")
        t, fn = time.time(), globals().get(fn_name) or getattr(hostile_newest_runs, fn_name)
        fn(p, plugin, dup) if name == "plugins" else fn(p, plugin) if name == "launch" else fn(p)
        print(f"[{name}: {time.time() - t:.0f} s]", file=sys.stderr, flush=True)
    counts = {}
    for surface, _, outcome, _ in p.results:
        counts.setdefault(surface, dict.fromkeys(OUTCOMES, 0))[outcome] += 1
    counts["all"] = {k: sum(c[k] for c in counts.values()) for k in OUTCOMES}
    print("| surface | tried | " + " | ".join(OUTCOMES) + " |\n|---|---:|" + "---:|" * len(OUTCOMES))
    for surface, c in counts.items():
        print(f"| {surface} | {sum(c.values())} | " + " | ".join(str(c[k]) for k in OUTCOMES) + " |")
    for surface, name, outcome, text in p.results:
        if outcome not in ("clear", "accepted"):
            lines = first_lines(text)
            lines[0] = ("exit 0: " if outcome == "silent" and not lines[0].startswith("[probe]") else "") + lines[0]
            print(f"  {outcome:8} {surface}/{name}: " + f"\n  {'':8} {'':{len(surface) + len(name) + 1}}  ".join(
                l[:220] for l in lines))
    with open(os.path.join(args.out, "probe.json"), "w") as f:
        json.dump([{"surface": s, "case": n, "outcome": o, "output": t[-3000:]} for s, n, o, t in p.results], f,
                  indent=1)


if __name__ == "__main__":
    main()
