#!/usr/bin/env python3
"""Throughput of the torch quantizers (:mod:`sim.rl.torch_quant`) beside the NumPy path and
ml_dtypes' E2M1 cast, measured in the same run.

For each format, values per second of fake quantization of a float32 tensor along its last
axis (rows of 1024):

- ``torch``: :func:`sim.rl.torch_quant.quantize_tensor` on the tensor's device;
- ``numpy path``: what the adapter did before, a host round trip through the golden model
  (``to_numpy`` -> :func:`sim.formats.fake_quantize` -> ``from_numpy``, back to the device);
- ``e2m1 cast``: ``float32 -> ml_dtypes.float4_e2m1fn`` with NumPy's ``astype`` on the host,
  a bare element cast with no scales (a floor for what an FP4 quantizer costs on the CPU).

Each figure is the median of ``--repeats`` timed runs after one warm-up run; ratios are
torch over the other two. ``--device all`` measures the CPU and, when torch sees one, the
GPU. ``--threads`` sets torch's intra-op threads (NumPy's kernels here are single-threaded).

Run ``python benchmarks/bench_torch_quant.py --help``.
"""

import argparse
import statistics
import sys
import time

import ml_dtypes
import numpy as np
import torch

from sim.rl.torch_quant import (fake_quantize_np, from_numpy, quantize_tensor, resq_np,
                                resq_parts, to_numpy)

CASES = (
    ("hif4", "hif4", {}),
    ("mxfp4", "mxfp4", {}),
    ("nvfp4", "nvfp4", {}),
    ("nvfp4 (no T)", "nvfp4", {"tensor_scale": False}),
    ("hif8", "hif8", {}),
    ("bf16", "bf16", {}),
)
RESQ_CASES = (("hif4 + ResQ 2:4", "hif4", "2:4"), ("hif4 + ResQ dense", "hif4", "dense"))


def _median_seconds(fn, repeats, sync):
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _numpy_path(t, fmt, options):
    return from_numpy(fake_quantize_np(to_numpy(t), fmt, -1, **options), t.device)


def _numpy_resq_path(t, fmt, mode):
    return from_numpy(resq_np(to_numpy(t), fmt, mode, -1).corrected(), t.device)


def measure(device, n, repeats, resq):
    """Rows (label, torch values/s, numpy-path values/s) on ``device``, and the E2M1 cast's
    values/s."""
    rng = np.random.default_rng(0)
    host = rng.standard_normal((n // 1024, 1024)).astype(np.float32)
    t = torch.from_numpy(host).to(device)
    sync = torch.cuda.synchronize if t.device.type == "cuda" else (lambda: None)
    values = host.size
    rows = []
    for label, fmt, options in CASES:
        tt = _median_seconds(lambda: quantize_tensor(t, fmt, -1, **options), repeats, sync)
        tn = _median_seconds(lambda: _numpy_path(t, fmt, options), repeats, sync)
        rows.append((label, values / tt, values / tn))
    if resq:
        for label, fmt, mode in RESQ_CASES:
            tt = _median_seconds(lambda: resq_parts(t, fmt, mode, -1), repeats, sync)
            tn = _median_seconds(lambda: _numpy_resq_path(t, fmt, mode), repeats, sync)
            rows.append((label, values / tt, values / tn))
    cast = _median_seconds(lambda: host.astype(ml_dtypes.float4_e2m1fn), repeats,
                           lambda: None)
    return rows, values / cast


def table(device, n, rows, cast_rate, threads, repeats):
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    lines = [
        f"{name}: {n} float32 values (rows of 1024, quantized along them), torch threads "
        f"{threads}, median of {repeats}; values/s in millions",
        f"{'format':<18} {'torch':>9} {'numpy path':>11} {'e2m1 cast':>10} "
        f"{'torch/numpy':>12} {'torch/cast':>11}",
    ]
    for label, rate_t, rate_n in rows:
        lines.append(f"{label:<18} {rate_t / 1e6:>9.1f} {rate_n / 1e6:>11.1f} "
                     f"{cast_rate / 1e6:>10.1f} {rate_t / rate_n:>12.2f} "
                     f"{rate_t / cast_rate:>11.2f}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1 << 22,
                        help="values per run, a multiple of 1024 (default 4194304)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs (default 5)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1)")
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default="all",
                        help="where the torch tensor lives (default: all available)")
    parser.add_argument("--resq", action="store_true",
                        help="also time HiF4 with Rollout-ResQ (2:4 and dense)")
    args = parser.parse_args(argv)
    if args.n <= 0 or args.n % 1024:
        parser.error(f"--n must be a positive multiple of 1024, not {args.n}")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    torch.set_num_threads(args.threads)
    devices = ["cpu"] if args.device == "cpu" else ["cuda"] if args.device == "cuda" else \
        ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if "cuda" in devices and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    for device in devices:
        rows, cast_rate = measure(device, args.n, args.repeats, args.resq)
        print(table(device, args.n, rows, cast_rate, args.threads, args.repeats))
        print()
    if "cuda" not in devices:
        print("GPU: not measured (torch sees no CUDA device)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
