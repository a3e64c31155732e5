"""Every code of every element and scale type against an independent implementation:
ml_dtypes for E2M1, E4M3, E8M0 and BF16; the spec's own tables for S1P2, E6M2 and HiF8."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import spec_reference as ref
from formats_inputs import bits_equal
from sim.formats import codecs
from hif4spec.formats import ELEMENT_TYPES, HIF4_REC_SIGNIFICANDS

# ------------------------------------------------------------------ decode tables


def _ml_decode(codes, dtype):
    return np.asarray(codes).astype(np.uint8).view(dtype).astype(np.float64)


def test_e2m1_all_codes_match_ml_dtypes():
    want = _ml_decode(np.arange(16), ml_dtypes.float4_e2m1fn)
    assert bits_equal(codecs.E2M1_VALUES, want)


def test_e4m3_all_codes_match_ml_dtypes():
    want = _ml_decode(np.arange(256), ml_dtypes.float8_e4m3fn)
    assert bits_equal(codecs.E4M3_VALUES, want)
    assert np.isnan(codecs.E4M3_VALUES[[0x7F, 0xFF]]).all()
    assert np.nanmax(codecs.E4M3_VALUES) == 448.0


def test_ue4m3_ignores_bit7():
    c = np.arange(256)
    assert bits_equal(codecs.UE4M3_VALUES, codecs.E4M3_VALUES[c & 0x7F])


def test_e8m0_all_codes_match_ml_dtypes():
    want = _ml_decode(np.arange(256), ml_dtypes.float8_e8m0fnu)
    assert bits_equal(codecs.E8M0_VALUES, want)


def test_bf16_all_codes_match_ml_dtypes():
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    with np.errstate(invalid="ignore"):
        want = codes.view(ml_dtypes.bfloat16).astype(np.float64)
    assert bits_equal(codecs.decode_bf16(codes), want)


def test_s1p2_table_from_spec():
    # value (-1)^s * k / 4, k in 0..7: written out by hand.
    pos = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
    want = np.array(pos + [-v for v in pos])
    assert bits_equal(codecs.S1P2_VALUES, want)
    assert np.signbit(codecs.S1P2_VALUES[8])


def test_e6m2_table_from_spec():
    for code in range(256):
        v = codecs.E6M2_VALUES[code]
        if code == 0xFF:
            assert np.isnan(v)
            continue
        e, m = code >> 2, code & 3
        assert v == 2.0 ** (e - 48) * (1 + m / 4)
    assert codecs.E6M2_VALUES[0] == 2.0 ** -48
    assert codecs.E6M2_VALUES[0xFE] == 49152.0


# The spec's HiF8 prefix table, transcribed as text and decoded from bit strings.
HIF8_PREFIXES = [  # prefix, D (None = denormal), mantissa bits
    ("0000", None, 3), ("0001", 0, 3), ("001", 1, 3), ("01", 2, 3), ("10", 3, 2), ("11", 4, 1),
]


def _hif8_from_spec(code):
    bits = format(code, "08b")
    sign, rest = bits[0], bits[1:]
    if code == 0x80:
        return float("nan")
    if rest == "1101111":
        return float("-inf") if sign == "1" else float("inf")
    for prefix, d, mbits in HIF8_PREFIXES:
        if rest.startswith(prefix):
            body = rest[len(prefix):]
            break
    if d is None:
        m = int(body, 2)
        mag = 0.0 if m == 0 else 2.0 ** (m - 23)
    else:
        ebits, mant = body[:d], body[d:]
        assert len(mant) == mbits
        if d == 0:
            e = 0
        else:
            e = int("1" + ebits[1:], 2)          # implicit leading 1 of the magnitude
            if ebits[0] == "1":
                e = -e
        mag = 2.0 ** e * (1 + int(mant, 2) / 2 ** mbits)
    return -mag if sign == "1" else mag


def test_hif8_table_from_spec():
    want = np.array([_hif8_from_spec(c) for c in range(256)])
    assert bits_equal(codecs.HIF8_VALUES, want)
    finite = codecs.HIF8_VALUES[np.isfinite(codecs.HIF8_VALUES)]
    assert finite.max() == 32768.0
    assert np.abs(finite[finite != 0]).min() == 2.0 ** -22
    # Every nonzero finite magnitude appears exactly once per sign (no duplicate codes).
    pos = codecs.HIF8_VALUES[:128]
    pos = pos[np.isfinite(pos)]
    assert len(np.unique(pos)) == len(pos)


def test_hif4_rec_table():
    for code in range(255):
        e, m = code >> 2, code & 3
        assert codecs.HIF4_REC[code] == HIF4_REC_SIGNIFICANDS[m] * 2.0 ** (48 - e)
        assert codecs.HIF4_REC[code] == ref.bf16(1.0 / codecs.E6M2_VALUES[code])
    assert np.isnan(codecs.HIF4_REC[255])


def test_table_types_agree_with_decode_tables():
    assert ELEMENT_TYPES["E2M1"].max_finite == np.nanmax(codecs.E2M1_VALUES)
    assert ELEMENT_TYPES["E6M2"].max_finite == np.nanmax(codecs.E6M2_VALUES)
    assert ELEMENT_TYPES["HIF8"].max_finite == np.nanmax(
        codecs.HIF8_VALUES[np.isfinite(codecs.HIF8_VALUES)])


# ------------------------------------------------------------------ encoders


def _dense_float32(lo_exp, hi_exp, per_binade=4096, seed=0):
    """Float32 values covering [2^lo, 2^hi): every binade sampled, plus all grid neighbours."""
    rng = np.random.default_rng(seed)
    e = np.repeat(np.arange(lo_exp, hi_exp), per_binade)
    m = rng.random(e.size)
    x = np.ldexp(1 + m, e).astype(np.float32)
    return np.concatenate([x, -x, np.float32([0.0, np.inf, -np.inf])])


def _with_neighbours(values, dtype):
    v = np.asarray(values, dtype=dtype)
    return np.concatenate([v, np.nextafter(v, dtype(np.inf)), np.nextafter(v, dtype(-np.inf))])


def _ml_encode(x, dtype):
    return x.astype(dtype).view(np.uint8 if np.dtype(dtype).itemsize == 1 else np.uint16)


def _spec_sign_fix(x, ml_codes, sign_bit, zero_codes):
    """ml_dtypes keeps the sign of -0.0; the spec gives -0.0 sign 0."""
    out = ml_codes.copy()
    negzero = (x == 0) & np.signbit(x)
    out[negzero] &= ~np.array(1 << sign_bit, dtype=out.dtype)
    return out


def test_encode_e2m1_matches_ml_dtypes_on_float32():
    grid = np.array([0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 1e9])
    x = np.concatenate([_dense_float32(-12, 5), _with_neighbours(grid, np.float32),
                        -_with_neighbours(grid, np.float32), np.float32([-0.0])])
    got = codecs.encode_e2m1(x.astype(np.float64))
    want = _spec_sign_fix(x, _ml_encode(x, ml_dtypes.float4_e2m1fn), 3, ())
    assert np.array_equal(got, want)


def test_encode_e4m3_matches_ml_dtypes_on_float32():
    x = np.concatenate([_dense_float32(-14, 10), _with_neighbours(
        [2.0 ** -10, 2.0 ** -9, 3 * 2.0 ** -10, 448, 464, 480, 2.0 ** -6], np.float32),
        np.float32([-0.0, np.nan])])
    got = codecs.encode_e4m3(x.astype(np.float64))
    want = _spec_sign_fix(x, _ml_encode(x, ml_dtypes.float8_e4m3fn), 7, ())
    nan = np.isnan(codecs.E4M3_VALUES[want])
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all(np.isnan(codecs.E4M3_VALUES[got[nan]]))


def test_encode_bf16_matches_ml_dtypes_on_float32():
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 1 << 32, size=1 << 18, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = np.concatenate([x, np.float32([0.0, -0.0, np.inf, -np.inf, 3.4e38, 1e-45])])
    with np.errstate(invalid="ignore"):
        got = codecs.encode_bf16(x.astype(np.float64))
        want = _ml_encode(x, ml_dtypes.bfloat16)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all(got[nan] == 0x7FC0)


def test_encoders_round_float64_once():
    """float64 inputs are rounded from their float64 value, not through float32."""
    assert codecs.encode_e2m1(0.25 + 2.0 ** -40) == 1            # 0.5, not 0
    assert codecs.encode_bf16(1 + 2.0 ** -8 + 2.0 ** -40) == 0x3F81
    assert codecs.encode_e4m3(2.0 ** -10 + 2.0 ** -60) == 1     # 2^-9, not 0
    rng = np.random.default_rng(5)
    x = np.ldexp(1 + rng.random(20000), rng.integers(-140, 129, 20000))
    x = np.concatenate([x, np.ldexp(1 + np.arange(256) / 256 + 2.0 ** -30, 0)])
    got = codecs.bf16_round(x)
    want = np.array([ref.bf16(v) for v in x])
    assert bits_equal(got, want)


def test_encode_decode_round_trips():
    # Every non-NaN code decodes to a value that encodes back to it (-0 codes give +0).
    for enc, table, nbits, sign_bit in [
            (codecs.encode_e2m1, codecs.E2M1_VALUES, 4, 3),
            (codecs.encode_e4m3, codecs.E4M3_VALUES, 8, 7),
            (codecs.encode_hif8, codecs.HIF8_VALUES, 8, 7)]:
        codes = np.arange(1 << nbits)
        ok = ~np.isnan(table) & ~((table == 0) & (codes >> sign_bit == 1))
        assert np.array_equal(enc(table[codes[ok]]), codes[ok]), enc.__name__
    codes = np.arange(1 << 16).astype(np.uint16)
    vals = codecs.decode_bf16(codes)
    ok = ~np.isnan(vals)
    assert np.array_equal(codecs.encode_bf16(vals[ok]), codes[ok])


def test_encode_e6m2_all_bf16_inputs():
    """HiF4 step 3 on every positive finite BF16 value (SF is a BF16 number)."""
    codes = np.arange(1, 0x7F80).astype(np.uint16)
    sf = codecs.decode_bf16(codes)
    got = codecs.encode_e6m2(sf)
    for v, c in zip(sf[::7], got[::7]):
        c2 = min(max(v, 2.0 ** -48), 49152.0)
        e = ref.exp2floor(c2)
        want = float(round(Fraction(c2 * 2.0 ** (2 - e))) * Fraction(2) ** (e - 2))
        assert codecs.E6M2_VALUES[c] == want, (v, c)
    assert codecs.encode_e6m2(np.nan) == 0xFF


def test_encode_hif8_all_float16_and_wide():
    x16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = np.concatenate([x16.astype(np.float64),
                        _with_neighbours(np.abs(codecs.HIF8_VALUES[np.isfinite(
                            codecs.HIF8_VALUES)]), np.float64)])
    x = np.concatenate([x, -x])
    got = codecs.HIF8_VALUES[codecs.encode_hif8(x)]
    want = np.array([ref.hif8(float(v)) for v in x])
    assert bits_equal(got, want)
    assert codecs.encode_hif8(-1e-30) == 0x00           # no -0


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32])
def test_round_to_dtype_is_one_rne(dtype):
    rng = np.random.default_rng(9)
    x = np.ldexp(1 + rng.random(4000), rng.integers(-30, 20, 4000))
    x = np.concatenate([x, np.ldexp(1 + np.arange(64) / 64 + 2.0 ** -40, -3),
                        [70000.0, 65520.0, 65519.99, 2.0 ** -25, 3 * 2.0 ** -26]])
    rounder = {np.dtype(np.float16): ref.to_float16, np.dtype(np.float32): ref.to_float32,
               np.dtype(ml_dtypes.bfloat16): ref.bf16}[np.dtype(dtype)]
    got = codecs.round_to_dtype(x, dtype)
    want = np.array([rounder(float(v)) for v in x]).astype(dtype)
    assert got.dtype == np.dtype(dtype)
    assert bits_equal(got, want)


# ------------------------------------------------------------------ fast helpers


def _around_grid(grid, rng, n=200000, top=None):
    """Random values in [0, top], the grid points, midpoints and their float64 neighbours."""
    grid = np.asarray(grid, dtype=np.float64)
    grid = grid[np.isfinite(grid)]
    top = grid.max() if top is None else top
    mids = (grid[1:] + grid[:-1]) / 2
    pts = np.concatenate([grid, mids])
    return np.concatenate([rng.random(n) * top, np.exp2(-rng.random(n) * 60) * top, pts,
                           np.nextafter(pts, 0), np.nextafter(pts, np.inf), [0.0, 5e-324]])


def test_fast_e2m1_and_e4m3_rounding_equal_the_plain_ones():
    rng = np.random.default_rng(12)
    v = _around_grid(np.abs(codecs.E2M1_VALUES[:8]), rng, top=8.0)
    assert bits_equal(codecs.e2m1_round_fast(v), codecs.e2m1_round(v))
    assert np.array_equal(codecs.e2m1_code_of_magnitude(codecs.e2m1_round(v)),
                          codecs.encode_e2m1(v))
    v = np.minimum(_around_grid(np.abs(codecs.E4M3_VALUES[:127]), rng), 448.0)
    q = codecs.e4m3_round_fast(v)
    assert bits_equal(q, np.abs(codecs.E4M3_VALUES[codecs.encode_e4m3(v)]))
    assert np.array_equal(codecs.e4m3_code_of_magnitude(q), codecs.encode_e4m3(v))


def test_fast_generic_rounding_equals_frexp_rounding():
    rng = np.random.default_rng(13)
    for man_bits, emin, emax in [(7, -126, 127), (10, -14, 15), (3, -6, 8), (1, 0, 2)]:
        a = np.ldexp(1 + rng.random(100000), rng.integers(emin - 12, emax + 2, 100000))
        ties = np.ldexp(1 + (2 * rng.integers(0, 2 ** man_bits, 1000) + 1) /
                        2 ** (man_bits + 1), rng.integers(emin, emax, 1000))
        a = np.concatenate([a, ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf)])
        want = codecs.round_float(a, man_bits, emin)
        want[want >= 2.0 ** (emax + 1)] = np.inf
        assert bits_equal(codecs.round_float_fast(a, man_bits, emin, emax), want)


def test_hif4_scale_thresholds_equal_steps_2_and_3():
    from sim.formats import hif4

    rng = np.random.default_rng(14)
    thr = hif4._SCALE_THRESHOLDS
    v = np.concatenate([thr, np.nextafter(thr, 0), np.nextafter(thr, np.inf),
                        np.ldexp(1 + rng.random(200000), rng.integers(-70, 30, 200000)),
                        np.float32(rng.standard_normal(10000)).astype(np.float64) ** 2,
                        [0.0, 5e-324, 1e300]])
    assert np.array_equal(hif4.scale_codes(v), hif4.scale_code_plain(v))
    # the plain steps 2-3 against the spec reference
    for x in v[::997]:
        sf = min(max(ref.bf16(x * ref.bf16(1 / 7)), 2.0 ** -48), 49152.0)
        e = ref.exp2floor(sf)
        s = float(round(Fraction(sf * 2.0 ** (2 - e))) * Fraction(2) ** (e - 2))
        assert codecs.E6M2_VALUES[hif4.scale_code_plain(x)] == s
