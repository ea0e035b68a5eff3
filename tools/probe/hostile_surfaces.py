#!/usr/bin/env python3
"""Hostile-input probe, third round: the surfaces added after tools/probe/hostile_inputs.py
(schedule files, `pipelab schedule` and `pipelab simulate` flags, YAML-level attacks, FIFOs as
input files, `table`/`plot` on damaged runs, faults around the trace and `--resume`, and the
distributed executor's exit codes). Each case is run as a user would and sorted:

  clear     exit 2 with a message that names the file (or the flag) and says how to fix it;
            for `table`/`plot` on a damaged run: exit 0 with a warning naming the run
  unclear   any other failure: exit 1, or a message without the place or without a fix
  crash     killed by a signal
  hang      still running after --timeout seconds
  silent    exit 0 where the input is broken, or a promise not kept (a resumed run without
            its trace, a table cell left empty without a warning)
  accepted  exit 0 for an input that is merely unusual

  python3 tools/probe/hostile_surfaces.py --pipelab build/pipelab [--out /tmp/probe3] [--only yaml,...]

Surfaces: yaml, schedule-files, schedule-flags, simulate-flags, fifo, reports, resume, distributed.
Prints a table of counts per surface and every case that is not clear, and writes probe.json.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_inputs import BASE  # noqa: E402

FIX_WORDS = ("Fix:", "e.g.", "(see: pipelab")
OUTCOMES = ("clear", "unclear", "crash", "hang", "silent", "accepted")


class Probe:
    def __init__(self, pipelab, out, timeout):
        self.pipelab, self.out, self.timeout = pipelab, out, timeout
        self.results = []

    def path(self, name):
        return os.path.join(self.out, name)

    def write(self, name, text, mode="w"):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, mode) as f:
            f.write(text)
        return p

    def exe(self, args, timeout=None, env=None):
        """(returncode or None on a hang, output)."""
        try:
            p = subprocess.run([self.pipelab] + args, capture_output=True, timeout=timeout or self.timeout,
                               cwd=self.out, env=env)
            return p.returncode, (p.stdout + p.stderr).decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"") + (e.stderr or b"")
            return None, out.decode(errors="replace")

    def record(self, surface, name, outcome, output):
        self.results.append((surface, name, outcome, output))

    def expect_error(self, surface, name, args, names, timeout=None):
        """A broken input: clear when exit 2 names one of `names` and gives a fix."""
        rc, out = self.exe(args, timeout)
        self.record(surface, name, classify(rc, out, names, reject=True), out)

    def expect_ok(self, surface, name, args, check=None):
        """An input that must work; `check(rc, out)` returns an outcome to override."""
        rc, out = self.exe(args)
        outcome = classify(rc, out, [], reject=False)
        if check and outcome == "accepted":
            outcome = check(rc, out) or outcome
        self.record(surface, name, outcome, out)


def classify(rc, out, names, reject):
    if rc is None:
        return "hang"
    if rc < 0:
        return "crash"
    if rc == 0:
        return "silent" if reject else "accepted"
    if not reject:
        return "unclear"
    named = any(n and n in out for n in names)
    fix = any(w in out for w in FIX_WORDS)
    internal = "internal error" in out or "std::" in out or "bad_alloc" in out or ".cc:" in out or ".cpp:" in out
    return "clear" if rc == 2 and named and fix and not internal else "unclear"


def base_yaml(**replace):
    text = BASE
    for old, new in replace.items():
        text = text.replace(old, new, 1)
    return text


# ---------------------------------------------------------------------------------------------
def probe_yaml(p):
    s = "yaml"
    bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [{', '.join(['*l%d' % (i - 1)] * 10)}]\n" for i in range(1, 9))
    cases = {
        "self-alias-list": "a: &a [*a]\n" + BASE,
        "self-alias-map": "a: &a {b: *a}\n" + BASE,
        "self-alias-deep": "a: &a [[[[*a]]]]\n" + BASE,
        "alias-bomb": bomb + BASE,
        "alias-bomb-in-section": bomb.replace("l8:", "l8x:") + BASE.replace("run:       {", "run:       {extra: *l7, "),
        "deep-nesting": "a: " + "[" * 50000 + "]" * 50000 + "\n" + BASE,
        "deep-maps": "a: " + "{b: " * 20000 + "1" + "}" * 20000 + "\n" + BASE,
        "nul-byte": BASE.replace("lr: 0.1", "lr: 0.1\x00junk"),
        "nul-in-key": BASE.replace("momentum", "mom\x00entum") + "optimizer2\x00: 1\n",
        "lr-1e300": base_yaml(**{"lr: 0.1": "lr: 1e300"}),
        "samples-1e11": base_yaml(**{"samples: 64": "samples: 1e11"}),
        "samples-int-huge": base_yaml(**{"samples: 64": "samples: 100000000000"}),
        "shape-huge": base_yaml(**{"shape: [8]": "shape: [100000, 100000, 100000]"}),
        "threads-100000": base_yaml(**{"progress: false": "progress: false, threads: 100000"}),
        "epochs-huge": base_yaml(**{"epochs: 1": "epochs: 2000000000"}),
        "batch-huge": base_yaml(**{"batch_size: 16": "batch_size: 2000000000"}),
        "eval-batch-huge": base_yaml(**{"batch_size: 16": "batch_size: 16, eval_batch_size: 2000000000"}),
        "mlp-width-huge": base_yaml(**{"sizes: [8, 16, 3]": "sizes: [8, 2000000000, 3]"}),
        "workers-huge": base_yaml(**{"progress: false": "progress: false, loader: {workers: 100000}"}),
        "prefetch-huge": base_yaml(**{"progress: false": "progress: false, loader: {workers: 1, prefetch: 2000000000}"}),
        "checkpoint-every-neg": base_yaml(**{"progress: false": "progress: false, checkpoint_every: -1"}),
        "long-scalar": base_yaml(**{"lr: 0.1": "lr: " + "1" * 100000}),
        "many-keys": BASE + "".join(f"k{i}: {i}\n" for i in range(20000)),
        "set-self-alias": None,
        "set-nul": None,
    }
    for name, text in cases.items():
        if text is None:
            continue
        f = p.write(f"yaml-{name}.yaml", text, "w")
        for cmd in ("run", "describe"):
            args = [cmd, f] + (["--set", f"run.output={p.out}/runs/{name}"] if cmd == "run" else [])
            p.expect_error(s, f"{name}/{cmd}", args, [os.path.basename(f)])
        if name.startswith(("self-alias", "alias-bomb")):
            p.expect_error(s, f"{name}/simulate", ["simulate", f, "--device-flops", "10"], [os.path.basename(f)])
            p.expect_error(s, f"{name}/costs", ["simulate", p.path("cfg-base.yaml"), "--costs", f],
                           [os.path.basename(f)])
            p.expect_error(s, f"{name}/schedule", ["schedule", f], [os.path.basename(f)])
    p.expect_error(s, "set-self-alias", ["run", p.path("cfg-base.yaml"), "--set", "optimizer.lr=&a [*a]"],
                   ["--set"])
    p.expect_error(s, "set-nul-name", ["run", p.path("cfg-base.yaml"), "--set", "run.output=a\tb\x01"], ["run.output"])
    loop = p.path("yaml-loop.yaml")
    if not os.path.lexists(loop):
        os.symlink(loop, loop)
    p.expect_error(s, "symlink-loop", ["run", loop], ["yaml-loop.yaml"])
    dangling = p.path("yaml-dangling.yaml")
    if not os.path.lexists(dangling):
        os.symlink(p.path("nowhere/x.yaml"), dangling)
    p.expect_error(s, "symlink-dangling", ["run", dangling], ["yaml-dangling.yaml"])
    p.expect_error(s, "dev-zero", ["run", "/dev/zero"], ["/dev/zero"])
    p.expect_error(s, "dev-urandom-costs", ["simulate", p.path("cfg-base.yaml"), "--costs", "/dev/urandom"],
                   ["/dev/urandom"])


# ---------------------------------------------------------------------------------------------
SCHED_CFG = BASE.replace("scheme:    {type: gpipe, chunks: 2}", "scheme:    {type: custom, file: FILE}")


def probe_schedule_files(p):
    s = "schedule-files"
    good2 = "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1B0 1B1 1U\n"
    cases = {
        "skips-micro-batches": "d0: 0F0 0F2 0B0 0B2 0U\nd1: 1F0 1F2 1B0 1B2 1U\n",
        "skips-on-one-stage": "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1B0 1U\n",
        "huge-micro-batch": "d0: 0F0 0F999999999 0B0 0B999999999 0U\nd1: 1F0 1F999999999 1B0 1B999999999 1U\n",
        "huge-stage": "d0: 0F0 0B0 0U\nd1: 999999999F0 999999999B0 999999999U\n",
        "huge-device": "d0: 0F0 0B0 0U\nd999999999: 1F0 1B0 1U\n",
        "overflow-number": "d0: 0F0 0B0 0U\nd1: 1F99999999999999999999 1U\n",
        "forward-only": "d0: 0F0 0F1\nd1: 1F0 1F1\n",
        "stage-without-actions": "d0: 0F0 0F1 0B0 0B1 0U\nd1: 2F0 2F1 2B0 2B1 2U\n",
        "device-without-actions": "d0: 0F0 0F1 0B0 0B1 0U\nd1:\nd2: 1F0 1F1 1B0 1B1 1U\n",
        "allreduce-in-pipeline": "d0: 0F0 0F1 0B0 0B1 0ALLREDUCE 0U\nd1: 1F0 1F1 1B0 1B1 1ALLREDUCE 1U\n",
        "head-without-heads": "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1H0 1H1 1B0 1B1 1U\n",
        "deadlock": "d0: 0F0 0B0 0F1 0B1 0U\nd1: 1F1 1B1 1F0 1B0 1U\n",
        "runs-twice": "d0: 0F0 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1B0 1B1 1U\n",
        "update-twice": "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1B0 1B1 1U 1U\n",
        "update-mid": "d0: 0F0 0B0 0U 0F1 0B1 0U\nd1: 1F0 1B0 1U 1F1 1B1 1U\n",
        "no-update": "d0: 0F0 0F1 0B0 0B1\nd1: 1F0 1F1 1B0 1B1\n",
        "half-line-label": "d0: 0F0 0F1 0B0 0B1 0U\nd1\n",
        "half-line-colon": "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1B0\n",
        "half-token": "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1B0 1B1 1\n",
        "no-receiver": "d0: 0F0 0SEND_F0 0SEND_F1 0F1 0RECV_B0 0B0 0RECV_B1 0B1 0U\n"
                       "d1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1U\n",
        "no-sender": "d0: 0F0 0SEND_F0 0F1 0RECV_B0 0B0 0RECV_B1 0B1 0U\n"
                     "d1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1U\n",
        "w-before-i": "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1W0 1I0 1B1 1U\n",
        "nul-byte": "d0: 0F0 0F1 0B0\x00 0B1 0U\nd1: 1F0 1F1 1B0 1B1 1U\n",
        "binary": "\x00\x01\x02\xff\xfe\n",
        "empty": "",
        "comments-only": "# nothing\n\n",
        "second-line-same-device": "d0: 0F0 0F1 0B0 0B1 0U\nd0: 1F0\nd1: 1F1 1B0 1B1 1U\n",
        "negative-device": "d-1: 0F0 0B0 0U\n",
        "three-stages-two-devices": "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1B0 1B1 1U 2F0 2F1 2B0 2B1 2U\n",
        "csv-bad-cell": None,
        "csv-comms": None,
        "csv-skips": None,
    }
    csv = {
        "csv-bad-cell": "0F0,0F1,0B0,0B1,0U\n1F0,1F1,1B0,1X1,1U\n",
        "csv-comms": "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                     "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
        "csv-skips": "0F0,0F2,0B0,0B2,0U\n1F0,1F2,1B0,1B2,1U\n",
    }
    big = "d0: " + " ".join(f"0F{i}" for i in range(20000)) + "\n"
    cases["too-many-micro-batches"] = big
    for name, text in cases.items():
        if text is None:
            text, ext = csv[name], ".csv"
        else:
            ext = ".sched"
        f = p.write(f"sched-{name}{ext}", text)
        cfg = p.write(f"sched-{name}.yaml", SCHED_CFG.replace("FILE", f))
        p.expect_error(s, f"{name}/run", ["run", cfg, "--set", f"run.output={p.out}/runs/sched-{name}"],
                       [os.path.basename(f)])
        p.expect_error(s, f"{name}/schedule", ["schedule", "--scheme", "custom", "--set", f"scheme.file={f}"],
                       [os.path.basename(f)])
    f = p.write("sched-good.sched", good2)
    cfg = p.write("sched-good.yaml", SCHED_CFG.replace("FILE", f))
    p.expect_ok(s, "good/run", ["run", cfg, "--set", f"run.output={p.out}/runs/sched-good"])
    p.expect_error(s, "folder/run", ["run", cfg, "--set", f"scheme.file={p.out}"], ["scheme.file"])
    p.expect_error(s, "missing/run", ["run", cfg, "--set", "scheme.file=nope.sched"], ["nope.sched"])


# ---------------------------------------------------------------------------------------------
def probe_schedule_flags(p):
    s = "schedule-flags"
    sched = ["schedule", "--scheme"]
    cases = {
        "stages-100000": (["pipedream_flush", "--stages", "100000"], "--stages"),
        "stages-100000-gpipe": (["gpipe", "--stages", "100000", "--microbatches", "100000"], "--stages"),
        "microbatches-1e9": (["gpipe", "--stages", "4", "--microbatches", "1000000000"], "--microbatches"),
        "microbatches-zero": (["gpipe", "--microbatches", "0"], "--microbatches"),
        "stages-negative": (["gpipe", "--stages", "-3"], "--stages"),
        "stages-text": (["gpipe", "--stages", "four"], "--stages"),
        "virtual-stages-huge": (["interleaved_1f1b", "--stages", "4", "--virtual-stages", "1000000"],
                                "virtual"),
        "chunks-huge": (["gpipe", "--set", "scheme.chunks=2000000000"], "chunks"),
        "costs-nan": (["gpipe", "--costs", "nan,1,1"], "--costs"),
        "costs-inf": (["gpipe", "--costs", "inf,1,1"], "--costs"),
        "costs-1e308": (["gpipe", "--costs", "1e308,1e308,1e308"], "--costs"),
        "costs-negative": (["gpipe", "--costs", "1,-1,1"], "--costs"),
        "costs-two": (["gpipe", "--costs", "1,1"], "--costs"),
        "costs-text": (["gpipe", "--costs", "a,b,c"], "--costs"),
        "costs-empty-items": (["gpipe", "--costs", ",,"], "--costs"),
        "costs-tiny": (["gpipe", "--costs", "1e-300,1e-300,0"], "--costs"),
        "unknown-scheme": (["gpipee"], "gpipee"),
        "set-bad": (["gpipe", "--set", "scheme"], "--set"),
        "set-unknown-key": (["gpipe", "--set", "scheme.chunkz=2"], "chunkz"),
        "zbv-odd-stages": (["zbv", "--stages", "3"], "stages"),
        "interleaved-indivisible": (["interleaved_1f1b", "--stages", "3", "--virtual-stages", "2"], "stages"),
    }
    for name, (args, flag) in cases.items():
        p.expect_error(s, name, sched + args, [flag], timeout=min(p.timeout, 30))
    p.expect_error(s, "file-folder", ["schedule", p.out], [p.out])
    p.expect_error(s, "file-missing", ["schedule", "nope.yaml"], ["nope.yaml"])
    p.expect_ok(s, "stages-64", sched + ["pipedream_flush", "--stages", "64", "--microbatches", "128"])


# ---------------------------------------------------------------------------------------------
def probe_simulate_flags(p):
    s = "simulate-flags"
    cfg = p.path("cfg-base.yaml")
    sim = ["simulate", cfg, "--device-flops", "10"]
    cases = {
        "flops-nan": (["simulate", cfg, "--device-flops", "nan"], "--device-flops"),
        "flops-inf": (["simulate", cfg, "--device-flops", "inf"], "--device-flops"),
        "flops-1e308": (["simulate", cfg, "--device-flops", "1e308"], "--device-flops"),
        "flops-negative": (["simulate", cfg, "--device-flops", "-1"], "--device-flops"),
        "memory-bw-nan": (sim + ["--memory-bw", "nan"], "--memory-bw"),
        "memory-bw-negative": (sim + ["--memory-bw", "-5"], "--memory-bw"),
        "link-gbps-nan": (sim + ["--link-gbps", "nan"], "--link-gbps"),
        "link-gbps-inf": (sim + ["--link-gbps", "inf"], "--link-gbps"),
        "link-gbps-negative": (sim + ["--link-gbps", "-1"], "--link-gbps"),
        "link-gbps-1e308": (sim + ["--link-gbps", "1e308"], "--link-gbps"),
        "latency-nan": (sim + ["--link-latency-us", "nan"], "--link-latency-us"),
        "latency-negative": (sim + ["--link-latency-us", "-3"], "--link-latency-us"),
        "latency-1e308": (sim + ["--link-latency-us", "1e308"], "--link-latency-us"),
        "slow-abc": (sim + ["--slow-device", "abc:2"], "--slow-device"),
        "slow-99": (sim + ["--slow-device", "99:2"], "--slow-device"),
        "slow-nan": (sim + ["--slow-device", "1:nan"], "--slow-device"),
        "slow-inf": (sim + ["--slow-device", "1:inf"], "--slow-device"),
        "slow-zero": (sim + ["--slow-device", "1:0"], "--slow-device"),
        "slow-no-factor": (sim + ["--slow-device", "1"], "--slow-device"),
        "slow-trailing": (sim + ["--slow-device", "1:2x"], "--slow-device"),
        "slow-three": (sim + ["--slow-device", "1:2:3"], "--slow-device"),
        "microbatches-1e6": (sim + ["--microbatches", "1000000"], "--microbatches"),
        "microbatches-over-batch": (sim + ["--microbatches", "17"], "--microbatches"),
        "stages-100000": (sim + ["--stages", "100000"], "--stages"),
        "stages-zero": (sim + ["--stages", "0"], "--stages"),
        "schemes-commas": (sim + ["--schemes", ",,,"], "--schemes"),
        "schemes-bad-value": (sim + ["--schemes", "gpipe:chunks=abc"], "chunks"),
        "schemes-unknown": (sim + ["--schemes", "nope"], "nope"),
        "schemes-stages-text": (sim + ["--schemes", "gpipe:stages=abc"], "stages"),
        "schemes-micro-huge": (sim + ["--schemes", "gpipe:microbatches=1000000000"], "microbatches"),
        "input-shape-zero": (sim + ["--input-shape", "0"], "--input-shape"),
        "input-shape-huge": (sim + ["--input-shape", "100000,100000,100000"], "--input-shape"),
        "dtype-bad": (sim + ["--dtype", "int8"], "--dtype"),
        "executor-bad": (sim + ["--executor", "gpu"], "--executor"),
    }
    for name, (args, flag) in cases.items():
        p.expect_error(s, name, args, [flag], timeout=min(p.timeout, 60))
    stage = "{forward: 0.01, backward: 0.02, update: 0.001, activation_bytes: 1000, gradient_bytes: 1000}"
    costs = {
        "costs-inf": stage.replace("0.01", ".inf"),
        "costs-nan": stage.replace("0.01", ".nan"),
        "costs-1e308": stage.replace("0.01", "1e308"),
        "costs-negative": stage.replace("0.02", "-0.02"),
        "costs-bytes-1e308": stage.replace("1000,", "1e308,", 1),
        "costs-no-forward": "{backward: 0.02}",
    }
    for name, st in costs.items():
        f = p.write(f"{name}.yaml", f"format: pipelab-stage-costs\nstages: [{st}, {st}]\n")
        p.expect_error(s, name, ["simulate", cfg, "--costs", f], [os.path.basename(f)])
    f = p.write("costs-link-inf.yaml", f"link: {{gbps: .inf}}\nstages: [{stage}, {stage}]\n")
    p.expect_error(s, "costs-link-inf", ["simulate", cfg, "--costs", f], [os.path.basename(f)])
    f = p.write("costs-mbs-huge.yaml", f"micro_batch_size: 1e-300\nstages: [{stage}, {stage}]\n")
    p.expect_error(s, "costs-mbs-tiny", ["simulate", cfg, "--costs", f], [os.path.basename(f)])
    f = p.write("costs-many-stages.yaml", "stages: [" + ", ".join([stage] * 3000) + "]\n")
    p.expect_error(s, "costs-3000-stages", ["simulate", cfg, "--costs", f], ["stages"])
    p.expect_error(s, "markdown-folder", sim + ["--markdown", p.out], [p.out])
    p.expect_error(s, "svg-unwritable", sim + ["--svg", "/proc/nope/x.svg"], ["/proc/nope"])
    ok = p.write("costs-ok.yaml", f"stages: [{stage}, {stage}]\n")
    p.expect_ok(s, "costs-ok", ["simulate", cfg, "--costs", ok])


# ---------------------------------------------------------------------------------------------
def make_fifo(p, name):
    f = p.path(name)
    if os.path.lexists(f):
        os.remove(f)
    os.makedirs(os.path.dirname(f), exist_ok=True)
    os.mkfifo(f)
    return f


def finished_run(p, name, extra=()):
    """A finished run folder (a 2-epoch run of the probe's base experiment, traced)."""
    out = p.path(f"runs/{name}")
    if not os.path.exists(os.path.join(out, "summary.json")):
        rc, text = p.exe(["run", p.path("cfg-base.yaml"), "--quiet", "--overwrite", "--set", f"run.output={out}",
                          "--set", "run.epochs=2", "--set", "run.trace=true"] + list(extra))
        if rc != 0:
            raise RuntimeError(f"the probe's base run failed: {text}")
    return out


def probe_fifo(p):
    s = "fifo"
    cfg = p.path("cfg-base.yaml")
    f = make_fifo(p, "fifo/exp.yaml")
    p.expect_error(s, "experiment/run", ["run", f], ["exp.yaml"])
    p.expect_error(s, "experiment/describe", ["describe", f], ["exp.yaml"])
    p.expect_error(s, "experiment/simulate", ["simulate", f, "--device-flops", "1"], ["exp.yaml"])
    p.expect_error(s, "experiment/schedule", ["schedule", f], ["exp.yaml"])
    p.expect_error(s, "experiment/sweep", ["sweep", f, "--dry-run"], ["exp.yaml"])
    f = make_fifo(p, "fifo/s.sched")
    p.expect_error(s, "scheme.file", ["run", cfg, "--set", "scheme={type: custom, file: " + f + "}"], ["s.sched"])
    f = make_fifo(p, "fifo/costs.json")
    p.expect_error(s, "--costs", ["simulate", cfg, "--costs", f], ["costs.json"])
    f = make_fifo(p, "fifo/init.pt")
    p.expect_error(s, "init.from", ["run", cfg, "--set", f"init.from={f}"], ["init.pt"])
    f = make_fifo(p, "fifo/data.pt")
    p.expect_error(s, "dataset.path", ["run", cfg, "--set", f"dataset={{type: tensors, path: {f}}}"], ["data.pt"])
    f = make_fifo(p, "fifo/ref.csv")
    run = finished_run(p, "fifo-src")
    stopped = p.path("runs/fifo-stopped")
    shutil.rmtree(stopped, ignore_errors=True)
    p.exe(["run", cfg, "--set", f"run.output={stopped}", "--set", "run.epochs=3", "--stop-after", "1", "--quiet"])
    p.expect_error(s, "--reference", ["table", os.path.dirname(run), "--cols", "scheme", "--reference", f], ["ref.csv"])
    for victim in ("summary.json", "metrics/epochs.csv", "config.yaml"):
        d = p.path(f"fifo/runs/{victim.replace('/', '-')}")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(run, d)
        os.remove(os.path.join(d, victim))
        os.mkfifo(os.path.join(d, victim))
        for cmd in ("table", "plot"):
            if (cmd, victim) in (("table", "metrics/epochs.csv"), ("plot", "summary.json")):
                continue  # a file the command does not read
            rc, out = p.exe([cmd, d, "--out", p.path(f"fifo/{cmd}-{victim.replace('/', '-')}")])
            outcome = classify(rc, out, [victim.split("/")[-1]], reject=True)
            if rc == 0 and victim.split("/")[-1] in out and ("skip" in out or "warning" in out):
                outcome = "clear"
            p.record(s, f"{victim}/{cmd}", outcome, out)
        if victim != "summary.json":
            d = p.path(f"fifo/stopped/{victim.replace('/', '-')}")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(stopped, d)
            os.remove(os.path.join(d, victim))
            os.mkfifo(os.path.join(d, victim))
            rc, out = p.exe(["run", cfg, "--resume", "--set", f"run.output={d}", "--set", "run.epochs=3", "--quiet"])
            p.record(s, f"{victim}/resume", classify(rc, out, [victim.split("/")[-1]], reject=True), out)


# ---------------------------------------------------------------------------------------------
def probe_reports(p):
    s = "reports"
    src = finished_run(p, "report-src")
    damage = {
        "summary-empty": ("summary.json", ""),
        "summary-nan": ("summary.json", None),
        "summary-string": ("summary.json", '"hello"'),
        "summary-truncated": ("summary.json", '{"test_acc": {"fin'),
        "summary-list": ("summary.json", "[1, 2]"),
        "epochs-empty": ("metrics/epochs.csv", ""),
        "epochs-ragged": ("metrics/epochs.csv", None),
        "epochs-header-only": ("metrics/epochs.csv", None),
        "epochs-text": ("metrics/epochs.csv", None),
        "epochs-folder": ("metrics/epochs.csv", "<folder>"),
        "config-garbage": ("config.yaml", "{{{"),
    }
    for name, (victim, text) in damage.items():
        root = p.path(f"reports/{name}")
        shutil.rmtree(root, ignore_errors=True)
        good = os.path.join(root, "good")
        bad = os.path.join(root, "bad")
        shutil.copytree(src, good)
        shutil.copytree(src, bad)
        target = os.path.join(bad, victim)
        original = open(target).read()
        if text is None:
            if name == "summary-nan":
                text = original.replace('"final":', '"final": NaN, "x":', 1)
            elif name == "epochs-ragged":
                lines = original.splitlines()
                text = "\n".join(lines[:1] + [l.rsplit(",", 3)[0] for l in lines[1:]]) + "\n"
            elif name == "epochs-header-only":
                text = original.splitlines()[0] + "\n"
            else:
                lines = original.splitlines()
                text = "\n".join(lines[:1] + [",".join("abc" for _ in l.split(",")) for l in lines[1:]]) + "\n"
        os.remove(target)
        if text == "<folder>":
            os.makedirs(target)
        else:
            open(target, "w").write(text)
        for cmd, extra in (("table", ["--cols", "scheme"]), ("plot", [])):
            if cmd == "table" and victim == "metrics/epochs.csv":
                continue
            if cmd == "plot" and victim == "summary.json":
                continue
            rc, out = p.exe([cmd, root, "--out", p.path(f"reports/{name}-{cmd}")] + extra)
            if rc == 0:
                named = "bad" in out and any(w in out for w in ("skip", "warning", "Note:"))
                outcome = "clear" if named else "silent"
            else:
                outcome = classify(rc, out, ["bad", victim], reject=True)
            p.record(s, f"{name}/{cmd}", outcome, out)
    root = os.path.dirname(src)
    for name, args in {
        "rows-commas": ["table", root, "--rows", ",,,", "--cols", "scheme"],
        "cols-commas": ["table", root, "--cols", ",,"],
        "group-by-comma": ["plot", root, "--group-by", ","],
        "rows-blank-item": ["table", root, "--rows", "model,,seed", "--cols", "scheme"],
        "metric-unknown": ["table", root, "--cols", "scheme", "--metric", "nope.final"],
        "plot-metric-unknown": ["plot", root, "--metric", "nope"],
        "plot-x-bad": ["plot", root, "--x", "banana"],
        "where-bad": ["table", root, "--cols", "scheme", "--where", "novalue"],
        "decimals-huge": ["table", root, "--cols", "scheme", "--decimals", "100000"],
        "out-folder": ["table", root, "--cols", "scheme", "--out", p.out + "/"],
        "reference-garbage": ["table", root, "--cols", "scheme", "--reference", p.write("ref-bad.csv", "\x00\x01,\n,,,\n")],
    }.items():
        flag = next((a for a in args if a.startswith("--")), "")
        p.expect_error(s, name, args, [flag, args[-1]])


# ---------------------------------------------------------------------------------------------
def check_promised(run_dir, epochs):
    """What a finished traced run promises; '' when kept, else what is missing."""
    missing = [f for f in ("summary.json", "checkpoints/final.pt") if not os.path.isfile(os.path.join(run_dir, f))]
    if missing:
        return "missing " + ", ".join(missing)
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    # The trace files, or the summary's word on why they are missing.
    missing = [f for f in ("trace.json", "metrics/actions.csv", "metrics/costs.json")
               if not os.path.isfile(os.path.join(run_dir, f))]
    if missing and not summary.get("trace_missing"):
        return "missing " + ", ".join(missing) + " (and the summary does not say why)"
    if not summary.get("samples_per_second", 0) > 0:
        return "samples_per_second is 0"
    lines = open(os.path.join(run_dir, "metrics/epochs.csv")).read().splitlines()
    if not lines or not lines[0].startswith("epoch") or len(lines) != epochs + 1:
        return f"metrics/epochs.csv has {len(lines)} lines (header + {epochs} expected)"
    return ""


def probe_resume(p):
    s = "resume"
    cfg = p.path("cfg-base.yaml")
    common = ["--set", "run.trace=true", "--set", "run.epochs=3", "--quiet"]

    def resumed(name, out):
        rc, text = p.exe(["run", cfg, "--resume", "--set", f"run.output={out}"] + common)
        if rc != 0:
            p.record(s, name, "unclear", text)
            return
        why = check_promised(out, 3)
        p.record(s, name, "silent" if why else "clear", text + ("\n" + why if why else ""))

    # The trace write fails (trace.json a folder), then --resume.
    out = p.path("runs/resume-trace-folder")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "trace.json"))
    rc, text = p.exe(["run", cfg, "--set", f"run.output={out}"] + common)
    p.record(s, "trace-folder/first", "clear" if rc == 1 and "trace.json" in text else "unclear", text)
    shutil.rmtree(os.path.join(out, "trace.json"))
    resumed("trace-folder/resume", out)
    # A kill after the last epoch, before the trace and summary: what it leaves behind.
    out = p.path("runs/resume-after-last-epoch")
    shutil.rmtree(out, ignore_errors=True)
    p.exe(["run", cfg, "--set", f"run.output={out}"] + common)
    for f in ("summary.json", "trace.json", "metrics/actions.csv", "metrics/costs.json", "checkpoints/final.pt"):
        if os.path.exists(os.path.join(out, f)):
            os.remove(os.path.join(out, f))
    resumed("killed-before-trace/resume", out)
    # SIGKILL at several moments of a run, then --resume: everything promised is there.
    slow = ["--set", "dataset.samples=4096", "--set", "run.batch_size=16"]
    for delay in (0.3, 0.8, 1.5, 2.5, 4.0):
        out = p.path(f"runs/resume-kill-{delay}")
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.Popen([p.pipelab, "run", cfg, "--set", f"run.output={out}"] + common + slow,
                                cwd=p.out, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        rc, text = p.exe(["run", cfg, "--resume", "--set", f"run.output={out}"] + common + slow)
        why = check_promised(out, 3) if rc == 0 else "exit %d" % rc
        p.record(s, f"kill-at-{delay}s/resume", "silent" if why else "clear", text + "\n" + why)
    # Damaged metrics/epochs.csv, then --resume: refused with file:line, never rewritten.
    src = p.path("runs/resume-src")
    shutil.rmtree(src, ignore_errors=True)
    p.exe(["run", cfg, "--set", f"run.output={src}", "--stop-after", "2"] + common)
    damage = {
        "foreign-line": lambda t: t.replace("\n", "\nhello,world\n", 1),
        "no-header": lambda t: "\n".join(t.splitlines()[1:]) + "\n",
        "empty": lambda t: "",
        "garbage": lambda t: "\x00\x01\x02",
        "epoch-missing": lambda t: "\n".join(t.splitlines()[:1] + t.splitlines()[2:]) + "\n",
        "epoch-out-of-order": lambda t: "\n".join(t.splitlines()[:1] + t.splitlines()[1:][::-1]) + "\n",
    }
    for name, fn in damage.items():
        out = p.path(f"runs/resume-damaged-{name}")
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(src, out)
        target = os.path.join(out, "metrics/epochs.csv")
        before = fn(open(target).read())
        open(target, "w").write(before)
        rc, text = p.exe(["run", cfg, "--resume", "--set", f"run.output={out}"] + common)
        outcome = classify(rc, text, ["epochs.csv"], reject=True)
        if rc == 0:
            outcome = "silent"
        elif open(target).read() != before:
            outcome = "silent"  # refused, but the file was rewritten
        p.record(s, f"epochs-{name}", outcome, text)
    # A partial last line (a kill mid-append) is what a crash leaves: resume must accept it.
    out = p.path("runs/resume-partial-line")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    with open(os.path.join(out, "metrics/epochs.csv"), "a") as f:
        f.write("3,0.5,0.")
    resumed("epochs-partial-last-line", out)


# ---------------------------------------------------------------------------------------------
def probe_distributed(p):
    s = "distributed"
    cfg = p.write("dist.yaml", BASE.replace("progress: false", "progress: false, executor: {type: distributed, "
                                                               "timeout_s: 7}"))
    out = p.path("runs/dist-timeout")
    rc, text = p.exe(["launch", "--nproc", "2", cfg, "--overwrite", "--set", f"run.output={out}"])
    resolved = open(os.path.join(out, "config.yaml")).read() if os.path.exists(os.path.join(out, "config.yaml")) else ""
    kept = "timeout_s: 7" in resolved
    p.record(s, "timeout-in-file-with-rank", "clear" if rc == 0 and kept else "silent", text + resolved[-400:])
    # A rank killed mid-run: the survivor stops within timeout_s, exit 1, naming the rank.
    slow = BASE.replace("samples: 64", "samples: 20000").replace("epochs: 1", "epochs: 3")
    slow = slow.replace("progress: false", "progress: false, executor: {type: distributed, timeout_s: 10}")
    cfg = p.write("dist-slow.yaml", slow)
    port = str(29500 + os.getpid() % 1000)
    outs = p.path("runs/dist-kill")
    shutil.rmtree(outs, ignore_errors=True)
    procs = [subprocess.Popen([p.pipelab, "run", cfg, "--rank", str(r), "--world-size", "2", "--master",
                               f"127.0.0.1:{port}", "--set", f"run.output={outs}", "--quiet"], cwd=p.out,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in (0, 1)]
    time.sleep(4)
    procs[1].send_signal(signal.SIGKILL)
    try:
        text = procs[0].communicate(timeout=60)[0].decode(errors="replace")
        rc = procs[0].returncode
    except subprocess.TimeoutExpired:
        procs[0].kill()
        rc, text = None, ""
    procs[1].wait()
    if rc is None:
        outcome = "hang"
    elif rc == 1 and "rank 1" in text and ".cc" not in text and ".cpp" not in text:
        outcome = "clear"
    elif rc == 0:
        outcome = "silent"
    else:
        outcome = "unclear"
    p.record(s, "peer-killed", outcome, text)


SURFACES = {"yaml": probe_yaml, "schedule-files": probe_schedule_files, "schedule-flags": probe_schedule_flags,
            "simulate-flags": probe_simulate_flags, "fifo": probe_fifo, "reports": probe_reports,
            "resume": probe_resume, "distributed": probe_distributed}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipelab", required=True)
    ap.add_argument("--out", default="/tmp/pipelab-probe3")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--only", default=",".join(SURFACES))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    p = Probe(os.path.abspath(args.pipelab), args.out, args.timeout)
    p.write("cfg-base.yaml", BASE)
    for name in args.only.split(","):
        t = time.time()
        SURFACES[name](p)
        print(f"[{name}: {time.time() - t:.0f} s]", file=sys.stderr, flush=True)
    counts = {}
    for surface, _, outcome, _ in p.results:
        counts.setdefault(surface, {}).setdefault(outcome, 0)
        counts[surface][outcome] += 1
    print("| surface | tried | " + " | ".join(OUTCOMES) + " |\n|---|---:|" + "---:|" * len(OUTCOMES))
    for surface, c in counts.items():
        print(f"| {surface} | {sum(c.values())} | " + " | ".join(str(c.get(k, 0)) for k in OUTCOMES) + " |")
    total = {k: sum(c.get(k, 0) for c in counts.values()) for k in OUTCOMES}
    print(f"| all | {sum(total.values())} | " + " | ".join(str(total[k]) for k in OUTCOMES) + " |")
    for surface, name, outcome, text in p.results:
        if outcome not in ("clear", "accepted"):
            last = [l for l in text.strip().splitlines() if l.strip()][-1:] or [""]
            print(f"  {outcome:8} {surface}/{name}: {last[0][:220]}")
    with open(os.path.join(args.out, "probe.json"), "w") as f:
        json.dump([{"surface": s, "case": n, "outcome": o, "output": t[-3000:]} for s, n, o, t in p.results], f,
                  indent=1)


if __name__ == "__main__":
    main()
