"""Named edge-case streams per unit, and the exhaustive scale and element pair streams.

:func:`named_cases` is what the RTL benches run before their random steps: the hand-checked
streams of :mod:`sim.stimulus.checked` (with their expected words) followed by the edge cases
here, which random stimulus rarely hits (every scale code with zero elements, the largest
magnitudes, alternating signs, NaN scales until the next ``first``, cancellation to +0, the
smallest results, blocks far apart), and per unit the adversarial K-loops
``cancel_to_zero_then_tiny``, ``tie_far_below``, ``opposite_terms_far_below`` (where a step
has two or more terms) and ``cancel_but_rounding_error``, which drive the accumulator through
those situations; these carry no hand-derived words, the golden model gives them.
:func:`scale_pair_stream` and :func:`element_pair_stream` are exhaustive (slow
tests).
"""

import numpy as np

from hif4spec import operand_layout, residual_layout, step_layout, unit_spec

from sim.formats.registry import golden, register

from .checked import checked_cases, e6m2_code
from .streams import fields, layouts, loop as _loop, scale_code, single as _single, \
    stream as _stream

__all__ = ["named_cases", "edge_cases", "scale_pair_stream", "element_pair_stream"]


def _hif4_operand(n, *, elem=0, l3=0, l2=0, scale=None):
    return fields(operand_layout("hif4"), n, elem=elem, l3=l3, l2=l2,
                  scale=scale_code("hif4", "one") if scale is None else scale)


def _hif4_residual(residual, n, *, elem=0, scale=None, l3=0, l2=0):
    if residual == "none":
        return None
    if residual == "dense":
        return _hif4_operand(n, elem=elem, l3=l3, l2=l2, scale=scale)
    return fields(step_layout("hif4-2:4"), n, elem=elem, pos=[0, 3] * 16, l3=l3, l2=l2,
                  scale=scale_code("hif4", "one") if scale is None else scale)


def hif4_cases(residual):
    """Named HiF4 streams (see the names)."""
    cases = []
    rng = np.random.default_rng(12345)

    # All-zero blocks (every scale code, including the NaN code 0xFF last).
    n = 256
    scales = np.arange(256, dtype=np.uint8)
    a = _hif4_operand(n)
    a["scale"] = scales
    w = _hif4_operand(n)
    w["scale"] = scales[::-1].copy()
    cases.append(("all_zero", _stream(a, w, _hif4_residual(residual, n), *_single(n))))

    # Maximum magnitude: k = 7, all micro-exponents 1, largest finite scale, 64-step loop.
    n = 64
    big = dict(elem=7, l3=1, l2=1, scale=0xFE)
    cases.append(("max_magnitude", _stream(_hif4_operand(n, **big), _hif4_operand(n, **big),
                                           _hif4_residual(residual, n, **big), *_loop(n))))
    neg = _hif4_operand(n, **big)
    neg["elem"][:] = 15
    cases.append(("max_magnitude_negative",
                  _stream(_hif4_operand(n, **big), neg, _hif4_residual(residual, n, **big),
                          *_loop(n))))

    # Alternating signs within blocks and between steps.
    n = 64
    a = _hif4_operand(n, elem=5)
    a["elem"][:, 1::2] |= 8
    w = _hif4_operand(n, elem=6)
    w["elem"][1::2] ^= 8
    a["scale"][:] = rng.integers(150, 230, n)
    cases.append(("alternating_signs", _stream(a, w, _hif4_residual(residual, n, elem=3),
                                               *_loop(n))))

    # NaN scale codes in a, w and r; the NaN sticks until the next first step.
    n = 8
    a, w = _hif4_operand(n, elem=3), _hif4_operand(n, elem=2)
    r = _hif4_residual(residual, n, elem=1)
    a["scale"][1] = 0xFF
    w["scale"][3] = 0xFF
    if r is not None:
        r["scale"][6] = 0xFF
    first = np.array([1, 0, 0, 1, 1, 0, 1, 1], dtype=bool)
    last = np.ones(n, dtype=bool)
    cases.append(("nan_scale", _stream(a, w, r, first, last)))

    # Cancellation to +0: v then -v in one loop (an exact zero sum gives +0).
    n = 2
    a = _hif4_operand(n, elem=7, scale=0xC7)
    w = _hif4_operand(n, elem=5, scale=0x33)
    w["elem"][1] |= 8
    r = _hif4_residual(residual, n, elem=2, scale=0x40)
    if r is not None:
        r["elem"][1] |= 8
    cases.append(("cancel_to_zero", _stream(a, w, r, [1, 0], [0, 1])))

    # Smallest results: smallest scales and one k=1 product (2**-100), and a huge value
    # cancelled exactly leaving the smallest residual (main/residual scales far apart).
    n = 3
    a = _hif4_operand(n, scale=0)
    w = _hif4_operand(n, scale=0)
    a["elem"][:, 0] = 1
    w["elem"][:, 0] = 1
    w["elem"][1, 0] = 9
    r = _hif4_residual(residual, n, scale=0)
    cases.append(("smallest", _stream(a, w, r, [1, 1, 1], [1, 1, 1])))
    if residual != "none":
        n = 2
        a = _hif4_operand(n, elem=4, scale=0xFE)
        w = _hif4_operand(n, elem=4, scale=0xFE)
        w["elem"][1] |= 8
        r = _hif4_residual(residual, n, scale=0)
        r["elem"][1, 0] = 1
        cases.append(("cancel_keeps_tiny_residual", _stream(a, w, r, [1, 0], [0, 1])))
    return cases + _hif4_loops(residual)


def _operand(unit, n, *, elem=0, scale=None):
    return fields(operand_layout(unit), n, elem=elem,
                  scale=scale_code(unit, "one") if scale is None else scale)


def _residual(unit, residual, n, *, elem=0, scale=127):
    """A residual of ``n`` steps of block-format ``unit``: None, a dense operand, or packed
    2:4 with kept positions 0 and 3 of every micro-group."""
    if residual == "none":
        return None
    if residual == "dense":
        return _operand(unit, n, elem=elem, scale=scale)
    lay = residual_layout(unit_spec(unit).fmt, residual)
    return fields(lay, n, elem=elem, pos=[0, 3] * (lay.shape("pos")[-1] // 2), scale=scale)


def _common_cases(unit, residual, mark_nan=None):
    """Cases that read the same for both formats (E2M1 elements, a scale per block);
    ``mark_nan(a, w)`` adds format-specific codes to the ``nan_scale`` case."""
    cases = []
    rng = np.random.default_rng(4242)

    def res(n, **kw):
        return _residual(unit, residual, n, **kw)

    # All-zero elements under every scale code (NaN codes included): +0 or NaN.
    n = 256
    a, w = _operand(unit, n), _operand(unit, n)
    a["scale"][:] = np.arange(256, dtype=np.uint8)[:, None]
    w["scale"][:] = np.arange(256, dtype=np.uint8)[::-1, None]
    cases.append(("all_zero", _stream(a, w, res(n), *_single(n))))

    # Largest magnitudes: 6 x 6 everywhere, largest finite scales, one 64-step loop (and
    # negative); for MXFP4 this overflows to Inf, which then stays.
    n = 64
    big = dict(elem=7, scale=scale_code(unit, "max"))
    r = res(n, elem=7, scale=0xFE)
    cases.append(("max_magnitude", _stream(_operand(unit, n, **big), _operand(unit, n, **big),
                                           r, *_loop(n))))
    neg = _operand(unit, n, **big)
    neg["elem"][:] = 15
    cases.append(("max_magnitude_negative", _stream(_operand(unit, n, **big), neg, r,
                                                    *_loop(n))))

    # Alternating signs inside blocks and between steps, random scales near 1.
    n = 64
    a = _operand(unit, n, elem=5)
    a["elem"][:, :, 1::2] |= 8
    w = _operand(unit, n, elem=6)
    w["elem"][1::2] ^= 8
    a["scale"][:] = np.clip(scale_code(unit, "one") + rng.integers(-6, 7, a["scale"].shape), 0, 126)
    cases.append(("alternating_signs", _stream(a, w, res(n, elem=3), *_loop(n))))

    # NaN codes in a, w (and r) on different steps and blocks; NaN sticks until first.
    n = 8
    a, w = _operand(unit, n, elem=3), _operand(unit, n, elem=2)
    r = res(n, elem=1)
    a["scale"][1, 0] = scale_code(unit, "nan")
    w["scale"][3, -1] = scale_code(unit, "nan")
    if mark_nan is not None:
        mark_nan(a, w)
    if r is not None:
        r["scale"][6, 1] = 0xFF
    first = np.array([1, 0, 0, 1, 1, 0, 1, 1], dtype=bool)
    cases.append(("nan_scale", _stream(a, w, r, first, np.ones(n, dtype=bool))))

    # Exact cancellation to +0 across two steps (v then -v).
    n = 2
    a = _operand(unit, n, elem=7, scale=scale_code(unit, "one") + 9)
    w = _operand(unit, n, elem=5, scale=scale_code(unit, "one") - 3)
    w["elem"][1] |= 8
    r = res(n, elem=2, scale=90)
    if r is not None:
        r["elem"][1] |= 8
    cases.append(("cancel_to_zero", _stream(a, w, r, [1, 0], [0, 1])))
    return cases


def mxfp4_cases(residual):
    """Named MXFP4 streams (see the names)."""
    cases = _common_cases("mxfp4", residual)

    # Blocks far apart: 2**252 (overflow to Inf), -2**-256 alone (rounds to -0), 2**-16 with
    # a 2**-256 sticky, and 2**-150 (a tie between 0 and 2**-149) broken upward by 2**-256.
    n = 4
    a, w = _operand("mxfp4", n), _operand("mxfp4", n)
    a["elem"][:, :, 0] = w["elem"][:, :, 0] = 1           # 0.5 * 0.5 in each block
    a["scale"][:, 0] = w["scale"][:, 0] = [254, 0, 120, 0]
    a["scale"][:, 1] = w["scale"][:, 1] = [0, 0, 0, 53]
    w["elem"][1, 0, 0] = 9                                 # -0.5
    a["elem"][1, 1, 0] = 0
    cases.append(("far_apart_blocks", _stream(a, w, _residual("mxfp4", residual, n, scale=0),
                                              *_single(n))))

    # Two huge block sums (36 * 2**254 and its negative) cancel exactly: +0, or with a
    # residual exactly the residual's 3 * 2**0 (2**-127 * 2**127 scales).
    n = 2
    a, w = _operand("mxfp4", n, scale=0xFE), _operand("mxfp4", n, scale=0xFE)
    a["elem"][:, 0, 0] = w["elem"][:, 0, 0] = 7
    a["elem"][:, 1, 0] = 15
    w["elem"][:, 1, 0] = 7
    r = _residual("mxfp4", residual, n, scale=0)
    if r is not None:
        r["elem"][:, 0, 0] = 1                              # position 0 (2:4 pos 0 too)
    cases.append(("huge_cancel", _stream(a, w, r, [1, 1], [1, 1])))

    # Duplicate residual positions (both kept elements of a micro-group on one position).
    if residual == "2:4":
        n = 16
        rng = np.random.default_rng(99)
        a, w = _operand("mxfp4", n, elem=2), _operand("mxfp4", n, elem=3)
        r = _residual("mxfp4", residual, n, elem=5, scale=125)
        r["pos"][:] = rng.integers(0, 4, (n, 2, 1), dtype=np.uint8)  # all on one position
        w["elem"][:] = rng.integers(0, 16, w["elem"].shape, dtype=np.uint8)
        cases.append(("duplicate_positions", _stream(a, w, r, *_loop(n))))
    return cases + _mxfp4_loops(residual)


def _nvfp4_bit7(a, w):
    a["scale"][4, 2] = 0xFF                  # bit 7 set: still NaN (low bits 0x7F)
    w["scale"][6, 1] = 0x80 | scale_code("nvfp4", "one")     # bit 7 set on a finite code: ignored


def nvfp4_cases(residual):
    """Named NVFP4 streams (see the names)."""
    cases = _common_cases("nvfp4", residual, _nvfp4_bit7)

    # Subnormal and zero UE4M3 scales: every code 0..7 on both sides, one product each.
    n = 64
    a, w = _operand("nvfp4", n), _operand("nvfp4", n)
    codes = np.arange(64)
    a["scale"][:] = (codes % 8)[:, None]
    w["scale"][:] = (codes // 8)[:, None]
    a["elem"][:, :, 0] = 1
    w["elem"][:, :, 0] = 1
    cases.append(("subnormal_scales", _stream(a, w, None, *_single(n))))

    # Block terms at the extreme shifts (0 and 28) in one step, and their cancellation.
    n = 3
    a, w = _operand("nvfp4", n, elem=7), _operand("nvfp4", n, elem=7)
    a["scale"][:] = [[1, 0x7E, 1, 0x7E]] * n
    w["scale"][:] = [[1, 0x7E, 1, 0x7E]] * n
    a["elem"][1, 3] |= 8
    a["elem"][2, 1] |= 8
    cases.append(("extreme_block_shifts", _stream(a, w, None, *_single(n))))
    return cases + _nvfp4_loops()


# ---------------------------------------------------------------------------------------
# Adversarial K-loops: the accumulator driven through a situation, first to last step

#: Element code pairs (a, w) by their product in the format's element units: HiF4 S1P2
#: k_a * k_w (units of 2**-4), E2M1 magnitudes (units of 2**-2).
_PRODUCT_PAIRS = {
    "s1p2": {ka * kw: (ka, kw) for ka in range(1, 8) for kw in range(1, 8)},
    "e2m1": {ha * hw: (ca, cw) for ca, ha in enumerate((0, 1, 2, 3, 4, 6, 8, 12)) if ha
             for cw, hw in enumerate((0, 1, 2, 3, 4, 6, 8, 12)) if hw},
}


def _fill(a_elem, w_elem, total, kind):
    """Write into the 1-D element views ``a_elem``, ``w_elem`` (from index 0) code pairs of
    ``kind`` ("s1p2", "e2m1") whose products add up to ``total``, largest product first."""
    products = sorted(_PRODUCT_PAIRS[kind], reverse=True)
    i = 0
    while total:
        p = next(p for p in products if p <= total)
        if i == len(a_elem):
            raise ValueError(f"no room for the product sum {total} in {len(a_elem)} elements")
        a_elem[i], w_elem[i] = _PRODUCT_PAIRS[kind][p]
        total -= p
        i += 1


def _hif4_wide(a, w, s, total):
    """Step ``s`` of the HiF4 fields ``a``, ``w`` gets the product sum ``total`` (sum of
    k_a * k_w * 2**micro-exponents; up to about 43000): ``total % 16`` from micro-group 0
    (micro-exponents 0), ``total // 16`` from sub-groups 1..7 (every micro-exponent 1, a
    factor 16); micro-group 1 (elements 4..7) stays free."""
    _fill(a["elem"][s, :4], w["elem"][s, :4], total % 16, "s1p2")
    _fill(a["elem"][s, 8:], w["elem"][s, 8:], total // 16, "s1p2")
    for f in (a, w):
        f["l2"][s, 1:] = 1
        f["l3"][s, 2:] = 1


def _hif4_r(r, s, position, code):
    """Residual element ``code`` at ``position`` (the first of its micro-group: a multiple of
    4) of step ``s``: the dense element, or the 2:4 kept element 2 * (position // 4), whose
    position is 0."""
    if "pos" in r:
        r["elem"][s, position // 2] = code
    else:
        r["elem"][s, position] = code


def _hif4_pow2(a, w, s, e):
    """Step ``s`` of the HiF4 fields ``a``, ``w`` gets the product 2**e (-96 <= e <= 34) at
    element 0: 1.0 * 1.0, the scales and, above 2**30, micro-exponents of a then w."""
    sh = max(0, e - 30)
    a["elem"][s, 0] = w["elem"][s, 0] = 4
    a["scale"][s] = e6m2_code(min(e - sh, 15))
    w["scale"][s] = e6m2_code(e - sh - min(e - sh, 15))
    for f, field in [(a, "l2"), (a, "l3"), (w, "l2"), (w, "l3")][:sh]:
        f[field][s, 0] = 1


def _hif4_loops(residual):
    """The adversarial K-loops of the HiF4 unit (values in the comments; u is the FP32 ulp
    of the accumulator where it rounds)."""
    cases = []

    def steps(n):
        return (_hif4_operand(n), _hif4_operand(n), _hif4_residual(residual, n, scale=0))

    # Largest steps cancelling exactly to +0 (7056 * 2**30, plus the residual's 4704 or
    # 2352 * 2**20: one FP32 value, no rounding), then smallest-scale steps: 2**-100 (with a
    # residual 2**-99), then -3 * 2**-100. Every HiF4 step is a multiple of 2**-100, so no
    # nonzero sum rounds to zero: a loop cannot end at -0 (an exact zero sum is +0).
    a, w, r = steps(4)
    for f in (a, w) + ((r,) if r is not None else ()):
        f["elem"][:2], f["l2"][:2], f["l3"][:2], f["scale"][:2] = 7, 1, 1, 0xFE
        if f is not w:
            f["elem"][1] |= 8
    a["scale"][2:] = w["scale"][2:] = 0
    a["elem"][2, 0] = w["elem"][2, 0] = 1
    a["elem"][3, 1], w["elem"][3, 1] = 3 | 8, 1
    if r is not None:
        r["scale"][:2] = e6m2_code(5)
        _hif4_r(r, 2, 0, 1)
    cases.append(("cancel_to_zero_then_tiny", _stream(a, w, r, *_loop(4))))

    if residual == "none":
        # One term per step: here the half ulp and the bit deciding it are the step's own
        # bits, at most 21 binades apart since a step's significand P * (4 + m_a) *
        # (4 + m_w) is below 2**22; this step is the widest, (2**21 - 1) * 2**-13 (product
        # sum 42799 times the scale significands 7/4 * 7/4). acc =
        # 2**32 + 2**9 (odd in u = 2**9), + 2**8 - 2**-13: just below the tie, stays; the
        # tie alone would go to the even 2**32 + 2**10.
        a, w, r = steps(3)
        _hif4_pow2(a, w, 0, 32)
        _hif4_pow2(a, w, 1, 9)
        _hif4_wide(a, w, 2, 42799)
        a["scale"][2], w["scale"][2] = e6m2_code(0, 3), e6m2_code(-5, 3)
        cases.append(("tie_far_below", _stream(a, w, r, *_loop(3))))
    else:
        # acc = 2**32 (even in u = 2**9); main + 2**8 (the tie), and the residual + 2**-52,
        # 60 binades below, decides it: up to 2**32 + 2**10 (the tie alone stays at 2**32).
        a, w, r = steps(2)
        _hif4_pow2(a, w, 0, 32)
        _hif4_pow2(a, w, 1, 8)
        w["elem"][1, 4] = 1
        _hif4_r(r, 1, 4, 1)                    # 1/4 * 2**-48 * 1/4
        cases.append(("tie_far_below", _stream(a, w, r, *_loop(2))))

        # acc = 2**34 (u = 2**11); main -(2**12 - 2**-6) = -(2u - 2**-6) (product sum 37449
        # times 7/4 is 2**18 - 1), residual + 5 * 2**10 = 2.5u: the sum u/2 + 2**-6 rounds
        # up to 2**34 + 2**11, while either term alone, the two added with a rounding in
        # between (either order), or the sum without its 2**-6 (a tie) give other words.
        a, w, r = steps(2)
        _hif4_pow2(a, w, 0, 34)
        _hif4_wide(a, w, 1, 37449)
        a["elem"][1] |= 8
        a["scale"][1] = e6m2_code(0, 3)
        w["elem"][1, 4] = 4
        r["scale"][1] = e6m2_code(12)
        _hif4_r(r, 1, 4, 5)                    # 5/4 * 2**12 * 1
        cases.append(("opposite_terms_far_below", _stream(a, w, r, *_loop(2))))

    # acc = RNE(2**32 + 5 * 2**6) = 2**32 + 2**9 (u = 2**9), then adding minus the exact sum
    # leaves the rounding error 3 * 2**6. Without a residual a step is one term and -x takes
    # two steps, -2**32 then -5 * 2**6, each exact (as in Fast2Sum); with a residual the
    # 5 * 2**6 is the residual term and one step subtracts both.
    n = 4 if residual == "none" else 2
    a, w, r = steps(n)
    for s in range(0, n, n // 2):
        _hif4_pow2(a, w, s, 32)
    if residual == "none":
        a["elem"][[1, 3], 0], w["elem"][[1, 3], 0] = 5, 4
        a["scale"][[1, 3]] = e6m2_code(8)
    else:
        w["elem"][:, 4] = 4
        r["scale"][:] = e6m2_code(-7)
        _hif4_r(r, 0, 4, 5)                    # 5/4 * 2**-7 * 2**15
        _hif4_r(r, 1, 4, 5 | 8)
    a["elem"][n // 2:, 0] |= 8
    cases.append(("cancel_but_rounding_error", _stream(a, w, r, *_loop(n))))
    return cases


def _mxfp4_pow2(a, w, s, b, e):
    """Step ``s``, block ``b`` of the MXFP4 fields ``a``, ``w`` gets the product 2**e
    (-254 <= e <= 254) at element 0: 1.0 * 1.0 and the E8M0 scales."""
    ea = min(max(e, -127), 127)
    a["elem"][s, b, 0] = w["elem"][s, b, 0] = 2
    a["scale"][s, b], w["scale"][s, b] = 127 + ea, 127 + e - ea


def _mxfp4_loops(residual):
    """The adversarial K-loops of the MXFP4 unit (u as in :func:`_hif4_loops`); the
    residual, where there is one, takes part in the first only (zero in the others)."""
    cases = []

    def steps(n):
        return _operand("mxfp4", n), _operand("mxfp4", n), _residual("mxfp4", residual, n, scale=0)

    # Large steps cancelling exactly to +0 (9 * 2**113 in two blocks, plus the residual's
    # 36 * 2**95 per element, one FP32 value), then the smallest scales: 2**-149 + 2**-256
    # rounds to 2**-149, and adding -2**-149 - 2**-256 leaves -2**-256, which rounds to -0:
    # the sign of a nonzero sum rounding to zero is kept (an exact zero sum would be +0).
    a, w, r = steps(4)
    a["elem"][:2], w["elem"][:2] = 7, 7
    a["scale"][:2], w["scale"][:2] = 227, 132
    a["elem"][1] |= 8
    if r is not None:
        r["elem"][:2], r["scale"][:2] = 7, 217
        r["elem"][1] |= 8
    for s in (2, 3):
        _mxfp4_pow2(a, w, s, 0, -149)
        a["elem"][s, 1, 0] = w["elem"][s, 1, 0] = 1
        a["scale"][s, 1] = w["scale"][s, 1] = 0
    a["elem"][3] |= 8
    cases.append(("cancel_to_zero_then_tiny", _stream(a, w, r, *_loop(4))))

    # acc = 2**33 (even in u = 2**10); block 0 adds 2**9 (the tie) and block 1 2**-254, 263
    # binades below, which decides it: up to 2**33 + 2**10 (the tie alone stays at 2**33).
    a, w, r = steps(2)
    _mxfp4_pow2(a, w, 0, 0, 33)
    _mxfp4_pow2(a, w, 1, 0, 9)
    _mxfp4_pow2(a, w, 1, 1, -254)
    cases.append(("tie_far_below", _stream(a, w, r, *_loop(2))))

    # acc = 2**34 (u = 2**11); block 0 adds -(2**12 - 1) = -(2u - 1) (4095 / 4 times 2**2),
    # block 1 + 5 * 2**10 = 2.5u: the sum u/2 + 1 rounds up to 2**34 + 2**11, while either
    # block alone, the two added with a rounding in between (either order), or the sum
    # without its 1 (a tie) give other words.
    a, w, r = steps(2)
    _mxfp4_pow2(a, w, 0, 0, 34)
    _fill(a["elem"][1, 0], w["elem"][1, 0], 4095, "e2m1")
    a["elem"][1, 0] |= 8
    a["scale"][1, 0] = 129
    _fill(a["elem"][1, 1], w["elem"][1, 1], 5, "e2m1")
    a["scale"][1, 1] = 139
    cases.append(("opposite_terms_far_below", _stream(a, w, r, *_loop(2))))

    # acc = RNE(2**100 + 5 * 2**74) = 2**100 + 2**77 (u = 2**77; the 5 * 2**74 from block 1),
    # then minus the exact sum in one step leaves the rounding error 3 * 2**74.
    a, w, r = steps(2)
    for s in (0, 1):
        _mxfp4_pow2(a, w, s, 0, 100)
        _fill(a["elem"][s, 1], w["elem"][s, 1], 5, "e2m1")
        a["scale"][s, 1] = 127 + 76
    a["elem"][1] |= 8
    cases.append(("cancel_but_rounding_error", _stream(a, w, r, *_loop(2))))
    return cases


def _ue4m3(e, m=0):
    """UE4M3 code of the normal scale 2**e * (1 + m/8)."""
    return (e + 7) << 3 | m


def _nvfp4_loops():
    """The adversarial K-loops of the NVFP4 unit (u as in :func:`_hif4_loops`). Its step
    values are multiples of 2**-20 (0.5 * 0.5 * 2**-9 * 2**-9) below 2**29, so no sum rounds
    to zero, and after k steps half an ulp of the accumulator is at most 24 + ceil(log2(k))
    binades above 2**-20 (tie_far_below reaches 24 in two steps)."""
    cases = []

    def largest(a, w, s):                       # 4 * 16 * 6 * 6 * 448**2 = 441 * 2**20
        a["elem"][s], w["elem"][s] = 7, 7
        a["scale"][s], w["scale"][s] = 0x7E, 0x7E

    def two_pow_24(a, w, s):                    # 16 * 4.0 * 4.0 * 2**8 * 2**8, block 0
        a["elem"][s, 0], w["elem"][s, 0] = 6, 6
        a["scale"][s, 0] = w["scale"][s, 0] = _ue4m3(8)

    # The largest steps cancelling exactly to +0, then the smallest (subnormal) scales:
    # 2**-20, then -3 * 2**-20 (-2**-19 at the end; never -0, see above).
    n = 4
    a, w = _operand("nvfp4", n), _operand("nvfp4", n)
    largest(a, w, 0)
    largest(a, w, 1)
    a["elem"][1] |= 8
    a["elem"][2, 0, 0] = w["elem"][2, 0, 0] = 1
    a["elem"][3, 1, 0], w["elem"][3, 1, 0] = 3 | 8, 1
    a["scale"][2, 0] = w["scale"][2, 0] = a["scale"][3, 1] = w["scale"][3, 1] = 1
    cases.append(("cancel_to_zero_then_tiny", _stream(a, w, None, *_loop(n))))

    # acc = 441 * 2**20 (even in u = 2**5); block 0 adds 2**4 (the tie) and block 3 2**-20,
    # 24 binades below, which decides it: up to acc + 2**5 (the tie alone stays).
    n = 2
    a, w = _operand("nvfp4", n), _operand("nvfp4", n)
    largest(a, w, 0)
    a["elem"][1, 0, 0] = w["elem"][1, 0, 0] = 6
    a["elem"][1, 3, 0] = w["elem"][1, 3, 0] = 1
    a["scale"][1, 3] = w["scale"][1, 3] = 1
    cases.append(("tie_far_below", _stream(a, w, None, *_loop(n))))

    # acc = 2**24 (u = 2); block 0 adds -(4 - 2**-10) = -(2u - 2**-10) (35 / 4 times the
    # scales 9/8 * 2**-1 and 13/8 * 2**-1: 4095 * 2**-10), block 1 + 5 = 2.5u: the sum
    # u/2 + 2**-10 rounds up to 2**24 + 2, while either block alone, the two added with a
    # rounding in between (either order), or the sum without its 2**-10 give other words.
    a, w = _operand("nvfp4", n), _operand("nvfp4", n)
    two_pow_24(a, w, 0)
    _fill(a["elem"][1, 0], w["elem"][1, 0], 35, "e2m1")
    a["elem"][1, 0] |= 8
    a["scale"][1, 0], w["scale"][1, 0] = _ue4m3(-1, 1), _ue4m3(-1, 5)
    _fill(a["elem"][1, 1], w["elem"][1, 1], 5, "e2m1")
    a["scale"][1, 1] = _ue4m3(2)
    cases.append(("opposite_terms_far_below", _stream(a, w, None, *_loop(n))))

    # acc = RNE(2**24 + 5/4) = 2**24 + 2 (u = 2; the 5/4 from block 1), then minus the exact
    # sum in one step leaves the rounding error 3/4.
    a, w = _operand("nvfp4", n), _operand("nvfp4", n)
    for s in (0, 1):
        two_pow_24(a, w, s)
        _fill(a["elem"][s, 1], w["elem"][s, 1], 5, "e2m1")
    a["elem"][1] |= 8
    cases.append(("cancel_but_rounding_error", _stream(a, w, None, *_loop(n))))
    return cases


def scale_pair_stream(unit):
    """Every scale-code pair (65536 steps), one per step, through the whole datapath.

    Step ``k`` has activation code ``k // 256`` and weight code ``k % 256`` on every block,
    one 1 x 1 product in block 0 and a random product in the last block; every step is
    its own loop.
    """
    n = 65536
    rng = np.random.default_rng(65536)
    a, w = _operand(unit, n), _operand(unit, n)
    k = np.arange(n)
    a["scale"][:] = (k // 256)[:, None]
    w["scale"][:] = (k % 256)[:, None]
    a["elem"][:, 0, 0] = w["elem"][:, 0, 0] = 2
    a["elem"][:, -1, 1] = rng.integers(0, 16, n)
    w["elem"][:, -1, 1] = rng.integers(0, 16, n)
    return _stream(a, w, None, *_single(n))


def element_pair_stream(unit):
    """Every E2M1 pair in every element position (a 16 x 16 table per position)."""
    lay = operand_layout(unit)
    nb, per = lay.shape("elem")
    codes = np.arange(256)
    n = 256
    a, w = _operand(unit, n), _operand(unit, n)
    for b in range(nb):
        for i in range(per):
            shift = (b * per + i) * 37 % 256       # each position sees every pair once
            a["elem"][:, b, i] = (codes + shift) % 256 // 16
            w["elem"][:, b, i] = (codes + shift) % 16
    return _stream(a, w, None, *_single(n))


register("hif4", edge_cases=hif4_cases)
register("mxfp4", edge_cases=mxfp4_cases)
register("nvfp4", edge_cases=nvfp4_cases)


def edge_cases(unit, residual="none"):
    """``[(name, stream), ...]``: the edge cases of ``unit`` (no hand-derived words), the
    ``edge_cases`` of its format object (``sim.formats.registry``)."""
    layouts(unit, residual)
    return golden(unit_spec(unit).fmt).need("edge_cases")(residual)


def named_cases(unit, residual="none"):
    """``[(name, stream), ...]``: :func:`sim.stimulus.checked_cases` then :func:`edge_cases`."""
    return checked_cases(unit, residual) + edge_cases(unit, residual)
