"""Training runs the speed benchmarks share: one pipelab run of an experiment under a given
executor (one intra-op thread per device), and the bubble-limited ideal step that
`pipelab simulate` replays from a sequential run's measured stage costs (docs/perf.md, "The
ideal": every action at its uncontended time, the schedule's order and dependencies,
messages free), and how their figures over rounds are printed.
"""
import os
import re
import statistics
import subprocess


def spread(values, scale=1.0, digits=2):
    """Rounds' figures (times `scale`) as "median [min, max]"; a single round's as itself."""
    v = [x * scale for x in values]
    if len(v) == 1:
        return f"{v[0]:.{digits}f}"
    return f"{statistics.median(v):.{digits}f} [{min(v):.{digits}f}, {max(v):.{digits}f}]"


def train(pipelab, experiment, executor, out, overrides=(), trace=True, threads=1):
    """Trains `experiment` into `out` with `executor` (sequential, threaded or launch: two
    processes), one intra-op thread per device; `threads` intra-op threads for the
    sequential executor's one thread."""
    sets = ["--set", f"run.trace={'true' if trace else 'false'}", "--set", f"run.output={out}",
            "--set", "run.progress=false"]
    for o in overrides:
        sets += ["--set", o]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if executor == "launch":
        cmd = [pipelab, "launch", "--nproc", "2", experiment, "--set", "run.threads=1"] + sets
    else:
        setting = "run.executor={type: threaded, intra_op_threads: 1}" if executor == "threaded" else \
            "run.executor={type: sequential}"
        cmd = [pipelab, "run", experiment, "--quiet", "--set", setting, "--set", f"run.threads={threads}"] + sets
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")


def simulated_step(pipelab, experiment, costs, overrides=()):
    """The step (seconds) `pipelab simulate` replays for `experiment` with `costs`."""
    cmd = [pipelab, "simulate", experiment, "--costs", costs]
    for o in overrides:
        cmd += ["--set", o]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    header = None
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "step (ms)" in cells:
            header = cells
        elif header and len(cells) == len(header) and re.match(r"^[0-9.]+$", cells[header.index("step (ms)")]):
            return float(cells[header.index("step (ms)")]) / 1e3
    raise SystemExit(f"no step in `pipelab simulate`'s output:\n{done.stdout}")


def ideal_step(pipelab, experiment, out, overrides=()):
    """Trains `experiment` sequentially into `out` (traced) and returns the ideal step in seconds."""
    train(pipelab, experiment, "sequential", out, overrides)
    return simulated_step(pipelab, experiment, os.path.join(out, "metrics", "costs.json"), overrides)
