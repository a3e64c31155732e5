"""The torch quantizers equal the NumPy golden model bit for bit (zero tolerance).

:mod:`sim.rl.torch_quant` reimplements every format with torch operations; here each result
is compared, as bits, with :func:`sim.formats.fake_quantize` and
:func:`sim.formats.resq.resq`: every format x axis x dtype (float16, bfloat16, float32,
float64) x option, every format x ResQ mode, on heavy-tailed data with ties, zeros, -0.0,
subnormals, all-zero blocks, outliers, NaN (canonical, negative, with payloads) and +-Inf
mixed in, on axes that are not a multiple of the block, on every float16 and bfloat16 bit
pattern, on random float32/float64 bit patterns and on hypothesis-drawn tensors. The code
path that other devices take (no host checks, the loop form of the sequential sums) runs
here too, on the CPU. ``test_cuda_bit_identical`` repeats the comparison on a GPU when torch
sees one.
"""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

# the golden model warns about the NaN and Inf inputs that these tests feed it on purpose
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:overflow encountered:RuntimeWarning")

import sim.rl.torch_quant as tq                                      # noqa: E402
from sim.formats import fake_quantize as golden_fq                   # noqa: E402
from sim.formats.resq import keep_mask as golden_keep_mask           # noqa: E402
from sim.formats.resq import resq as golden_resq                     # noqa: E402
from sim.rl.torch_quant import (FORMATS, RESQ_MODES, fake_quantize, from_numpy,  # noqa: E402
                                quantize_tensor, resq_corrected, resq_parts, to_numpy)

DTYPES = {
    "float16": (np.float16, torch.float16),
    "bfloat16": (ml_dtypes.bfloat16, torch.bfloat16),
    "float32": (np.float32, torch.float32),
    "float64": (np.float64, torch.float64),
}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _options(fmt):
    """Every option set of ``fmt`` (NVFP4 with and without its tensor scale)."""
    return [{}, {"tensor_scale": False}] if fmt == "nvfp4" else [{}]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread: on a loaded 2-core machine torch's thread handoff per operation
    costs milliseconds (results do not depend on it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(params=["cpu", "sync-free"])
def path(request, monkeypatch):
    """Run each test twice: the CPU path, and the path of other devices (no host checks,
    sequential sums as a loop), both on the CPU."""
    if request.param == "sync-free":
        monkeypatch.setattr(tq, "_on_cpu", lambda t: False)
    return request.param


def _bits(a):
    a = np.asarray(a)
    return a.view(_UINT[a.dtype.itemsize])


def _same(torch_out, golden_out, where=""):
    got = to_numpy(torch_out)
    assert got.dtype == golden_out.dtype, where
    assert got.shape == golden_out.shape, where
    diff = np.flatnonzero(_bits(got) != _bits(golden_out))
    assert diff.size == 0, (f"{where}: {diff.size} of {got.size} differ, first at flat "
                            f"{diff[:4]}: {got.flat[diff[:4]]} != {golden_out.flat[diff[:4]]}")


def _nan_patterns(np_dtype):
    """NaN bit patterns of the dtype: canonical, negative, signalling, with payloads."""
    bits = {2: [0x7E00, 0xFE00, 0x7C01, 0xFD05], 4: [0x7FC00000, 0xFFC00000, 0x7F800001,
            0xFFA00005, 0x7FC12345], 8: [0x7FF8000000000000, 0xFFF8000000000000,
            0x7FF0000000000001, 0xFFF4000000000123]}[np.dtype(np_dtype).itemsize]
    if np.dtype(np_dtype).name == "bfloat16":
        bits = [0x7FC0, 0xFFC0, 0x7F81, 0xFFA3]
    return np.array(bits, dtype=_UINT[np.dtype(np_dtype).itemsize]).view(np_dtype)


def _data(np_dtype, shape=(5, 70, 3), seed=0, specials=True):
    """Heavy-tailed data over many binades with adversarial values mixed in.

    Zeros, -0.0, values on the midpoints of the E2M1 / S1P2 / HiF8 grids (ties), the
    dtype's subnormals and largest values, an underflow-heavy slice, an outlier slice, an
    all-zero slice; with ``specials``, NaNs of several bit patterns and +-Inf.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 8, shape))
    flat = x.reshape(-1)
    flat[::17] = 0.0
    flat[5::23] = -0.0
    ties = flat[7::11]
    ties[:] = ((rng.integers(0, 32, ties.shape) + 0.5) * np.exp2(rng.integers(-6, 6, ties.shape))
               * rng.choice([-1.0, 1.0], ties.shape))
    info = ml_dtypes.finfo(np_dtype) if np.dtype(np_dtype).name == "bfloat16" else \
        np.finfo(np_dtype)
    tiny = float(info.smallest_subnormal)
    flat[3::31] = tiny * rng.integers(1, 9, flat[3::31].shape) * rng.choice([-1, 1])
    x[0] = rng.standard_normal(shape[1:]) * 1e-30               # underflow-heavy slice
    x[shape[0] // 2] *= 1e4                                       # an outlier slice
    x[-1, :2] = 0.0                                               # all-zero rows
    if specials:
        flat[13::97] = float(info.max) * rng.choice([-1.0, 1.0, 0.5])
    with np.errstate(over="ignore"):
        x = x.astype(np_dtype)
    if specials:
        nans = _nan_patterns(np_dtype)
        x.reshape(-1)[41::257] = np.resize(nans, x.reshape(-1)[41::257].shape)
        x[tuple(i % n for i, n in zip((2, 64, 2), shape))] = np.inf
        x[tuple(i % n for i, n in zip((1, 9, 0), shape))] = -np.inf
    return x


# --------------------------------------------------------------------------------------
# fake quantization


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_fake_quantize_bit_identical(fmt, dtype, path):
    np_dtype, torch_dtype = DTYPES[dtype]
    for specials in (True, False):
        x = _data(np_dtype, specials=specials, seed=int(specials))
        t = from_numpy(x)
        assert t.dtype == torch_dtype
        for axis in (0, 1, 2, -1):
            for opts in _options(fmt):
                _same(fake_quantize(t, fmt, axis=axis, **opts),
                      golden_fq(x, fmt, axis=axis, **opts), f"axis {axis} {opts}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_16bit_pattern(fmt, dtype):
    """All 65536 bit patterns, in order and shuffled (NaN/Inf in most blocks), and the
    finite ones shuffled into blocks (so that almost every block is quantized)."""
    np_dtype, _ = DTYPES[dtype]
    rng = np.random.default_rng(7)
    every = np.arange(1 << 16, dtype=np.uint16).view(np_dtype)
    finite = rng.permutation(every[np.isfinite(every.astype(np.float32))])
    cases = [every.reshape(256, 256), rng.permutation(every).reshape(256, 256),
             finite[:finite.size // 64 * 64].reshape(-1, 64)]
    for x in cases:
        for axis in (0, 1):
            for opts in _options(fmt):
                _same(quantize_tensor(from_numpy(x), fmt, axis, **opts),
                      golden_fq(x, fmt, axis=axis, **opts), f"axis {axis} {opts}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_wide_bit_patterns(dtype, path):
    """Random bit patterns, and blocks whose values share a random exponent window down to
    the subnormals (so the scale steps see every binade)."""
    np_dtype, _ = DTYPES[dtype]
    rng = np.random.default_rng(11)
    width = np.dtype(np_dtype).itemsize
    raw = rng.integers(0, 1 << 63, 64 * 600, dtype=np.uint64)
    raw = raw.astype(np.uint32) if width == 4 else raw | (raw << np.uint64(1) & (1 << 63))
    low = -160 if width == 4 else -1090
    e = rng.integers(low, 120, (3000, 1)) + rng.integers(-8, 3, (3000, 64))
    windows = (rng.standard_normal((3000, 64)) * np.exp2(e.astype(float))).astype(np_dtype)
    for x in (raw.view(np_dtype).reshape(-1, 320), windows):
        for fmt in FORMATS:
            for opts in _options(fmt):
                _same(quantize_tensor(from_numpy(x), fmt, -1, **opts),
                      golden_fq(x, fmt, axis=-1, **opts), f"{fmt} {opts}")


_HYP = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def _tensors(draw):
    """A float32 tensor of up to 3 axes (lengths 1..150) from bit patterns biased towards
    specials, one scale per block-sized run, and an axis."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 150 if ndim == 1 else 40), min_size=ndim,
                                max_size=ndim)))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    kind = draw(st.sampled_from(["normal", "bits", "grid"]))
    if kind == "bits":
        x = rng.integers(0, 1 << 32, size, dtype=np.uint64).astype(np.uint32).view(np.float32)
    elif kind == "grid":                                   # small integers times 2^e: ties
        x = (rng.integers(-15, 16, size) * 0.25 * np.exp2(rng.integers(-130, 120))).astype(
            np.float32)
    else:
        x = (rng.standard_normal(size) * np.exp2(rng.integers(-140, 120, size))).astype(
            np.float32)
    return x.reshape(shape), draw(st.integers(-ndim, ndim - 1))


@_HYP
@given(case=_tensors(), fmt=st.sampled_from(FORMATS), dtype=st.sampled_from(list(DTYPES)))
def test_hypothesis_fake_quantize(case, fmt, dtype):
    x, axis = case
    with np.errstate(over="ignore"):
        x = x.astype(DTYPES[dtype][0])
    for opts in _options(fmt):
        _same(quantize_tensor(from_numpy(x), fmt, axis, **opts),
              golden_fq(x, fmt, axis=axis, **opts))


# --------------------------------------------------------------------------------------
# Rollout-ResQ


@pytest.mark.parametrize("mode", RESQ_MODES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_resq_bit_identical(fmt, mode, path):
    """corrected and main, every dtype, 2-D and 3-D, both ends of the axes, with and without
    specials (HiF8 and BF16 overflow to Inf, so their residuals meet +-Inf)."""
    for dtype, (np_dtype, _) in DTYPES.items():
        for shape, axes in (((40, 130), (-1, 0)), ((3, 37, 70), (2, 1))):
            for specials in (False, True):
                x = _data(np_dtype, shape=shape, seed=len(shape) + specials, specials=specials)
                if fmt == "hif8":
                    x.reshape(-1)[::53] = np.asarray(50000.0, np_dtype)
                for axis in axes if path == "cpu" else axes[:1]:
                    for opts in _options(fmt):
                        want = golden_resq(x, fmt, mode, axis=axis, **opts)
                        corrected, main = resq_parts(from_numpy(x), fmt, mode, axis, **opts)
                        where = f"{dtype} {shape} axis {axis} {opts} specials {specials}"
                        _same(corrected, want.corrected(), where)
                        _same(main, want.main.dequantize(), where)
                        if specials or opts:
                            continue
                        _same(resq_corrected(from_numpy(x), fmt, mode, axis=axis),
                              want.corrected(), where)


@_HYP
@given(case=_tensors(), fmt=st.sampled_from(FORMATS), mode=st.sampled_from(RESQ_MODES))
def test_hypothesis_resq(case, fmt, mode):
    x, axis = case
    _same(resq_corrected(from_numpy(x), fmt, mode, axis=axis),
          golden_resq(x, fmt, mode, axis=axis).corrected())


def test_sparsifier_sums_are_sequential():
    """Sums of squares taken in row order, not exactly or pairwise: column A is
    1 + 4 * 2^-54 (1 in sequence, 1 + 2^-52 exactly), column B is 1 + 2^-52, so the
    sequential sums keep B where exact sums would tie and keep A."""
    col_a = [1.0] + [2.0 ** -27] * 4
    col_b = [1.0, 2.0 ** -26, 0.0, 0.0, 0.0]
    v = np.stack([col_a, col_b], axis=1)
    assert golden_keep_mask(v, "channel50", axis=1)[0].tolist() == [False, True]
    tiles = np.zeros((32, 128))
    tiles[:5, 0], tiles[:2, 64] = col_a, col_b[:2]
    assert golden_keep_mask(tiles, "block32x64", axis=1)[0, [0, 64]].tolist() == [False, True]
    for values, mode in ((v, "channel50"), (tiles, "block32x64")):
        got = tq._keep_mask(torch.from_numpy(values), mode, 1).numpy()
        assert np.array_equal(got, golden_keep_mask(values, mode, axis=1))
    sq = torch.from_numpy(v * v)
    assert torch.equal(tq._seqsum_loop(sq, 0), tq._seqsum(sq, 0))
    assert tq._seqsum(sq, 0)[0].item() == 1.0 and tq._seqsum(sq, 0)[1].item() == 1 + 2 ** -52


@pytest.mark.parametrize("mode", ["2:4", "channel50", "block32x64"])
def test_keep_mask_ties_and_nans(mode, path):
    """Many equal magnitudes (ties go to the lower index), NaN ranking first, odd shapes."""
    rng = np.random.default_rng(3)
    for shape, axis in (((70, 33), 1), ((70, 33), 0), ((3, 5, 130), 2), ((1, 7), 1),
                        ((33, 1), 0)):
        v = np.round(rng.standard_normal(shape) * 2) / 2
        v[rng.random(shape) < 0.3] = 0.0
        v.reshape(-1)[::13] = np.nan
        got = tq._keep_mask(torch.from_numpy(v), mode, axis).numpy()
        assert np.array_equal(got, golden_keep_mask(v, mode, axis=axis)), (shape, axis)


# --------------------------------------------------------------------------------------
# API


@pytest.mark.parametrize("fmt", FORMATS)
def test_straight_through_gradient(fmt):
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(4, 70, dtype=dtype, requires_grad=True)
        g = torch.randn(4, 70, dtype=dtype)
        fake_quantize(x, fmt).backward(g)
        assert torch.equal(x.grad, g)
        x.grad = None
        resq_corrected(x, fmt, "2:4").backward(g)
        assert torch.equal(x.grad, g)


def test_inputs_unchanged_and_layouts():
    """The input is never written; non-contiguous inputs give the golden model's result."""
    x = _data(np.float64, shape=(6, 130), specials=True)
    t = from_numpy(x).t()                              # non-contiguous (130, 6)
    before = t.clone()
    for fmt in FORMATS:
        for axis in (0, 1):
            _same(fake_quantize(t, fmt, axis=axis), golden_fq(np.ascontiguousarray(x.T), fmt,
                                                              axis=axis))
            resq_corrected(t, fmt, "dense", axis=axis)
    assert torch.equal(t.view(torch.int64), before.view(torch.int64))


def test_shapes_at_the_edges():
    for fmt in ("hif8", "bf16"):                       # 0-d tensors: element formats only
        x = np.array(-3.3e-5, dtype=np.float32)
        _same(fake_quantize(torch.tensor(-3.3e-5), fmt), golden_fq(x, fmt))
    for fmt in FORMATS:
        for shape in ((0,), (3, 0), (0, 70)):
            x = np.zeros(shape, dtype=np.float32)
            _same(fake_quantize(torch.zeros(shape), fmt), golden_fq(x, fmt))
            assert resq_corrected(torch.zeros(shape), fmt, "2:4").shape == shape
        x = np.array([[0.7], [-2.5]], dtype=np.float32)   # length-1 axis, one row per block
        _same(fake_quantize(torch.from_numpy(x.copy()), fmt, axis=1), golden_fq(x, fmt, axis=1))


def test_bad_arguments():
    with pytest.raises(ValueError, match="format must be one of"):
        fake_quantize(torch.zeros(4), "fp4")
    with pytest.raises(ValueError, match="dtype must be one of"):
        fake_quantize(torch.zeros(4, dtype=torch.int32), "hif4")
    with pytest.raises(ValueError, match="ResQ mode must be one of"):
        resq_corrected(torch.zeros(4), "hif4", "3:4")
    with pytest.raises(ValueError, match=r"Unknown option\(s\) tensor_scale for format 'hif4'"):
        fake_quantize(torch.zeros(4), "hif4", tensor_scale=False)
    with pytest.raises(ValueError, match="Axis 2 is out of range"):
        fake_quantize(torch.zeros(4, 4), "hif4", axis=2)
    with pytest.raises(ValueError, match="needs an array with at least one axis"):
        fake_quantize(torch.tensor(1.0), "mxfp4")
    with pytest.raises(ValueError, match="ResQ needs an array with at least one axis"):
        resq_corrected(torch.tensor(1.0), "hif8", "dense")
    with pytest.raises(TypeError, match="expected a torch.Tensor"):
        fake_quantize(np.zeros(4), "hif4")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device visible to torch: the GPU comparison needs one")
def test_cuda_bit_identical():
    """On the GPU: every format x dtype x axis, and every format x ResQ mode, against the
    golden model, bits compared on the host; the results stay on the GPU."""
    for dtype, (np_dtype, _) in DTYPES.items():
        x = _data(np_dtype, shape=(9, 300, 5), seed=5)
        t = from_numpy(x, "cuda")
        for fmt in FORMATS:
            for axis in (0, 1, 2):
                for opts in _options(fmt):
                    y = fake_quantize(t, fmt, axis=axis, **opts)
                    assert y.device.type == "cuda"
                    _same(y, golden_fq(x, fmt, axis=axis, **opts), f"{dtype} {fmt} {axis}")
        x2 = _data(np_dtype, shape=(70, 200), seed=6)
        for fmt in FORMATS:
            for mode in RESQ_MODES:
                for axis in (0, 1):
                    want = golden_resq(x2, fmt, mode, axis=axis)
                    corrected, main = resq_parts(from_numpy(x2, "cuda"), fmt, mode, axis)
                    _same(corrected, want.corrected(), f"{dtype} {fmt} {mode} {axis}")
                    _same(main, want.main.dequantize(), f"{dtype} {fmt} {mode} {axis}")
