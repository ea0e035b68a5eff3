#!/usr/bin/env python3
"""The plain PyTorch eager training loop that pipelab_bench_gpu compares pipelab's `single`
scheme against: torchvision's ResNet, SGD (momentum 0.9, weight decay 5e-4), cross-entropy,
optional autocast and channels-last, synthetic 224x224 images held in host memory and copied
to the GPU batch by batch (as pipelab's loader does), one loss.item() per step (as a loop that
logs its loss does). Prints one JSON line per configuration:

  python3 tools/bench/eager_train.py --depth 50 --configs 64:none:cl,128:bf16:cl --steps 20

A configuration is BATCH:AMP:LAYOUT with AMP in none|bf16|fp16 and LAYOUT cl (channels-last)
or cf (channels-first). Samples/s counts the timed steps only (after --warmup steps).
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F


def parse_configs(text):
    out = []
    for item in text.split(","):
        batch, amp, layout = item.split(":")
        if amp not in ("none", "bf16", "fp16") or layout not in ("cl", "cf"):
            sys.exit(f"eager_train.py: bad configuration '{item}' (BATCH:none|bf16|fp16:cl|cf)")
        out.append((int(batch), amp, layout == "cl"))
    return out


def run(depth, batch, amp, channels_last, steps, warmup, device, pin_memory=False):
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, f"resnet{depth}")(num_classes=1000).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    n = batch * (steps + warmup)
    x_all = torch.randn(n, 3, 224, 224)
    y_all = torch.randint(1000, (n,))
    if pin_memory:  # as DataLoader(pin_memory=True) hands batches over: copies the host does not wait for
        x_all, y_all = x_all.pin_memory(), y_all.pin_memory()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    scaler = torch.amp.GradScaler("cuda") if amp == "fp16" else None
    model.train()
    running = 0.0
    start = None
    for i in range(steps + warmup):
        if i == warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        x = x_all[i * batch:(i + 1) * batch].to(device, non_blocking=True)
        y = y_all[i * batch:(i + 1) * batch].to(device, non_blocking=True)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        running += loss.item()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"implementation": "eager", "depth": depth, "batch": batch, "amp": amp,
            "channels_last": channels_last, "pin_memory": pin_memory, "steps": steps, "seconds": seconds,
            "samples_per_second": batch * steps / seconds, "torch": torch.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--depth", type=int, default=50, help="ResNet depth (torchvision: 18, 34, 50, 101, 152)")
    p.add_argument("--configs", default="64:none:cl,128:none:cl,64:bf16:cl,128:bf16:cl",
                   help="comma-separated BATCH:AMP:LAYOUT")
    p.add_argument("--steps", type=int, default=20, help="timed steps per configuration")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (cuDNN setup, allocator)")
    p.add_argument("--pin-memory", action="store_true",
                   help="hold the batches in page-locked host memory (DataLoader(pin_memory=True))")
    p.add_argument("--profile", help="write a Chrome trace of the whole run (host operators, CUDA kernels) here")
    p.add_argument("--host-only", action="store_true", help="with --profile: host operators only (no CUPTI)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("eager_train.py: no CUDA device")
    profiler = None
    if args.profile:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if not args.host_only:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        profiler = torch.profiler.profile(activities=activities)
        profiler.__enter__()
    for batch, amp, cl in parse_configs(args.configs):
        print(json.dumps(run(args.depth, batch, amp, cl, args.steps, args.warmup, torch.device("cuda:0"),
                             args.pin_memory)), flush=True)
    if profiler:
        profiler.__exit__(None, None, None)
        profiler.export_chrome_trace(args.profile)


if __name__ == "__main__":
    main()
