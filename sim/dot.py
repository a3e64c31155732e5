"""Bit-true dot-product units (``docs/formats.md`` section 7): steps, GEMM, packing.

A unit consumes one *step* per transfer: 64 elements of each operand (HiF4: one block,
MXFP4: two blocks, NVFP4: four blocks) and optionally one residual block, and keeps an FP32
accumulator ``acc = RNE_FP32(acc + v)`` where ``v`` is the exact step value.

Exact arithmetic
----------------
A step value is a short sum of *terms* ``P * 2**e`` with a signed integer ``P`` (an integer
block product sum times the integer significands of the two block scales) and an integer
exponent ``e``; the accumulator is one more such term (its 24-bit significand). The sum of
the terms is formed exactly and rounded once to FP32 (:func:`round_terms`): in one int64
where a row's terms fit a 62-bit window (the common case), otherwise in a multi-limb
fixed-point integer (int64 limbs of 30 bits spanning every exponent that occurs, from the
lowest term bit up to the highest). Block product sums are integers below 2**17, exact in
float32/float64 arithmetic; nothing with a fraction is ever summed in floating point, so main
and residual scales any number of binades apart and total cancellation are handled exactly.
Long accumulator chains of :func:`run_steps` are finished step by step on Python ints
(:func:`_round_terms_scalar`, the kernel's independent twin). :func:`accumulate_trunc` is
the truncating accumulator of ``--accum trunc`` (not spec section 7; for comparison), which
:func:`run_steps` and :func:`gemm` take with ``accum="trunc"``.
:func:`run_steps` evaluates the accumulator chain of a stream of steps; :func:`gemm` the same
for every (row, column) pair of two packed matrices, vectorized over rows and columns.

Step fields
-----------
Field arrays have a leading step dimension ``S`` and then the shape the spec gives the field
(``hif4spec.STEP_LAYOUTS[layout].shape(field)``), e.g. hif4 ``elem`` (S, 64), ``l3``
(S, 16), ``l2`` (S, 8), ``scale`` (S,); mxfp4 ``elem`` (S, 2, 32), ``scale`` (S, 2), block
0 first; NVFP4's UE4M3 scale bit 7 is ignored. A residual has the layout
``hif4spec.residual_layout(fmt, residual)``: the packed 2:4 residual ("hif4-2:4", the
fields of :func:`sim.formats.resq.pack_24`; "mxfp4-2:4", those of
:func:`sim.formats.resq_mxfp4.pack_24_mxfp4`), or the operand's own layout for "dense".
:func:`pack_steps` and its kin pack the same layouts (:mod:`sim.formats.packing`) and also
take "2:4" for "hif4-2:4" and "dense" for "hif4".
"""

import numpy as np

from hif4spec import (ACCUMS, FORMATS, RESIDUAL_MODES, STEP_LAYOUTS, TRUNC_BITS,
                      TRUNC_BITS_RANGE, TRUNC_PRESUM, UnitView, residual_layout,
                      step_layout)

from .formats import packing
from .formats.codecs import int_decode, int_grid
from .formats.registry import golden

__all__ = [
    "FORMATS_DOT",
    "RESIDUALS",
    "NAN_WORD",
    "step_terms",
    "step_value",
    "round_terms",
    "accumulate",
    "accumulate_trunc",
    "run_steps",
    "pack_step",
    "unpack_step",
    "pack_steps",
    "unpack_steps",
    "step_bytes",
    "gemm",
    "gemm_float",
    "operand_terms",
    "scale_result",
    "f32_bits",
    "bits_f32",
]

#: Formats with a dot-product unit, and the blocks one 64-element step holds.
FORMATS_DOT = UnitView("dot", lambda u: FORMATS[u.fmt].blocks_per_step, key="fmt")
#: Residual kinds a unit accepts, per format.
RESIDUALS = UnitView("dot", lambda u: u.residuals, key="fmt")
#: The FP32 word a unit emits for NaN.
NAN_WORD = 0x7FC00000

_LIMB = 30                      # bits per limb of the exact fixed-point sum
_FAST_BITS = 62                 # rows whose terms fit this many bits are summed in one int64
_LIMB_MASK = (1 << _LIMB) - 1

# ---------------------------------------------------------------------------------------
# Integer decode tables (spec section 1), from hif4spec.ELEMENT_TYPES via
# sim.formats.codecs.int_decode: a scale is (significand, exponent) with value sig * 2**exp,
# NaN codes flagged; an element is an integer on its type's grid (value = int * 2**lsb).

E2M1_INT2 = int_grid("E2M1")[0]                 # 2 * value (lsb 2**-1)
S1P2_INT4 = int_grid("S1P2")[0]                 # 4 * value (lsb 2**-2)
E6M2_SIG, E6M2_EXP, E6M2_NAN = int_decode("E6M2")
_, E8M0_EXP, E8M0_NAN = int_decode("E8M0")
UE4M3_SIG, UE4M3_EXP, UE4M3_NAN = int_decode("UE4M3")


# ---------------------------------------------------------------------------------------
# FP32 words


def f32_bits(x):
    """float32 values -> uint32 words, NaN canonicalized to 0x7FC00000."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).copy()
    bits[np.isnan(x)] = NAN_WORD
    return bits


def bits_f32(bits):
    """uint32 words -> float32 values."""
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _f32_terms(bits):
    """Finite FP32 words -> (signed significand, exponent); Inf/NaN give 0."""
    bits = np.asarray(bits, dtype=np.uint32).astype(np.int64)
    biased = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    sig = np.where(biased == 0, frac, frac | 0x800000)
    exp = np.where(biased == 0, -149, biased - 150)
    sig = np.where(biased == 0xFF, 0, sig)
    sig = np.where(bits >> 31 == 1, -sig, sig)
    return sig, exp


# ---------------------------------------------------------------------------------------
# The exact sum and its single rounding


def round_terms(P, E):
    """RNE_FP32 of the exact sum over the last axis of ``P * 2**E``.

    Parameters
    ----------
    P : int64 array (C, T)
        Signed integer significands, ``|P| < 2**62``.
    E : int array (C, T)
        Exponents (ignored where ``P == 0``).

    Returns
    -------
    uint32 array (C,)
        IEEE binary32 words: one rounding of the exact sum, gradual underflow, overflow to
        +-Inf; an exact zero sum gives +0, a nonzero sum that rounds to zero keeps its sign.

    Notes
    -----
    Where all of a row's terms fit one 62-bit window (the common case) the row's sum is one
    exact int64; other rows go through the multi-limb sum. Both end in :func:`_round_mag`.
    """
    P = np.asarray(P, dtype=np.int64)
    E = np.asarray(E, dtype=np.int64)
    if P.ndim == 1:
        P, E = P[:, None], E[:, None]
    return _round_cols(list(P.T), list(E.T), P.shape[0])


def _round_cols(Ps, Es, C):
    """:func:`round_terms` on terms given as lists of column arrays (C,) (fast layout)."""
    T = len(Ps)
    out = np.zeros(C, dtype=np.uint32)
    if C == 0 or T == 0:
        return out
    big = np.iinfo(np.int64).max
    nzs = [p != 0 for p in Ps]
    anynz = np.logical_or.reduce(nzs)
    if not anynz.any():
        return out
    pbits = max(int(np.abs(p).max()) for p in Ps).bit_length()
    emin = np.minimum.reduce([np.where(nz, e, big) for nz, e in zip(nzs, Es)])
    emax = np.maximum.reduce([np.where(nz, e, -big) for nz, e in zip(nzs, Es)])
    fast = anynz & (emax - emin <= _FAST_BITS - pbits - T.bit_length())
    nfast = int(fast.sum())
    if nfast:
        allfast = nfast == C
        em = emin if allfast else emin[fast]
        total = np.zeros(nfast, dtype=np.int64)
        for p, e, nz in zip(Ps, Es, nzs):
            if not allfast:
                p, e, nz = p[fast], e[fast], nz[fast]
            total += p << np.where(nz, e - em, 0)       # exact: |total| < 2**62
        words = _round_mag(np.abs(total), em, np.zeros(nfast, bool), total < 0, total != 0)
        if allfast:
            return words
        out[fast] = words
    slow = anynz & ~fast
    if slow.any():
        P = np.stack([p[slow] for p in Ps], axis=1)
        E = np.stack([e[slow] for e in Es], axis=1)
        out[slow] = _round_limbs(P, E, P != 0)
    return out


def _bit_length(V):
    """``int.bit_length`` of every element of an int64 array ``V >= 0``."""
    bl = np.frexp(V.astype(np.float64))[1].astype(np.int64)
    return np.where((V >> np.maximum(bl - 1, 0)) == 0, bl - 1, bl)    # float rounded up


def _round_mag(V, vbase, sticky, neg, nonzero):
    """FP32 words of (-1)**neg * (V + sticky * eps) * 2**vbase, V < 2**62 an int64 >= 0.

    ``sticky`` says that nonzero bits lie below V's bit 0 (the exact value is a little
    above V * 2**vbase); ``nonzero`` rows with V == 0 do not occur (a zero sum is +0).
    """
    bl = _bit_length(V)
    msb = vbase + bl - 1
    r = np.maximum(msb - 23, -149)
    shift = r - vbase
    down = np.clip(shift, 0, 63)                        # 63: all of V is below half an ulp
    q = V >> down
    rem = V - (q << down)
    half = np.where(down > 0, np.int64(1) << np.maximum(down - 1, 0), 1)
    up = (down > 0) & ((rem > half) | ((rem == half) & (sticky | ((q & 1) == 1))))
    q = np.where(shift < 0, V << np.clip(-shift, 0, 62), q + up)     # q * 2**r
    carry = q >= (1 << 24)
    q = np.where(carry, q >> 1, q)
    r = np.where(carry, r + 1, r)
    normal = q >= (1 << 23)
    biased = r + 150
    word = np.where(normal, (biased << 23) | (q & 0x7FFFFF), q)
    word = np.where(normal & (biased >= 255), 0x7F800000, word)
    word = np.where(neg, word | (1 << 31), word)
    word = np.where(nonzero, word, 0)
    return word.astype(np.uint32)


def _round_limbs(P, E, nz):
    """:func:`round_terms` for rows whose terms span more than one int64: an exact
    fixed-point sum in 30-bit limbs covering every exponent present, then one rounding."""
    C = P.shape[0]
    E = np.where(nz, E, E[nz].min())
    if np.abs(P).max() >= (1 << 31):     # split into pieces below 2**31 (exact)
        lo = P & _LIMB_MASK
        hi = P >> _LIMB
        P = np.concatenate([lo, hi], axis=1)
        E = np.concatenate([E, E + _LIMB], axis=1)
    base = int(E.min()) - _LIMB             # one zero limb below every term
    top = int(E.max()) + 31 + P.shape[1].bit_length() + 1
    L = (top - base) // _LIMB + 2
    limbs = np.zeros((L, C), dtype=np.int64)
    cols = np.arange(C)
    off = E - base
    idx = off // _LIMB
    sh = off % _LIMB
    for t in range(P.shape[1]):
        x = P[:, t] << sh[:, t]             # |x| < 2**61
        limbs[idx[:, t], cols] += x & _LIMB_MASK
        limbs[idx[:, t] + 1, cols] += x >> _LIMB
    _normalize(limbs)
    neg = limbs[-1] < 0
    if neg.any():
        limbs[:, neg] = -limbs[:, neg]
        _normalize(limbs)
    nzl = limbs != 0
    anynz = nzl.any(axis=0)
    t = L - 1 - np.argmax(nzl[::-1], axis=0)       # top nonzero limb (>= 1 when nonzero)
    t = np.where(anynz, t, 1)
    V = (limbs[t, cols] << _LIMB) | limbs[t - 1, cols]     # < 2**60
    cnt = np.cumsum(nzl, axis=0)
    sticky = np.where(t >= 2, cnt[np.maximum(t - 2, 0), cols] > 0, False)
    vbase = base + (t - 1) * _LIMB                  # exponent of V's bit 0
    return _round_mag(V, vbase, sticky, neg, anynz)


def _normalize(limbs):
    """Carry-propagate so limbs 0..L-2 lie in [0, 2**30); the top limb keeps the sign."""
    for k in range(limbs.shape[0] - 1):
        c = limbs[k] >> _LIMB
        limbs[k] &= _LIMB_MASK
        limbs[k + 1] += c


def _round_terms_scalar(terms):
    """Scalar twin of :func:`round_terms` on Python ints: terms = [(P, e), ...] -> word."""
    base = min((e for p, e in terms if p), default=None)
    if base is None:
        return 0
    s = 0
    for p, e in terms:
        if p:
            s += p << (e - base)
    if s == 0:
        return 0
    sign = 0
    if s < 0:
        sign, s = 1 << 31, -s
    msb = base + s.bit_length() - 1
    r = max(msb - 23, -149)
    shift = r - base
    if shift > 0:
        q = s >> shift
        rem = s & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
    else:
        q = s << -shift
    if q >= 1 << 24:
        q >>= 1
        r += 1
    if q >= 1 << 23:
        biased = r + 150
        if biased >= 255:
            return sign | 0x7F800000
        return sign | (biased << 23) | (q & 0x7FFFFF)
    return sign | q


def accumulate(acc, P, E, nan):
    """One step of the accumulator for many independent units.

    Parameters
    ----------
    acc : uint32 array (C,)
        FP32 words before the step (+0 for a ``first`` step).
    P, E : int64 arrays (C, T), or lists of T arrays (C,)
        The step's exact terms (see :func:`step_terms`).
    nan : bool array (C,)
        Whether the step holds a NaN scale.

    Returns
    -------
    uint32 array (C,)
        ``RNE_FP32(acc + v)``; NaN (0x7FC00000) if acc or the step is NaN; +-Inf stays.
    """
    acc = np.asarray(acc, dtype=np.uint32)
    sig, exp = _f32_terms(acc)
    if isinstance(P, (list, tuple)):                    # column lists (gemm)
        Ps, Es = [sig] + list(P), [exp] + list(E)
    else:
        Ps = [sig] + list(np.asarray(P, dtype=np.int64).T)
        Es = [exp] + list(np.asarray(E, dtype=np.int64).T)
    out = _round_cols(Ps, Es, len(acc))
    mag = acc & 0x7FFFFFFF
    is_inf = mag == 0x7F800000
    is_nan = (mag > 0x7F800000) | np.asarray(nan, dtype=bool)
    out = np.where(is_inf, acc, out)
    out = np.where(is_nan, NAN_WORD, out)
    return out.astype(np.uint32)


def _accumulate_scalar(acc, terms, nan):
    mag = acc & 0x7FFFFFFF
    if nan or mag > 0x7F800000:
        return NAN_WORD
    if mag == 0x7F800000:
        return acc
    if mag:
        biased = mag >> 23
        frac = mag & 0x7FFFFF
        sig, exp = (frac, -149) if biased == 0 else (frac | 0x800000, biased - 150)
        if acc >> 31:
            sig = -sig
        terms = [(sig, exp)] + terms
    return _round_terms_scalar(terms)


# ---------------------------------------------------------------------------------------
# The truncating accumulator: an option for comparison, not spec section 7
#
# Every nonzero operand of a step (the accumulator and each term) has a top place: a term's
# leading one, the accumulator's hidden-bit place (its word's alignment, -126 when
# subnormal). With m the highest of them and lam = m - 23 - extra_bits, each operand is
# truncated toward zero to a multiple of 2**lam, the truncated operands are added exactly,
# and the sum is rounded toward zero to FP32 (gradual underflow; a magnitude past the
# largest finite one gives it, 0x7F7FFFFF with the sign; an exact zero gives +0, a nonzero
# sum that truncates to zero keeps its sign). NaN and Inf follow spec section 7.
#
# The terms are those the unit's front end hands to its accumulator: one per block with its
# own scale (HiF4: the block, and the residual block; MXFP4: two blocks, and two residual
# blocks), except NVFP4, whose front end adds its four blocks exactly into one term first
# (their UE4M3 scales span few binades): there the step value is one operand
# (``hif4spec.TRUNC_PRESUM``).

_NO_TOP = -(1 << 40)            # the top place of a zero operand: below every real one


def _check_extra_bits(extra_bits):
    if isinstance(extra_bits, bool) or not isinstance(extra_bits, int) \
            or extra_bits not in TRUNC_BITS_RANGE:
        raise ValueError(f"extra_bits must be an integer from {TRUNC_BITS_RANGE[0]} to "
                         f"{TRUNC_BITS_RANGE[-1]}, not {extra_bits!r}")


def _rz_words(S, lam):
    """FP32 words of ``S * 2**lam`` rounded toward zero (``S`` int64, ``|S| < 2**62``)."""
    V = np.abs(S)
    bl = _bit_length(V)
    top = lam + bl - 1
    sh = bl - 24
    mant = np.where(sh >= 0, V >> np.clip(sh, 0, 63), V << np.clip(-sh, 0, 63))
    biased = top + 127
    normal = np.where(biased >= 255, 0x7F7FFFFF, (biased << 23) | (mant & 0x7FFFFF))
    k = lam + 149                       # a subnormal: S * 2**lam in units of 2**-149
    sub = np.where(k >= 0, V << np.clip(k, 0, 63), V >> np.clip(-k, 0, 63))
    word = np.where(top >= -126, normal, sub)
    word = np.where(S < 0, word | (1 << 31), word)
    return np.where(S == 0, 0, word).astype(np.uint32)


def accumulate_trunc(acc, P, E, nan, extra_bits=TRUNC_BITS):
    """One step of the truncating accumulator (``hif4spec.ACCUMS`` ``"trunc"``) for many
    units: the arguments and result of :func:`accumulate`, but the sum is the truncated one
    described above (``extra_bits`` below the largest operand's 24, 0 to 30), not
    ``RNE_FP32(acc + v)``."""
    _check_extra_bits(extra_bits)
    acc = np.asarray(acc, dtype=np.uint32)
    sig, exp = _f32_terms(acc)
    if isinstance(P, (list, tuple)):
        Ps, Es = [sig] + list(P), [exp] + list(E)
    else:
        Ps = [sig] + list(np.asarray(P, dtype=np.int64).T)
        Es = [exp] + list(np.asarray(E, dtype=np.int64).T)
    Es = [np.asarray(e, dtype=np.int64) for e in Es]
    tops = [np.where(sig != 0, exp + 23, _NO_TOP)]
    tops += [np.where(p != 0, e + _bit_length(np.abs(p)) - 1, _NO_TOP)
             for p, e in zip(Ps[1:], Es[1:])]
    lam = np.maximum.reduce(tops) - 23 - extra_bits
    S = np.zeros(len(acc), dtype=np.int64)
    for p, e in zip(Ps, Es):
        d = lam - e
        mag = np.abs(p)
        kept = np.where(d >= 0, mag >> np.clip(d, 0, 63), mag << np.clip(-d, 0, 63))
        S += np.where(p < 0, -kept, kept)
    out = _rz_words(S, lam)
    mag = acc & 0x7FFFFFFF
    out = np.where(mag == 0x7F800000, acc, out)
    out = np.where((mag > 0x7F800000) | np.asarray(nan, dtype=bool), NAN_WORD, out)
    return out.astype(np.uint32)


def _accumulate_trunc_scalar(acc, terms, nan, extra_bits=TRUNC_BITS):
    """Scalar twin of :func:`accumulate_trunc` on Python ints: terms = [(P, e), ...]."""
    mag = acc & 0x7FFFFFFF
    if nan or mag > 0x7F800000:
        return NAN_WORD
    if mag == 0x7F800000:
        return acc
    ops = [(p, e, e + abs(p).bit_length() - 1) for p, e in terms if p]
    if mag:
        biased = mag >> 23
        sig, exp = (mag, -149) if biased == 0 else ((mag & 0x7FFFFF) | 0x800000, biased - 150)
        ops.append((-sig if acc >> 31 else sig, exp, exp + 23))
    if not ops:
        return 0
    lam = max(top for _, _, top in ops) - 23 - extra_bits
    s = 0
    for p, e, _ in ops:
        kept = abs(p) << (e - lam) if e >= lam else abs(p) >> (lam - e)
        s += -kept if p < 0 else kept
    if s == 0:
        return 0
    sign = 1 << 31 if s < 0 else 0
    s = abs(s)
    top = lam + s.bit_length() - 1
    if top < -126:
        return sign | (s << (lam + 149) if lam >= -149 else s >> (-149 - lam))
    if top + 127 >= 255:
        return sign | 0x7F7FFFFF
    sh = s.bit_length() - 24
    mant = s >> sh if sh >= 0 else s << -sh
    return sign | ((top + 127) << 23) | (mant & 0x7FFFFF)


def _presum(P, E):
    """The exact sum of a step's terms as one term, ``([P], [E])`` (columns (C,)): the
    terms must lie within 62 bits of each other (NVFP4's do)."""
    if not isinstance(P, (list, tuple)):
        P, E = list(np.asarray(P, dtype=np.int64).T), list(np.asarray(E, dtype=np.int64).T)
    nz = [p != 0 for p in P]
    base = np.minimum.reduce([np.where(z, e, 1 << 40) for z, e in zip(nz, E)])
    base = np.where(base == 1 << 40, 0, base)
    total = sum(np.where(z, p << np.where(z, e - base, 0), 0) for p, z, e in zip(P, nz, E))
    return [total], [base]


def _presum_scalar(terms):
    """:func:`_presum` of one step's ``[(P, e), ...]`` on Python ints."""
    base = min((e for p, e in terms if p), default=0)
    return [(sum(p << (e - base) for p, e in terms if p), base)]


def _steppers(accum, extra_bits, fmt=None):
    """``(vectorized, scalar)`` step functions of back end ``accum`` (``ACCUMS``) for the
    units of ``fmt``."""
    if accum not in ACCUMS:
        raise ValueError(f"accum must be one of {', '.join(ACCUMS)}, not {accum!r}")
    if accum != "trunc":
        return accumulate, _accumulate_scalar
    _check_extra_bits(extra_bits)
    if fmt in TRUNC_PRESUM:
        return (lambda acc, P, E, nan: accumulate_trunc(acc, *_presum(P, E), nan, extra_bits),
                lambda acc, terms, nan: _accumulate_trunc_scalar(acc, _presum_scalar(terms),
                                                                 nan, extra_bits))
    return (lambda acc, P, E, nan: accumulate_trunc(acc, P, E, nan, extra_bits),
            lambda acc, terms, nan: _accumulate_trunc_scalar(acc, terms, nan, extra_bits))


# ---------------------------------------------------------------------------------------
# Exact step terms


def _check_fmt(fmt, residual="none"):
    if fmt not in FORMATS_DOT:
        raise ValueError(f"Dot-product format must be one of {', '.join(FORMATS_DOT)}, "
                         f"not {fmt!r}")
    if residual not in RESIDUALS[fmt]:
        raise ValueError(f"Residual for {fmt} must be one of {', '.join(RESIDUALS[fmt])}, "
                         f"not {residual!r}")


class _Tables:
    """``_TABLES[fmt]``: format ``fmt``'s element ints as float32, their lsb exponent and
    its scale table (``GoldenFormat.dot_tables``, built on first use)."""

    def __getitem__(self, fmt):
        return golden(fmt).dot_tables


_TABLES = _Tables()


def __getattr__(name):
    if name == "_S1P2_SHIFTED":            # HiF4 element ints with their micro-exponents
        from .formats.builtin import hif4_shifted_ints

        return hif4_shifted_ints()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _fmt_of(spec):
    """The operand format of a FormatSpec or ResidualBlockSpec."""
    return getattr(spec, "fmt", spec.name)


def _operand(lay, f):
    """Fields of step layout ``lay`` (any leading dims) -> integer element values, float32
    (..., blocks, positions), and scale codes, int64 (..., blocks).

    The format object decodes the elements (``GoldenFormat.decode_elements``: HiF4 elements
    carry their micro-exponents); a packed 2:4 block is expanded to its positions
    (:func:`_scatter24`).
    """
    spec = lay.spec
    fields = spec.fields
    v = golden(_fmt_of(spec)).decode_elements(f, spec)
    if "pos" in fields:
        v = _scatter24(spec, v, np.asarray(f["pos"], dtype=np.intp))
    scale = np.asarray(f["scale"], dtype=np.int64)
    if lay.blocks == 1:
        v, scale = v[..., None, :], scale[..., None]
    return v, scale


def _scatter24(spec, val, pos):
    """Kept values (..., kept) of a 2:4 block ``spec`` -> float32 (..., positions): kept j of
    micro-group g lands on position ``g * size + pos_j``; two kept on one position add."""
    size = 1 << spec.fields["pos"].width                # positions per micro-group
    per = spec.kept * size // spec.positions            # kept elements per micro-group
    lead = val.shape[:-1]
    groups = spec.positions // size
    v = val.astype(np.float32, copy=False).reshape(lead + (groups, per))
    p = (pos & (size - 1)).astype(np.uint8).reshape(lead + (groups, per))
    vk = [np.ascontiguousarray(v[..., k]) for k in range(per)]
    pk = [np.ascontiguousarray(p[..., k]) for k in range(per)]
    # Position j of a micro-group holds the sum of its kept values that land there: at most
    # ``per`` small integers added to +0, exact in float32.
    dense = np.empty(lead + (groups, size), dtype=np.float32)
    zero = np.float32(0)
    for j in range(size):
        col = np.zeros(lead + (groups,), dtype=np.float32)
        for k in range(per):
            col += np.where(pk[k] == j, vk[k], zero)
        dense[..., j] = col
    return dense.reshape(lead + (spec.positions,))


def _scale_parts(fmt, s):
    """Scale codes -> (significand, exponent of the element lsb, NaN) of every block."""
    _, lsb, sig, exp, nan = _TABLES[fmt]
    s = s & (len(sig) - 1)
    return sig[s], exp[s] + lsb, nan[s]


def _dot_last(x, y):
    """Exact integer dot products over the last axis of float32 integer arrays -> int64."""
    return np.einsum("...i,...i->...", x, y).astype(np.int64)


#: Steps per pass of :func:`step_terms` (its arrays stay in the caches).
_TERMS_BLOCK = 8192


def step_terms(fmt, a, w, r=None, residual="none"):
    """Exact terms of every step: value = sum_t P[:, t] * 2**E[:, t].

    Returns
    -------
    P : int64 (S, T), E : int64 (S, T), nan : bool (S,)
        One term per block of each operand pair: ``T`` is the step's block count (1 hif4,
        2 mxfp4, 4 nvfp4), twice that with a residual.
    """
    _check_fmt(fmt, residual)
    if residual != "none" and r is None:
        raise ValueError(f"residual={residual!r} needs the residual fields r")
    a = {k: np.asarray(v) for k, v in a.items()}
    w = {k: np.asarray(v) for k, v in w.items()}
    r = None if residual == "none" else {k: np.asarray(v) for k, v in r.items()}
    S = len(a["scale"])
    if S <= _TERMS_BLOCK:
        return _step_terms(fmt, a, w, r, residual)

    def part(f, i):
        return None if f is None else {k: v[i:i + _TERMS_BLOCK] for k, v in f.items()}

    parts = [_step_terms(fmt, part(a, i), part(w, i), part(r, i), residual)
             for i in range(0, S, _TERMS_BLOCK)]
    return tuple(np.concatenate(x) for x in zip(*parts))


def _step_terms(fmt, a, w, r, residual):
    av, asc = _operand(step_layout(fmt), a)
    wv, wsc = _operand(step_layout(fmt), w)
    asig, aexp, anan = _scale_parts(fmt, asc)
    wsig, wexp, wnan = _scale_parts(fmt, wsc)
    P = [_dot_last(av, wv) * asig * wsig]
    E = [aexp + wexp]
    nan = (anan | wnan).any(axis=-1)
    if residual != "none":
        lay = residual_layout(fmt, residual)
        if "pos" in lay.spec.fields:
            rdot, rsc = _kept_dot(lay, r, wv)
        else:
            rv, rsc = _operand(lay, r)
            rdot = _dot_last(rv, wv)
        rsig, rexp, rnan = _scale_parts(fmt, rsc)
        P.append(rdot * rsig * wsig)
        E.append(rexp + wexp)
        nan = nan | rnan.any(axis=-1)
    return np.concatenate(P, -1), np.concatenate(E, -1), nan


def _kept_dot(lay, f, wv):
    """``(dots, scale codes)`` of packed 2:4 fields ``f`` of step layout ``lay`` against
    the dense values ``wv`` (..., blocks, positions): the integer dot product (int64) of
    each block, the kept values times the values at their positions (kept j of micro-group
    g sits at ``g * size + pos_j``), the same sums as :func:`_scatter24` and a dot, without
    the dense block."""
    spec = lay.spec
    v = golden(_fmt_of(spec)).decode_elements(f, spec)
    size = 1 << spec.fields["pos"].width                # positions per micro-group
    per = spec.kept * size // spec.positions            # kept elements per micro-group
    idx = ((np.arange(spec.kept, dtype=np.intp) // per) * size
           + (np.asarray(f["pos"]).astype(np.intp) & (size - 1)))
    scale = np.asarray(f["scale"], dtype=np.int64)
    if lay.blocks == 1:
        v, idx, scale = v[..., None, :], idx[..., None, :], scale[..., None]
    return _dot_last(v, np.take_along_axis(wv, idx, axis=-1)), scale


def step_value(fmt, a, w, r=None, residual="none"):
    """Exact step values as a list of :class:`fractions.Fraction` (None for a NaN step)."""
    from fractions import Fraction

    P, E, nan = step_terms(fmt, a, w, r, residual)
    out = []
    for p, e, n in zip(P.tolist(), E.tolist(), nan.tolist()):
        out.append(None if n else sum((Fraction(x) * Fraction(2) ** y for x, y in zip(p, e)),
                                      Fraction(0)))
    return out


# ---------------------------------------------------------------------------------------
# Streams of steps


def run_steps(fmt, a, w, first, last=None, r=None, residual="none", accum="window",
              extra_bits=TRUNC_BITS):
    """The FP32 accumulator word after every step of a stream.

    Parameters
    ----------
    fmt : {"hif4", "mxfp4", "nvfp4"}
    a, w : dict of arrays
        Step fields with a leading step dimension S (see the module docstring).
    first : bool array (S,)
        The step starts from +0 (the unit also starts from +0 after reset).
    last : bool array (S,), optional
        Where the unit emits; it does not change the accumulator (accepted for symmetry).
    r : dict of arrays, optional
        Residual step fields for ``residual`` "2:4" (HiF4 packed 2:4) or "dense".
    accum : str
        The accumulator back end (``hif4spec.ACCUMS``): the exact ones give the same words;
        ``"trunc"`` those of :func:`accumulate_trunc` with ``extra_bits`` (on the terms
        its unit adds: ``hif4spec.TRUNC_PRESUM``).

    Returns
    -------
    uint32 array (S,)
        The accumulator after each step (the unit emits the words where ``last`` is set).
    """
    steppers = _steppers(accum, extra_bits, fmt)
    _check_fmt(fmt, residual)
    a, S = packing.check_steps(step_layout(fmt), a, fmt, "a")
    w, Sw = packing.check_steps(step_layout(fmt), w, fmt, "w")
    if Sw != S:
        raise ValueError(f"a has {S} steps but w has {Sw}")
    if residual != "none":
        if r is None:
            raise ValueError(f"residual={residual!r} needs the residual fields r")
        lay = residual_layout(fmt, residual)
        r, Sr = packing.check_steps(lay, r, lay.name, "r")
        if Sr != S:
            raise ValueError(f"a has {S} steps but r has {Sr}")
    first = np.asarray(first, dtype=bool).reshape(-1)
    if first.shape != (S,):
        raise ValueError(f"first must have shape ({S},), not {first.shape}")
    if last is not None and np.asarray(last).reshape(-1).shape != (S,):
        raise ValueError(f"last must have shape ({S},)")
    P, E, nan = step_terms(fmt, a, w, r, residual)
    return _chain(P, E, nan, first, *steppers)


#: Below this many chains still running, the rest of a stream is evaluated step by step.
_VECTOR_MIN = 48


def _chain(P, E, nan, first, step=accumulate, step_scalar=_accumulate_scalar):
    S = P.shape[0]
    out = np.zeros(S, dtype=np.uint32)
    if S == 0:
        return out
    idx = np.arange(S)
    start = first.copy()
    start[0] = True
    pos = idx - np.maximum.accumulate(np.where(start, idx, 0))
    order = np.argsort(pos, kind="stable")
    counts = np.bincount(pos)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    p = 0
    while p < len(counts) and counts[p] >= _VECTOR_MIN:
        sel = order[bounds[p]:bounds[p + 1]]
        acc = out[sel - 1] if p else np.zeros(len(sel), dtype=np.uint32)
        out[sel] = step(acc, P[sel], E[sel], nan[sel])
        p += 1
    if p < len(counts):
        rest = np.sort(order[bounds[p]:])
        Pl, El, nl = P[rest].tolist(), E[rest].tolist(), nan[rest].tolist()
        prev = out[rest - 1].tolist() if p else None
        vals = {}
        for k, i in enumerate(rest.tolist()):
            if pos[i] == p:
                acc = int(prev[k]) if p else 0
            else:
                acc = vals[i - 1]
            vals[i] = step_scalar(acc, list(zip(Pl[k], El[k])), nl[k])
        out[rest] = [vals[i] for i in rest.tolist()]
    return out


# ---------------------------------------------------------------------------------------
# Packing one step to an int (spec layouts; block 0 in the low bits)

#: Older names of two step layouts: the HiF4 unit's residual layouts under their modes.
_ALIASES = {mode: residual_layout("hif4", mode).name for mode in RESIDUAL_MODES
            if mode != "none"}


def _layout(name):
    """The :class:`hif4spec.StepLayout` called ``name`` (a spec name or an alias)."""
    try:
        return step_layout(_ALIASES.get(name, name))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"Step layout must be one of {', '.join([*STEP_LAYOUTS, *_ALIASES])}, "
                         f"not {name!r}") from None


def step_bytes(fmt):
    """Bytes of one packed step of layout ``fmt`` (``hif4spec.StepLayout.bytes``)."""
    return _layout(fmt).bytes


def pack_steps(fmt, fields):
    """Fields with a leading step dimension S -> list of S Python ints (spec bit layouts).

    ``fmt`` names the step layout: "hif4", "mxfp4", "nvfp4", "hif4-2:4" (alias "2:4"),
    "mxfp4-2:4" or "dense" (= "hif4"); block 0 in the low bits.
    """
    lay = _layout(fmt)
    f, _ = packing.check_steps(lay, fields, fmt, "step")
    f = {k: v.astype(np.int64) for k, v in f.items()}
    packing.check_range(lay, f)
    return packing.pack_ints(lay, f)


def unpack_steps(fmt, words):
    """Inverse of :func:`pack_steps`: a sequence of ints -> fields with leading dim S."""
    lay = _layout(fmt)
    words = [int(x) for x in words]
    if any(x < 0 for x in words):
        raise ValueError("packed steps must be non-negative ints")
    if any(x >> lay.bits for x in words):
        raise ValueError(f"a packed {fmt} step has at most {lay.bits} bits")
    return packing.unpack_ints(lay, words)


def pack_step(fmt, fields):
    """One step's fields (no step dimension) -> Python int in the spec's packed layout.

    The single-step twin of :func:`pack_steps` (same layouts); it also rejects non-integer
    arrays.
    """
    lay = _layout(fmt)
    one = {}
    for name in lay.fields:
        try:
            v = np.asarray(fields[name])
        except KeyError:
            raise ValueError(f"step fields for {fmt} need {name!r} (have {sorted(fields)})") \
                from None
        if v.shape != lay.shape(name):
            raise ValueError(f"step field {name!r} for {fmt} must have shape "
                             f"{lay.shape(name)}, not {v.shape}")
        if v.dtype.kind not in "uib":
            raise ValueError(f"field {name!r} holds values outside "
                             f"0..{(1 << lay.width(name)) - 1}")
        packing.check_range(lay, {name: v})
        one[name] = v[None]
    return packing.pack_ints(lay, one)[0]


def unpack_step(fmt, word):
    """Python int -> one step's fields (no step dimension)."""
    lay = _layout(fmt)
    word = int(word)
    if not 0 <= word < 1 << lay.bits:
        raise ValueError(f"a packed {fmt} step is a non-negative int of at most {lay.bits} "
                         "bits")
    return {k: v[0, ...] for k, v in packing.unpack_ints(lay, [word]).items()}


# ---------------------------------------------------------------------------------------
# GEMM over packed matrices


def _steps_of(qt, what):
    """A QuantizedTensor (rows, K) quantized along K -> per-step field arrays
    with shape (rows, nsteps, ...) in the run_steps layout, zero blocks padding the tail."""
    fmt = qt.fmt
    if len(qt.shape) != 2 or qt.axis != 1:
        raise ValueError(f"{what} must be a 2-D tensor quantized along axis 1 (K), "
                         f"not shape {qt.shape} axis {qt.axis}")
    nblk = FORMATS_DOT[fmt]
    f = {k: np.asarray(v) for k, v in qt.fields.items() if k != "tensor_scale"}
    rows, nb = f["scale"].shape[:2]
    ns = -(-nb // nblk)
    pad = ns * nblk - nb
    if pad:
        f = {k: np.concatenate([v, np.zeros((rows, pad) + v.shape[2:], v.dtype)], axis=1)
             for k, v in f.items()}
    lay = step_layout(fmt)
    return {k: f[k].reshape((rows, ns) + lay.shape(k)) for k in lay.fields}, ns


def _block_sums(x, y):
    """(M, n) x (N, n) integer-valued float32 -> int64 (M, N) block sums, exact: products
    are at most 784 and sums below 2**16, so any summation order is exact in float32.
    (einsum's own loop, not BLAS: a threaded BLAS crawls on a loaded machine.)"""
    return np.einsum("in,jn->ij", x.astype(np.float32), y, optimize=False).astype(np.int64)


def gemm(a_qt, w_qt, r=None, *, scaled=False, row_chunk=None, accum="window",
         extra_bits=TRUNC_BITS):
    """The FP32 words the unit emits for every (row of A, row of W) pair.

    Parameters
    ----------
    a_qt, w_qt : QuantizedTensor
        A (M, K) and W (N, K), same format (hif4, mxfp4, nvfp4), quantized along axis 1.
        The K blocks form the steps (64 elements each), ``first`` on the first step and
        ``last`` on the last; a tail short of a whole step is padded with zero blocks.
    r : QuantizedTensor or dict or ResQ result, optional
        The activation residual: a QuantizedTensor (M, K) of the same format (dense, or
        sparsified with dropped codes zeroed: the value is the same as the packed 2:4 form);
        a dict of packed 2:4 fields from :func:`sim.formats.resq.pack_24` (HiF4); or an
        object with ``.residual`` (the result of :func:`sim.formats.resq.resq`).
    scaled : bool
        NVFP4: return y = RNE_FP32(acc * T_a * T_w) instead of the unit's words.
    row_chunk : int, optional
        Rows of A per pass (bounds memory); default keeps about 2**16 cells per pass.
    accum : str
        The units' accumulator back end (``hif4spec.ACCUMS``): the exact ones give the same
        words; ``"trunc"`` those of :func:`accumulate_trunc` with
        ``extra_bits`` (on the terms its unit adds: ``hif4spec.TRUNC_PRESUM``).

    Returns
    -------
    uint32 array (M, N)
    """
    step = _steppers(accum, extra_bits, a_qt.fmt)[0]
    fmt = a_qt.fmt
    if fmt not in FORMATS_DOT or w_qt.fmt != fmt:
        raise ValueError(f"gemm needs two tensors of one of {', '.join(FORMATS_DOT)}, "
                         f"not {a_qt.fmt!r} and {w_qt.fmt!r}")
    if a_qt.shape[1:] != w_qt.shape[1:]:
        raise ValueError(f"A {a_qt.shape} and W {w_qt.shape} must have the same K")
    af, ns = _steps_of(a_qt, "A")
    wf, _ = _steps_of(w_qt, "W")
    M, N = a_qt.shape[0], w_qt.shape[0]
    ai, asc = _operand(step_layout(fmt), af)   # (M, ns, nblk, n)
    wi, wsc = _operand(step_layout(fmt), wf)
    asig, aexp, anan = _scale_parts(fmt, asc)   # (M, ns, nblk)
    wsig, wexp, wnan = _scale_parts(fmt, wsc)
    rdense = None
    if r is not None:
        rdense = _residual_ints(fmt, r, a_qt)
    if row_chunk is None:
        row_chunk = max(1, (1 << 16) // max(N, 1))
    out = np.zeros((M, N), dtype=np.uint32)
    wif = wi.astype(np.float32)
    for m0 in range(0, M, row_chunk):
        ms = slice(m0, min(M, m0 + row_chunk))
        mc = ms.stop - ms.start
        acc = np.zeros(mc * N, dtype=np.uint32)
        for k in range(ns):
            Pl, El = [], []
            nan = (anan[ms, k].any(-1)[:, None] | wnan[:, k].any(-1)[None, :])
            for b in range(ai.shape[2]):
                s = _block_sums(ai[ms, k, b], wif[:, k, b])
                Pl.append(s * asig[ms, k, b][:, None] * wsig[:, k, b][None, :])
                El.append(aexp[ms, k, b][:, None] + wexp[:, k, b][None, :])
            if rdense is not None:
                ri, rsig, rexp, rnan = rdense
                for b in range(ri.shape[2]):
                    s = _block_sums(ri[ms, k, b], wif[:, k, b])
                    Pl.append(s * rsig[ms, k, b][:, None] * wsig[:, k, b][None, :])
                    El.append(rexp[ms, k, b][:, None] + wexp[:, k, b][None, :])
                nan = nan | rnan[ms, k].any(-1)[:, None]
            P = [p.reshape(-1) for p in Pl]
            E = [np.broadcast_to(e, (mc, N)).reshape(-1) for e in El]
            nan = np.broadcast_to(nan, (mc, N)).reshape(-1)
            acc = step(acc, P, E, nan)
        out[ms] = acc.reshape(mc, N)
    if scaled and golden(fmt).has_tensor_scale:
        out = scale_result(out, a_qt.fields["tensor_scale"], w_qt.fields["tensor_scale"])
    return out


def _packed_24(fmt):
    """Whether GEMM takes ``fmt``'s packed 2:4 residual as a dict: one 2:4 block a step, so
    the packed fields of a tensor are already its steps."""
    return "2:4" in RESIDUALS[fmt] and residual_layout(fmt, "2:4").blocks == 1


def _residual_ints(fmt, r, a_qt):
    if hasattr(r, "residual") and not isinstance(r, dict):
        r = r.residual
    if isinstance(r, dict):                      # packed 2:4 fields (one block a step)
        if not _packed_24(fmt):
            ok = [f for f in FORMATS_DOT if _packed_24(f)]
            raise ValueError(f"packed 2:4 residual fields are for {', '.join(ok)} only")
        f = {k: np.asarray(v) for k, v in r.items()}
        if f["scale"].shape != a_qt.fields["scale"].shape:
            raise ValueError("residual must match A's blocks")
        ri, rs = _operand(residual_layout(fmt, "2:4"), f)
    else:
        if r.fmt != fmt or r.shape != a_qt.shape or r.axis != a_qt.axis:
            raise ValueError(f"residual must be a {fmt} tensor of A's shape {a_qt.shape} "
                             f"quantized along axis 1")
        if RESIDUALS[fmt] == ("none",):
            raise ValueError(f"{fmt.upper()} units have no residual input")
        rf, _ = _steps_of(r, "residual")
        ri, rs = _operand(step_layout(fmt), rf)
    rsig, rexp, rnan = _scale_parts(fmt, rs)
    return ri, rsig, rexp, rnan


def operand_terms(qt, r=None):
    """The exact block terms :func:`gemm` forms of one operand: a QuantizedTensor (rows, K)
    quantized along K, and A's residual ``r`` as :func:`gemm` takes it.

    Returns ``(ints, sig, exp, nan)``: integer element values, float32 (rows, steps, blocks,
    n); per block the scale's integer significand and the exponent of the elements' unit,
    int64, and whether the scale is NaN (rows, steps, blocks). An element's value is
    ``int * sig * 2**exp``. The residual's blocks follow the operand's own on the blocks
    axis.
    """
    f, _ = _steps_of(qt, "operand")
    ints, scale = _operand(step_layout(qt.fmt), f)
    parts = [(ints,) + _scale_parts(qt.fmt, scale)]
    if r is not None:
        parts.append(_residual_ints(qt.fmt, r, qt))
    return tuple(np.concatenate(p, axis=2) for p in zip(*parts))


def gemm_float(a_qt, w_qt, r=None, *, scaled=False):
    """:func:`gemm` as float32 values."""
    return bits_f32(gemm(a_qt, w_qt, r, scaled=scaled))


def scale_result(acc_words, t_a, t_w):
    """NVFP4 outside the unit: y = RNE_FP32(acc * T_a * T_w), the product taken exactly.

    One rounding of the exact product; IEEE sign rules (an exact zero keeps the XOR of the
    signs); NaN accumulators give NaN, +-Inf accumulators stay +-Inf (NaN if a T is 0).
    """
    acc = np.asarray(acc_words, dtype=np.uint32)
    shape = acc.shape
    acc = acc.reshape(-1)
    ta = np.asarray(t_a, dtype=np.float32).reshape(1)
    tw = np.asarray(t_w, dtype=np.float32).reshape(1)
    if not (np.isfinite(ta).all() and np.isfinite(tw).all()):
        raise ValueError(f"tensor scales must be finite, not {ta[0]} and {tw[0]}")
    sa, ea = _f32_terms(f32_bits(ta))
    sw, ew = _f32_terms(f32_bits(tw))
    tsig = int(sa[0]) * int(sw[0])                  # |tsig| < 2**48
    texp = int(ea[0]) + int(ew[0])
    tneg = tsig < 0
    tsig = abs(tsig)
    sig, exp = _f32_terms(acc)
    if tneg:
        sig = -sig
    P = np.stack([sig * (tsig & 0xFFFFFF), sig * (tsig >> 24)], -1)   # each < 2**48
    E = np.stack([exp + texp, exp + texp + 24], -1)
    out = round_terms(P, E)
    sign = (acc & 0x80000000) ^ (np.uint32(0x80000000) if tneg else np.uint32(0))
    mag = acc & 0x7FFFFFFF
    out = np.where((mag == 0) | (tsig == 0), sign, out)               # exact zero product
    out = np.where(mag == 0x7F800000, sign | np.uint32(0x7F800000), out)
    out = np.where((mag > 0x7F800000) | ((mag == 0x7F800000) & (tsig == 0)), NAN_WORD, out)
    return out.astype(np.uint32).reshape(shape)
