"""Bit-true GEMM speed: the exact NumPy path of :func:`sim.dot.gemm`, its torch backend
(the same words) and a plain float32 matmul of the dequantized tensors, in one run.

    .venv/bin/python benchmarks/bench_gemm.py [--shape 256 4096 256] [--fmt hif4 ...]
        [--residual none] [--exact-shape M K N] [--repeat 3] [--device cpu] [--threads N]

The exact path is timed once on ``--exact-shape`` (default: the full shape) and, when that
is smaller, extrapolated linearly in M*K*N (the path is linear in each dimension beyond a
few rows); the report says which. The torch backend's words are checked against the exact
path's on the exact shape. Times are the best of ``--repeat`` runs.
"""

import argparse
import time

import numpy as np
import torch

from sim.dot import gemm
from sim.formats import quantize
from sim.formats.resq import resq


def operands(fmt, M, K, N, residual, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((N, K)).astype(np.float32)
    wq = quantize(w, fmt, axis=1)
    if residual == "none":
        return quantize(a, fmt, axis=1), wq, None
    out = resq(a, fmt, residual, axis=1)
    return out.main, wq, out


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", type=int, nargs=3, default=(256, 4096, 256),
                    metavar=("M", "K", "N"))
    ap.add_argument("--exact-shape", type=int, nargs=3, metavar=("M", "K", "N"),
                    help="time the exact path here and extrapolate (default: --shape)")
    ap.add_argument("--fmt", nargs="+", default=["hif4", "mxfp4", "nvfp4"])
    ap.add_argument("--residual", default="none", help="none, 2:4 or dense (hif4, mxfp4)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    M, K, N = args.shape
    em, ek, en = args.exact_shape or args.shape
    macs, emacs = M * K * N, em * ek * en
    print(f"shape {M}x{K}x{N}, residual {args.residual}, device {args.device}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"{'fmt':6} {'exact s':>9} {'torch s':>9} {'f32 mm s':>9} {'torch/exact':>12} "
          f"{'torch GMAC/s':>13} {'exact':>7}")
    for fmt in args.fmt:
        aq, wq, r = operands(fmt, M, K, N, args.residual)
        ea, ew, er = operands(fmt, em, ek, en, args.residual, seed=1)
        t = time.perf_counter()
        want = gemm(ea, ew, er)
        t_exact = (time.perf_counter() - t) * macs / emacs
        got = gemm(ea, ew, er, backend="torch", device=args.device)
        if not np.array_equal(got, want):
            raise SystemExit(f"{fmt}: torch backend differs from the exact path")
        gemm(aq, wq, r, backend="torch", device=args.device)             # warm up
        t_torch = best(lambda: gemm(aq, wq, r, backend="torch", device=args.device),
                       args.repeat)
        x = torch.from_numpy(np.ascontiguousarray(aq.dequantize(), np.float32))
        y = torch.from_numpy(np.ascontiguousarray(wq.dequantize(), np.float32))
        x, y = x.to(args.device), y.to(args.device)
        t_mm = best(lambda: (x @ y.T).cpu(), args.repeat)
        how = "timed" if (em, ek, en) == (M, K, N) else "extrap"
        print(f"{fmt:6} {t_exact:9.3f} {t_torch:9.4f} {t_mm:9.4f} {t_exact / t_torch:11.0f}x "
              f"{macs / t_torch / 1e9:13.2f} {how:>7}", flush=True)


if __name__ == "__main__":
    main()
