"""The fourth probe's surfaces that run whole commands and check their results: sweeps,
`simulate`'s traffic, `plot`, `--resume` with replicas and codec state, and paths that loop or
run through files (tools/probe/hostile_newest.py runs them)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_newest_base import *  # noqa: E402,F401,F403


def probe_sweep(p):
    s, grid = "sweep", "sweep:\n  output: OUT\n  grid:\n    run.seed: [0, 1]\n"
    seeds = lambda *w: {"seed=0": list(w), "seed=1": list(w)}  # noqa: E731

    def sweep(name, text, want, extra=()):
        """`want`: each cell id and the words its experiment.yaml must hold."""
        out = p.path(f"sweeps/{name}")
        rc, log = p.exe(["sweep", p.cfg(f"{s}-{name}", text.replace("OUT", out)), "--jobs", "1"] + list(extra))
        found = {os.path.basename(os.path.dirname(f)): open(f).read() for f in glob.glob(f"{out}/*/experiment.yaml")}
        problems = sorted({f"cell {c}: " + (f"no '{w}'" if c in found else "missing") for c, words in want.items()
                           for w in words if c not in found or w not in found[c]})
        p.note(s, name, rc, log, "; ".join(problems[:3] + [f"cells: {sorted(found)}"]) if problems else "")

    limited = lambda key: BASE.replace("classes: 3}", f"classes: 3, {key}}}")  # noqa: E731
    sweep("limit-in-file", limited("limit: 32") + grid, seeds("limit: 32"))
    sweep("test_limit-in-file", limited("test_limit: 8") + grid, seeds("test_limit: 8"))
    sweep("limit-via-set", BASE + grid, seeds("limit: 32"), ["--set", "dataset.limit=32"])
    sweep("test_limit-via-set", BASE + grid, seeds("test_limit: 8"), ["--set", "dataset.test_limit=8"])
    for key, a, b in (("limit", 16, 32), ("test_limit", 4, 8)):
        sweep(f"{key}-grid-key", BASE + grid.replace("run.seed: [0, 1]", f"dataset.{key}: [{a}, {b}]"),
              {f"{key}={a}": [f"{key}: {a}"], f"{key}={b}": [f"{key}: {b}"]})
    sweep("compression-section", BASE + "compression: {activations: {type: topk, fraction: 0.5}}\n" + grid,
          seeds("compression:", "topk"))
    sweep("clip-in-optimizer", BASE.replace("lr: 0.1}", "lr: 0.1, clip_grad_norm: 1}") + grid, seeds("clip_grad_norm"))
    # A NaN loss on the progress line: the run is paused after each new metrics/epochs.csv line,
    # so that the sweep (which looks once a second) sees it while the run still runs.
    out = p.path("sweeps/nan")
    f = p.cfg(f"{s}-nan", BASE.replace("lr: 0.1", "lr: 1e30") + grid.replace("OUT", out).replace("[0, 1]", "[0]"))
    paused = set()

    def pause(pid):
        csv = glob.glob(f"{out}/*/metrics/epochs.csv")
        lines = len(open(csv[0]).read().splitlines()) if csv else 0
        for kid in [k for k in children_of(pid) if lines and (k, lines) not in paused]:
            paused.add((kid, lines))
            try:
                os.kill(kid, signal.SIGSTOP)
                time.sleep(1.5)
            finally:
                os.kill(kid, signal.SIGCONT)

    log = p.exe(["sweep", f, "--jobs", "1"], watch=pause)[1]
    line = next((l for l in log.splitlines() if "train loss" in l), "")
    p.record(s, "nan-on-progress-line", "unclear" if not line else "accepted" if "nan" in line.lower() else "silent",
             f"[probe] progress line: {line or 'none seen'}\n{log}")
    for jobs in (1, 2):
        out = p.path(f"sweeps/threads-{jobs}")
        rc, log = p.exe(["sweep", p.cfg(f"{s}-threads-{jobs}", BASE + grid.replace("OUT", out)), "--jobs", str(jobs)])
        m = re.search(r"OMP_NUM_THREADS=(\d+)|(\d+) threads? each", log)
        got = int(m.group(1) or m.group(2)) if m else None
        fair = max(1, (os.cpu_count() or 2) // (2 if jobs == 1 else jobs))  # run.threads 0: half the cores
        p.note(s, f"jobs-{jobs}-threads", rc, log, "" if got and got <= fair else f"{got} threads per run, fair {fair}")
    for name, extra in {"jobs-0": ["--jobs", "0"], "jobs-negative": ["--jobs", "-2"],
                        "threads-negative": ["--threads", "-1"]}.items():
        f = p.cfg(f"{s}-{name}", BASE + grid.replace("OUT", p.path(f"sweeps/{name}")))
        p.expect_error(s, name, ["sweep", f] + extra, [extra[0]])


def probe_simulate(p):
    s = "simulate"
    row = lambda out, scheme: next((l for l in out.splitlines() if l.startswith(f"| {scheme} |")), None)  # noqa: E731
    bytes_moved = lambda out, scheme: float(row(out, scheme).split("|")[-2]) if row(out, scheme) else None  # noqa: E731
    dp = p.cfg(f"{s}-dp", "model: {type: mlp, sizes: [784, 1024, 1024, 10]}\ndataset: " +
               VEC.replace("[8]", "[784]").replace("classes: 3", "classes: 10") + "\npartition: {stages: 1}\n"
               "scheme: {type: dp, replicas: 8}\noptimizer: {type: sgd, lr: 0.1}\n"
               "run: {epochs: 1, batch_size: 64, seed: 0, progress: false}\n")
    gp = p.cfg(f"{s}-gpipe", BASE.replace("batch_size: 16", "batch_size: 32"))
    for name, cfg, scheme, ms in (("dp-x8-m8-vs-m32", dp, "dp", (8, 32)), ("dp-x8-m1-vs-m8", dp, "dp", (1, 8)),
                                  ("gpipe-m2-vs-m16", gp, "gpipe", (2, 16))):
        runs = [p.exe(["simulate", cfg, "--device-flops", "10", "--microbatches", str(m)]) for m in ms]
        got = [bytes_moved(out, scheme) for _, out in runs]
        rc, out = next((r for r in runs if r[0] != 0), runs[-1])
        p.note(s, name, rc, out, "" if None not in got and got[0] == got[1] else
               f"bytes moved per step (MiB) at m = {ms}: {got}")
    if not torch_files(p):
        return
    lm = ("model: {type: transformer, num_words: 4096, d_model: 64, heads: 2, ff: 32, layers: 2, dropout: 0, head: lm, "
          "tie_embeddings: TIE}\n" + f"dataset: {{type: tensors, path: {p.path('torch/lm.pt')}, test_fraction: 0.25}}\n"
          + REST.replace("{type: gpipe, chunks: 2}", "{type: pipedream_flush, chunks: 2}"))
    tied, untied = p.cfg(f"{s}-lm-tied", lm.replace("TIE", "true")), p.cfg(f"{s}-lm-untied", lm.replace("TIE", "false"))
    p.expect_ok(s, "valid/tied-lm-2-stages", ["simulate", tied, "--device-flops", "10"])
    p.expect_ok(s, "valid/tied-lm-interleaved", ["simulate", tied, "--device-flops", "10", "--schemes",
                                                 "interleaved_1f1b:virtual_stages=2:stages=4"])
    (rc1, a), (rc2, b) = (p.exe(["simulate", f, "--device-flops", "10"]) for f in (tied, untied))
    got = (bytes_moved(a, "pipedream_flush"), bytes_moved(b, "pipedream_flush"))
    # The tied weight (1 MiB) sums its two copies' gradients across the stages every step.
    p.note(s, "tied-lm-counts-tied-all-reduce", rc1 or rc2, a + b,
           f"MiB per step tied, untied: {got}" if None in got or got[0] <= got[1] else "")


def probe_plot(p):
    s, src = "plot", finished_run(p, "plot-src")
    for name, (file, column, value) in {  # a value with "1e" (valid) goes into every other row
            "loss-text": ("steps", "loss", "abc"), "loss-empty": ("steps", "loss", ""),
            "loss-nan": ("steps", "loss", "nan"),
            "loss-inf": ("steps", "loss", "inf"), "step-text": ("steps", "step", "x"), "lr-text": ("steps", "lr", "fast"),
            "loss-1e300": ("steps", "loss", "1e300"), "loss-minus-1e300": ("steps", "loss", "-1e300"),
            "loss-1e-300": ("steps", "loss", "1e-300"), "step-1e18": ("steps", "step", "1e18"),
            "epochs-test_acc-1e300": ("epochs", "test_acc", "1e300")}.items():
        root, valid = p.path(f"plot/{name}"), "1e" in value
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(src, os.path.join(root, "victim"))
        target = os.path.join(root, "victim", "metrics", file + ".csv")
        lines = open(target).read().splitlines()
        col, rows = lines[0].split(",").index(column), [l.split(",") for l in lines[1:]]
        for k, r in enumerate(rows):
            r[col] = value if not valid or k % 2 else r[col]
        open(target, "w").write("\n".join([lines[0]] + [",".join(r) for r in rows]) + "\n")
        svg = p.path(f"plot/{name}.svg")
        rc, out = p.exe(["plot", root, "--x", "epoch" if file == "epochs" else "step", "--metric",
                         column if column in ("lr", "test_acc") else "loss", "--out", svg])
        ticks = re.findall(r"<text[^>]*>([^<]*)</text>", open(svg).read()) if rc == 0 and os.path.exists(svg) else []
        long = [t for t in ticks if len(re.sub(r"[^0-9]", "", t)) >= 20]
        if valid:
            p.note(s, name, rc, out, f"a tick of {len(long[0])} characters" if long else "")
        elif rc == 0:
            p.record(s, name, "clear" if "victim" in out and re.search(r"skip|warning|Note:", out) else "silent", out)
        else:
            p.record(s, name, judge(rc, out, [file, "victim"], True), out)


def same_weights(a, b):
    code = ("import sys, torch\nx, y = (torch.load(f, weights_only=True) for f in sys.argv[1:])\n"
            "bad = sorted(k for k in set(x) | set(y) if k not in x or k not in y or not torch.equal(x[k], y[k]))\n"
            "print(', '.join(bad[:3]) if bad else 'same')\n")
    r = subprocess.run([sys.executable, "-c", code, a, b], capture_output=True, text=True)
    if r.returncode:
        return "same" if open(a, "rb").read() == open(b, "rb").read() else "bytes differ"
    return r.stdout.strip()


RESUME_CASES = """
replicas2-topk-ef             2  gpipe      gradients: {type: topk, fraction: 0.25, error_feedback: ef}
replicas2-topk-ef21           2  gpipe      gradients: {type: topk, fraction: 0.25, error_feedback: ef21}
replicas2-aq_sgd              2  gpipe      activations: {type: aq_sgd, bits: 4}
replicas3-topk-ef             3  gpipe      gradients: {type: topk, fraction: 0.25, error_feedback: ef}
replicas2-async-topk-ef       2  async      gradients: {type: topk, fraction: 0.25, error_feedback: ef}
pipedream-2-1-topk        [2,1]  pipedream  activations: {type: topk, fraction: 0.25, error_feedback: ef}
control-replicas2-no-codec    2  gpipe      -
control-one-pipeline-topk-ef  1  gpipe      gradients: {type: topk, fraction: 0.25, error_feedback: ef}
"""  # name, partition.replicas, scheme (gpipe: with 2 chunks), compression (-: none); 2 stages, 3 epochs


def probe_resume(p):
    s = "resume"
    base = BASE.replace("samples: 64", "samples: 256").replace("epochs: 1", "epochs: 3").replace("lr: 0.1}",
                                                                                               "lr: 0.1, momentum: 0.9}")
    for line in RESUME_CASES.strip().splitlines():
        name, replicas, scheme, codec = line.split(None, 3)
        f = p.cfg(f"{s}-{name}", base.replace("{stages: 2}", f"{{stages: 2, replicas: {replicas}}}").replace(
            "gpipe, chunks: 2", "gpipe, chunks: 2" if scheme == "gpipe" else scheme)
                  + (f"compression: {{{codec}}}\n" if codec != "-" else ""))
        for how in ("stop-after", "kill-9") if name == "replicas2-topk-ef" else ("stop-after",):
            slow = ["--set", "dataset.samples=4096"] if how == "kill-9" else []
            whole, cut = p.path(f"runs/{s}-{name}-{how}-whole"), p.path(f"runs/{s}-{name}-{how}-cut")
            for d in (whole, cut):
                shutil.rmtree(d, ignore_errors=True)
            rc, out = p.exe(["run", f, "--quiet", "--set", f"run.output={whole}"] + slow)
            if rc != 0:
                p.note(s, f"{name}/{how}", rc, out)
                continue
            if how == "stop-after":
                p.exe(["run", f, "--quiet", "--stop-after", "1", "--set", f"run.output={cut}"])
            else:  # SIGKILL as soon as the first epoch's state is saved
                p.exe(["run", f, "--quiet", "--set", f"run.output={cut}"] + slow,
                      watch=lambda pid: os.path.exists(f"{cut}/checkpoints/state.pt"))
            rc, out = p.exe(["run", f, "--quiet", "--resume", "--set", f"run.output={cut}"] + slow)
            weights = same_weights(f"{whole}/checkpoints/final.pt", f"{cut}/checkpoints/final.pt") if rc == 0 else "same"
            steps = rc != 0 or open(f"{whole}/metrics/steps.csv").read() == open(f"{cut}/metrics/steps.csv").read()
            p.note(s, f"{name}/{how}", rc, out, "" if weights == "same" and steps else
                   f"final.pt against the uninterrupted run: {weights}; steps.csv {'same' if steps else 'differs'}")


def probe_paths(p):
    s = "paths"
    for name, (key, value, looped) in {  # name: (key, value with LOOP for the looping path, the loop's name)
            "init-pt-loop": ("init.from", "LOOP", "a.pt"),
            "init-safetensors-loop": ("init.from", "LOOP", "b.safetensors"),
            "model-file-loop": ("model", "{type: torchscript, file: LOOP}", "model.pt"),
            "tensors-path-loop": ("dataset", "{type: tensors, path: LOOP}", "data.pt"),
            "glue-path-loop": ("dataset", "{type: glue, task: rte, path: LOOP}", "glue-dir"),
            "image-path-loop": ("dataset", "{type: image_folder, path: LOOP}", "image-dir"),
            "scheme-file-loop": ("scheme", "{type: custom, file: LOOP}", "s.sched"),
            "data_dir-loop": ("run.data_dir", "LOOP", "data-dir"),
            "output-loop": ("run.output", "LOOP/x", "output-dir")}.items():
        extra = ["--set", "dataset={type: mnist}"] if name == "data_dir-loop" else []
        value = value.replace("LOOP", p.plant("loops/" + looped))
        p.bad(s, name, BASE, ["--set", f"{key}={value}"] + extra, [looped], LOOP_MUST)
    glue = p.write("paths/glue/dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")[:-len("dev.tsv")]
    if not os.path.lexists(f"{glue}train.tsv"):
        os.symlink("train.tsv", f"{glue}train.tsv")
    p.bad(s, "glue-train-tsv-loop", BASE, ["--set", f"dataset={{type: glue, task: rte, path: {glue}}}"], ["train.tsv"],
          LOOP_MUST)
    base = p.cfg(f"{s}-base", BASE)
    p.expect_error(s, "costs-loop", ["simulate", base, "--costs", p.plant("loops/costs.yaml")], ["costs.yaml"],
                   must=LOOP_MUST)
    aq = p.codec_cache(s, {"codec_cache-loop": lambda c: os.symlink("codec_cache", c),
                           "codec_cache-dangling": lambda c: os.symlink("nowhere/cache", c)})
    for name, cfg, out in (("output-under-file", base, f"{base}/x"), ("output-is-file", base, base),
                           ("output-under-dev-null", base, "/dev/null/x"), ("output-under-file-aq_sgd", aq, f"{base}/o")):
        p.expect_error(s, name, ["run", cfg, "--quiet", "--set", f"run.output={out}"], ["run.output"])
