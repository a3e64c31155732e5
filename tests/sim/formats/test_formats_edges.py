"""Named edge cases of docs/formats.md sections 1-5, the byte layouts and the API errors."""

import ml_dtypes
import numpy as np
import pytest

import spec_reference as ref
from formats_inputs import bits_equal
from sim.formats import FORMATS, QuantizedTensor, fake_quantize, from_bytes, quantize
from hif4spec.formats import STEP_ELEMS

BLOCK_FORMATS = ["hif4", "mxfp4", "nvfp4"]
ALL_FORMATS = list(FORMATS)


def _vs_ref(x, fmt, **opts):
    want = ref.fake_quantize_ref(x, fmt, **opts)
    assert bits_equal(quantize(x, fmt, **opts).decoded(), want)
    return want


# ------------------------------------------------------------------ zero groups


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_all_zero_group(fmt):
    x = np.zeros((2, 64), dtype=np.float32)
    x[1] = -0.0
    qt = quantize(x, fmt)
    y = qt.dequantize()
    assert np.all(y == 0) and not np.signbit(y).any()       # -0.0 inputs get sign 0
    f = qt.fields
    if fmt == "hif4":
        assert np.all(f["scale"] == 0)                        # S = 2^-48
        assert not f["elem"].any() and not f["l2"].any() and not f["l3"].any()
    elif fmt == "mxfp4":
        assert np.all(f["scale"] == 0)                        # X = 2^-127
        assert not f["elem"].any()
    elif fmt == "nvfp4":
        assert np.all(f["scale"] == 0) and f["tensor_scale"] == 1.0
        assert not f["elem"].any()
    else:
        assert not f["code"].any()


def test_negative_values_rounding_to_zero_keep_sign_bit():
    x = np.zeros(64)
    x[0], x[1], x[2] = 1000.0, -1e-50, -0.0
    for fmt in ALL_FORMATS:
        y = fake_quantize(x, fmt)
        assert y[1] == 0
        assert np.signbit(y[1]) == (fmt != "hif8"), fmt      # HiF8 has no -0
        assert not np.signbit(y[2])


# ------------------------------------------------------------------ outliers, ranges


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_one_huge_outlier(fmt):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 64)) * 0.01
    x[:, 17] = [1e6, -3e4, 2.0 ** 20, 1e30]
    want = _vs_ref(x, fmt)
    if fmt == "hif4":
        # S clips at 49152; the outlier saturates to 7/4 * 4 * 49152 at most.
        assert np.nanmax(np.abs(want)) <= 49152 * 7
        assert np.all(want[3, :17] == 0)                      # 1e30 flushes its group
    if fmt == "mxfp4":
        assert want[0, 17] == 6 * 2.0 ** 17                  # 1e6: X = 2^17, saturate to 6


def test_hif4_below_2_pow_minus_48_and_above_2_pow_20():
    tiny = np.array([2.0 ** -49, 2.0 ** -50, 2.0 ** -51, 2.0 ** -52, 3 * 2.0 ** -53,
                     2.0 ** -60, -2.0 ** -49, 0.0] * 8)
    want = _vs_ref(tiny, "hif4")
    qt = quantize(tiny, "hif4")
    assert qt.fields["scale"][0] == 0                         # SF clipped to 2^-48
    # min nonzero value is S/4 = 2^-50; below the half of it everything is 0.
    assert np.all((np.abs(want) == 0) == (np.abs(tiny) < 2.0 ** -51))
    huge = np.array([2.0 ** 20, 2.0 ** 21 + 1, 3e6, 2.0 ** 25, -1e8, 1.0, 2.0 ** 19, 0] * 8)
    want = _vs_ref(huge, "hif4")
    assert quantize(huge, "hif4").fields["scale"][0] == 0xFE  # 49152
    assert np.nanmax(np.abs(want)) == 49152 * 4 * 1.75


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_magnitudes_below_2_pow_minus_48_and_above_2_pow_20(fmt):
    rng = np.random.default_rng(2)
    lo = np.ldexp(1 + rng.random((8, 64)), rng.integers(-80, -48, (8, 64)))
    hi = np.ldexp(1 + rng.random((8, 64)), rng.integers(20, 40, (8, 64)))
    mixed = np.where(rng.random((8, 64)) < 0.5, lo, hi)
    for x in (lo, hi, mixed, -lo):
        _vs_ref(x, fmt)
        _vs_ref(x.astype(np.float32), fmt)


# ------------------------------------------------------------------ ties


def test_mxfp4_every_e2m1_tie():
    # amax = 4 -> X = 2^(2-2) = 1, so v / X are the listed midpoints themselves.
    x = np.array([4.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -2.5, -5.0]
                 + [0.0] * 20)
    want = [4.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -0.0, -1.0, -2.0, -4.0] + [0.0] * 20
    assert bits_equal(fake_quantize(x, "mxfp4"), np.array(want))
    _vs_ref(x, "mxfp4")
    # 7 and 7.99 saturate to 6 (amax just below 8 -> X = 1).
    x = np.array([np.nextafter(8.0, 0), 7.0, 6.5] + [0.0] * 29)
    assert list(fake_quantize(x, "mxfp4")[:3]) == [6.0, 6.0, 6.0]


def test_nvfp4_every_e2m1_tie_and_e4m3_scale_tie():
    # amax = 6 -> s = 1 (T off), elements on every E2M1 midpoint.
    x = np.array([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -1.25, -3.5] + [0.0] * 6)
    want = [6.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -1.0, -4.0] + [0.0] * 6
    assert bits_equal(fake_quantize(x, "nvfp4", tensor_scale=False), np.array(want))
    # Block scale ties: amax / 6 exactly between two E4M3 values (1.0625 -> 1.0, 1.1875 -> 1.25).
    for amax6, s in [(1.0625, 1.0), (1.1875, 1.25), (2.0 ** -10, 0.0), (3 * 2.0 ** -10,
                                                                          2.0 ** -8)]:
        x = np.zeros(16)
        x[0] = amax6 * 6
        qt = quantize(x, "nvfp4", tensor_scale=False)
        from sim.formats.codecs import UE4M3_VALUES
        assert UE4M3_VALUES[qt.fields["scale"][0]] == s, amax6
        _vs_ref(x, "nvfp4", tensor_scale=False)


def test_hif4_every_rhalf_tie():
    # S = 1 (REC = 1): group max 7 -> b = 1 for sub-group 0; micro-group 1 has max 1.5 -> c = 0
    # so y = a * 2^(2-1-0) = 2a: a = (m + 0.5) / 2 is an exact tie, rounds half up.
    x = np.zeros(64)
    x[0] = 7.0
    x[4:8] = [1.75, 0.25, 0.75, 1.25]          # y = 3.5, 0.5, 1.5, 2.5 -> k = 4, 1, 2, 3
    qt = quantize(x, "hif4")
    assert qt.fields["scale"][0] == 48 << 2
    assert qt.fields["l2"][0, 0] == 1 and qt.fields["l3"][0, 1] == 0
    assert list(qt.fields["elem"][0, 4:8]) == [4, 1, 2, 3]
    _vs_ref(x, "hif4")


def test_hif8_and_bf16_ties():
    # HiF8 rounds half away from zero at the mantissa width of the binade.
    x = np.array([1.0625, 1.1875, -1.0625, 17.0, 18.0, 3 * 2.0 ** -23, 2.0 ** -23, 36864.0])
    assert list(fake_quantize(x, "hif8")) == [1.125, 1.25, -1.125, 16.0, 20.0, 2.0 ** -21,
                                              2.0 ** -22, 32768.0]
    assert fake_quantize(np.array([40960.0]), "hif8")[0] == np.inf
    # BF16: ties to even.
    x = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -(1 + 2.0 ** -8)])
    assert list(fake_quantize(x, "bf16")) == [1.0, 1 + 2.0 ** -6, -1.0]


# ------------------------------------------------------------------ NaN / Inf


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_blocks(fmt, bad):
    block = FORMATS[fmt].block
    x = np.ones((2, 2 * block), dtype=np.float32)
    x[0, 3] = bad
    qt = quantize(x, fmt)
    y = qt.dequantize()
    assert np.isnan(y[0, :block]).all()
    assert not np.isnan(y[0, block:]).any() and not np.isnan(y[1]).any()
    f = qt.fields
    assert f["scale"][0, 0] == FORMATS[fmt].nan_scale_code
    assert not f["elem"][0, 0].any()
    if fmt == "hif4":
        assert not f["l2"][0, 0].any() and not f["l3"][0, 0].any()
    if fmt == "nvfp4":                          # T over the finite values only
        assert f["tensor_scale"] == np.float32(1.0 / 2688)
    _vs_ref(x, fmt)


@pytest.mark.parametrize("fmt", ["hif8", "bf16"])
def test_elementwise_keep_nan_inf(fmt):
    x = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
    y = fake_quantize(x, fmt)
    assert np.isnan(y[0]) and y[1] == np.inf and y[2] == -np.inf and y[3] == 1.0
    code = quantize(x, fmt).fields["code"]
    assert code[0] == (0x80 if fmt == "hif8" else 0x7FC0)


# ------------------------------------------------------------------ tails, shapes, axes


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
@pytest.mark.parametrize("n", [1, 15, 17, 63, 65, 100])
def test_lengths_not_divisible_by_block(fmt, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    block = FORMATS[fmt].block
    nb = -(-n // block)
    padded = np.zeros((3, nb * block), dtype=np.float32)
    padded[:, :n] = x
    opts = {"tensor_scale": False} if fmt == "nvfp4" else {}
    qt = quantize(x, fmt, **opts)
    assert qt.fields["elem"].shape == (3, nb, block)
    y = qt.dequantize()
    assert y.shape == x.shape
    assert bits_equal(y, fake_quantize(padded, fmt, **opts)[:, :n])
    assert len(qt.to_bytes()) == 3 * nb * FORMATS[fmt].block_bytes + (4 if fmt == "nvfp4"
                                                                       else 0)
    _vs_ref(x, fmt, **opts)


def test_field_shapes_follow_the_contract():
    x = np.zeros((2, 3, 130), dtype=np.float32)
    qt = quantize(x, "hif4", axis=2)
    assert qt.fields["elem"].shape == (2, 3, 3, 64) and qt.fields["l3"].shape == (2, 3, 3, 16)
    assert qt.fields["l2"].shape == (2, 3, 3, 8) and qt.fields["scale"].shape == (2, 3, 3)
    qt = quantize(x, "mxfp4", axis=1)
    assert qt.fields["elem"].shape == (2, 130, 1, 32) and qt.fields["scale"].shape == (2, 130, 1)
    assert qt.axis == 1 and qt.shape == (2, 3, 130) and qt.dtype == np.float32
    qt = quantize(x, "nvfp4", axis=-3)
    assert qt.axis == 0 and qt.fields["elem"].shape == (3, 130, 1, 16)
    assert qt.fields["tensor_scale"].shape == () and qt.fields["tensor_scale"].dtype == np.float32
    qt = quantize(x, "hif8")
    assert qt.fields["code"].shape == x.shape and qt.fields["code"].dtype == np.uint8
    qt = quantize(x, "bf16")
    assert qt.fields["code"].dtype == np.uint16
    assert STEP_ELEMS == 64


def test_axis_moves_like_transpose():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 40)).astype(np.float32)
    for fmt in BLOCK_FORMATS:
        a = fake_quantize(x, fmt, axis=0)
        b = fake_quantize(x.T.copy(), fmt, axis=1).T
        assert bits_equal(a, b)


# ------------------------------------------------------------------ bytes


def test_hif4_byte_layout_by_hand():
    elem = np.arange(64, dtype=np.uint8) % 16
    l3 = np.array([1, 0] * 8, dtype=np.uint8)
    l2 = np.array([0, 0, 0, 1, 1, 0, 0, 1], dtype=np.uint8)
    fields = {"elem": elem[None, None], "l3": l3[None, None], "l2": l2[None, None],
              "scale": np.array([[0xC3]], dtype=np.uint8)}
    qt = QuantizedTensor("hif4", (1, 64), 1, np.float32, fields)
    data = qt.to_bytes()
    assert len(data) == 36
    assert data[0] == 0x10 and data[1] == 0x32 and data[7] == 0xFE     # elem 0|1<<4, ...
    assert data[32] == 0x55 and data[33] == 0x55                       # L3 bits 256..271
    assert data[34] == 0b10011000                                      # L2 bits 272..279
    assert data[35] == 0xC3
    back = from_bytes(data, "hif4", (1, 64), axis=1)
    assert back == qt


def test_mxfp4_nvfp4_byte_layouts():
    x = np.zeros(32, dtype=np.float32)
    x[0], x[1] = 4.0, -1.0
    data = quantize(x, "mxfp4").to_bytes()
    assert len(data) == 17 and data[0] == 0xA6 and data[16] == 127     # 4 = 0x6, -1 = 0xA
    data = quantize(x[:16], "nvfp4").to_bytes()
    t = np.float32(4.0 / 2688)
    assert len(data) == 13 and data[:4] == t.astype("<f4").tobytes()
    qt = quantize(x[:16], "nvfp4", tensor_scale=False)
    data = qt.to_bytes()
    # s = E4M3(4/6) = 0.6875; 4/s -> 6 (code 7), -1/s -> -1.5 (code 0xB)
    assert data[:4] == np.float32(1.0).tobytes() and data[4] == 0xB7
    assert data[12] == 0x33 == qt.fields["scale"][0]                  # 0.6875 = 2^-1 * 1.375


@pytest.mark.parametrize("fmt", ALL_FORMATS)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_bytes_round_trip_and_length(fmt, dtype):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((3, 5, 37)) * 10).astype(dtype)
    for axis in (0, 2):
        qt = quantize(x, fmt, axis=axis)
        data = qt.to_bytes()
        back = from_bytes(data, fmt, x.shape, axis=axis, dtype=dtype)
        assert back == qt
        assert bits_equal(back.dequantize(), qt.dequantize())
        with pytest.raises(ValueError, match="bytes long"):
            from_bytes(data[:-1], fmt, x.shape, axis=axis)
        with pytest.raises(ValueError, match="bytes long"):
            from_bytes(data + b"\0", fmt, x.shape, axis=axis)


def test_elementwise_bytes_order():
    x = np.array([[1.0, -2.0], [0.5, np.nan]], dtype=np.float32)
    assert quantize(x, "bf16").to_bytes() == bytes([0x80, 0x3F, 0x00, 0xC0, 0x00, 0x3F,
                                                    0xC0, 0x7F])
    assert quantize(x, "hif8").to_bytes() == bytes([0x08, 0x90, 0x18, 0x80])


# ------------------------------------------------------------------ API errors


def test_bad_arguments_raise_clear_value_errors():
    x = np.zeros((2, 64), dtype=np.float32)
    with pytest.raises(ValueError, match="Format must be one of"):
        quantize(x, "fp4")
    with pytest.raises(ValueError, match="out of range"):
        quantize(x, "hif4", axis=2)
    with pytest.raises(ValueError, match="dtype"):
        quantize(x.astype(np.int32), "hif4")
    with pytest.raises(ValueError, match="Unknown option"):
        quantize(x, "hif4", tensor_scale=True)
    with pytest.raises(ValueError, match="0-d"):
        quantize(np.float32(1.0), "mxfp4")
    assert fake_quantize(np.float32(1.5), "hif8").shape == ()
    with pytest.raises(ValueError, match="Axis must be an integer"):
        fake_quantize(x, "hif4", axis=1.0)


def test_empty_tensors():
    for fmt in ALL_FORMATS:
        x = np.zeros((0, 64), dtype=np.float32)
        assert fake_quantize(x, fmt).shape == (0, 64)
        assert quantize(x, fmt).to_bytes() == (np.float32(1).tobytes() if fmt == "nvfp4"
                                               else b"")


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_non_contiguous_and_fortran_inputs(fmt):
    rng = np.random.default_rng(8)
    base = (rng.standard_normal((6, 256)) * 3).astype(np.float32)
    for x, axis in [(base[:, ::2], -1), (base[::2, :], 0), (np.asfortranarray(base), -1),
                    (np.asfortranarray(base), 0), (base.T, 0)]:
        want = fake_quantize(np.ascontiguousarray(x), fmt, axis=axis)
        got = fake_quantize(x, fmt, axis=axis)
        assert got.flags.c_contiguous and bits_equal(got, want)
        assert bits_equal(quantize(x, fmt, axis=axis).dequantize(), want)


@pytest.mark.parametrize("fmt", ["hif8", "bf16"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_elementwise_zero_dim(fmt, dtype):
    for v in [np.nan, -0.0, 1.3, -1e-30, np.inf]:
        x = np.array(v, dtype=dtype)
        y = fake_quantize(x, fmt)
        assert y.shape == () and y.dtype == x.dtype
        assert bits_equal(quantize(x, fmt).dequantize(), y)
        assert bits_equal(y.reshape(1), fake_quantize(x.reshape(1), fmt))


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_tensors_larger_than_a_chunk(fmt):
    """Chunked processing (65536 elements at a time) changes nothing."""
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((3, 50000)) * np.exp2(rng.integers(-20, 20, (3, 1))))
    x = x.astype(np.float32)
    x[1, 777] = np.nan
    y = fake_quantize(x, fmt)
    qt = quantize(x, fmt)
    assert bits_equal(qt.dequantize(), y)
    opts = {"tensor_scale": False} if fmt == "nvfp4" else {}
    pieces = [fake_quantize(x[:, lo:lo + 3200], fmt, **opts) for lo in range(0, 50000, 3200)]
    assert bits_equal(fake_quantize(x, fmt, **opts), np.concatenate(pieces, axis=1))
    _vs_ref(x[:, :640], fmt)
