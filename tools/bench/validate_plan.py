#!/usr/bin/env python3
"""Benchmark (not a test): does `pipelab plan` rank the pipelines for the devices here as
measured runs rank them?

For each model (an MLP, a small ResNet, a causal transformer LM, and four outside the set the
planner was first checked on: a wider GPT-style LM, a half-width MobileNetV2, a deep narrow
LM of 24 thin layers and a U-Net whose skip connections cross stages), `pipelab plan --devices 2
--time-blocks --allow-idle` costs every candidate from each block timed on this machine
(one intra-op thread per device, as the threaded executor runs them). The script then trains
the plan's five best distinct candidates and five others drawn at random from the rest of the
ranked list with the threaded executor, reads each run's measured step and the peak of
what its memory meter sees (activations, temporaries and gradients: metrics/costs.json's
device_peak_bytes), and reports per model: Spearman's rank correlation
of predicted and measured steps, how far the plan's pick is from the best measured step,
and the memory error of each run. Goals (issue 54): Spearman >= 0.8, the pick within 5% of
the best, memory within 10%. Run it alone: a second busy process skews every figure.

    tools/bench/validate_plan.py [--pipelab build/pipelab] [--rounds 1] [--models mlp,cnn,lm,mobilenet,gpt,deep_lm,unet]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = {
    "mlp": "experiments/simulate/validate_mlp.yaml",
    "cnn": "experiments/plan/validate_cnn.yaml",
    "lm": "experiments/plan/validate_lm.yaml",
    # Outside the set the planner was first checked on (issue 77).
    "mobilenet": "experiments/plan/validate_mobilenet.yaml",
    "gpt": "experiments/plan/validate_gpt.yaml",
    # Outside it too (issue 96): many thin layers; an encoder-decoder whose skips cross stages.
    "deep_lm": "experiments/plan/validate_deep_lm.yaml",
    "unet": "experiments/plan/validate_unet.yaml",
}


def write_lm_tokens(path):
    """512 sequences of 32 tokens and their next tokens, for validate_lm.yaml."""
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 4000, (512, 33), generator=g)
    torch.save({"x": x[:, :32].contiguous(), "y": x[:, 1:].contiguous()}, path)


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def chosen(ranked, seed):
    """The five best distinct plans and five others at random. Plans with the same shape and
    the same predicted step (data parallelism as `dp`, as `single` with replicas, as a
    pipeline of one micro-batch) count once."""
    seen, best, rest = set(), [], []
    for c in ranked:
        key = (c["stages"], c["replicas"], c["devices"], f"{c['step_seconds']:.3g}")
        if key in seen:
            continue
        seen.add(key)
        (best if len(best) < 5 else rest).append(c)
    return best + random.Random(seed).sample(rest, min(5, len(rest)))


def overrides(c):
    own_replicas = "replicas" in c["scheme"]
    balance = "[" + ", ".join(str(b) for b in c["balance"]) + "]"
    return ["--set", "scheme=" + c["scheme"], "--set", f"partition.stages={c['stages']}",
            "--set", f"partition.replicas={1 if own_replicas else c['replicas']}",
            "--set", f"partition.balance={balance}"] + (
                ["--set", "partition.recompute=[" + ", ".join(str(s) for s in c["recompute"]) + "]"]
                if c.get("recompute") else [])


def measure(pipelab, experiment, c, out):
    done = subprocess.run([pipelab, "run", experiment, "--quiet", "--set", f"run.output={out}"] + overrides(c),
                          stdout=subprocess.DEVNULL)
    # Exit 3 is a run that diverged (batch norm over micro-batches of two examples can): its
    # steps were timed all the same.
    if done.returncode not in (0, 3):
        raise subprocess.CalledProcessError(done.returncode, done.args)
    costs_path = os.path.join(out, "metrics", "costs.json")
    if not os.path.exists(costs_path):
        return None  # diverged before its traced epoch: nothing was timed
    with open(costs_path) as f:
        costs = json.load(f)
    # The plan predicts each device's peak: every stage it holds (a V, interleaved chunks).
    return costs["step_seconds"], max(s["device_peak_bytes"] for s in costs["stages"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pipelab", default=os.path.join(ROOT, "build", "pipelab"))
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--models", default="mlp,cnn,lm")
    a = p.parse_args()
    os.chdir(ROOT)
    tokens = os.path.join(ROOT, "experiments", "plan", "lm_tokens.pt")
    if "lm" in a.models and not os.path.exists(tokens):
        write_lm_tokens(tokens)
    summary = []
    with tempfile.TemporaryDirectory(prefix="pipelab-validate-plan-") as tmp:
        for name in a.models.split(","):
            experiment = MODELS[name]
            ranked_file = os.path.join(tmp, name + ".json")
            subprocess.run([a.pipelab, "plan", experiment, "--devices", "2", "--time-blocks", "--allow-idle",
                            "--top", "1000", "--json", ranked_file], check=True, stdout=subprocess.DEVNULL)
            with open(ranked_file) as f:
                picks = chosen(json.load(f)["ranked"], seed=54)
            measured = [[] for _ in picks]
            memory = [0.0] * len(picks)
            for r in range(a.rounds):  # rounds interleave the candidates
                for i, c in enumerate(picks):
                    got = measure(a.pipelab, experiment, c, os.path.join(tmp, f"{name}-{i}-{r}"))
                    if got is None:
                        continue
                    measured[i].append(got[0])
                    memory[i] = got[1]
            # A candidate that diverged before its traced epoch in every round was never timed.
            for i in reversed(range(len(picks))):
                if not measured[i]:
                    print(f"{name}: {picks[i]['label']} diverged before its traced epoch: left out")
                    del picks[i], measured[i], memory[i]
            steps = [sorted(m)[len(m) // 2] for m in measured]
            print(f"\n{name} ({experiment}): 2 devices, threaded, {a.rounds} round(s)")
            print(f"{'#':>3} {'candidate':<44} {'st x r':>6} {'predicted':>10} {'measured':>10} "
                  f"{'meter MiB pred':>14} {'meas':>7} {'error':>7}")
            for i, c in enumerate(picks):
                predicted_memory = max(c["peak_above_weights_bytes"])
                error = (predicted_memory - memory[i]) / memory[i] * 100 if memory[i] > 0 else float("nan")
                print(f"{i + 1:>3} {c['label'][:44]:<44} {c['stages']:>2} x {c['replicas']:<2} "
                      f"{c['step_seconds'] * 1e3:>8.2f}ms {steps[i] * 1e3:>8.2f}ms "
                      f"{predicted_memory / 2**20:>14.2f} {memory[i] / 2**20:>7.2f} {error:>+6.1f}%")
            rho = spearman([c["step_seconds"] for c in picks], steps)
            gap = (steps[0] - min(steps)) / min(steps) * 100
            ratios = sorted(steps[i] / c["step_seconds"] for i, c in enumerate(picks))
            errors = [(max(c["peak_above_weights_bytes"]) - memory[i]) / memory[i] * 100
                      for i, c in enumerate(picks) if memory[i] > 0]
            summary.append((name, rho, gap, ratios, errors))
            print(f"Spearman {rho:.2f}; the plan's pick is {gap:.1f}% slower than the best measured")
    print("\nmodel      spearman  pick vs best  measured/predicted (median)  within 15%  memory error  within 10%")
    for name, rho, gap, ratios, errors in summary:
        steps_in = sum(1 for x in ratios if abs(x - 1) <= 0.15)
        memory_in = sum(1 for e in errors if abs(e) <= 10)
        print(f"{name:<10} {rho:>8.2f}  {gap:>+11.1f}%  {ratios[0]:.2f} to {ratios[-1]:.2f} "
              f"({ratios[len(ratios) // 2]:.2f}){'':>9}{steps_in:>3} of {len(ratios):<3}  "
              f"{min(errors):+.1f}% to {max(errors):+.1f}%  {memory_in:>3} of {len(errors)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
