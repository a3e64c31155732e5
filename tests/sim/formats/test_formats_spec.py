"""The vectorized golden model against the plain spec reference, bit for bit.

``spec_reference`` follows docs/formats.md step by step with Python floats, one group at a
time; these tests feed both the same adversarial tensors and compare with zero tolerance.
"""

import ml_dtypes
import numpy as np
import pytest

import spec_reference as ref
from formats_inputs import (bits_equal, block_tie_groups, first_difference, hif4_tie_groups,
                            wide_groups)
from sim.formats import fake_quantize, quantize


def _check(x, fmt, axis=-1, **options):
    """Model vs reference: exact float64 values, then the rounding to the input dtype."""
    want = ref.fake_quantize_ref(x, fmt, axis=axis, **options)
    qt = quantize(x, fmt, axis=axis, **options)
    got = qt.decoded()
    assert bits_equal(got, want), (fmt, first_difference(got, want))
    fq = fake_quantize(x, fmt, axis=axis, **options)
    assert fq.dtype == x.dtype and fq.shape == x.shape
    assert bits_equal(fq, qt.dequantize())
    rounder = {np.dtype(np.float64): float, np.dtype(np.float32): ref.to_float32,
               np.dtype(np.float16): ref.to_float16,
               np.dtype(ml_dtypes.bfloat16): ref.bf16}[x.dtype]
    want_dt = np.array([rounder(float(v)) for v in want.ravel()]).astype(x.dtype)
    assert bits_equal(fq.ravel(), want_dt), (fmt, first_difference(fq, want_dt))


@pytest.mark.parametrize("seed", range(3))
def test_hif4_wide_random(seed):
    rng = np.random.default_rng(seed)
    _check(wide_groups(rng, 300, 64).reshape(30, 640), "hif4")


@pytest.mark.parametrize("seed", range(3))
def test_hif4_ties_and_y_plus_half(seed):
    rng = np.random.default_rng(100 + seed)
    x = hif4_tie_groups(rng, 400)
    _check(x, "hif4")
    # The float64 step t = y + 0.5 must be taken as written: with S a power of two,
    # y = 0.5 - 2^-54 gives t = 1.0 (k = 1) where exact rounding would give k = 0.
    x = np.zeros(64)
    x[0] = 7.0                                   # S = 1.0, REC = 1, b = 1, c = 1 here
    qt = quantize(x, "hif4")
    assert qt.fields["scale"][0] == 48 << 2 and qt.fields["l2"][0, 0] == 1
    x[1] = 0.5 - 2.0 ** -54                      # y = a * 2^(2 - b - c) = a
    qt = quantize(x, "hif4")
    assert qt.fields["l3"][0, 0] == 1
    assert qt.fields["elem"][0, 1] == 1
    _check(x, "hif4")


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("seed", range(3))
def test_block_formats_ties_and_powers_of_two(fmt, seed):
    rng = np.random.default_rng(200 + seed)
    x = block_tie_groups(rng, 600, fmt, tensor_scale=False)
    opts = {"tensor_scale": False} if fmt == "nvfp4" else {}
    _check(x.reshape(-1, 96), fmt, **opts)


@pytest.mark.parametrize("seed", range(3))
def test_nvfp4_with_tensor_scale(seed):
    rng = np.random.default_rng(300 + seed)
    x = block_tie_groups(rng, 400, "nvfp4", tensor_scale=True)
    _check(x.reshape(-1, 80), "nvfp4")
    _check(wide_groups(rng, 100, 16, lo=-30, hi=0).reshape(-1, 160), "nvfp4")


@pytest.mark.parametrize("fmt", ["hif8", "bf16"])
def test_elementwise_wide(fmt):
    rng = np.random.default_rng(7)
    x = wide_groups(rng, 200, 64, lo=-140, hi=130).ravel()
    x = np.concatenate([x, np.ldexp(1.0, np.arange(-30, 20)) * 1.25,
                        np.ldexp(1.0, np.arange(-30, 20)) * 1.0625,
                        [40960.0, np.nextafter(40960.0, 0), 2.0 ** -23,
                         np.nextafter(2.0 ** -23, 0), np.inf, -np.inf, np.nan]])
    _check(x, fmt)


@pytest.mark.parametrize("fmt", ["hif4", "mxfp4", "nvfp4", "hif8", "bf16"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_dtypes_and_axes(fmt, dtype):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((5, 70, 3)) * np.exp2(rng.integers(-8, 8, (5, 1, 3))))
    x = x.astype(dtype)
    for axis in (0, 1, 2, -1):
        _check(x, fmt, axis=axis)


@pytest.mark.parametrize("fmt", ["hif4", "mxfp4", "nvfp4"])
def test_million_values_against_spec(fmt):
    """>= 10^6 values, magnitudes 2^-60..2^25, zeros, ties (and for HiF4 the y + 0.5 step),
    float32 and float64 values: the model equals the spec reference bit for bit."""
    rng = np.random.default_rng(2024)
    n = 1 << 20
    block = {"hif4": 64, "mxfp4": 32, "nvfp4": 16}[fmt]
    g = n // block
    if fmt == "hif4":
        x = np.concatenate([hif4_tie_groups(rng, g // 2), wide_groups(rng, g - g // 2, 64)])
        opts = {}
    else:
        x = np.concatenate([block_tie_groups(rng, g // 2, fmt, tensor_scale=False),
                            wide_groups(rng, g - g // 2, block)])
        opts = {"tensor_scale": False} if fmt == "nvfp4" else {}
    x = x.reshape(-1, 1024)
    assert x.size >= 10 ** 6
    want = ref.fake_quantize_ref(x, fmt, **opts)
    got = quantize(x, fmt, **opts).decoded()
    assert bits_equal(got, want), (fmt, first_difference(got, want))
    got = fake_quantize(x, fmt, **opts)
    assert bits_equal(got, want), (fmt, first_difference(got, want))
    # float32 inputs (the fast path): a quarter of the rows is enough on top of the above.
    x32 = x[: x.shape[0] // 4].astype(np.float32)
    want = np.array(ref.fake_quantize_ref(x32, fmt, **opts), dtype=np.float32)  # exact
    assert bits_equal(fake_quantize(x32, fmt, **opts), want)


@pytest.mark.parametrize("fmt", ["hif4", "mxfp4", "nvfp4", "hif8", "bf16"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_dtypes_at_their_range_ends(fmt, dtype):
    """Outputs that overflow float16 (HiF4 can reach 1.12 Vmax), land in its subnormals, or
    need the single RNE from the exact value into bfloat16."""
    rng = np.random.default_rng(21)
    info = ml_dtypes.finfo(dtype)
    top = float(info.max)
    tiny = float(info.smallest_subnormal)
    groups = [rng.uniform(0.5, 1.0, (4, 64)) * top,
              rng.uniform(0.0, 64.0, (4, 64)) * tiny,
              np.ldexp(1 + rng.random((4, 64)), rng.integers(-26, -10, (4, 64))),
              rng.standard_normal((4, 64)) * 1000]
    x = (np.concatenate(groups) * rng.choice([-1.0, 1.0], (16, 64))).astype(dtype)
    _check(x, fmt)
