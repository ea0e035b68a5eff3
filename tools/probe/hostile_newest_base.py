"""Shared parts of the fourth hostile-input probe (tools/probe/hostile_newest.py): the outcome
rules, the Probe4 runner with its memory cap and process watch, and the model and file builders
the surfaces use."""
import argparse
import glob
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_inputs import BASE  # noqa: E402
from hostile_surfaces import Probe, classify, finished_run, make_fifo  # noqa: E402

OUTCOMES = ("clear", "unclear", "crash", "hang", "silent", "accepted", "refused")
INTERNAL = re.compile(r"INTERNAL ASSERT|internal error|frame #\d|Exception raised from|filesystem error|std::|"
                      r"bad_alloc|Traceback|<--- HERE|\w\.(cpp|cc|h|hpp):\d+")
MEMORY = re.compile(r"bad_alloc|can't allocate memory|Cannot allocate memory|out of memory")
SIGNALLED = tuple(128 + s for s in (signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGKILL, signal.SIGSEGV))
RAM = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
LAUNCH_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
              "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_NODELIST", "TORCHELASTIC_RESTART_COUNT")
REST = "\n".join(BASE.splitlines()[2:]) + "\n"  # partition, scheme, optimizer, run
ONE_STAGE = REST.replace("stages: 2", "stages: 1").replace("{type: gpipe, chunks: 2}", "{type: single}")
VEC = "{type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 3}"
DATA = {"vec": VEC, "seq": VEC.replace("[8]", "[4, 8]"), "img": VEC.replace("[8]", "[1, 8, 8]"),
        "ids": "{type: tensors, path: IDS, test_fraction: 0.25}"}
LOOP_MUST = ["symbolic link", "symlink", "loop"]


def judge(rc, out, names, reject, must=()):
    """hostile_surfaces' classes, plus: internal text or none of the words `must` (outside paths)
    is unclear, a failed valid input is refused, a signalled rank or a capped allocation a crash."""
    outcome = classify(rc, out, names, reject)
    if outcome in ("hang", "crash", "silent", "accepted"):
        return outcome
    asked = re.search(r"tried to allocate (\d+) bytes", out)
    if rc in SIGNALLED or (MEMORY.search(out) and not (asked and int(asked.group(1)) > RAM)):
        return "crash"
    if not reject:
        return "refused"
    words = re.sub(r"\S*/\S*", " ", out).lower()
    if outcome == "clear" and (INTERNAL.search(out) or (must and not any(m.lower() in words for m in must))):
        return "unclear"
    return outcome


def cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))  # the hostile sizes must not take the machine


def children_of(pid):
    def parent(d):
        try:
            return int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and parent(d) == pid]


class Probe4(Probe):
    """hostile_surfaces' Probe with an environment per case, a memory cap, a hang that takes its
    process group with it, and experiments written from text (`bad` must fail, `good` must work)."""

    def exe(self, args, timeout=None, env=None, watch=None):
        """(exit code, None when killed; output). `watch(pid)` runs every 10 ms: True kills the group."""
        full = dict({k: v for k, v in os.environ.items() if k not in LAUNCH_ENV}, **(env or {}))
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen([self.pipelab] + args, cwd=self.out, env=full, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=cap_memory)
            start = time.time()
            while proc.poll() is None and time.time() - start < (timeout or self.timeout) and not (
                    watch and watch(proc.pid)):
                time.sleep(0.01)
            killed = proc.poll() is None
            if killed:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            log.seek(0)
            return None if killed else proc.returncode, log.read().decode(errors="replace")

    def expect_error(self, surface, name, args, names, timeout=None, env=None, must=()):
        rc, out = self.exe(args, timeout, env)
        self.record(surface, name, judge(rc, out, names, True, must), out)

    def note(self, surface, name, rc, out, problem=""):
        """A valid input's outcome; a `problem` (a promise not kept) makes an exit 0 silent."""
        outcome = judge(rc, out, [], False)
        self.record(surface, name, "silent" if outcome == "accepted" and problem else outcome,
                    f"[probe] {problem}\n{out}" if problem else out)

    def expect_ok(self, surface, name, args, timeout=None, env=None):
        self.note(surface, name, *self.exe(args, timeout, env))

    def cfg(self, name, text):
        return self.write(f"cfg/{name.replace('/', '-')}.yaml", text.replace("IDS", self.path("torch/ids.pt")))

    def run(self, cfg, name, *extra):
        return ["run", cfg, "--quiet", "--overwrite", "--set", f"run.output={self.path('runs/' + name.replace('/', '-'))}"
                ] + list(extra)

    def bad(self, s, name, text, extra=(), names=(), must=(), timeout=None, env=None, valid=False):
        f = self.cfg(f"{s}-{name}", text)
        rc, out = self.exe(self.run(f, f"{s}-{name}", *extra), timeout, env)
        self.note(s, name, rc, out) if valid else self.record(
            s, name, judge(rc, out, list(names) or [os.path.basename(f)], True, must), out)

    def good(self, s, name, text, extra=(), timeout=None, env=None):
        self.bad(s, name, text, extra, timeout=timeout, env=env, valid=True)

    def plant(self, name, src=None):
        """NAME in the output folder: a copy of `src`, or without one a symbolic link to itself."""
        f = self.path(name)
        os.makedirs(os.path.dirname(f), exist_ok=True)
        return shutil.copy(src, f) if src else f if os.path.lexists(f) else os.symlink(os.path.basename(f), f) or f

    def codec_cache(self, s, makers):
        """aq_sgd with `storage: disk` where the run's codec_cache/ is made hostile by `makers`."""
        aq = self.cfg(f"{s}-aq-disk", BASE + "compression: {activations: {type: aq_sgd, storage: disk}}\n")
        for name, make in makers.items():
            out = self.path(f"runs/{s}-{name}")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            make(os.path.join(out, "codec_cache"))
            self.expect_error(s, name, ["run", aq, "--quiet", "--set", f"run.output={out}"], ["codec_cache"])
        return aq


def experiment(model, data="vec", rest=REST):
    return f"model: {model}\ndataset: {DATA.get(data, data)}\n{rest}"


def sequential(layers, data="vec"):
    return experiment("\n  type: sequential\n  layers:\n" + "".join(f"    - {l}\n" for l in layers), data)


MODULES = {  # TorchScript modules: name -> (children, forward body)
    "ooo": ("s.b = L(16, 3); s.a = L(8, 16)", "return s.b(s.a(x))"),
    "train": ("s.a = L(8, 16); s.b = L(16, 3)", "return s.b(s.a(x) * 2.0) if s.training else s.b(s.a(x))"),
    "lstm": ("s.lstm = nn.LSTM(8, 16, batch_first=True); s.head = L(16, 3)",
             "y, _ = s.lstm(x.unsqueeze(1)); return s.head(y[:, -1])"),
    "good": ("s.a = L(8, 16); s.b = L(16, 3)", "return s.b(s.a(x))"),
    "res": ("s.a = L(8, 8); s.b = L(8, 3)", "return s.b(x + s.a(x))"),
    "twice": ("s.a = L(8, 8); s.b = L(8, 3)", "return s.b(s.a(s.a(x)))"),
    "unused": ("s.a = L(8, 16); s.spare = L(16, 16); s.b = L(16, 3)", "return s.b(s.a(x))"),
    "bare": ("pass", "return x[:, :3] * 2.0"),
}


def torch_files(p):
    """TorchScript modules and id/LM data, made by python3 with torch; False without torch."""
    d = p.path("torch")
    if os.path.exists(f"{d}/done"):
        return True
    classes = "".join(f"class M_{n}(nn.Module):\n    def __init__(s):\n        super().__init__(); {init}\n"
                      f"    def forward(s, x):\n        {body}\n" for n, (init, body) in MODULES.items())
    script = p.write("torch/make.py", "import sys, warnings, torch, torch.nn as nn\nwarnings.filterwarnings('ignore')\n"
                     "L, d = nn.Linear, sys.argv[1]\n" + classes + f"""
for n in {list(MODULES)}:
    torch.jit.script(globals()['M_' + n]()).save(f'{{d}}/{{n}}.pt')
torch.jit.script(nn.Sequential(L(8, 16), nn.ReLU(), L(16, 3))).save(f'{{d}}/seq.pt')
torch.jit.trace(M_good(), torch.zeros(2, 8)).save(f'{{d}}/traced.pt')
torch.save(M_good().state_dict(), f'{{d}}/state_dict.pt')
g = torch.Generator().manual_seed(0)
ids = {{'x': torch.randint(1, 50, (64, 6), generator=g), 'y': torch.randint(0, 3, (64,), generator=g)}}
torch.save(ids, f'{{d}}/ids.pt')
x, y = torch.randint(1, 4096, (64, 16), generator=g), torch.randint(0, 4096, (64, 16), generator=g)
x[0, 0] = y[0, 0] = 4095
torch.save({{'x': x, 'y': y}}, f'{{d}}/lm.pt')
open(f'{{d}}/done', 'w').close()
""")
    r = subprocess.run([sys.executable, script, d], capture_output=True, text=True)
    if r.returncode:
        print(f"skipping the cases that need torch: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return r.returncode == 0


MODEL_CASES = """
unused/attention-ff               seq  ff          attention: {heads: 2, ff: 32}
unused/attention-activation       seq  activation  attention: {heads: 2, activation: gelu}
unused/layer_norm-groups          vec  groups      layer_norm: {groups: 4}
unused/layer_norm-momentum        vec  momentum    layer_norm: {momentum: 0.5}
unused/batch_norm-groups          vec  groups      batch_norm: {groups: 2}
unused/group_norm-momentum        vec  momentum    group_norm: {groups: 2, momentum: 0.3}
unused/max_pool2d-out             img  out         max_pool2d: {kernel: 2, out: [2, 2]}
unused/avg_pool2d-out             img  out         avg_pool2d: {kernel: 2, out: [2, 2]}
unused/max_pool1d-out             seq  out         conv1d: {out: 4, kernel: 3} ; max_pool1d: {kernel: 2, out: [2]}
unused/adaptive-pool-kernel       img  kernel      adaptive_avg_pool2d: {out: [2, 2], kernel: 3}
unused/lstm-heads                 seq  heads       lstm: {hidden: 8, heads: 2}
unused/leaky_relu-p               vec  p           leaky_relu: {slope: 0.1, p: 0.5}
unused/embedding-hidden           ids  hidden      embedding: {num: 50, dim: 4, hidden: 8}
huge/lstm-layers-1e6              seq  -           lstm: {hidden: 4, layers: 1000000}
huge/lstm-hidden-1e9              seq  -           lstm: {hidden: 1000000000}
huge/linear-out-1e12              vec  -           linear: {out: 1000000000000}
huge/conv2d-out-1e9               img  -           conv2d: {out: 1000000000, kernel: 3}
huge/attention-heads-1e9          seq  -           attention: {heads: 1000000000}
huge/transformer-ff-1e12          seq  -           transformer_encoder_layer: {heads: 2, ff: 1000000000000}
huge/adaptive-out-1e6             img  -           adaptive_avg_pool2d: {out: [1000000, 1000000]}
huge/group_norm-groups-1e9        vec  -           group_norm: {groups: 1000000000}
huge/embedding-num-1e12           ids  -           embedding: {num: 1000000000000, dim: 4}
huge/embedding-dim-1e12           ids  -           embedding: {num: 50, dim: 1000000000000}
residual/ids-to-floats            ids  -           residual: [embedding: {num: 50, dim: 1}, flatten]
residual/ids-sigmoid              ids  -           residual: [sigmoid]
attention/heads-3-of-8            seq  heads       attention: {heads: 3}
attention/transformer-3-of-8      seq  heads       transformer_encoder_layer: {heads: 3, ff: 16}
attention/vectors-heads-3         vec  heads       attention: {heads: 3}
attention/vectors-heads-2         vec  sequence    attention: {heads: 2}
attention/images-heads-2          img  sequence    attention: {heads: 2}
attention/embedded-heads-3        ids  heads       embedding: {num: 50, dim: 8} ; attention: {heads: 3}
"""  # name, data, a word the message needs (-: none), the layers (;-separated) between the data's own
