"""The torch adapters equal the NumPy golden model bit for bit (zero tolerance).

Every format x axis x dtype through :func:`sim.rl.torch_quant.fake_quantize`, every format x
ResQ mode through :func:`sim.rl.torch_quant.resq_corrected`, the torch-native BF16 path on
special float32 bit patterns, and the straight-through gradient.
"""

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sim.formats import fake_quantize as golden_fq          # noqa: E402
from sim.rl.torch_quant import (FORMATS, RESQ_MODES, fake_quantize, from_numpy,  # noqa: E402
                                quantize_tensor, resq_corrected, to_numpy)

DTYPES = {
    "float16": (np.float16, torch.float16),
    "bfloat16": (ml_dtypes.bfloat16, torch.bfloat16),
    "float32": (np.float32, torch.float32),
    "float64": (np.float64, torch.float64),
}


def _data(np_dtype, shape=(5, 70, 3), seed=0, specials=True):
    """Heavy-tailed data over many binades, with zeros, ties-prone values and specials."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 8, shape))
    x.flat[::17] = 0.0
    x.flat[5::23] = -0.0
    x.flat[7::29] = 0.25 + rng.integers(0, 8, x.flat[7::29].shape) * 0.5
    x[0] = rng.standard_normal(shape[1:]) * 1e-30           # underflow-heavy slice
    x[3] *= 1e4                                               # an outlier slice
    x = x.astype(np_dtype)
    if specials:
        x[(1, 3, 1)[:x.ndim]] = np.nan
        x[(2, 64, 2)[:x.ndim]] = np.inf
    return x


def _bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _same(torch_out, golden_out):
    got = to_numpy(torch_out)
    assert got.dtype == golden_out.dtype
    assert got.shape == golden_out.shape
    assert np.array_equal(_bits(got), _bits(golden_out))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_fake_quantize_bit_identical(fmt, dtype):
    np_dtype, torch_dtype = DTYPES[dtype]
    x = _data(np_dtype)
    t = from_numpy(x)
    assert t.dtype == torch_dtype
    for axis in (0, 1, 2, -1):
        _same(fake_quantize(t, fmt, axis=axis), golden_fq(x, fmt, axis=axis))
    if fmt == "nvfp4":
        _same(fake_quantize(t, fmt, axis=1, tensor_scale=False),
              golden_fq(x, fmt, axis=1, tensor_scale=False))


@pytest.mark.parametrize("mode", RESQ_MODES)
@pytest.mark.parametrize("fmt", ["hif4", "mxfp4", "nvfp4"])
def test_resq_corrected_bit_identical(fmt, mode):
    from sim.formats.resq import resq

    for dtype, seed in (("float32", 1), ("bfloat16", 2)):
        np_dtype, _ = DTYPES[dtype]
        x = _data(np_dtype, shape=(40, 130), seed=seed, specials=False)
        for axis in (-1, 0):
            want = resq(x, fmt, mode, axis=axis).corrected()
            _same(resq_corrected(from_numpy(x), fmt, mode, axis=axis), want)


def test_bf16_fast_path_special_bits():
    """float32 -> BF16 in torch equals the golden model on edge bit patterns."""
    rng = np.random.default_rng(3)
    edges = np.array([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x00008000, 0x00018000,
                      0x00007FFF, 0x007FFFFF, 0x00800000, 0x3F808000, 0x3F818000, 0x3F80FFFF,
                      0x7F7F7FFF, 0x7F7F8000, 0xFF7F8000, 0x7F800000, 0xFF800000, 0x7F800001,
                      0x7FC00000, 0xFFC00001, 0x7FFFFFFF], dtype=np.uint32)
    bits = np.concatenate([edges, rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64)
                           .astype(np.uint32), np.arange(0, 1 << 17, dtype=np.uint32)])
    x = bits.view(np.float32)
    got = quantize_tensor(torch.from_numpy(x.copy()), "bf16").numpy()
    assert np.array_equal(_bits(got), _bits(golden_fq(x, "bf16")))


@pytest.mark.parametrize("fmt", ["hif4", "nvfp4"])
def test_straight_through_gradient(fmt):
    x = torch.randn(4, 64, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, 64, dtype=torch.float64)
    fake_quantize(x, fmt).backward(g)
    assert torch.equal(x.grad, g)
    x.grad = None
    resq_corrected(x, fmt, "2:4").backward(g)
    assert torch.equal(x.grad, g)


def test_bad_arguments():
    with pytest.raises(ValueError, match="format must be one of"):
        fake_quantize(torch.zeros(4), "fp4")
    with pytest.raises(ValueError, match="dtype must be one of"):
        fake_quantize(torch.zeros(4, dtype=torch.int32), "hif4")
    with pytest.raises(ValueError, match="ResQ mode must be one of"):
        resq_corrected(torch.zeros(4), "hif4", "3:4")
