"""Quantizer throughput benchmark and the Gaussian MSE comparison of the HiF4 paper.

Used by ``hif4 bench quantize`` (which ``benchmarks/bench_quantize.py`` runs). Throughput
is a measurement printed beside baselines taken in the same run (``numpy.copy`` and
ml_dtypes' ``float4_e2m1fn`` cast of the same array), never a pass/fail check; the MSE ratios
are a correctness check (``tests/sim/formats/test_formats_mse.py``).
"""

import os
import time

import numpy as np

from hif4spec.formats import FORMATS

from .tensor import fake_quantize, quantize

__all__ = ["gaussian_mse", "gaussian_mse_ratios", "throughput", "format_report", "pin_one_core"]

#: sigma = 0.01 * 2^k for these k (HiF4 paper, Gaussian comparison).
SIGMA_EXPONENTS = tuple(range(3, 17))
#: The format the paper's MSE ratios divide by, and the ratio it publishes per format.
PAPER_BASELINE = "hif4"
PAPER_RATIOS = {"nvfp4": 1.32, "mxfp4": 1.89}


def gaussian_mse(fmt, sigma, rows=512, cols=256, seed=0):
    """MSE of ``fmt`` fake quantization of ``rows x cols`` N(0, sigma^2) float32 samples,
    groups along axis 0 (NVFP4 without tensor scale)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * sigma).astype(np.float32)
    opts = {o: False for o in FORMATS[fmt].options if o == "tensor_scale"}
    y = fake_quantize(x, fmt, axis=0, **opts)
    d = y.astype(np.float64) - x.astype(np.float64)
    return float(np.mean(d * d))


def gaussian_mse_ratios(seed=0, rows=512, cols=256, exponents=SIGMA_EXPONENTS):
    """Mean over sigma = 0.01 * 2^k of MSE(f)/MSE(:data:`PAPER_BASELINE`) for each format f
    of :data:`PAPER_RATIOS`, in its order: ``(nvfp4, mxfp4)``.

    The formats see the same samples for each sigma.
    """
    ratios = {f: [] for f in PAPER_RATIOS}
    for i, k in enumerate(exponents):
        sigma = 0.01 * 2.0 ** k
        mse = {f: gaussian_mse(f, sigma, rows, cols, seed + i)
               for f in (PAPER_BASELINE, *PAPER_RATIOS)}
        for f, r in ratios.items():
            r.append(mse[f] / mse[PAPER_BASELINE])
    return tuple(float(np.mean(r)) for r in ratios.values())


def pin_one_core():
    """Restrict this process to one CPU (Linux); returns the CPU or None."""
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    return None


def _best(fn, repeats):
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def throughput(values=1 << 24, formats=("hif4", "mxfp4", "nvfp4", "hif8", "bf16"),
               repeats=3, seed=0, packed=True, progress=None):
    """Time fake quantization (and, with ``packed``, :func:`quantize`) of ``values`` float32
    N(0, 1) samples laid out as rows of 4096 along the last axis.

    Returns a list of rows ``(name, seconds_wall, seconds_cpu)``; the first two rows are the
    baselines ``numpy.copy`` and ``ml_dtypes float4_e2m1fn cast``.
    """
    import ml_dtypes

    cols = 4096 if values % 4096 == 0 else values
    x = np.random.default_rng(seed).standard_normal(values).astype(np.float32)
    x = x.reshape(-1, cols)
    jobs = [("numpy.copy", lambda: np.copy(x)),
            ("ml_dtypes float4_e2m1fn cast", lambda: x.astype(ml_dtypes.float4_e2m1fn))]
    for fmt in formats:
        jobs.append((f"{fmt} fake_quantize", lambda f=fmt: fake_quantize(x, f)))
        if packed:
            jobs.append((f"{fmt} quantize (codes)", lambda f=fmt: quantize(x, f)))
    rows = []
    for i, (name, fn) in enumerate(jobs):
        if progress:
            progress(f"[{i + 1}/{len(jobs)}] {name}")
        wall, cpu = _best(fn, repeats)
        rows.append((name, wall, cpu))
    return rows


def format_report(rows, values):
    """Text table: M values/s (wall and CPU time) and ratios to the two baselines."""
    base_copy, base_cast = rows[0], rows[1]
    out = [f"{values} float32 values, one core; best of the repeats",
           f"{'':34s} {'Mval/s':>9s} {'Mval/s':>9s}  {'x copy':>7s} {'x e2m1':>7s}",
           f"{'':34s} {'(wall)':>9s} {'(cpu)':>9s}  {'(cpu)':>7s} {'(cpu)':>7s}"]
    for name, wall, cpu in rows:
        out.append(f"{name:34s} {values / wall / 1e6:9.1f} {values / max(cpu, 1e-9) / 1e6:9.1f}"
                   f"  {base_copy[2] / max(cpu, 1e-9):7.3f} {base_cast[2] / max(cpu, 1e-9):7.3f}")
    return "\n".join(out)
