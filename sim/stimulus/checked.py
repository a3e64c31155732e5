"""Hand-checked named streams: adversarial corners with expected words derived by hand.

:func:`checked_cases` returns short streams that hit the corners of the accumulator (spec
section 7): exact cancellation to +0, signed zeros, ties to even at normal and subnormal
rounding points, overflow to +-Inf and staying there, NaN scales poisoning until the next
``first``, main and residual scales 60+ binades apart, two kept 2:4 elements on one position,
UE4M3 bit 7. Each stream carries the FP32 words derived by hand at some steps (``expect``;
every step is a ``last`` step). The golden model's tests check them against
``sim.dot.run_steps`` and an independent Fraction reference, and the RTL benches run them
as part of :func:`sim.stimulus.named_cases`, where ``sim.stimulus.expected_words`` checks
the golden words against them before the RTL is checked against the golden words.
"""

import numpy as np

from hif4spec import ELEMENT_TYPES, operand_layout, step_layout, unit_spec

from sim.formats.registry import golden, register

from .streams import fields, layouts, scale_code, stream

__all__ = ["checked_cases", "e6m2_code"]

PZERO, NZERO, PINF, NINF, NAN = 0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000
MAXF = 0x7F7FFFFF


def e6m2_code(e, m=0):
    """E6M2 code of 2**e * (1 + m/4) (``ValueError`` unless that is a finite E6M2 value)."""
    t = ELEMENT_TYPES["E6M2"]
    code = ((e + t.bias) << t.man_bits) | m
    if not (0 <= e + t.bias < 1 << t.exp_bits and 0 <= m < 1 << t.man_bits) \
            or code in t.nan_codes:
        raise ValueError(f"2**{e} * (1 + {m}/4) is not an E6M2 value")
    return code


def _hif4(n, elems=(), scale=None):
    """n HiF4 steps; elems = [(step, index, code)]; scale: code or per-step list."""
    f = fields(operand_layout("hif4"), n, scale=e6m2_code(0) if scale is None else scale)
    for s, i, c in elems:
        f["elem"][s, i] = c
    return f


def _r24(n, elems=(), scale=None):
    """n packed 2:4 residual steps; elems = [(step, kept j, code, pos)]; positions default to
    the ascending pair (0, 1) of every micro-group."""
    f = fields(step_layout("hif4-2:4"), n, pos=[0, 1] * 16,
               scale=e6m2_code(-48) if scale is None else scale)
    for s, j, c, p in elems:
        f["elem"][s, j] = c
        f["pos"][s, j] = p
    return f


def _blocks(fmt, n, elems=(), scales=None):
    """n MXFP4 / NVFP4 steps; elems = [(step, block, index, code)]; scales (n, blocks)."""
    f = fields(operand_layout(fmt), n, scale=scale_code(fmt, "one") if scales is None else scales)
    for s, b, i, c in elems:
        f["elem"][s, b, i] = c
    return f


def _stream(name, a, w, first, r=None, expect=()):
    first = np.asarray(first, bool)
    return name, stream(a, w, r, first, np.ones_like(first), dict(expect))


def _zero_residual(residual, n, dense):
    """A zero residual of ``n`` steps: packed 2:4 (HiF4), ``dense(n)``, or None."""
    if residual == "2:4":
        return _r24(n)
    if residual == "dense":
        return dense(n)
    return None


def _hif4_zero_dense(n):
    return _hif4(n, scale=e6m2_code(-48))


def _mxfp4_zero_dense(n):
    return _blocks("mxfp4", n)


def _hif4_streams(residual):
    out = []
    big, small = e6m2_code(15), e6m2_code(-9)
    # x then -x: exact zero -> +0; -x then +x: +0 as well
    a = _hif4(4, [(0, 3, 5), (1, 3, 5 | 8), (2, 3, 5 | 8), (3, 3, 5)])
    w = _hif4(4, [(s, 3, 7) for s in range(4)])
    out.append(_stream("cancel_to_plus_zero", a, w, [1, 0, 1, 0],
                       expect={1: PZERO, 3: PZERO}))
    # acc = 2**30, + 2**6 (half an ulp): tie, stays 2**30 (even); 2**30 + 2**7 (odd) + 2**6:
    # tie, goes up to 2**30 + 2**8 (even)
    a = _hif4(5, [(s, 0, 4) for s in range(5)], scale=big)
    w = _hif4(5, [(s, 0, 4) for s in range(5)], scale=[big, small, big, small, small])
    w["l3"][3, 0] = 1                                       # step 3 adds 2**7
    out.append(_stream("tie_to_even", a, w, [1, 0, 1, 0, 0],
                       expect={0: 0x4E800000, 1: 0x4E800000, 3: 0x4E800001,
                               4: 0x4E800002}))
    # the largest HiF4 operands, negative, over several steps (no overflow is possible: a
    # step is below 2**50)
    a = _hif4(3, [(s, i, 7 | 8) for s in range(3) for i in range(64)], scale=0xFE)
    w = _hif4(3, [(s, i, 7) for s in range(3) for i in range(64)], scale=0xFE)
    a["l3"][:], a["l2"][:], w["l3"][:], w["l2"][:] = 1, 1, 1, 1
    out.append(_stream("max_magnitude_negative", a, w, [1, 0, 0]))
    # the smallest scales: products 2**-100
    a = _hif4(2, [(0, 0, 1), (1, 9, 1 | 8)], scale=0)
    w = _hif4(2, [(0, 0, 1), (1, 9, 1)], scale=0)
    out.append(_stream("min_scales", a, w, [1, 0], expect={0: 0x0D800000, 1: PZERO}))
    # NaN scale in a, in w: NaN until the next first (also across last)
    a = _hif4(5, [(s, 0, 4) for s in range(5)])
    w = _hif4(5, [(s, 0, 4) for s in range(5)])
    a["scale"][1] = 0xFF
    w["scale"][3] = 0xFF
    out.append(_stream("nan_scale_poisons_until_first", a, w, [1, 0, 0, 1, 1],
                       expect={0: 0x3F800000, 1: NAN, 2: NAN, 3: NAN, 4: 0x3F800000}))
    n0 = len(out)
    for _, s in out[:n0]:
        s["r"] = _zero_residual(residual, len(s["first"]), _hif4_zero_dense)
    if residual == "none":
        return out
    # residual cases: main cancels acc exactly; a residual 2**-35 (65 binades below) stays
    n = 2
    a = _hif4(n, [(0, 0, 4), (1, 0, 4 | 8)], scale=big)
    w = _hif4(n, [(0, 0, 4), (1, 0, 4)], scale=big)
    if residual == "2:4":
        r = _r24(n, [(1, 0, 1, 0)])
    else:
        r = _hif4(n, [(1, 0, 1)], scale=e6m2_code(-48))
    out.append(_stream("residual_survives_cancellation", a, w, [1, 0], r,
                       expect={0: 0x4E800000, 1: 0x2E000000}))
    # acc 2**30, main + 2**6 (a tie), residual +-2**-59 (89 binades below) breaks it
    for sign, word in ((0, 0x4E800001), (8, 0x4E800000)):
        a = _hif4(n, [(0, 0, 4), (1, 0, 4)], scale=big)
        w = _hif4(n, [(0, 0, 4), (1, 0, 4)], scale=[big, small])
        if residual == "2:4":
            r = _r24(n, [(1, 0, 1 | sign, 0)])
        else:
            r = _hif4(n, [(1, 0, 1 | sign)], scale=e6m2_code(-48))
        out.append(_stream(f"residual_breaks_tie_{'up' if not sign else 'down'}", a, w,
                           [1, 0], r, expect={1: word}))
    # NaN residual scale
    a = _hif4(3, [(s, 0, 4) for s in range(3)])
    w = _hif4(3, [(s, 0, 4) for s in range(3)])
    r = _zero_residual(residual, 3, _hif4_zero_dense)
    r["scale"][1] = 0xFF
    out.append(_stream("nan_residual_scale", a, w, [1, 0, 1], r,
                       expect={0: 0x3F800000, 1: NAN, 2: 0x3F800000}))
    if residual == "2:4":
        # two kept elements on one position both count: 1.0 + 0.5 at position 5
        a = _hif4(1)
        w = _hif4(1, [(0, 5, 4)])
        r = _r24(1, [(0, 2, 4, 1), (0, 3, 2, 1)], scale=e6m2_code(0))
        out.append(_stream("two_kept_on_one_position", a, w, [1], r,
                           expect={0: 0x3FC00000}))
    return out


def _mxfp4_streams(residual):
    out = []
    # max finite 2**128 - 2**104 exactly; + 2**103 is a tie -> +Inf; large finite negative
    # steps keep +Inf; NaN scale -> NaN until first; fresh chain overflows again
    a = _blocks("mxfp4", 8, [(0, 0, 0, 1), (0, 1, 0, 9)] + [(s, 0, 0, 1) for s in range(1, 8)])
    w = _blocks("mxfp4", 8, [(s, b, 0, 1) for s in range(8) for b in range(2)])
    a["scale"][0], w["scale"][0] = (254, 180), (130, 180)
    a["scale"][1], w["scale"][1] = (232, 0), (127, 0)
    for s in (2, 3):
        a["elem"][s, 0, 0] = 15
        a["scale"][s], w["scale"][s] = (254, 0), (254, 0)
    a["scale"][4, 1] = 255
    a["scale"][7], w["scale"][7] = (254, 254), (254, 254)
    out.append(_stream("overflow_tie_to_inf_stays_then_nan", a, w, [1, 0, 0, 0, 0, 0, 1, 0],
                       expect={0: MAXF, 1: PINF, 2: PINF, 3: PINF, 4: NAN, 5: NAN,
                               6: 0x3E800000, 7: PINF}))
    # negative overflow
    a = _blocks("mxfp4", 2, [(0, 0, 0, 15), (1, 0, 0, 15)], scales=[(254, 254), (254, 0)])
    w = _blocks("mxfp4", 2, [(0, 0, 0, 7), (1, 0, 0, 7)], scales=[(254, 254), (254, 0)])
    out.append(_stream("negative_overflow", a, w, [1, 0], expect={0: NINF, 1: NINF}))
    # just below the overflow tie: stays max finite
    a = _blocks("mxfp4", 2, [(0, 0, 0, 1), (0, 1, 0, 9), (1, 0, 0, 1), (1, 1, 0, 9)])
    w = _blocks("mxfp4", 2, [(s, b, 0, 1) for s in range(2) for b in range(2)])
    a["scale"][0], w["scale"][0] = (254, 180), (130, 180)
    a["scale"][1], w["scale"][1] = (232, 0), (127, 0)
    out.append(_stream("just_below_overflow", a, w, [1, 0], expect={0: MAXF, 1: MAXF}))
    # -2**-256 rounds to -0; + 0 -> +0; x - x -> +0; -tiny then +tiny -> +0
    a = _blocks("mxfp4", 6, [(0, 0, 0, 9), (2, 0, 0, 1), (3, 0, 0, 9), (4, 0, 0, 9),
                             (5, 0, 0, 1)])
    w = _blocks("mxfp4", 6, [(s, 0, 0, 1) for s in range(6)])
    a["scale"][[0, 4, 5]] = 0
    w["scale"][[0, 4, 5]] = 0
    out.append(_stream("signed_zeros", a, w, [1, 0, 1, 0, 1, 0],
                       expect={0: NZERO, 1: PZERO, 3: PZERO, 4: NZERO, 5: PZERO}))
    # 2**-150 -> +0 (tie to even), 2**-150 + 2**-256 -> 2**-149, -2**-150 -> -0
    a = _blocks("mxfp4", 3, [(0, 0, 0, 1), (1, 0, 0, 1), (1, 1, 0, 1), (2, 0, 0, 9)],
                scales=(53, 0))
    w = _blocks("mxfp4", 3, [(0, 0, 0, 1), (1, 0, 0, 1), (1, 1, 0, 1), (2, 0, 0, 1)],
                scales=(53, 0))
    out.append(_stream("subnormal_ties", a, w, [1, 1, 1], expect={0: 0, 1: 1, 2: NZERO}))
    # 1 + 2**-23 (odd) + 2**-24 -> 1 + 2**-22; 1 + 2**-24 -> 1
    a = _blocks("mxfp4", 4, [(0, 0, 0, 1), (0, 1, 0, 1), (1, 0, 0, 1), (2, 0, 0, 1),
                             (3, 0, 0, 1)], scales=[(128, 117), (116, 0), (128, 0), (116, 0)])
    w = _blocks("mxfp4", 4, [(0, 0, 0, 1), (0, 1, 0, 1), (1, 0, 0, 1), (2, 0, 0, 1),
                             (3, 0, 0, 1)], scales=[(128, 116), (116, 0), (128, 0), (116, 0)])
    out.append(_stream("normal_ties", a, w, [1, 0, 1, 0],
                       expect={0: 0x3F800001, 1: 0x3F800002, 2: 0x3F800000, 3: 0x3F800000}))
    # subnormal sums of many products
    a = _blocks("mxfp4", 2, [(s, b, i, 3 + 8 * (i % 2)) for s in range(2) for b in range(2)
                             for i in range(32)], scales=(60, 61))
    w = _blocks("mxfp4", 2, [(s, b, i, 5) for s in range(2) for b in range(2)
                             for i in range(31)], scales=(60, 62))
    out.append(_stream("subnormal_sums", a, w, [1, 0]))
    for _, s in out:
        s["r"] = _zero_residual(residual, len(s["first"]), _mxfp4_zero_dense) \
            if residual == "dense" else None
    if residual == "dense":
        # main 2**125 then -2**125; the residual 2**-129 (254 binades below) is what is left
        a = _blocks("mxfp4", 2, [(0, 0, 0, 1), (1, 0, 0, 9)], scales=(254, 127))
        w = _blocks("mxfp4", 2, [(0, 0, 0, 1), (1, 0, 0, 1)], scales=(127, 127))
        r = _blocks("mxfp4", 2, [(1, 0, 0, 1)], scales=(0, 0))
        out.append(_stream("residual_survives_cancellation", a, w, [1, 0], r,
                           expect={0: 0x7E000000, 1: 0x00100000}))
        a = _blocks("mxfp4", 3, [(s, 0, 0, 2) for s in range(3)])
        w = _blocks("mxfp4", 3, [(s, 0, 0, 2) for s in range(3)])
        r = _blocks("mxfp4", 3)
        r["scale"][1, 1] = 255
        out.append(_stream("nan_residual_scale", a, w, [1, 0, 1], r,
                           expect={0: 0x3F800000, 1: NAN, 2: 0x3F800000}))
    return out


def _nvfp4_streams():
    out = []
    # bit 7 of UE4M3 is ignored: 0xB8 == 0x38 == 1.0; both 0x7F and 0xFF are NaN
    a = _blocks("nvfp4", 4, [(s, 0, 0, 2) for s in range(4)])
    w = _blocks("nvfp4", 4, [(s, 0, 0, 2) for s in range(4)])
    a["scale"][0, 0] = 0xB8
    a["scale"][1, 2] = 0xFF
    w["scale"][2, 3] = 0x7F
    out.append(_stream("ue4m3_bit7_and_nan_codes", a, w, [1, 1, 1, 1],
                       expect={0: 0x3F800000, 1: NAN, 2: NAN, 3: 0x3F800000}))
    # zero scale: zero products; smallest subnormal scales: 2**-9 * 2**-9 * 0.25 = 2**-20
    a = _blocks("nvfp4", 2, [(0, 0, 0, 7), (1, 0, 0, 1)], scales=[(0, 1, 1, 1), (1, 1, 1, 1)])
    w = _blocks("nvfp4", 2, [(0, 0, 0, 7), (1, 0, 0, 1)], scales=[(1, 1, 1, 1), (1, 1, 1, 1)])
    out.append(_stream("zero_and_subnormal_scales", a, w, [1, 1],
                       expect={0: PZERO, 1: 0x35800000}))
    # largest scales and elements: 4 blocks x 16 x 36 x 448**2
    a = _blocks("nvfp4", 2, [(s, b, i, 7) for s in range(2) for b in range(4) for i in range(16)],
                scales=0x7E)
    w = _blocks("nvfp4", 2, [(s, b, i, 15) for s in range(2) for b in range(4)
                             for i in range(16)], scales=0x7E)
    out.append(_stream("max_magnitude", a, w, [1, 0]))
    # cancellation between blocks of one step
    a = _blocks("nvfp4", 1, [(0, 0, 3, 5), (0, 2, 7, 5 | 8)], scales=(0x40, 0x11, 0x40, 0x22))
    w = _blocks("nvfp4", 1, [(0, 0, 3, 6), (0, 2, 7, 6)], scales=(0x30, 0x7E, 0x30, 0x01))
    out.append(_stream("cancel_between_blocks", a, w, [1], expect={0: PZERO}))
    return out


def checked_cases(unit, residual="none"):
    """``[(name, stream), ...]``: the hand-checked streams of ``unit`` with ``residual``.

    Every stream has ``last`` set on every step and ``expect`` ({step: FP32 word}) where the
    word was derived by hand. The streams are the ``checked_cases`` of the unit's format
    object (``sim.formats.registry``; ``ValueError`` where it registers none). MXFP4 with the
    2:4 residual has none here (its named checks are in
    ``tests/hwgen/test_hwgen_mxfp4_r24_golden.py``).
    """
    layouts(unit, residual)
    return golden(unit_spec(unit).fmt).need("checked_cases")(residual)


def _mxfp4_checked(residual):
    return [] if residual == "2:4" else _mxfp4_streams(residual)


def _nvfp4_checked(residual):
    return _nvfp4_streams()


register("hif4", checked_cases=_hif4_streams)
register("mxfp4", checked_cases=_mxfp4_checked)
register("nvfp4", checked_cases=_nvfp4_checked)
