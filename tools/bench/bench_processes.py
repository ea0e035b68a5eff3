#!/usr/bin/env python3
"""Two processes against the peer: pipelab's `launch --nproc 2`, pipelab's threaded executor
(one process, one thread per device) and torch.distributed.pipelining (PipelineStage and its
schedules from the installed torch, 2 processes over Gloo), on the same model, batch and
schedule, interleaved in one run.

    tools/bench/bench_processes.py [--pipelab build/pipelab] [--models mlp,lm,cnn] [--widths 64,512,1024]
                                   [--rounds 4] [--steps 16] [--schedules gpipe,1f1b,...] [--with-gloo]
                                   [--no-ideal] [--markdown]
    tools/bench/bench_processes.py --single [--threads 1,2] [--models ...]

`--single` instead compares pipelab's `single` scheme (one stage, `pipelab run`) with the
eager PyTorch loop a researcher writes for the same model (SGD, one loss.item() per step), at
each intra-op thread count: the seconds per step and eager / single (> 1: pipelab is faster).

Every system trains the same workload (tools/bench/peer_models.py: an MLP of 8 Linear(W, W)
layers, a causal transformer language model, a ResNet on CIFAR-sized images), cut into the
same stages, with plain SGD on mini-batches of 8 micro-batches, one intra-op thread per
stage device. A figure is the
median over rounds of the seconds per training step in the steady state: pipelab's epochs
after the first (metrics/epochs.csv, train_seconds / steps; untraced, as torch records
nothing), torch's steps after two warm-up steps (timed between barriers on every rank).
Each round also measures the bubble-limited ideal (docs/perf.md: `pipelab simulate`'s replay
of the schedule with a sequential run's measured stage costs). Printed: those seconds and the
speed ratios within each round (> 1: the first named is faster; median [min, max] over the
rounds): launch / torch, launch / threaded, and ideal / each system, its efficiency. At the
ideal, launch / torch would be 1 / (ideal / torch): what a perfect executor could show.
`--with-gloo` also times `launch` with `run.executor.backend: gloo` (every message over Gloo's
TCP transport, as between machines) beside the default (shared memory on one machine).
LibTorch's threads spin, so nothing else should run meanwhile.
"""
import argparse
import collections
import csv
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_models import MICRO, workload  # noqa: E402
from traced_runs import ideal_step, spread, train  # noqa: E402

# schedule -> (pipelab scheme, pipelab stages, torch schedule class, torch stages per rank)
SCHEDULES = {
    # torch's ScheduleGPipe recomputes nothing: neither does this GPipe (pipelab's default is
    # torchgpipe's except_last).
    "gpipe": ("{type: gpipe, chunks: 8, checkpoint: never}", 2, "ScheduleGPipe", 1),
    "1f1b": ("{type: pipedream_flush, chunks: 8}", 2, "Schedule1F1B", 1),
    "interleaved": ("{type: interleaved_1f1b, chunks: 8, virtual_stages: 2}", 4, "ScheduleInterleaved1F1B", 2),
    "zb": ("{type: zb_h1, chunks: 8}", 2, "ScheduleInterleavedZeroBubble", 1),
    "zbv": ("{type: zbv, chunks: 8}", 4, "ScheduleZBVZeroBubble", 2),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def experiment(work, steps, scheme, stages, executor, data_dir):
    balance = ", ".join(str(b) for b in work.balance(stages))
    return work.sections(steps, data_dir) + f"""partition: {{stages: {stages}, balance: [{balance}]}}
scheme:    {scheme}
optimizer: {{type: sgd, lr: 0.01}}
run:       {{epochs: 3, batch_size: {work.batch}, seed: 1, progress: false, executor: {{type: {executor}}}}}
"""


def steady_seconds(out, steps):
    """Seconds per step of a pipelab run in `out`: the median over epochs after the first of
    an epoch's training seconds over the mini-batches it trained (metrics/steps.csv)."""
    with open(os.path.join(out, "metrics", "epochs.csv")) as f:
        epochs = list(csv.DictReader(f))
    with open(os.path.join(out, "metrics", "steps.csv")) as f:
        trained = collections.Counter(row["epoch"] for row in csv.DictReader(f))
    if any(trained[e["epoch"]] != steps for e in epochs):
        raise SystemExit(f"{out}: an epoch trained {dict(trained)} mini-batches, not {steps}: the workload's dataset "
                         f"is not the size the benchmark asked for")
    return statistics.median(float(e["train_seconds"]) for e in epochs[1:]) / steps


def pipelab_step_seconds(binary, work, steps, schedule, executor, backend="auto"):
    """Seconds per step of `executor` (launch or threaded), untraced: torch records nothing either."""
    scheme, stages, _, _ = SCHEDULES[schedule]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "e.yaml")
        with open(path, "w") as f:
            f.write(experiment(work, steps, scheme, stages, "distributed" if executor == "launch" else "threaded", tmp))
        out = os.path.join(tmp, "run")
        overrides = [f"run.executor.backend={backend}"] if executor == "launch" else []
        train(binary, path, executor, out, overrides, trace=False)
        return steady_seconds(out, steps)


def ideal_step_seconds(binary, work, steps, schedule):
    """The bubble-limited ideal step (traced_runs.ideal_step) of `schedule` on `work`."""
    scheme, stages, _, _ = SCHEDULES[schedule]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "e.yaml")
        with open(path, "w") as f:
            f.write(experiment(work, steps, scheme, stages, "sequential", tmp))
        return ideal_step(binary, path, os.path.join(tmp, "run"))


def single_step_seconds(binary, work, steps, threads):
    """Seconds per step of `single` (one stage, sequential) at `threads` intra-op threads, untraced."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "e.yaml")
        with open(path, "w") as f:
            f.write(experiment(work, steps, "{type: single}", 1, "sequential", tmp))
        out = os.path.join(tmp, "run")
        train(binary, path, "sequential", out, trace=False, threads=threads)
        return steady_seconds(out, steps)


def eager_worker(args):
    """The eager loop, in a process of its own (its thread count and allocator)."""
    import torch

    torch.set_num_threads(args.threads_one)
    torch.manual_seed(1)
    work = workload(args.model, args.width)
    model = torch.nn.Sequential(*work.blocks())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = work.batch_tensors()

    def step():
        loss = work.loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    for _ in range(2):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    print(json.dumps({"seconds": (time.perf_counter() - start) / args.steps}))


def eager_step_seconds(model, width, steps, threads):
    cmd = [sys.executable, __file__, "--eager-worker", "--model", model, "--width", str(width), "--steps", str(steps),
           "--threads-one", str(threads)]
    done = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS=str(threads)), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the eager loop failed ({model}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def single_against_eager(args):
    import torch

    print(f"pipelab {args.pipelab} `single` against eager torch {torch.__version__}; medians of {args.rounds} "
          f"interleaved rounds")
    print(f"{'model':<22} {'threads':>7} {'single s/step':>13} {'eager s/step':>12} {'eager/single':>12}")
    for model in args.models.split(","):
        for width in [int(w) for w in args.widths.split(",")] if model == "mlp" else [0]:
            work = workload(model, width)
            label = f"{model} {width}" if model == "mlp" else model
            for threads in [int(t) for t in args.threads.split(",")]:
                single, eager = [], []
                for _ in range(args.rounds):
                    single.append(single_step_seconds(args.pipelab, work, args.steps, threads))
                    eager.append(eager_step_seconds(model, width, args.steps, threads))
                s, e = statistics.median(single), statistics.median(eager)
                print(f"{label:<22} {threads:>7} {s:>13.4f} {e:>12.4f} {e / s:>12.2f}", flush=True)


def torch_worker(args):
    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    _, _, schedule_name, per_rank = SCHEDULES[args.schedule]
    stages_total = world * per_rank
    if schedule_name == "ScheduleZBVZeroBubble":
        mine = [rank, stages_total - 1 - rank]  # the V: rank 0 holds the first and the last stage
    else:
        mine = [rank + world * k for k in range(per_rank)]  # looped placement
    torch.manual_seed(1)
    work = workload(args.model, args.width)
    blocks = work.blocks()  # every rank makes them all, in one order: the same weights
    starts = [0]
    for count in work.balance(stages_total):
        starts.append(starts[-1] + count)
    stages, params = [], []
    for s in mine:
        part = torch.nn.Sequential(*blocks[starts[s]:starts[s + 1]])
        params += list(part.parameters())
        stages.append(pipelining.PipelineStage(part, s, stages_total, torch.device("cpu")))
    cls = getattr(pipelining, schedule_name)
    multi = issubclass(cls, pipelining.schedules.PipelineScheduleMulti)
    schedule = cls(stages if multi else stages[0], n_microbatches=MICRO, loss_fn=work.loss)
    opt = torch.optim.SGD(params, lr=0.01)
    x, y = work.batch_tensors()
    first, last = 0 in mine, stages_total - 1 in mine

    def step():
        kwargs = {"target": y} if last else {}
        if first:
            schedule.step(x, **kwargs)
        else:
            schedule.step(**kwargs)
        opt.step()
        opt.zero_grad()

    for _ in range(2):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    dist.barrier()
    seconds = (time.perf_counter() - start) / args.steps
    if rank == 0:
        print(json.dumps({"seconds": seconds}))
    dist.destroy_process_group()


def torch_step_seconds(model, width, steps, schedule):
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        cmd = [sys.executable, __file__, "--torch-worker", "--model", model, "--width", str(width),
               "--steps", str(steps), "--schedule", schedule]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate() for p in procs]
    if any(p.returncode != 0 for p in procs):
        logs = "\n".join(f"rank {r}:\n{e[-2000:]}" for r, (_, e) in enumerate(outs))
        raise SystemExit(f"torch workers failed ({model}, {schedule}, width {width}):\n{logs}")
    return json.loads(outs[0][0].strip().splitlines()[-1])["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipelab", default="build/pipelab")
    ap.add_argument("--models", default="mlp,lm,cnn", help="workloads (tools/bench/peer_models.py)")
    ap.add_argument("--widths", default="512", help="the MLP's widths")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    ap.add_argument("--with-gloo", action="store_true", help="also time launch with backend gloo")
    ap.add_argument("--no-ideal", action="store_true", help="skip the bubble-limited ideal (a sequential traced "
                    "run and `pipelab simulate` a round)")
    ap.add_argument("--markdown", action="store_true", help="also print the table in Markdown")
    ap.add_argument("--single", action="store_true", help="pipelab's single scheme against the eager loop instead")
    ap.add_argument("--threads", default="1,2", help="--single: intra-op thread counts")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--eager-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads-one", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--model", default="mlp", help=argparse.SUPPRESS)
    ap.add_argument("--width", type=int, default=512, help=argparse.SUPPRESS)
    ap.add_argument("--schedule", default="gpipe", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    if args.eager_worker:
        return eager_worker(args)
    if args.single:
        return single_against_eager(args)
    import torch

    print(f"pipelab {args.pipelab} against torch {torch.__version__}; {MICRO} micro-batches, "
          f"2 processes x 1 thread, Gloo; medians of {args.rounds} interleaved rounds, [min, max] of the "
          f"rounds' ratios")
    rows = []
    for model in args.models.split(","):
        for width in [int(w) for w in args.widths.split(",")] if model == "mlp" else [0]:
            work = workload(model, width)
            label = work.describe() if args.markdown else (f"{model} {width}" if model == "mlp" else model)
            for schedule in args.schedules.split(","):
                rows.append(measure(args, work, schedule, label))
                print_row(rows[-1], header=len(rows) == 1)
    if args.markdown:
        print("\n" + markdown(rows))


def measure(args, work, schedule, label):
    """One row: each system's seconds per step and the ratios, round by round."""
    times = {k: [] for k in ["launch", "threaded", "torch"] + (["gloo"] if args.with_gloo else []) +
             ([] if args.no_ideal else ["ideal"])}
    for _ in range(args.rounds):
        times["launch"].append(pipelab_step_seconds(args.pipelab, work, args.steps, schedule, "launch"))
        if args.with_gloo:
            times["gloo"].append(pipelab_step_seconds(args.pipelab, work, args.steps, schedule, "launch", "gloo"))
        times["threaded"].append(pipelab_step_seconds(args.pipelab, work, args.steps, schedule, "threaded"))
        times["torch"].append(torch_step_seconds(work.name, getattr(work, "width", 0), args.steps, schedule))
        if not args.no_ideal:
            times["ideal"].append(ideal_step_seconds(args.pipelab, work, args.steps, schedule))
    # Ratios within a round (its runs are neighbours in time). launch/X: X's seconds over
    # launch's (> 1: launch is faster); ideal/X: the ideal's seconds over X's, X's efficiency.
    pairs = {"launch/torch": ("torch", "launch"), "launch/threaded": ("threaded", "launch"),
             "gloo/torch": ("torch", "gloo"), "ideal/launch": ("ideal", "launch"),
             "ideal/threaded": ("ideal", "threaded"), "ideal/torch": ("ideal", "torch")}
    ratios = {name: [a / b for a, b in zip(times[num], times[den])]
              for name, (num, den) in pairs.items() if num in times and den in times}
    return {"label": label, "schedule": schedule, "seconds": {k: statistics.median(v) for k, v in times.items()},
            "ratios": ratios}


def print_row(row, header):
    sec, ratios = row["seconds"], row["ratios"]
    if header:
        print(f"{'model':<22} {'schedule':<12} " + " ".join(f"{k + ' s/step':>15}" for k in sec) + " " +
              " ".join(f"{k:>18}" for k in ratios))
    print(f"{row['label'][:22]:<22} {row['schedule']:<12} " + " ".join(f"{v:>15.4f}" for v in sec.values()) + " " +
          " ".join(f"{spread(v):>18}" for v in ratios.values()), flush=True)


SCHEDULE_NAMES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved 1F1B", "zb": "ZB-H1", "zbv": "ZB-V"}


def markdown(rows):
    """The rows as docs/perf.md's and the README's table."""
    keys = list(rows[0]["ratios"])
    out = ["| workload | schedule | launch s/step | " + " | ".join(keys) + " |",
           "|---|---|---:|" + "---:|" * len(keys)]
    for r in rows:
        out.append(f"| {r['label']} | {SCHEDULE_NAMES.get(r['schedule'], r['schedule'])} | "
                   f"{r['seconds']['launch']:.3f} | " + " | ".join(spread(r["ratios"][k]) for k in keys) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
