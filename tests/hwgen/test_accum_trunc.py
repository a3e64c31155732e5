"""The truncating back end (``hif4spec.ACCUMS`` ``"trunc"``): its golden model
(:func:`sim.dot.accumulate_trunc` and its scalar twin) against an independent Fraction
reference of the definition in ``docs/accumulator.md``, and :class:`hwgen.accum_trunc.TruncAdd`
against the golden model, bit for bit, in the Amaranth simulator."""

from fractions import Fraction

import numpy as np
import pytest
from conftest import word_value
from test_accum_bounded import run_adder

from hif4spec import TRUNC_BITS
from hwgen.accum import TermSpec
from hwgen.accum_trunc import TruncAdd, TruncSpec
from hwgen.hif4 import MAX_TERM_EXP_DIFF as HIF4_MAX_EXP_DIFF
from hwgen.hif4 import HiF4DotUnit
from hwgen.mxfp4 import term_specs as mxfp4_terms
from hwgen.nvfp4 import term_specs as nvfp4_terms
from hwgen.parts import probe
from sim.dot import (NAN_WORD, _accumulate_trunc_scalar, accumulate, accumulate_trunc,
                     run_steps)
from sim.stimulus import random_stream
from sim.stimulus.accum import AccumSteps, Term, accum_steps

MAX_FINITE = 0x7F7FFFFF


# ---------------------------------------------------------------------------------------
# An independent reference: Fractions, floor and the FP32 grid, straight from the text


def _floor_log2(x):
    """floor(log2(x)) of a positive Fraction."""
    k = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** k > x:
        k -= 1
    while Fraction(2) ** (k + 1) <= x:
        k += 1
    return k


def _rz_f32(v):
    """The FP32 word of Fraction ``v`` rounded toward zero (gradual underflow, the largest
    finite word past it; zero gives +0)."""
    if v == 0:
        return 0
    sign = 1 << 31 if v < 0 else 0
    v = abs(v)
    if v >= Fraction(2) ** 128:
        return sign | MAX_FINITE
    k = max(_floor_log2(v), -126)
    q = int(v / Fraction(2) ** (k - 23))            # floor: toward zero
    if k == -126 and q < 1 << 23:
        return sign | q                             # subnormal (or a signed zero)
    return sign | ((k + 127) << 23) | (q & 0x7FFFFF)


def reference(acc, terms, nan, extra_bits):
    """The truncating accumulation of ``docs/accumulator.md`` on Fractions."""
    mag = acc & 0x7FFFFFFF
    if nan or mag > 0x7F800000:
        return NAN_WORD
    if mag == 0x7F800000:
        return acc
    ops = [(Fraction(p) * Fraction(2) ** e, _floor_log2(Fraction(abs(p))) + e)
           for p, e in terms if p]
    if mag:
        top = max(mag >> 23, 1) - 127               # the hidden-bit place, -126 subnormal
        ops.append((word_value(acc), top))
    if not ops:
        return 0
    unit = Fraction(2) ** (max(t for _, t in ops) - 23 - extra_bits)
    total = sum((1 if x > 0 else -1) * (abs(x) // unit) * unit for x, _ in ops)
    return _rz_f32(total)


def _random_steps(rng, n, nterms):
    """Accumulator words and terms across the whole range, with cancellation, overflow,
    underflow, signed zeros and specials."""
    out = []
    for _ in range(n):
        kind = rng.integers(6)
        base = int(rng.integers(-300, 140))
        terms = []
        for _ in range(nterms):
            bits = int(rng.integers(1, 30))
            p = int(rng.integers(-(1 << bits), 1 << bits)) if rng.random() > 0.1 else 0
            e = base + int(rng.integers(-60, 8)) if kind != 1 else int(rng.integers(-320, 100))
            terms.append((p, e))
        acc = int(rng.integers(0, 1 << 32))
        if kind == 2 and terms[0][0]:               # the accumulator cancels a term's top
            v = -Fraction(terms[0][0]) * Fraction(2) ** terms[0][1]
            acc = _rz_f32(v) if abs(v) < Fraction(2) ** 127 else acc
        elif kind == 3:
            acc = int(rng.choice([0, 1 << 31, 0x7F800000, 0xFF800000, 0x7FC00001, 1, 0x80000007,
                                  MAX_FINITE, 0xFF7FFFFF, 0x00800000]))
        elif kind == 4:                             # past the largest finite
            acc, terms = MAX_FINITE, [(int(rng.integers(1, 1 << 20)), 110)] + terms[1:]
        out.append((acc, terms, bool(rng.random() < 0.03)))
    return out


@pytest.mark.parametrize("extra_bits", [0, TRUNC_BITS, 8, 30])
def test_golden_matches_the_fraction_reference(extra_bits):
    rng = np.random.default_rng(extra_bits)
    steps = _random_steps(rng, 1500, 3)
    want = [reference(*s, extra_bits) for s in steps]
    scalar = [_accumulate_trunc_scalar(*s, extra_bits) for s in steps]
    assert scalar == want
    acc = np.array([a for a, _, _ in steps], dtype=np.uint32)
    P = np.array([[p for p, _ in t] for _, t, _ in steps], dtype=np.int64)
    E = np.array([[e for _, e in t] for _, t, _ in steps], dtype=np.int64)
    nan = np.array([n for _, _, n in steps])
    assert accumulate_trunc(acc, P, E, nan, extra_bits).tolist() == want


def test_hand_examples():
    """Truncation at 2**(top - 23 - extra_bits) and toward zero, where RNE of the exact sum
    differs; the edges of the range."""
    one = 0x3F800000
    cases = [
        # acc, terms, extra bits, truncated word, exact (RNE) word
        (one, [(7, -25)], 0, 0x3F800001, 0x3F800002),       # 1 + 1.75 ulp: kept 1 ulp
        (one, [(7, -25)], 2, 0x3F800001, 0x3F800002),       # all kept, truncated to FP32
        (one, [(-1, -30)], 3, one, one),                    # below the window: dropped
        (one, [(-1, -26)], 3, 0x3F7FFFFF, one),             # kept, then toward zero
        (0x80000000, [(0, 0)], 3, 0, 0),                    # -0 + 0 = +0
        (MAX_FINITE, [(1, 104)], 3, MAX_FINITE, 0x7F800000),    # no overflow to Inf
        (0, [(-3, -151)], 3, 0x80000000, 0x80000001),       # -0.75 * 2**-149: -0 kept
        (0x00000003, [(-1, -148)], 3, 0x00000001, 0x00000001),  # subnormal, exact
        (one, [(1, 0), (-1, 0)], 3, one, one),
    ]
    for acc, terms, bits, trunc, exact in cases:
        assert _accumulate_trunc_scalar(acc, terms, False, bits) == trunc, (hex(acc), terms)
        assert reference(acc, terms, False, bits) == trunc
        P = np.array([[p for p, _ in terms]]), np.array([[e for _, e in terms]])
        assert int(accumulate(np.array([acc], np.uint32), *P, np.array([False]))[0]) == exact


def test_bad_extra_bits():
    with pytest.raises(ValueError, match="extra_bits"):
        accumulate_trunc(np.zeros(1, np.uint32), np.zeros((1, 1), np.int64),
                         np.zeros((1, 1), np.int64), np.zeros(1, bool), 31)
    with pytest.raises(ValueError, match="extra_bits"):
        TruncSpec([TermSpec("t", 8, 5, 20)], -1)
    with pytest.raises(ValueError, match="golden model's range"):
        TruncSpec([TermSpec("t", 8, 5, 20)], 31)


# ---------------------------------------------------------------------------------------
# The RTL against the golden model

SPECS = {
    "hif4": (lambda: probe(HiF4DotUnit(residual="none"))._terms(), None),
    "hif4-2:4": (lambda: probe(HiF4DotUnit(residual="2:4"))._terms(), HIF4_MAX_EXP_DIFF),
    "nvfp4": (lambda: nvfp4_terms(), None),
    "mxfp4": (lambda: mxfp4_terms("none"), None),
    "wide": (lambda: [TermSpec("t", 30, 9, 200)], None),
}


def run_rtl(terms, steps, extra_bits):
    return run_adder(TruncAdd(terms, extra_bits), terms, steps)


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("extra_bits", [0, TRUNC_BITS])
def test_rtl_matches_golden(name, extra_bits):
    make, max_exp_diff = SPECS[name]
    terms = make()
    steps = accum_steps(terms, 600, 11 + extra_bits, max_exp_diff)
    want = steps.golden("trunc", extra_bits)
    got = run_rtl(terms, steps, extra_bits)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(steps.acc[i]), steps.sig[i].tolist(), steps.exp[i].tolist(),
                           hex(got[i]), hex(want[i])) for i in bad[:5]]
    # The steps reach the truncation: it must differ from the exact sum on some.
    assert (want != steps.golden()).sum() > 20


def test_rtl_four_terms():
    """MXFP4 with a residual: four independent terms, random fields over their whole
    range (including exponent fields past the finite scales' 508)."""
    terms = mxfp4_terms("dense")
    rng = np.random.default_rng(3)
    n = 500
    sig = np.stack([rng.integers(-(1 << (t.sig_bits - 1)), 1 << (t.sig_bits - 1), n)
                    >> rng.integers(0, t.sig_bits, n) for t in terms], 1)
    base = rng.integers(0, 1 << terms[0].exp_bits, n)
    exp = np.clip(base[:, None] + rng.integers(-40, 40, (n, len(terms))), 0,
                  (1 << terms[0].exp_bits) - 1)
    acc = rng.integers(0, 1 << 32, n).astype(np.uint32)
    near = rng.random(n) < 0.5                    # accumulators near the terms' range
    acc = np.where(near, (np.clip(base - 256 + 127 + 10, 1, 254) << 23)
                   | rng.integers(0, 1 << 23, n) | (rng.integers(0, 2, n) << 31), acc)
    steps = AccumSteps(tuple(Term.of(t) for t in terms), acc.astype(np.uint32), sig, exp,
                       rng.random(n) < 0.02, rng.random(n) < 0.05, np.zeros(n, np.uint8))
    want = steps.golden("trunc")
    got = run_rtl(terms, steps, TRUNC_BITS)
    assert (got == want).all(), np.flatnonzero(got != want)[:5]
    assert (want != steps.golden()).sum() > 20


def test_unit_golden_differs_from_exact():
    """On a unit's random stream the truncating words differ from the exact ones (the
    verification of a truncating unit is not the exact one's)."""
    for unit, residual in (("hif4", "2:4"), ("mxfp4", "dense"), ("nvfp4", "none")):
        s = random_stream(unit, residual, 400, np.random.default_rng(2))
        args = (unit, s["a"], s["w"], s["first"], s["last"])
        exact = run_steps(*args, r=s["r"], residual=residual)
        trunc = run_steps(*args, r=s["r"], residual=residual, accum="trunc")
        assert (exact != trunc).sum() > 10, unit
        with pytest.raises(ValueError, match="accum"):
            run_steps(*args, r=s["r"], residual=residual, accum="nearest")
