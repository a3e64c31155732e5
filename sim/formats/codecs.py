"""Element and scale codecs of ``docs/formats.md`` section 1, vectorized.

Decode tables are float64 arrays indexed by code, derived from ``hif4spec.ELEMENT_TYPES``
(:func:`int_decode`, the exact integer form :mod:`sim.dot` computes with; HiF8 from its own
prefix decoder). Encoders round the float64 value of their
input (never through float32) and return integer codes. Signed encoders follow the spec's
sign rule: a code's sign bit is set iff the input is < 0, so -0.0 encodes with sign 0. The
exception is :func:`encode_bf16`, the IEEE building block BF16(x), which keeps -0.0.

Two implementations of the roundings live side by side: the plain ones (``round_float``
with ``frexp``/``ldexp``, used to build tables and as a cross-check) and the fast ones used
by the kernels (``*_fast``, exponent bits and add-and-subtract rounding); the tests prove
them equal on every grid point, midpoint and neighbour.
"""

import numpy as np

from hif4spec.formats import ELEMENT_TYPES, HIF8_OVERFLOW

__all__ = [
    "int_decode",
    "int_grid",
    "exp2floor",
    "round_float",
    "S1P2_VALUES",
    "E2M1_VALUES",
    "E4M3_VALUES",
    "UE4M3_VALUES",
    "E8M0_VALUES",
    "E6M2_VALUES",
    "HIF8_VALUES",
    "HIF4_REC",
    "encode_e2m1",
    "encode_e4m3",
    "encode_ue4m3",
    "encode_e6m2",
    "encode_hif8",
    "encode_bf16",
    "decode_bf16",
    "bf16_round",
    "round_to_dtype",
    "round_float_fast",
    "pow2_floor",
    "e2m1_round",
    "e2m1_round_fast",
    "e4m3_round_fast",
    "e2m1_code_of_magnitude",
    "e4m3_code_of_magnitude",
    "hif8_round",
]


def _c64(a):
    """``a`` as a C-contiguous float64 array of at least one dimension."""
    a = np.atleast_1d(np.asarray(a, dtype=np.float64))
    return a if a.flags.c_contiguous else a.copy(order="C")


def _same_shape(fn):
    """Give ``fn(a, ...)`` results the shape of ``a`` (0-d inputs give 0-d arrays)."""
    import functools

    @functools.wraps(fn)
    def wrapper(a, *args, **kwargs):
        return fn(a, *args, **kwargs).reshape(np.shape(a))
    return wrapper


def exp2floor(v):
    """Exact binary exponent e with 2**e <= v < 2**(e+1), for v > 0 (via ``frexp``).

    Returns int32 (int64 for Python scalars is not needed). Values <= 0 give meaningless
    exponents; callers mask them.
    """
    return np.frexp(np.asarray(v, dtype=np.float64))[1] - 1


def round_float(a, man_bits, emin):
    """Round a >= 0 (float64) RNE to a float with ``man_bits`` fraction bits, gradual
    underflow below 2**emin and unbounded exponent range; returns float64 (exact).

    NaN and Inf pass through.
    """
    a = np.asarray(a, dtype=np.float64)
    e = np.maximum(exp2floor(a), emin)
    shift = man_bits - e
    return np.ldexp(np.rint(np.ldexp(a, shift)), -shift)


def _fp_code(q, man_bits, emin):
    """Unsigned code of an exactly representable q >= 0 in a float type whose exponent field
    0 is subnormal with minimum normal exponent emin (bias = 1 - emin)."""
    e = np.maximum(exp2floor(q), emin)
    sig = np.ldexp(q, man_bits - e).astype(np.int64)   # in [0, 2**(man_bits+1))
    normal = sig >= (1 << man_bits)
    return np.where(normal, ((e - emin + 1) << man_bits) + sig - (1 << man_bits), sig)


# --------------------------------------------------------------------------- decode tables

def int_decode(name):
    """Every code of an IEEE-like element type (``hif4spec.ELEMENT_TYPES``, not HIF8) as
    exact integers.

    Returns ``(sig, exp, nan)`` over the ``2**bits`` codes: int64 ``sig`` (signed; a negative
    zero gives 0) and ``exp`` with value ``sig * 2**exp``, and bool ``nan`` on the NaN codes.
    Bits above the sign bit (above the exponent and mantissa in an unsigned type: UE4M3's
    bit 7) are ignored. Exponent field 0 has no implicit leading 1 when the type has
    subnormals or no exponent field at all (S1P2 is fixed point, its one binade subnormal).
    """
    t = ELEMENT_TYPES.get(name) if isinstance(name, str) else None
    if t is None or t.exp_bits + t.man_bits == 0:          # HIF8 is tapered
        raise ValueError(f"int_decode takes an IEEE-like element type of "
                         f"hif4spec.ELEMENT_TYPES, not {name!r}")
    neg, mag, exp, nan = _int_fields(t)
    return np.where(neg, -mag, mag), exp, nan


def int_grid(name):
    """Element type ``name`` on its integer grid: ``(ints, lsb)``, value = ``ints * 2**lsb``.

    ``lsb`` is the exponent of the type's smallest step (E2M1: -1, S1P2: -2); NaN codes
    give 0.
    """
    sig, exp, nan = int_decode(name)
    lsb = int(exp[~nan].min())
    return np.where(nan, 0, sig << (exp - lsb)), lsb


def _int_fields(t):
    """(neg, |sig|, exp, nan) of every code of ElementType ``t`` (see :func:`int_decode`)."""
    codes = np.arange(1 << t.bits, dtype=np.int64)
    body = t.exp_bits + t.man_bits
    u = codes & ((1 << body) - 1)
    neg = ((codes >> body) & 1 == 1) if t.signed else np.zeros(codes.shape, bool)
    e, m = u >> t.man_bits, u & ((1 << t.man_bits) - 1)
    sub = t.subnormals or t.exp_bits == 0           # field 0: no implicit 1, exponent 1
    mag = np.where((e > 0) | (not sub), m | (1 << t.man_bits), m)
    exp = np.maximum(e, int(sub)) - t.bias - t.man_bits
    nan = np.isin(u, t.nan_codes)
    return neg, mag, exp, nan


def _values(name):
    """float64 decode table of element type ``name``: signed zeros kept, NaN codes NaN."""
    neg, mag, exp, nan = _int_fields(ELEMENT_TYPES[name])
    v = np.where(nan, np.nan, np.ldexp(mag.astype(np.float64), exp))
    return np.where(neg, -v, v)


def _hif8_decode_one(code):
    s, r = code >> 7, code & 0x7F
    if r >> 3 == 0:                       # prefix 0000: denormal, value 2^(m-23)
        m = r & 7
        mag = 0.0 if m == 0 else 2.0 ** (m - 23)
    else:
        if r >> 3 == 1:                   # 0001: D = 0, 3 mantissa bits
            d, mbits, rest = 0, 3, r & 7
        elif r >> 4 == 1:                 # 001: D = 1
            d, mbits, rest = 1, 3, r & 15
        elif r >> 5 == 1:                 # 01: D = 2
            d, mbits, rest = 2, 3, r & 31
        elif r >> 5 == 2:                 # 10: D = 3, 2 mantissa bits
            d, mbits, rest = 3, 2, r & 31
        else:                             # 11: D = 4, 1 mantissa bit
            d, mbits, rest = 4, 1, r & 31
        m = rest & ((1 << mbits) - 1)
        ebits = rest >> mbits             # D bits: exponent sign, then magnitude w/o top 1
        if d == 0:
            e = 0
        else:
            esign = ebits >> (d - 1)
            emag = (1 << (d - 1)) | (ebits & ((1 << (d - 1)) - 1))
            e = -emag if esign else emag
        mag = 2.0 ** e * (1 + m / 2 ** mbits)
    if code == 0x80:
        return np.nan
    if r == 0x6F:
        mag = np.inf
    return -mag if s else mag


S1P2_VALUES, E2M1_VALUES, E4M3_VALUES, UE4M3_VALUES, E8M0_VALUES, E6M2_VALUES = (
    _values(n) for n in ("S1P2", "E2M1", "E4M3", "UE4M3", "E8M0", "E6M2"))
HIF8_VALUES = np.array([_hif8_decode_one(c) for c in range(256)])
for _t in (S1P2_VALUES, E2M1_VALUES, E4M3_VALUES, UE4M3_VALUES, E8M0_VALUES, E6M2_VALUES,
           HIF8_VALUES):
    _t.flags.writeable = False



# --------------------------------------------------------------------------- BF16

@_same_shape
def round_float_fast(a, man_bits, emin, emax):
    """RNE of a >= 0 (float64 array) to a float type with ``man_bits`` fraction bits,
    subnormals below 2**emin and overflow to Inf at 2**(emax+1); NaN stays NaN.

    Add-and-subtract rounding: with u = 2^(max(exp2floor(a), emin) - man_bits) the constant
    C = 1.5 * 2^52 * u puts a + C in the binade [2^52 u, 2^53 u) whose ulp is u, so
    fl(a + C) - C is a rounded RNE to a multiple of u (C / u is even). ``a`` is first
    clamped to 2^(emax+2) so that C stays finite; such values round to Inf anyway.
    """
    a = np.minimum(_c64(a), 2.0 ** (emax + 2))
    c = pow2_floor(a)
    np.maximum(c, 2.0 ** emin, out=c)
    c *= 1.5 * 2.0 ** (52 - man_bits)
    q = np.add(a, c)
    q -= c
    q[q >= 2.0 ** (emax + 1)] = np.inf
    return q


def bf16_round(x):
    """BF16(x) as an exact float64: RNE to 8 significant bits, gradual underflow (ulp 2^-133
    below 2^-126), overflow to +-Inf; NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.copysign(round_float_fast(np.abs(x), 7, -126, 127), x)


def encode_bf16(x):
    """BF16(x) bits (uint16): IEEE bfloat16 RNE of the float64 value; NaN -> 0x7FC0.

    This is the building block BF16(x) (-0.0 keeps its sign); the ``bf16`` format applies
    the spec's sign rule on top.
    """
    q = bf16_round(x)
    with np.errstate(over="ignore", invalid="ignore"):  # NaN lanes are replaced below
        bits = (q.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return np.where(np.isnan(q), np.uint16(0x7FC0), bits)


def decode_bf16(code):
    """float64 value of BF16 bits."""
    code = np.asarray(code).astype(np.uint32)
    with np.errstate(invalid="ignore"):
        return (code << 16).view(np.float32).astype(np.float64)


# --------------------------------------------------------------------------- encoders

def _sign_bit(v, bit):
    return np.where(np.asarray(v) < 0, 1 << bit, 0)


# E2M1 magnitude * 2 (0, 1, 2, 3, 4, 6, 8, 12) -> code.
_E2M1_CODE_OF_2Q = np.zeros(13, dtype=np.uint8)
_E2M1_CODE_OF_2Q[[0, 1, 2, 3, 4, 6, 8, 12]] = np.arange(8)


def e2m1_round(a):
    """RNE of a >= 0 (float64) onto the E2M1 magnitudes with saturation to 6 (NaN -> 0)."""
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        q = np.minimum(round_float(a, 1, 0), 6.0)
    return np.where(np.isnan(q), 0.0, q)


_EXP_MASK = np.uint64(0x7FF0000000000000)


@_same_shape
def pow2_floor(a):
    """2**exp2floor(a) for normal float64 a > 0 from the exponent bits (0.0 for zero and
    subnormals, Inf for Inf/NaN); ``a`` must be a float64 array."""
    a = _c64(a)
    return (a.view(np.uint64) & _EXP_MASK).view(np.float64)


def e2m1_round_fast(v, out=None, tmp=None):
    """Same as :func:`e2m1_round` for 0 <= v < 2**50 (float64), by the add-and-subtract
    rounding: with the grid spacing u (0.5 below 2, 1 below 4, else 2), C = 1.5 * 2**52 * u
    puts v + C in a binade whose ulp is u, so fl(v + C) - C is v rounded RNE to a multiple
    of u (C / u is even, so ties go to the even multiple), then saturate at 6.

    ``out`` and ``tmp`` are optional float64 buffers shaped like ``v`` (``out`` may be
    ``v`` itself)."""
    v = np.asarray(v, dtype=np.float64)
    shape = v.shape
    v = _c64(v)
    c = tmp.reshape(v.shape) if tmp is not None else np.empty_like(v)
    np.bitwise_and(v.view(np.uint64), _EXP_MASK, out=c.view(np.uint64))   # 2^exp2floor(v)
    np.clip(c, 1.0, 4.0, out=c)
    c *= 0.75 * 2.0 ** 52
    q = np.add(v, c, out=out.reshape(v.shape) if out is not None else None)
    q -= c
    return np.minimum(q, 6.0, out=q).reshape(shape)


@_same_shape
def e4m3_round_fast(v):
    """RNE of 0 <= v <= 448 (float64) onto the E4M3 magnitudes (add-and-subtract rounding
    with u = max(2^exp2floor(v), 2^-6) / 8, as in :func:`e2m1_round_fast`)."""
    v = _c64(v)
    c = pow2_floor(v)
    np.maximum(c, 2.0 ** -6, out=c)
    c *= 1.5 * 2.0 ** 49
    q = np.add(v, c)
    q -= c
    return q


@_same_shape
def e4m3_code_of_magnitude(q):
    """E4M3 code (uint8, sign 0) of an E4M3 magnitude q <= 448 (float64 array)."""
    q = _c64(q)
    bits = q.view(np.uint64)
    field = (bits >> np.uint64(52)).astype(np.int64)
    normal = ((field - 1023 + 7) << 3) | ((bits >> np.uint64(49)) & np.uint64(7)).astype(
        np.int64)
    sub = (q * 512.0).astype(np.int64)
    return np.where(q < 2.0 ** -6, sub, normal).astype(np.uint8)


def e2m1_code_of_magnitude(q):
    """E2M1 code (uint8, sign 0) of an E2M1 magnitude q (float array)."""
    return np.take(_E2M1_CODE_OF_2Q, (2 * q).astype(np.intp))


def encode_e2m1(v):
    """E2M1 codes (uint8) of float64 values: RNE with saturation to +-6; sign iff v < 0.

    NaN inputs give code 0 (a NaN block is handled by the block quantizer)."""
    v = np.asarray(v, dtype=np.float64)
    q = e2m1_round(np.abs(v))
    code = _E2M1_CODE_OF_2Q[(2 * q).astype(np.intp)]
    return (code | _sign_bit(v, 3)).astype(np.uint8)


def encode_e4m3(v):
    """OCP E4M3 codes (uint8): RNE of the float64 value; magnitudes above 464 (past the tie
    with the missing 480) and NaN/Inf give the NaN code 0x7F (with the sign bit of v < 0)."""
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    with np.errstate(invalid="ignore", over="ignore"):
        q = round_float(a, 3, -6)
        bad = ~(q <= 448.0)               # also NaN, Inf
        code = _fp_code(np.where(bad, 0.0, q), 3, -6)
    code = np.where(bad, 0x7F, code)
    return (code | _sign_bit(v, 7)).astype(np.uint8)


def encode_ue4m3(v):
    """UE4M3 codes: E4M3 of |v| with bit 7 written 0 (0x7F = NaN)."""
    return encode_e4m3(np.abs(np.asarray(v, dtype=np.float64)))


def encode_e6m2(sf):
    """HiF4 steps 3: clip sf to [2^-48, 49152], round RNE to E6M2 (carry to the next binade).

    Returns the uint8 code; NaN gives 0xFF.
    """
    sf = np.asarray(sf, dtype=np.float64)
    nan = np.isnan(sf)
    with np.errstate(invalid="ignore"):
        c = np.clip(np.where(nan, 1.0, sf), 2.0 ** -48, 49152.0)
        e = exp2floor(c)
        s = np.ldexp(np.rint(np.ldexp(c, 2 - e)), e - 2)
        e2 = exp2floor(s)
        m = np.ldexp(s, 2 - e2).astype(np.int64) - 4
    code = ((e2 + 48) << 2) | m
    return np.where(nan, 255, code).astype(np.uint8)


def _bf16_reciprocals():
    s = E6M2_VALUES.copy()
    s[255] = np.nan
    with np.errstate(invalid="ignore"):
        return bf16_round(1.0 / s)


#: REC = BF16(1/S) for every E6M2 code (NaN for 0xFF).
HIF4_REC = _bf16_reciprocals()
HIF4_REC.flags.writeable = False


# HiF8 mantissa width w for E = -22..16 (E >= 16 overflows anyway).
_HIF8_W = np.array([0 if e < -15 else 3 if abs(e) <= 3 else 2 if abs(e) <= 7 else 1
                    for e in range(-22, 17)], dtype=np.int64)


@_same_shape
def hif8_round(a):
    """Spec section 5 rounding of a >= 0 (float64): the HiF8 magnitude (Inf at and above
    40960, 0 below 2^-23, NaN stays NaN). E = exp2floor(a) comes from the exponent bits
    (E = -23 counts as -22), the powers of two are built from bits, and
    ``floor(a * 2^(w-E) + 0.5) * 2^(E-w)`` is evaluated as written."""
    a = _c64(a)
    e = (a.view(np.uint64) >> np.uint64(52)).astype(np.int64) - 1023
    np.clip(e, -22, 16, out=e)
    shift = np.take(_HIF8_W, e + 22) - e
    up = ((1023 + shift) << 52).view(np.float64)
    down = ((1023 - shift) << 52).view(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        q = a * up
        q += 0.5
        np.floor(q, out=q)
        q *= down
        np.copyto(q, np.inf, where=a >= HIF8_OVERFLOW)
        np.copyto(q, 0.0, where=a < 2.0 ** -23)
    return q


# Code of 2^E (positive) for E = -22..15, from the decode table; code(q) = base + M where
# M is the mantissa of q at the binade's width (0 for the denormals).
_HIF8_BASE = np.array([int(np.flatnonzero(HIF8_VALUES[:128] == 2.0 ** e)[0])
                       for e in range(-22, 16)], dtype=np.int64)


def encode_hif8(x):
    """HiF8 codes (uint8) of float64 values per spec section 5 (no -0; NaN -> 0x80)."""
    x = np.asarray(x, dtype=np.float64)
    shape = x.shape
    x = x.ravel()
    q = _c64(hif8_round(np.abs(x)))
    finite_nz = np.isfinite(q) & (q > 0)
    qf = np.where(finite_nz, q, 1.0)
    e = np.clip((qf.view(np.uint64) >> np.uint64(52)).astype(np.int64) - 1023, -22, 15)
    w = np.take(_HIF8_W, e + 22)
    scaled = qf * ((1023 + w - e) << 52).view(np.float64)      # q * 2^(w-E), exact
    m = scaled.astype(np.int64) - (1 << w)
    code = np.where(finite_nz, np.take(_HIF8_BASE, e + 22) + m, 0).astype(np.uint8)
    inf = np.isinf(q)
    code[inf] = 0x6F
    code[(x < 0) & (finite_nz | inf)] |= 0x80
    code[np.isnan(q)] = 0x80
    return code.reshape(shape)


# --------------------------------------------------------------------------- dtype rounding

def round_to_dtype(v, dtype):
    """Round float64 values once, RNE, to ``dtype`` (float16, bfloat16, float32, float64)."""
    dtype = np.dtype(dtype)
    v = np.asarray(v, dtype=np.float64)
    if dtype == np.float64:
        return v
    if dtype.name == "bfloat16":
        return encode_bf16(v).view(dtype)
    with np.errstate(over="ignore"):
        return v.astype(dtype)
