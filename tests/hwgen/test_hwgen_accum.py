"""Amaranth-simulator tests of the exact FP32 accumulation (``hwgen.accum.ExactAdd``).

Adversarial accumulator/step pairs (far-apart scales with full cancellation, ties, the
subnormal range, rounding to signed zero, overflow to Inf at the exact boundary, NaN and Inf
rules of spec section 7) and random ones, against an exact rational reference, for the HiF4
term geometry and for a wide one (terms down to 2**-300 and beyond 2**128) as MXFP4 needs.
"""

from fractions import Fraction

import numpy as np
import pytest
from amaranth.sim import Simulator

from conftest import rne_f32, word_value
from hwgen.accum import AccumSpec, ExactAdd, TermSpec

HIF4_TERMS = (TermSpec("main", 23, 7, 104, 126), TermSpec("res", 22, 7, 104, 126))
WIDE_TERMS = (TermSpec("t0", 16, 9, 300), TermSpec("t1", 16, 9, 300))
NAN = 0x7FC00000


def reference(acc, terms, specs, first=False, nan=False):
    acc = 0 if first else acc
    e = (acc >> 23) & 255
    if nan or (e == 255 and acc & 0x7FFFFF):
        return NAN
    if e == 255:
        return acc
    total = word_value(acc) + sum(Fraction(s) * Fraction(2) ** (x - t.bias)
                                  for (s, x), t in zip(terms, specs))
    return rne_f32(total, negative_zero=total < 0)


def check(specs, cases):
    dut = ExactAdd(AccumSpec(specs))

    async def bench(ctx):
        for acc, terms, first, nan in cases:
            ctx.set(dut.acc, acc)
            ctx.set(dut.step.first, first)
            ctx.set(dut.step.nan, nan)
            for (sig, exp), t in zip(terms, specs):
                ctx.set(dut.step[f"{t.name}_sig"], sig)
                ctx.set(dut.step[f"{t.name}_exp"], exp)
            got = ctx.get(dut.word)
            expect = reference(acc, terms, specs, first, nan)
            assert got == expect, f"acc {acc:#010x} terms {terms}: {got:#010x} != {expect:#010x}"

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def f32(x):
    return int(np.array(x, dtype=np.float32).view(np.uint32))


ONE = f32(1.0)
MAX = 0x7F7FFFFF
INF = 0x7F800000


def hif4_cases():
    b = 104                                     # term = sig * 2**(exp - 104)
    return [
        (ONE, [(-(1 << 20), b - 20), (1, b - 80)], 0, 0),        # 1 - 1 + 2**-80
        (ONE, [(-(1 << 20), b - 20), (-1, b - 104)], 0, 0),      # 1 - 1 - 2**-104
        (ONE, [(-(1 << 20), b - 20), (0, 0)], 0, 0),             # exact zero -> +0
        (0x80000000, [(0, 0), (0, 0)], 0, 0),                    # -0 + 0 -> +0
        (ONE, [(1, b - 24), (0, 0)], 0, 0),                      # tie -> even (1.0)
        (ONE, [(1, b - 24), (1, 0)], 0, 0),                      # above the tie
        (f32(1.0) + 1, [(1, b - 24), (0, 0)], 0, 0),             # tie -> even (up)
        (f32(-1.0), [(-1, b - 24), (1, 0)], 0, 0),               # below a negative tie
        (ONE, [(-1, b - 25), (0, 0)], 0, 0),                     # just below 1.0
        (f32(2.0 ** 100), [(-(1 << 22) + 1, 126), (1, 0)], 0, 0),
        (f32(2.0 ** -126), [(-1, 0), (0, 0)], 0, 0),             # min normal - 2**-104
        (MAX, [((1 << 22) - 1, 126), (0, 0)], 0, 0),
        (INF, [(-(1 << 22), 126), (0, 0)], 0, 0),                # Inf stays Inf
        (INF | 1 << 31, [(1 << 20, 100), (0, 0)], 0, 0),
        (NAN, [(5, 50), (0, 0)], 0, 0),                          # NaN stays NaN
        (NAN, [(5, 50), (0, 0)], 1, 0),                          # ... until first
        (INF, [(5, 50), (3, 9)], 1, 0),
        (ONE, [(5, 50), (3, 9)], 0, 1),                          # NaN scale in the step
        (f32(-3.5), [(7, 104), (-7, 100)], 1, 0),                # first ignores acc
    ]


def wide_cases():
    b = 300                                     # term = sig * 2**(exp - 300)
    top = 1 << 15
    return [
        (0, [(-1, b - 151), (0, 0)], 0, 0),                      # rounds to -0
        (0, [(1, b - 151), (0, 0)], 0, 0),                       # rounds to +0
        (0, [(-1, b - 150), (0, 0)], 0, 0),                      # tie with 0 -> -0
        (0, [(-1, b - 150), (-1, b - 200)], 0, 0),               # just past -> -2**-149
        (0, [(3, b - 151), (0, 0)], 0, 0),                       # 1.5 ulp -> 2 ulp
        (1, [(-1, b - 149), (1, b - 300)], 0, 0),                # subnormal cancels + tiny
        (0x00800000, [(-1, b - 149), (0, 0)], 0, 0),             # normal -> subnormal
        (0x007FFFFF, [(1, b - 150), (0, 0)], 0, 0),              # subnormal -> min normal
        (MAX, [(1, b + 103), (0, 0)], 0, 0),                     # max + half ulp -> Inf
        (MAX, [(1, b + 103), (-1, 0)], 0, 0),                    # a hair below -> max
        (MAX | 1 << 31, [(-top, 511), (0, 0)], 0, 0),            # far beyond -> -Inf
        (0, [(top - 1, 511), (-(top - 1), 511)], 0, 0),          # huge cancellation
        (ONE, [(top - 1, 511), (-(top - 1), 511)], 0, 0),
        (ONE, [(-1, b), (1, 0)], 0, 0),                          # 1 - 1 + 2**-300
        (ONE, [(-1, b), (-1, 0)], 0, 0),
    ]


def random_cases(specs, n, seed):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        e = int(rng.integers(0, 255))
        acc = int(rng.integers(0, 2)) << 31 | e << 23 | int(rng.integers(0, 1 << 23))
        terms = []
        for t in specs:
            sig = int(rng.integers(-(1 << (t.sig_bits - 1)), 1 << (t.sig_bits - 1)))
            if rng.random() < 0.3:
                sig >>= int(rng.integers(0, t.sig_bits))
            terms.append((sig, int(rng.integers(0, t.top_exp + 1))))
        if rng.random() < 0.3:                  # make the first term cancel acc's top bits
            v = word_value(acc)
            t = specs[0]
            exp = min(max((v.numerator.bit_length() - v.denominator.bit_length())
                          - (t.sig_bits - 3) + t.bias, 0), t.top_exp) if v else 0
            sig = -int(v / Fraction(2) ** (exp - t.bias)) if v else 0
            if -(1 << (t.sig_bits - 1)) <= sig < 1 << (t.sig_bits - 1):
                terms[0] = (sig, exp)
        cases.append((acc, terms, 0, 0))
    return cases


def test_hif4_terms_adversarial():
    check(HIF4_TERMS, hif4_cases())


def test_wide_terms_adversarial():
    check(WIDE_TERMS, wide_cases())


def test_random_pairs():
    check(HIF4_TERMS, random_cases(HIF4_TERMS, 300, 1))
    check(WIDE_TERMS, random_cases(WIDE_TERMS, 150, 2))


@pytest.mark.slow
def test_random_pairs_many():
    check(HIF4_TERMS, random_cases(HIF4_TERMS, 2000, 3))
    check(WIDE_TERMS, random_cases(WIDE_TERMS, 1000, 4))


def test_window_geometry():
    spec = AccumSpec(HIF4_TERMS)
    assert (spec.lsb, spec.window) == (-149, 280)
    spec = AccumSpec(WIDE_TERMS)
    assert spec.lsb == -300
    with pytest.raises(ValueError, match="distinct"):
        AccumSpec([TermSpec("x", 4, 4, 0), TermSpec("x", 4, 4, 0)])


@pytest.mark.parametrize("exp_max", [-1, 16, 2.0, "3"])
def test_exp_max_must_fit_its_field(exp_max):
    """A window is sized from ``exp_max``; one that the field cannot hold (or that is not an
    integer) is refused when the hardware is built, not trusted."""
    with pytest.raises(ValueError, match=r"exp_max must be an integer from 0 to 15 \(what a "
                                         r"4-bit exponent field holds\)"):
        TermSpec("x", 4, 4, 0, exp_max)
    assert TermSpec("x", 4, 4, 0, 15).top_exp == 15
    with pytest.raises(ValueError, match="bias must be an integer"):
        TermSpec("x", 4, 4, 0.5)


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_leading_zeros_both_structures(tree):
    """Both structures of :func:`hwgen.accum.leading_zeros` count the same: every value of
    widths 1-9, and values with every leading-one position (random bits below) at the
    widths the back ends use."""
    from amaranth.hdl import Module, Signal

    from hwgen.accum import leading_zeros

    rng = np.random.default_rng(5)
    for width in list(range(1, 10)) + [24, 27, 51, 88, 280]:
        m = Module()
        value = Signal(width)
        count = leading_zeros(m, value, width, tree=tree)
        if width < 10:
            values = list(range(1 << width))
        else:
            values = [0] + [(1 << k) | int(rng.integers(0, 1 << 62)) % (1 << k)
                            for k in range(width)]
        got = []

        async def bench(ctx):
            for v in values:
                ctx.set(value, v)
                got.append(ctx.get(count))

        sim = Simulator(m)
        sim.add_testbench(bench)
        sim.run()
        assert got == [width - v.bit_length() if v else 0 for v in values], width


@pytest.mark.parametrize("prefix", [False, True], ids=["adder", "prefix"])
def test_negated_where_both_structures(prefix):
    """Both structures of :func:`hwgen.accum.negated_where` give ``value`` or ``-value``
    modulo ``2**width``: every value of unsigned and signed inputs of 1-6 bits, at widths
    narrower, equal and wider, with the flag clear and set; and random values at the widths
    the split uses."""
    from amaranth.hdl import Module, Signal, signed

    from hwgen.accum import negated_where

    rng = np.random.default_rng(6)
    cases = [(bits, sgn, width) for bits in range(1, 7) for sgn in (False, True)
             for width in sorted({max(1, bits - 1), bits, bits + 2})]
    cases += [(183, True, 182), (53, False, 53), (159, False, 159)]
    for bits, sgn, width in cases:
        m = Module()
        value = Signal(signed(bits) if sgn else bits)
        neg = Signal()
        out = Signal(width)
        m.d.comb += out.eq(negated_where(m, value, neg, width, prefix=prefix))
        lo = -(1 << (bits - 1)) if sgn else 0
        hi = (1 << (bits - 1)) if sgn else (1 << bits)
        values = (range(lo, hi) if bits < 10 else
                  [lo, hi - 1, 0, 1] + [lo + int.from_bytes(rng.bytes(24)) % (hi - lo)
                                        for _ in range(60)])
        got, want = [], []

        async def bench(ctx):
            for v in values:
                for f in (0, 1):
                    ctx.set(value, v)
                    ctx.set(neg, f)
                    got.append(ctx.get(out))
                    want.append((-v if f else v) % (1 << width))

        sim = Simulator(m)
        sim.add_testbench(bench)
        sim.run()
        assert got == want, (bits, sgn, width)
