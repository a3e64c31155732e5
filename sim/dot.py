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
(:func:`_round_terms_scalar`, the kernel's independent twin).
:func:`run_steps` evaluates the accumulator chain of a stream of steps; :func:`gemm` the same
for every (row, column) pair of two packed matrices, vectorized over rows and columns.

Step fields
-----------
With a leading step dimension ``S``:

- hif4: ``elem`` (S, 64), ``l3`` (S, 16), ``l2`` (S, 8), ``scale`` (S,) (E6M2);
- mxfp4: ``elem`` (S, 2, 32), ``scale`` (S, 2) (E8M0), block 0 first;
- nvfp4: ``elem`` (S, 4, 16), ``scale`` (S, 4) (UE4M3, bit 7 ignored);
- residual "2:4" (HiF4 only): ``elem`` (S, 32), ``pos`` (S, 32), ``l3`` (S, 16),
  ``l2`` (S, 8), ``scale`` (S,) (the fields of :func:`sim.formats.resq.pack_24`);
- residual "dense": the operand's own fields (hif4, or mxfp4);
- residual "2:4" of MXFP4: ``elem`` (S, 2, 16), ``pos`` (S, 2, 16), ``scale`` (S, 2) (the
  packed MXFP4 2:4 residual of :mod:`sim.formats.resq_mxfp4`; step layout name "mxfp4-2:4").
"""

import numpy as np

__all__ = [
    "FORMATS_DOT",
    "RESIDUALS",
    "NAN_WORD",
    "step_terms",
    "step_value",
    "round_terms",
    "accumulate",
    "run_steps",
    "pack_step",
    "unpack_step",
    "pack_steps",
    "unpack_steps",
    "step_bytes",
    "random_steps",
    "gemm",
    "gemm_float",
    "scale_result",
    "f32_bits",
    "bits_f32",
]

#: Formats with a dot-product unit, and the blocks one 64-element step holds.
FORMATS_DOT = {"hif4": 1, "mxfp4": 2, "nvfp4": 4}
#: Residual kinds a unit accepts, per format.
RESIDUALS = {"hif4": ("none", "2:4", "dense"), "mxfp4": ("none", "2:4", "dense"),
             "nvfp4": ("none",)}
#: The FP32 word a unit emits for NaN.
NAN_WORD = 0x7FC00000

_LIMB = 30                      # bits per limb of the exact fixed-point sum
_FAST_BITS = 62                 # rows whose terms fit this many bits are summed in one int64
_LIMB_MASK = (1 << _LIMB) - 1

# ---------------------------------------------------------------------------------------
# Integer decode tables (spec section 1), written out independently of sim.formats.codecs.
# A scale is (significand int, exponent int) with value sig * 2**exp; NaN codes are flagged.

_E2M1_MAG2 = np.array([0, 1, 2, 3, 4, 6, 8, 12], dtype=np.int64)  # 2 * |value| by code & 7
# E2M1 code -> 2 * value (signed int); -0 -> 0.
E2M1_INT2 = np.array([(-1 if c & 8 else 1) * int(_E2M1_MAG2[c & 7]) for c in range(16)],
                     dtype=np.int64)
# S1P2 code -> 4 * value (signed int).
S1P2_INT4 = np.array([(-1 if c & 8 else 1) * (c & 7) for c in range(16)], dtype=np.int64)

# E6M2: value = 2**(E-48) * (1 + M/4) = (4 + M) * 2**(E - 50).
E6M2_SIG = np.array([4 + (c & 3) for c in range(256)], dtype=np.int64)
E6M2_EXP = np.array([(c >> 2) - 50 for c in range(256)], dtype=np.int64)
E6M2_NAN = np.arange(256) == 0xFF
# E8M0: value = 2**(code - 127); 255 = NaN.
E8M0_EXP = np.arange(256, dtype=np.int64) - 127
E8M0_NAN = np.arange(256) == 0xFF


def _ue4m3_tables():
    sig = np.zeros(256, dtype=np.int64)
    exp = np.zeros(256, dtype=np.int64)
    for c in range(256):
        u = c & 0x7F                        # bit 7 ignored
        e, m = u >> 3, u & 7
        if e == 0:
            sig[c], exp[c] = m, -9          # subnormal: m/8 * 2**-6
        else:
            sig[c], exp[c] = 8 + m, e - 10  # (1 + m/8) * 2**(e-7)
    nan = (np.arange(256) & 0x7F) == 0x7F
    return sig, exp, nan


UE4M3_SIG, UE4M3_EXP, UE4M3_NAN = _ue4m3_tables()


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


def _round_mag(V, vbase, sticky, neg, nonzero):
    """FP32 words of (-1)**neg * (V + sticky * eps) * 2**vbase, V < 2**62 an int64 >= 0.

    ``sticky`` says that nonzero bits lie below V's bit 0 (the exact value is a little
    above V * 2**vbase); ``nonzero`` rows with V == 0 do not occur (a zero sum is +0).
    """
    bl = np.frexp(V.astype(np.float64))[1].astype(np.int64)
    bl = np.where((V >> np.maximum(bl - 1, 0)) == 0, bl - 1, bl)    # float rounded up
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
# Exact step terms


def _check_fmt(fmt, residual="none"):
    if fmt not in FORMATS_DOT:
        raise ValueError(f"Dot-product format must be one of {', '.join(FORMATS_DOT)}, "
                         f"not {fmt!r}")
    if residual not in RESIDUALS[fmt]:
        raise ValueError(f"Residual for {fmt} must be one of {', '.join(RESIDUALS[fmt])}, "
                         f"not {residual!r}")


# S1P2 code (4 bits) and micro-exponent b + c (0..2) -> 4 * value * 2**(b + c), as float32:
# products of two such values (<= 784) and their sums over 64 elements (< 2**16) are exact
# in float32, which makes the block sums fast and still exact.
_S1P2_SHIFTED = np.array([[int(v) << sh for sh in range(3)] for v in S1P2_INT4],
                         dtype=np.float32).reshape(-1)
_E2M1_F32 = E2M1_INT2.astype(np.float32)


def _hif4_weights(f):
    """HiF4 fields (..., 64) -> float32 (..., 64): S1P2_INT4[elem] * 2**(b + c)."""
    elem = np.asarray(f["elem"], dtype=np.uint8)
    lead = elem.shape[:-1]
    l3 = np.asarray(f["l3"], dtype=np.uint8).reshape(lead + (8, 2, 1))
    l2 = np.asarray(f["l2"], dtype=np.uint8).reshape(lead + (8, 1, 1))
    sh = np.broadcast_to(l3 + l2, lead + (8, 2, 4)).reshape(lead + (64,))
    return _S1P2_SHIFTED[(elem & 15).astype(np.intp) * 3 + sh]


def _r24_dense(r):
    """Packed 2:4 residual fields (..., 32) -> float32 (..., 64) of S1P2_INT4 * 2**(b+c) at
    position 4 * (j // 2) + pos_j (two kept elements on one position both count)."""
    elem = np.asarray(r["elem"], dtype=np.uint8)
    lead = elem.shape[:-1]
    pos = np.asarray(r["pos"], dtype=np.uint8) & 3
    l3 = np.asarray(r["l3"], dtype=np.uint8)
    l2 = np.asarray(r["l2"], dtype=np.uint8)
    mg = np.arange(32) // 2
    sh = l3[..., mg] + l2[..., mg // 2]
    val = _S1P2_SHIFTED[(elem & 15).astype(np.intp) * 3 + sh]           # (..., 32)
    ve, vo = val[..., 0::2], val[..., 1::2]            # the two kept of each micro-group
    pe, po = pos[..., 0::2], pos[..., 1::2]
    zero = np.float32(0)
    dense = np.empty(lead + (16, 4), dtype=np.float32)
    for p in range(4):
        dense[..., p] = np.where(pe == p, ve, zero) + np.where(po == p, vo, zero)
    return dense.reshape(lead + (64,))


def _dot_last(x, y):
    """Exact integer dot products over the last axis of float32 integer arrays -> int64."""
    return np.einsum("...i,...i->...", x, y).astype(np.int64)


def step_terms(fmt, a, w, r=None, residual="none"):
    """Exact terms of every step: value = sum_t P[:, t] * 2**E[:, t].

    Returns
    -------
    P : int64 (S, T), E : int64 (S, T), nan : bool (S,)
        ``T`` is 1 (hif4), 2 (hif4 with residual, mxfp4), 4 (mxfp4 with residual, nvfp4).
    """
    _check_fmt(fmt, residual)
    if residual != "none" and r is None:
        raise ValueError(f"residual={residual!r} needs the residual fields r")
    if fmt == "hif4":
        wa, ww = _hif4_weights(a), _hif4_weights(w)
        sa = np.asarray(a["scale"], dtype=np.int64)
        sw = np.asarray(w["scale"], dtype=np.int64)
        s = _dot_last(wa, ww)
        P = [s * E6M2_SIG[sa] * E6M2_SIG[sw]]
        E = [E6M2_EXP[sa] + E6M2_EXP[sw] - 4]
        nan = E6M2_NAN[sa] | E6M2_NAN[sw]
        if residual != "none":
            wr = _r24_dense(r) if residual == "2:4" else _hif4_weights(r)
            sr = np.asarray(r["scale"], dtype=np.int64)
            P.append(_dot_last(wr, ww) * E6M2_SIG[sr] * E6M2_SIG[sw])
            E.append(E6M2_EXP[sr] + E6M2_EXP[sw] - 4)
            nan = nan | E6M2_NAN[sr]
        return np.stack(P, -1), np.stack(E, -1), nan
    ea = _E2M1_F32[np.asarray(a["elem"], dtype=np.uint8) & 15]
    ew = _E2M1_F32[np.asarray(w["elem"], dtype=np.uint8) & 15]
    sa = np.asarray(a["scale"], dtype=np.int64) & 0xFF
    sw = np.asarray(w["scale"], dtype=np.int64) & 0xFF
    s = _dot_last(ea, ew)                            # (S, blocks), units of 2**-2
    if fmt == "mxfp4":
        P = [s]
        E = [E8M0_EXP[sa] + E8M0_EXP[sw] - 2]
        nan = (E8M0_NAN[sa] | E8M0_NAN[sw]).any(axis=-1)
        if residual == "2:4":                       # MXFP4 2:4 hook (sim.formats.resq_mxfp4)
            from .formats.resq_mxfp4 import r24_step_terms
            Pr, Er, nr = r24_step_terms(r, w)
            P.append(Pr)
            E.append(Er)
            nan = nan | nr
        if residual == "dense":
            er = _E2M1_F32[np.asarray(r["elem"], dtype=np.uint8) & 15]
            sr = np.asarray(r["scale"], dtype=np.int64) & 0xFF
            P.append(_dot_last(er, ew))
            E.append(E8M0_EXP[sr] + E8M0_EXP[sw] - 2)
            nan = nan | E8M0_NAN[sr].any(axis=-1)
        return np.concatenate(P, -1), np.concatenate(E, -1), nan
    P = s * UE4M3_SIG[sa] * UE4M3_SIG[sw]
    E = UE4M3_EXP[sa] + UE4M3_EXP[sw] - 2
    nan = (UE4M3_NAN[sa] | UE4M3_NAN[sw]).any(axis=-1)
    return P, E, nan


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


def _as_steps(fmt, fields, what):
    shapes = {"hif4": {"elem": (64,), "l3": (16,), "l2": (8,), "scale": ()},
              "mxfp4": {"elem": (2, 32), "scale": (2,)},
              "nvfp4": {"elem": (4, 16), "scale": (4,)},
              "2:4": {"elem": (32,), "pos": (32,), "l3": (16,), "l2": (8,), "scale": ()},
              "mxfp4-2:4": {"elem": (2, 16), "pos": (2, 16), "scale": (2,)}}[fmt]
    out = {}
    S = None
    for k, tail in shapes.items():
        if k not in fields:
            raise ValueError(f"{what} fields for {fmt} need {k!r} (have {sorted(fields)})")
        v = np.asarray(fields[k])
        if v.shape[1:] != tail or v.ndim != len(tail) + 1:
            raise ValueError(f"{what} field {k!r} for {fmt} must have shape (S, "
                             f"{', '.join(map(str, tail))}), not {v.shape}")
        if S is None:
            S = v.shape[0]
        elif v.shape[0] != S:
            raise ValueError(f"{what} fields have different step counts")
        out[k] = v
    return out, S


def _residual_layout(fmt, residual):
    """Step layout name of a residual: "2:4" (HiF4), "mxfp4-2:4", or the format (dense)."""
    if residual == "2:4":
        return "mxfp4-2:4" if fmt == "mxfp4" else "2:4"
    return fmt


def run_steps(fmt, a, w, first, last=None, r=None, residual="none"):
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

    Returns
    -------
    uint32 array (S,)
        The accumulator after each step (the unit emits the words where ``last`` is set).
    """
    _check_fmt(fmt, residual)
    a, S = _as_steps(fmt, a, "a")
    w, Sw = _as_steps(fmt, w, "w")
    if Sw != S:
        raise ValueError(f"a has {S} steps but w has {Sw}")
    if residual != "none":
        if r is None:
            raise ValueError(f"residual={residual!r} needs the residual fields r")
        r, Sr = _as_steps(_residual_layout(fmt, residual), r, "r")
        if Sr != S:
            raise ValueError(f"a has {S} steps but r has {Sr}")
    first = np.asarray(first, dtype=bool).reshape(-1)
    if first.shape != (S,):
        raise ValueError(f"first must have shape ({S},), not {first.shape}")
    if last is not None and np.asarray(last).reshape(-1).shape != (S,):
        raise ValueError(f"last must have shape ({S},)")
    P, E, nan = step_terms(fmt, a, w, r, residual)
    return _chain(P, E, nan, first)


#: Below this many chains still running, the rest of a stream is evaluated step by step.
_VECTOR_MIN = 48


def _chain(P, E, nan, first):
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
        out[sel] = accumulate(acc, P[sel], E[sel], nan[sel])
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
            vals[i] = _accumulate_scalar(acc, list(zip(Pl[k], El[k])), nl[k])
        out[rest] = [vals[i] for i in rest.tolist()]
    return out


# ---------------------------------------------------------------------------------------
# Packing one step to an int (spec layouts; block 0 in the low bits)

_STEP_BYTES = {"hif4": 36, "mxfp4": 34, "nvfp4": 36, "2:4": 28, "dense": 36}


def step_bytes(fmt):
    """Bytes of one packed step: hif4 36, mxfp4 34, nvfp4 36, "2:4" residual 28."""
    if fmt == "mxfp4-2:4":
        return 26
    return _STEP_BYTES[_packfmt(fmt)]


def _packfmt(fmt):
    if fmt == "dense":
        return "hif4"
    if fmt not in ("hif4", "mxfp4", "nvfp4", "2:4"):
        raise ValueError(f"Step layout must be one of hif4, mxfp4, nvfp4, 2:4, dense, "
                         f"not {fmt!r}")
    return fmt


def _check_range(name, v, limit):
    if v.size and (v.min() < 0 or v.max() >= limit):
        raise ValueError(f"field {name!r} holds values outside 0..{limit - 1}")


def _nibbles(e):
    return (e[..., 0::2] | (e[..., 1::2] << 4)).astype(np.uint8)


def _unnibble(b):
    out = np.empty(b.shape[:-1] + (2 * b.shape[-1],), dtype=np.uint8)
    out[..., 0::2] = b & 15
    out[..., 1::2] = b >> 4
    return out


def _pack_array(fmt, f):
    """Fields with a leading step dimension -> uint8 (S, nbytes)."""
    fmt = _packfmt(fmt)
    f, S = _as_steps(fmt, f, "step")
    f = {k: np.asarray(v).astype(np.int64) for k, v in f.items()}
    limits = {"elem": 16, "l3": 2, "l2": 2, "scale": 256, "pos": 4}
    for k, v in f.items():
        _check_range(k, v, limits[k])
    f = {k: v.astype(np.uint8) for k, v in f.items()}
    bo = "little"
    if fmt == "hif4":
        return np.concatenate([_nibbles(f["elem"]), np.packbits(f["l3"], -1, bitorder=bo),
                               np.packbits(f["l2"], -1, bitorder=bo), f["scale"][:, None]], 1)
    if fmt == "2:4":
        p = f["pos"]
        pb = (p[:, 0::4] | (p[:, 1::4] << 2) | (p[:, 2::4] << 4) | (p[:, 3::4] << 6))
        return np.concatenate([_nibbles(f["elem"]), pb.astype(np.uint8),
                               np.packbits(f["l3"], -1, bitorder=bo),
                               np.packbits(f["l2"], -1, bitorder=bo), f["scale"][:, None]], 1)
    blocks = np.concatenate([_nibbles(f["elem"]), f["scale"][:, :, None]], axis=2)
    return blocks.reshape(S, -1)


def _unpack_array(fmt, b):
    fmt = _packfmt(fmt)
    b = np.asarray(b, dtype=np.uint8)
    S = b.shape[0]
    bo = "little"
    if fmt == "hif4":
        return {"elem": _unnibble(b[:, :32]),
                "l3": np.unpackbits(b[:, 32:34], -1, bitorder=bo),
                "l2": np.unpackbits(b[:, 34:35], -1, bitorder=bo),
                "scale": b[:, 35].copy()}
    if fmt == "2:4":
        pb = b[:, 16:24]
        pos = np.empty((S, 32), dtype=np.uint8)
        for k in range(4):
            pos[:, k::4] = (pb >> (2 * k)) & 3
        return {"elem": _unnibble(b[:, :16]), "pos": pos,
                "l3": np.unpackbits(b[:, 24:26], -1, bitorder=bo),
                "l2": np.unpackbits(b[:, 26:27], -1, bitorder=bo),
                "scale": b[:, 27].copy()}
    nblk = FORMATS_DOT[fmt]
    blk = b.reshape(S, nblk, -1)
    return {"elem": _unnibble(blk[:, :, :-1]), "scale": blk[:, :, -1].copy()}


def pack_steps(fmt, fields):
    """Fields with a leading step dimension S -> list of S Python ints (spec bit layouts).

    "mxfp4-2:4" (the 208-bit packed MXFP4 2:4 residual step) is handled by
    :mod:`sim.formats.resq_mxfp4`.

    ``fmt`` is "hif4" (288 bits), "mxfp4" (2 x 136 bits, block 0 low), "nvfp4" (4 x 72
    bits), "2:4" (the 224-bit packed HiF4 residual) or "dense" (= "hif4").
    """
    if fmt == "mxfp4-2:4":
        from .formats.resq_mxfp4 import pack_steps_r24
        return pack_steps_r24(fields)
    arr = _pack_array(fmt, fields)
    n = arr.shape[1]
    data = arr.tobytes()
    return [int.from_bytes(data[i:i + n], "little") for i in range(0, len(data), n)]


def unpack_steps(fmt, words):
    """Inverse of :func:`pack_steps`: a sequence of ints -> fields with leading dim S."""
    if fmt == "mxfp4-2:4":
        from .formats.resq_mxfp4 import unpack_steps_r24
        return unpack_steps_r24(words)
    n = step_bytes(fmt)
    words = list(words)
    try:
        data = b"".join(int(x).to_bytes(n, "little") for x in words)
    except OverflowError:
        raise ValueError(f"a packed {fmt} step has at most {8 * n} bits") from None
    if any(int(x) < 0 for x in words):
        raise ValueError("packed steps must be non-negative ints")
    return _unpack_array(fmt, np.frombuffer(data, dtype=np.uint8).reshape(len(words), n))


def _scalar_layouts():
    """field -> (shape, width, bit position of every item, C order) for one packed step."""
    hif4 = {"elem": ((64,), 4, [4 * i for i in range(64)]),
            "l3": ((16,), 1, [256 + j for j in range(16)]),
            "l2": ((8,), 1, [272 + g for g in range(8)]),
            "scale": ((), 8, [280])}
    r24 = {"elem": ((32,), 4, [4 * j for j in range(32)]),
           "pos": ((32,), 2, [128 + 2 * j for j in range(32)]),
           "l3": ((16,), 1, [192 + j for j in range(16)]),
           "l2": ((8,), 1, [208 + g for g in range(8)]),
           "scale": ((), 8, [216])}
    out = {"hif4": hif4, "2:4": r24}
    for fmt, nblk, block_bits in (("mxfp4", 2, 136), ("nvfp4", 4, 72)):
        n = 64 // nblk
        out[fmt] = {"elem": ((nblk, n), 4, [b * block_bits + 4 * i for b in range(nblk)
                                            for i in range(n)]),
                    "scale": ((nblk,), 8, [b * block_bits + 4 * n for b in range(nblk)])}
    return out


_SCALAR = _scalar_layouts()


def pack_step(fmt, fields):
    """One step's fields (no step dimension) -> Python int in the spec's packed layout.

    The single-step twin of :func:`pack_steps` (same layouts), in plain Python ints.
    """
    if fmt == "mxfp4-2:4":
        return pack_steps(fmt, {k: np.asarray(v)[None] for k, v in fields.items()})[0]
    fmt = _packfmt(fmt)
    word = 0
    for name, (shape, width, where) in _SCALAR[fmt].items():
        try:
            v = np.asarray(fields[name])
        except KeyError:
            raise ValueError(f"step fields for {fmt} need {name!r} (have {sorted(fields)})") \
                from None
        if v.shape != shape:
            raise ValueError(f"step field {name!r} for {fmt} must have shape {shape}, "
                             f"not {v.shape}")
        items = v.reshape(-1).tolist()
        if max(items) >= 1 << width or min(items) < 0 or v.dtype.kind not in "uib":
            raise ValueError(f"field {name!r} holds values outside 0..{(1 << width) - 1}")
        for x, p in zip(items, where):
            word |= x << p
    return word


def unpack_step(fmt, word):
    """Python int -> one step's fields (no step dimension)."""
    if fmt == "mxfp4-2:4":
        return {k: v[0] for k, v in unpack_steps(fmt, [word]).items()}
    n = step_bytes(fmt)
    word = int(word)
    if not 0 <= word < 1 << (8 * n):
        raise ValueError(f"a packed {fmt} step is a non-negative int of at most {8 * n} bits")
    out = {}
    for name, (shape, width, where) in _SCALAR[_packfmt(fmt)].items():
        mask = (1 << width) - 1
        out[name] = np.array([(word >> p) & mask for p in where], dtype=np.uint8).reshape(shape)
    return out


# ---------------------------------------------------------------------------------------
# Random stimulus


def random_steps(fmt, n, rng, residual="none", *, nan_prob=0.01, scales="uniform",
                 first_prob=0.25, ue4m3_bit7=False):
    """Random valid step fields for ``fmt`` (RTL stimulus and tests).

    Element codes, L2/L3 bits and 2:4 positions are drawn uniformly. Scale codes are drawn
    uniformly over the finite codes (``scales="uniform"``) or from a band a few binades wide
    around 1 (``scales="narrow"``, so that sums rarely overflow and often cancel); each
    scale is then replaced by its NaN code with probability ``nan_prob``.

    Returns
    -------
    dict
        ``a``, ``w``, ``r`` (None without residual), ``first`` and ``last`` (bool (n,);
        ``first[0]`` is True, ``last`` is set before every ``first`` and on the final step).
    """
    _check_fmt(fmt, residual)
    if scales not in ("uniform", "narrow"):
        raise ValueError(f"scales must be 'uniform' or 'narrow', not {scales!r}")

    def scale(shape, kind):
        if kind == "E6M2":
            lo, hi, nanc, one = 0, 255, 0xFF, 48 << 2
            band = 12
        elif kind == "E8M0":
            lo, hi, nanc, one = 0, 255, 0xFF, 127
            band = 3
        else:
            lo, hi, nanc, one = 0, 127, 0x7F, 7 << 3
            band = 12
        if scales == "uniform":
            s = rng.integers(lo, hi, size=shape)
        else:
            s = np.clip(one + rng.integers(-band, band + 1, size=shape), lo, hi - 1)
        s = np.where(rng.random(shape) < nan_prob, nanc, s)
        if kind == "UE4M3" and ue4m3_bit7:
            s = s | (rng.integers(0, 2, size=shape) << 7)
        return s.astype(np.uint8)

    def operand():
        if fmt == "hif4":
            return {"elem": rng.integers(0, 16, (n, 64), dtype=np.uint8),
                    "l3": rng.integers(0, 2, (n, 16), dtype=np.uint8),
                    "l2": rng.integers(0, 2, (n, 8), dtype=np.uint8),
                    "scale": scale((n,), "E6M2")}
        nb = FORMATS_DOT[fmt]
        return {"elem": rng.integers(0, 16, (n, nb, 64 // nb), dtype=np.uint8),
                "scale": scale((n, nb), "E8M0" if fmt == "mxfp4" else "UE4M3")}

    a, w = operand(), operand()
    r = None
    if residual == "dense":
        r = operand()
    elif residual == "2:4" and fmt == "mxfp4":
        from .formats.resq_mxfp4 import random_r24_steps
        r = random_r24_steps(n, rng, nan_prob=nan_prob, scales=scales)
    elif residual == "2:4":
        r = {"elem": rng.integers(0, 16, (n, 32), dtype=np.uint8),
             "pos": rng.integers(0, 4, (n, 32), dtype=np.uint8),
             "l3": rng.integers(0, 2, (n, 16), dtype=np.uint8),
             "l2": rng.integers(0, 2, (n, 8), dtype=np.uint8),
             "scale": scale((n,), "E6M2")}
    first = rng.random(n) < first_prob
    if n:
        first[0] = True
    last = np.zeros(n, dtype=bool)
    if n:
        last[:-1] = first[1:]
        last[-1] = True
    return {"a": a, "w": w, "r": r, "first": first, "last": last}


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
    if fmt == "hif4":
        return f, ns
    return {"elem": f["elem"].reshape(rows, ns, nblk, -1),
            "scale": f["scale"].reshape(rows, ns, nblk)}, ns


def _operand_ints(fmt, f):
    """(rows, ns, ...) fields -> integer element matrix (rows, ns, blocks, n) and scales."""
    if fmt == "hif4":
        return _hif4_weights(f)[:, :, None, :], np.asarray(f["scale"], np.int64)[:, :, None]
    return _E2M1_F32[np.asarray(f["elem"], np.uint8) & 15], np.asarray(f["scale"], np.int64)


def _scale_parts(fmt, s):
    if fmt == "hif4":
        return E6M2_SIG[s], E6M2_EXP[s] - 2, E6M2_NAN[s]
    if fmt == "mxfp4":
        return np.ones_like(s), E8M0_EXP[s] - 1, E8M0_NAN[s]
    return UE4M3_SIG[s & 0xFF], UE4M3_EXP[s & 0xFF] - 1, UE4M3_NAN[s & 0xFF]


def _block_sums(x, y):
    """(M, n) x (N, n) integer-valued float32 -> int64 (M, N) block sums, exact: products
    are at most 784 and sums below 2**16, so any summation order is exact in float32.
    (einsum's own loop, not BLAS: a threaded BLAS crawls on a loaded machine.)"""
    return np.einsum("in,jn->ij", x.astype(np.float32), y, optimize=False).astype(np.int64)


def gemm(a_qt, w_qt, r=None, *, scaled=False, row_chunk=None):
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

    Returns
    -------
    uint32 array (M, N)
    """
    fmt = a_qt.fmt
    if fmt not in FORMATS_DOT or w_qt.fmt != fmt:
        raise ValueError(f"gemm needs two tensors of one of {', '.join(FORMATS_DOT)}, "
                         f"not {a_qt.fmt!r} and {w_qt.fmt!r}")
    if a_qt.shape[1:] != w_qt.shape[1:]:
        raise ValueError(f"A {a_qt.shape} and W {w_qt.shape} must have the same K")
    af, ns = _steps_of(a_qt, "A")
    wf, _ = _steps_of(w_qt, "W")
    M, N = a_qt.shape[0], w_qt.shape[0]
    ai, asc = _operand_ints(fmt, af)            # (M, ns, nblk, n)
    wi, wsc = _operand_ints(fmt, wf)
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
            acc = accumulate(acc, P, E, nan)
        out[ms] = acc.reshape(mc, N)
    if scaled and fmt == "nvfp4":
        out = scale_result(out, a_qt.fields["tensor_scale"], w_qt.fields["tensor_scale"])
    return out


def _residual_ints(fmt, r, a_qt):
    if hasattr(r, "residual") and not isinstance(r, dict):
        r = r.residual
    if isinstance(r, dict):                      # packed 2:4 fields (HiF4)
        if fmt != "hif4":
            raise ValueError("packed 2:4 residual fields are HiF4 only")
        f = {k: np.asarray(v) for k, v in r.items()}
        if f["scale"].shape != a_qt.fields["scale"].shape:
            raise ValueError("residual must match A's blocks")
        ri = _r24_dense(f)[:, :, None, :]
        rs = f["scale"].astype(np.int64)[:, :, None]
    else:
        if r.fmt != fmt or r.shape != a_qt.shape or r.axis != a_qt.axis:
            raise ValueError(f"residual must be a {fmt} tensor of A's shape {a_qt.shape} "
                             f"quantized along axis 1")
        if fmt == "nvfp4":
            raise ValueError("NVFP4 units have no residual input")
        rf, _ = _steps_of(r, "residual")
        ri, rs = _operand_ints(fmt, rf)
    rsig, rexp, rnan = _scale_parts(fmt, rs)
    return ri, rsig, rexp, rnan


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
