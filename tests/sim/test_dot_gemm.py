"""GEMM over packed matrices (spec section 7) against an exact Fraction reference built from
the decoded tensors, and against run_steps."""

from fractions import Fraction as F

import numpy as np
import pytest

from conftest import rne_f32, word_value
from sim.dot import bits_f32, gemm, gemm_float, run_steps, scale_result
from sim.formats import quantize
from sim.formats.resq import pack_24, resq

NAN = 0x7FC00000
PINF = 0x7F800000


def unit_values(qt):
    """Decoded values (float64, exact), K padded with zeros to whole 64-element steps."""
    v = qt.decoded()
    k = v.shape[1]
    kp = -(-k // 64) * 64
    out = np.zeros((v.shape[0], kp))
    out[:, :k] = v
    return out


def ref_gemm(a_qt, w_qt, r_vals=None):
    av, wv = unit_values(a_qt), unit_values(w_qt)      # NVFP4: T removed below, exactly
    M, N = av.shape[0], wv.shape[0]
    K = av.shape[1]
    out = np.zeros((M, N), np.uint32)
    ta = F(float(a_qt.fields["tensor_scale"])) if a_qt.fmt == "nvfp4" else F(1)
    tw = F(float(w_qt.fields["tensor_scale"])) if a_qt.fmt == "nvfp4" else F(1)
    for m in range(M):
        for n in range(N):
            acc = 0
            for k0 in range(0, K, 64):
                sl = slice(k0, min(K, k0 + 64))
                xs = list(av[m, sl]) + ([] if r_vals is None else list(r_vals[m, sl]))
                ys = list(wv[n, sl]) * (1 if r_vals is None else 2)
                if any(np.isnan(x) for x in xs) or any(np.isnan(y) for y in ys):
                    acc = NAN
                    continue
                v = sum((F(float(x)) * F(float(y)) for x, y in zip(xs, ys)), F(0)) / (ta * tw)
                if (acc & 0x7FFFFFFF) >= PINF:
                    continue
                s = word_value(acc) + v
                acc = 0 if s == 0 else rne_f32(s)
            out[m, n] = acc
    return out


def operands(fmt, M, N, K, seed, spread=4):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)) * 2.0 ** rng.integers(-spread, spread + 1, (M, 1))
    w = rng.standard_normal((N, K)) * 2.0 ** rng.integers(-spread, spread + 1, (1, K))
    return a.astype(np.float32), w.astype(np.float32)


@pytest.mark.parametrize("fmt", ["hif4", "mxfp4", "nvfp4"])
@pytest.mark.parametrize("K", [64, 200])
def test_gemm_matches_fraction_reference(fmt, K):
    a, w = operands(fmt, 4, 5, K, seed=K)
    a[1, 7] = np.nan                                      # a NaN block in row 1
    aq, wq = quantize(a, fmt, axis=1), quantize(w, fmt, axis=1)
    got = gemm(aq, wq)
    want = ref_gemm(aq, wq)
    assert np.array_equal(got, want)
    assert (got[1] == NAN).all()


@pytest.mark.parametrize("fmt", ["hif4", "mxfp4", "nvfp4"])
def test_gemm_equals_run_steps_per_cell(fmt):
    a, w = operands(fmt, 6, 3, 320, seed=1, spread=30)
    aq, wq = quantize(a, fmt, axis=1), quantize(w, fmt, axis=1)
    got = gemm(aq, wq, row_chunk=4)                       # several row passes
    nblk = {"hif4": 1, "mxfp4": 2, "nvfp4": 4}[fmt]
    ns = 320 // 64
    for m in range(6):
        for n in range(3):
            def steps(qt, row):
                f = {k: v[row] for k, v in qt.fields.items() if k != "tensor_scale"}
                if fmt == "hif4":
                    return f
                return {"elem": f["elem"].reshape(ns, nblk, -1),
                        "scale": f["scale"].reshape(ns, nblk)}
            first = np.zeros(ns, bool)
            first[0] = True
            words = run_steps(fmt, steps(aq, m), steps(wq, n), first)
            assert words[-1] == got[m, n]


def test_gemm_with_resq_residuals():
    a, w = operands("hif4", 3, 4, 190, seed=2)
    wq = quantize(w, "hif4", axis=1)
    for mode in ("2:4", "dense", "channel50"):
        out = resq(a, "hif4", mode, axis=1)
        got = gemm(out.main, wq, out)
        want = ref_gemm(out.main, wq, unit_values(out.residual))
        assert np.array_equal(got, want), mode
        assert np.array_equal(gemm(out.main, wq, out.residual), got)
        if mode == "2:4":
            assert np.array_equal(gemm(out.main, wq, pack_24(out)), got)
    out = resq(a, "mxfp4", "dense", axis=1)
    wq = quantize(w, "mxfp4", axis=1)
    got = gemm(out.main, wq, out)
    assert np.array_equal(got, ref_gemm(out.main, wq, unit_values(out.residual)))
    with pytest.raises(ValueError, match="no residual"):
        gemm(*(quantize(x, "nvfp4", axis=1) for x in (a, w)), r=quantize(a, "nvfp4", axis=1))


def test_gemm_wide_scales_overflow_and_cancellation():
    # MXFP4 rows 2**+-120 apart: products reach 2**-240 and 2**+240 (overflow to Inf)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 128))
    a[0] *= 2.0 ** 120
    a[1] *= 2.0 ** -120
    a[2, 64:] = -a[2, :64]                                  # step 2 cancels step 1 exactly
    w = np.ones((3, 128))
    w[1] *= 2.0 ** 120
    w[2] *= 2.0 ** -120
    aq, wq = quantize(a, "mxfp4", axis=1), quantize(w, "mxfp4", axis=1)
    got = gemm(aq, wq)
    assert np.array_equal(got, ref_gemm(aq, wq))
    assert (got[0, 1] & 0x7FFFFFFF) == PINF
    assert got[2, 0] == 0 and got[2, 1] == 0                 # exact cancellation: +0


def test_nvfp4_scaled_result():
    a, w = operands("nvfp4", 5, 4, 96, seed=3, spread=10)
    aq, wq = quantize(a, "nvfp4", axis=1), quantize(w, "nvfp4", axis=1)
    acc = gemm(aq, wq)
    y = gemm(aq, wq, scaled=True)
    ta, tw = F(float(aq.fields["tensor_scale"])), F(float(wq.fields["tensor_scale"]))
    for m in range(5):
        for n in range(4):
            p = word_value(int(acc[m, n])) * ta * tw
            assert y[m, n] == (0 if p == 0 else rne_f32(p))
    assert np.array_equal(gemm_float(aq, wq, scaled=True), bits_f32(y))
    # specials and signed zeros
    words = np.array([0, 0x80000000, PINF, 0xFF800000, NAN, 0x7F7FFFFF, 1, 0x80000001],
                     np.uint32)
    out = scale_result(words, np.float32(2.0 ** -100), np.float32(3.0))
    assert out[:5].tolist() == [0, 0x80000000, PINF, 0xFF800000, NAN]
    assert out[5] == rne_f32(word_value(0x7F7FFFFF) * F(3) * F(2) ** -100)
    assert out[6] == 0 and out[7] == 0x80000000            # underflow keeps the sign
    big = scale_result(np.array([0x7F7FFFFF], np.uint32), np.float32(2.0 ** 100), 1.0)
    assert big[0] == PINF


def test_gemm_rejects_mismatches():
    a, w = operands("hif4", 2, 2, 64, seed=0)
    with pytest.raises(ValueError, match="same K"):
        gemm(quantize(a, "hif4", axis=1), quantize(w[:, :32], "hif4", axis=1))
    with pytest.raises(ValueError, match="gemm needs"):
        gemm(quantize(a, "hif4", axis=1), quantize(w, "mxfp4", axis=1))
    with pytest.raises(ValueError, match="quantized along axis 1"):
        gemm(quantize(a, "hif4", axis=0), quantize(w, "hif4", axis=0))
