#!/usr/bin/env python3
"""The GPU checks of the RL path in one script, sized to finish well inside 10 minutes on
one H100 (``--tiny``: the same code path on the CPU in about a minute or two, for a test).

In order, each step printing what it measured:

1. ``pytest -m cuda tests/sim/rl/test_torch_quant.py``: the torch quantizers on the GPU
   bit-identical to the golden model (skipped with ``--tiny``);
2. ``benchmarks/bench_torch_quant.py --device cuda``: their throughput against the NumPy
   path (skipped with ``--tiny``);
3. the quantizers eager against ``torch.compile`` on the shapes of the run (Linear inputs
   of K = 576 and 1536, the rows of one decode step and of one training batch), HiF4,
   MXFP4, NVFP4 and HiF4 + ResQ 2:4: seconds per call each, the ratio, and whether the
   compiled results equal the eager ones bit for bit (a mismatch fails the script);
4. ``hif4 rl --model smollm2`` on ``--device``: HiF4 W4A4 rollouts with float32 training
   (and all-HiF4 with ``--all-fp4``), larger batches and longer generations than the CPU
   runs, once eager and once with ``--compile``; mean seconds per step each and the ratio.

Prints a summary table at the end and writes it as JSON with ``--json``. Run
``python -P benchmarks/rl_gpu.py --help``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
HIF4 = [sys.executable, "-P", "-m", "sim.cli"]

#: Sizes of step 4: (prompts, group, max_tokens, steps) on the GPU and with --tiny.
RL_SIZES = {"gpu": (16, 8, 64, 4), "tiny": (2, 2, 3, 2)}
#: Rows of step 3 (decode step of the GPU run's 128 sequences, a training batch).
ROWS = {"gpu": (128, 128 * 96), "tiny": (4, 64)}


def _say(text):
    print(text, flush=True)


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def _seconds(fn, device, repeats):
    fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def compiled_vs_eager(device, rows, repeats=5):
    """Step 3: per case and shape, eager and compiled seconds and bit-equality."""
    from sim.rl.torch_quant import quantize_tensor, resq_parts

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    tq = torch.compile(quantize_tensor, dynamic=True)
    tr = torch.compile(resq_parts, dynamic=True)
    gen = torch.Generator(device="cpu").manual_seed(0)
    out = []
    for m in rows:
        for k in (576, 1536):
            # Gaussian rows with a spread of column scales, as Linear inputs with outliers
            x = (torch.randn(m, k, generator=gen) *
                 torch.logspace(-2, 2, k)[torch.randperm(k, generator=gen)]).to(device)
            cases = [(fmt, lambda f, fmt=fmt: f(x, fmt, -1), quantize_tensor, tq)
                     for fmt in ("hif4", "mxfp4", "nvfp4")]
            cases.append(("hif4+2:4", lambda f: f(x, "hif4", "2:4", -1), resq_parts, tr))
            for name, call, eager, comp in cases:
                t0 = time.perf_counter()
                got = call(comp)
                _sync(device)
                compile_s = time.perf_counter() - t0
                want = call(eager)
                pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
                equal = all(torch.equal(a, b) for a, b in pairs)
                te = _seconds(lambda: call(eager), device, repeats)
                tc = _seconds(lambda: call(comp), device, repeats)
                row = {"case": name, "rows": m, "k": k, "eager_s": te, "compiled_s": tc,
                       "speedup": te / tc, "equal": equal, "first_call_s": compile_s}
                _say(f"  {name:<9} {m:>6} x {k:<5} eager {1e3 * te:8.3f} ms  compiled "
                     f"{1e3 * tc:8.3f} ms  x{te / tc:6.1f}  bit-identical {equal}  (first "
                     f"call {compile_s:.1f} s)")
                out.append(row)
    return out


def rl_runs(device, sizes, all_fp4, folder):
    """Step 4: the same ``hif4 rl`` command eager and with --compile; seconds per step."""
    prompts, group, tokens, steps = sizes
    configs = [("fp32", "hif4")] + ([("hif4", "hif4")] if all_fp4 else [])
    out = []
    for train, rollout in configs:
        per = {}
        for mode in ("eager", "compiled"):
            path = Path(folder) / f"{train}_{rollout}_{mode}.json"
            argv = HIF4 + ["rl", "--model", "smollm2", "--device", device, "--train", train,
                           "--rollout", rollout, "--prompts", str(prompts), "--group",
                           str(group), "--max-tokens", str(tokens), "--steps", str(steps),
                           "--eval-every", str(steps), "--save-every", str(steps),
                           "--run-dir", str(Path(folder) / mode), "--json", str(path)]
            argv += ["--compile"] if mode == "compiled" else []
            argv += ["--quick"] if sizes == RL_SIZES["tiny"] else []      # 4 held-out prompts
            _say("  $ hif4 " + " ".join(argv[len(HIF4):]))
            t = time.perf_counter()
            subprocess.run(argv, cwd=ROOT, check=True)
            wall = time.perf_counter() - t
            (run,) = json.loads(path.read_text())["runs"]
            # the first step carries the compilation: the mean of the others is the rate
            secs = [h["seconds"] for h in run["history"] if "reward" in h]
            later = secs[1:] or secs
            per[mode] = {"step_s": sum(later) / len(later), "first_step_s": secs[0],
                         "wall_s": wall, "abs_log_ratio": run["abs_log_ratio"]}
            _say(f"  {train}/{rollout} {mode}: {per[mode]['step_s']:.2f} s per step after "
                 f"the first ({secs[0]:.1f} s), |log ratio| {run['abs_log_ratio']:.4f}, "
                 f"{wall:.0f} s in all")
        ratio = per["eager"]["step_s"] / per["compiled"]["step_s"]
        _say(f"  {train}/{rollout}: compiled quantizers x{ratio:.2f} per step")
        out.append({"config": f"{train}/{rollout}", "sizes": sizes, **per, "speedup": ratio})
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true",
                        help="CPU, tiny sizes, steps 1-2 skipped: the code path for a test")
    parser.add_argument("--all-fp4", action="store_true",
                        help="step 4 also runs all-HiF4 (HiF4 training too)")
    parser.add_argument("--json", metavar="FILE", help="write the measurements as JSON")
    args = parser.parse_args(argv)
    device = "cpu" if args.tiny else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("torch sees no CUDA device; use --tiny for the CPU code path")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    size = "tiny" if args.tiny else "gpu"
    if args.tiny:
        torch.set_num_threads(1)        # as hif4 rl: more threads thrash on a shared CPU
    t0 = time.perf_counter()
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    _say(f"rl_gpu: {name}, torch {torch.__version__}")
    doc = {"device": name, "torch": torch.__version__}
    if not args.tiny:
        _say("1. torch quantizers on the GPU against the golden model (pytest -m cuda)")
        subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-m", "cuda",
                        "tests/sim/rl/test_torch_quant.py", "-p", "no:cacheprovider"],
                       cwd=ROOT, check=True)
        _say("2. torch quantizer throughput (benchmarks/bench_torch_quant.py --device cuda)")
        subprocess.run([sys.executable, "-P", "benchmarks/bench_torch_quant.py", "--device",
                        "cuda", "--resq"], cwd=ROOT, check=True)
    _say("3. quantizers eager and compiled")
    doc["quantizers"] = compiled_vs_eager(device, ROWS[size], repeats=3 if args.tiny else 20)
    _say("4. hif4 rl --model smollm2, eager and --compile")
    with tempfile.TemporaryDirectory(prefix="rl_gpu-") as folder:
        doc["rl"] = rl_runs(device, RL_SIZES[size], args.all_fp4, folder)
    doc["wall_s"] = time.perf_counter() - t0
    _say(f"rl_gpu: done in {doc['wall_s']:.0f} s")
    bad = [q for q in doc["quantizers"] if not q["equal"]]
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    if bad:
        _say("FAIL: compiled quantizers differ from eager: " + ", ".join(
            f"{q['case']} {q['rows']}x{q['k']}" for q in bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
