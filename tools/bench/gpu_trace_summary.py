#!/usr/bin/env python3
"""Where a GPU training loop's time goes, from Chrome traces of LibTorch's profiler (Kineto):
the ones `pipelab_bench_gpu --profile DIR` writes for pipelab (pipelab.json) and for the eager
PyTorch loop (eager.json), optionally xz-compressed.

  python3 tools/bench/gpu_trace_summary.py DIR/pipelab.json.xz DIR/eager.json.xz
  python3 tools/bench/gpu_trace_summary.py --host DIR/pipelab-host.json.xz DIR/eager-host.json.xz

For each trace, over the window from the first to the last GPU kernel: the kernels' count and
busy time (the union of their intervals, all streams), the GPU's idle share, the host's
synchronising calls (how many, how long), the kernels launched per host operator kind, and
the operators that launch the most kernels. A loop whose GPU idles while its host is busy
launching small kernels or waiting in synchronisations is host-bound: that is what shows
here and not in samples/s.

With --host (traces of host operators only, `pipelab_bench_gpu --host-profile`, which need no
CUPTI): the operators each program issues, counted per convolution forward (both run the
same ResNet, so the counts compare), with their host time: what one side issues that the
other does not is its own host work.
"""
import argparse
import collections
import json
import lzma


def load(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def union_length(intervals):
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def innermost_operators(ops, launches):
    """correlation id -> the name of the innermost host operator (same thread) open at its launch."""
    items = collections.defaultdict(list)
    for op in ops:
        items[op.get("tid")].append((op["ts"], 0, op["ts"] + op["dur"], op["name"]))
    for launch in launches:
        items[launch.get("tid")].append((launch["ts"], 1, -launch["args"]["correlation"], None))
    out = {}
    for rows in items.values():
        # Same start: the enclosing (longer) operator first, launches after the operators.
        rows.sort(key=lambda r: (r[0], r[1], -r[2]))
        stack = []  # (end, name) of the operators open at the sweep's time
        for ts, kind, value, name in rows:
            while stack and stack[-1][0] < ts:
                stack.pop()
            if kind == 0:
                stack.append((value, name))
            else:
                out[-value] = stack[-1][1] if stack else "(no operator)"
    return out


SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy ",
         "cudaMemcpy", "cudaStreamWaitEvent")


def summarize(path, top):
    events = [e for e in load(path) if e.get("ph") == "X"]
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not kernels:
        print(f"{path}: no GPU kernels in the trace")
        return
    t0 = min(k["ts"] for k in kernels)
    t1 = max(k["ts"] + k["dur"] for k in kernels)
    busy = union_length([(k["ts"], k["ts"] + k["dur"]) for k in kernels])
    window = t1 - t0
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    syncs = collections.Counter()
    sync_time = collections.Counter()
    launches = 0
    for e in runtime:
        name = e["name"]
        if "LaunchKernel" in name or "cudaLaunch" in name:
            launches += 1
        if any(name.startswith(s) for s in SYNCS):
            syncs[name] += 1
            sync_time[name] += e["dur"]
    small = sum(1 for k in kernels if k["dur"] < 5)
    print(f"== {path}")
    print(f"  window {window / 1e3:.1f} ms, GPU busy {busy / 1e3:.1f} ms ({100 * busy / window:.1f}%), "
          f"idle {100 * (1 - busy / window):.1f}%")
    print(f"  {len(kernels)} kernels ({small} under 5 us), {launches} launches; "
          f"mean kernel {busy / max(len(kernels), 1):.1f} us")
    for name, n in syncs.most_common():
        print(f"  {name}: {n} calls, {sync_time[name] / 1e3:.1f} ms")
    # Kernels per top-level host operator: Kineto links a launch to its kernel by correlation id.
    by_correlation = {}
    for e in runtime:
        c = e.get("args", {}).get("correlation")
        if c is not None:
            by_correlation[c] = e
    owner_of_launch = innermost_operators(
        [e for e in events if e.get("cat") == "cpu_op"], by_correlation.values())
    per_op = collections.Counter()
    per_op_time = collections.Counter()
    for k in kernels:
        c = k.get("args", {}).get("correlation")
        owner = owner_of_launch.get(c, "(no operator)") if c in by_correlation else "(no launch)"
        per_op[owner] += 1
        per_op_time[owner] += k["dur"]
    print(f"  kernels by launching operator (top {top}): count, GPU ms")
    for name, n in per_op.most_common(top):
        print(f"    {n:6d} {per_op_time[name] / 1e3:8.2f}  {name}")
    # The GPU's own work by kernel: where two loops issue the same operators, a kernel that
    # one runs and the other does not (a layout conversion, a slower variant) shows here.
    per_kernel = collections.Counter()
    per_kernel_time = collections.Counter()
    for k in kernels:
        per_kernel[k["name"][:110]] += 1
        per_kernel_time[k["name"][:110]] += k["dur"]
    print(f"  kernels by name (top {top} by GPU time): count, GPU ms")
    for name, t in per_kernel_time.most_common(top):
        print(f"    {per_kernel[name]:6d} {t / 1e3:8.2f}  {name}")


def host_summary(path, top):
    ops = [e for e in load(path) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    if not ops:
        print(f"{path}: no host operators in the trace")
        return
    # Top-level operators: not inside another operator of the same thread.
    by_thread = collections.defaultdict(list)
    for op in ops:
        by_thread[op.get("tid")].append(op)
    count, time, top_count, top_time = (collections.Counter() for _ in range(4))
    for rows in by_thread.values():
        rows.sort(key=lambda e: (e["ts"], -e["dur"]))
        end = -1.0
        for op in rows:
            count[op["name"]] += 1
            time[op["name"]] += op["dur"]
            if op["ts"] >= end:
                top_count[op["name"]] += 1
                top_time[op["name"]] += op["dur"]
                end = op["ts"] + op["dur"]
    convs = count.get("aten::convolution", 0) or 1
    print(f"== {path}")
    print(f"  {sum(count.values())} operators ({sum(top_count.values())} top-level, {sum(top_time.values()) / 1e3:.1f}"
          f" ms inclusive); {count.get('aten::convolution', 0)} aten::convolution: counts below are per convolution")
    print(f"  top-level operators (top {top} by host time): per convolution, host ms in all, us each")
    for name, t in top_time.most_common(top):
        n = top_count[name]
        print(f"    {n / convs:8.3f} {t / 1e3:9.2f} {t / n:8.1f}  {name}")
    print(f"  all operators (top {top} by count): per convolution")
    for name, n in count.most_common(top):
        print(f"    {n / convs:8.3f}  {name}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+", help="Chrome traces (.json or .json.xz)")
    p.add_argument("--top", type=int, default=15, help="operators listed")
    p.add_argument("--host", action="store_true", help="host operators only (--host-profile traces)")
    args = p.parse_args()
    for path in args.traces:
        (host_summary if args.host else summarize)(path, args.top)


if __name__ == "__main__":
    main()
