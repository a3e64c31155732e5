"""The bounded one-term back end (:mod:`hwgen.accum_bounded`) against the golden model's
accumulation (:func:`sim.dot.accumulate`), bit for bit, in the Amaranth simulator: random
steps across the whole exponent range and the adversarial ones of issue 15 (cancellation
to zero, ties decided by bits far below, a term cancelling the accumulator but for its
rounding error, subnormal results, overflow, specials), on the HiF4 and NVFP4 terms and
two synthetic ones (a term narrower than the accumulator; one whose range reaches past
both ends of FP32)."""

import math

import numpy as np
import pytest
from amaranth.sim import Simulator

from hwgen.accum import TermSpec, accum_layout
from hwgen.accum_bounded import BoundedAdd, BoundedSpec
from hwgen.hif4 import MAX_TERM_EXP_DIFF as HIF4_MAX_EXP_DIFF
from hwgen.hif4 import HiF4DotUnit
from hwgen.nvfp4 import term_specs as nvfp4_terms
from sim.dot import NAN_WORD, accumulate

SPECS = {
    "hif4": lambda: HiF4DotUnit(residual="none")._terms(),
    "nvfp4": lambda: nvfp4_terms(),
    "narrow": lambda: [TermSpec("t", 8, 5, 20)],
    "wide": lambda: [TermSpec("t", 30, 9, 200)],
}


def _pack(layout, fields):
    word = 0
    for name, value in fields.items():
        f = layout[name]
        width = f.width
        word |= (int(value) & ((1 << width) - 1)) << f.offset
    return word


def run_rtl(terms, vectors):
    """Words of :class:`BoundedAdd` for ``vectors`` ``(acc, sig, exp, nan, first)``."""
    dut = BoundedAdd(terms)
    name = terms[0].name
    layout = accum_layout(terms)
    out = []

    async def bench(ctx):
        for acc, sig, exp, nan, first in vectors:
            ctx.set(dut.acc, int(acc))
            ctx.set(dut.step.as_value(), _pack(layout, {
                f"{name}_sig": sig, f"{name}_exp": exp, "nan": nan, "first": first,
                "last": 0}))
            out.append(ctx.get(dut.word))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return np.array(out, dtype=np.uint32)


def golden(term, vectors):
    acc = np.array([0 if first else a for a, _, _, _, first in vectors], dtype=np.uint32)
    P = np.array([[s] for _, s, _, _, _ in vectors], dtype=np.int64)
    E = np.array([[e - term.bias] for _, _, e, _, _ in vectors], dtype=np.int64)
    nan = np.array([n for _, _, _, n, _ in vectors], dtype=bool)
    return accumulate(acc, P, E, nan)


def _f32(x):
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def _word_value(w):
    """Exact value of a finite FP32 word as (sig, exp)."""
    e, f = (w >> 23) & 0xFF, w & 0x7FFFFF
    sig, exp = (f, -149) if e == 0 else (f | 0x800000, e - 150)
    return (-sig if w >> 31 else sig), exp


def _term_near(term, value_sig, value_exp, rng):
    """A term (sig, exp field) equal to ``value_sig * 2**value_exp`` if it can be, else as
    close as the term's grid allows, or None."""
    top = term.top_exp
    smax = (1 << (term.sig_bits - 1)) - 1
    for e in rng.permutation(top + 1):
        shift = value_exp - (int(e) - term.bias)
        s = value_sig << shift if shift >= 0 else value_sig >> -shift
        if abs(s) <= smax and s != 0:
            return int(s), int(e)
    return None


def vectors_for(term, n, seed):
    rng = np.random.default_rng(seed)
    smax = (1 << (term.sig_bits - 1)) - 1
    top = term.top_exp
    out = []

    def rand_sig():
        bits = int(rng.integers(1, term.sig_bits + 1))
        return int(rng.integers(-(1 << (bits - 1)), 1 << (bits - 1)))

    def rand_word():
        kind = rng.integers(0, 10)
        if kind == 0:
            return int(rng.integers(0, 1 << 23)) | (int(rng.integers(0, 2)) << 31)  # subnormal
        if kind == 1:
            return int(rng.choice([0, 0x80000000]))
        e = int(rng.integers(1, 255))
        return (e << 23) | int(rng.integers(0, 1 << 23)) | (int(rng.integers(0, 2)) << 31)

    while len(out) < n:
        kind = int(rng.integers(0, 9))
        acc, first, nan = rand_word(), 0, 0
        sig, exp = rand_sig(), int(rng.integers(0, top + 1))
        if kind == 1:                                   # the term near -acc: cancellation
            a_sig, a_exp = _word_value(acc)
            if a_sig:
                near = _term_near(term, -a_sig, a_exp, rng)
                if near:
                    sig, exp = near[0] + int(rng.integers(-3, 4)), near[1]
        elif kind == 2:                                 # acc near -term, off by a few ulps
            value = sig * 2.0 ** (exp - term.bias)
            if sig and math.isfinite(value) and abs(value) < 3e38:
                acc = _f32(-value)
                acc = (acc + int(rng.integers(-2, 3))) & 0xFFFFFFFF
                if (acc >> 23) & 0xFF == 0xFF:
                    acc = _f32(-value)
        elif kind == 3:                                 # ties: acc at half an ulp of term
            if sig:
                value = sig * 2.0 ** (exp - term.bias)
                if math.isfinite(value) and 1e-37 < abs(value) < 1e38:
                    ulp = 2.0 ** (math.floor(math.log2(abs(value))) - 23)
                    half = ulp / 2 * float(rng.choice([-1, 1]))
                    acc = _f32(half)
                    acc = (acc + int(rng.integers(-1, 2))) & 0x7FFFFFFF | (acc & 0x80000000)
        elif kind == 4:                                 # subnormal results
            a_sig, a_exp = _word_value(acc)
            near = _term_near(term, -(sig or 1), exp - term.bias, rng)
            if near:
                sig, exp = near
                value = sig * 2.0 ** (exp - term.bias)
                delta = int(rng.integers(-(1 << 20), 1 << 20)) * 2.0 ** -149
                if math.isfinite(value) and abs(value) < 3e38:
                    acc = _f32(-value + delta)
        elif kind == 5:                                 # exact zero, -0 and +0 operands
            a_sig, a_exp = _word_value(acc)
            near = _term_near(term, -a_sig, a_exp, rng) if a_sig else None
            if near and near[0] * 2.0 ** (near[1] - term.bias) == -a_sig * 2.0 ** a_exp:
                sig, exp = near
            else:
                sig = 0
        elif kind == 6:                                 # specials and flags
            pick = int(rng.integers(0, 5))
            if pick == 0:
                acc = 0x7F800000 | (int(rng.integers(0, 2)) << 31)
            elif pick == 1:
                acc = 0x7F800000 | int(rng.integers(1, 1 << 23))
            elif pick == 2:
                nan = 1
            elif pick == 3:
                first = 1
            else:
                acc = 0x7F7FFFFF | (int(rng.integers(0, 2)) << 31)   # +-max finite
                sig = smax if not acc >> 31 else -smax
                exp = top
        elif kind == 8:                                 # d = 1: acc just above -term
            k = exp - term.bias + term.sig_bits - 1     # |term| < 2**k <= |acc|
            if -126 <= k <= 127 and term.sig_bits > 2:
                neg = int(rng.integers(0, 2))
                acc = ((k + 127) << 23) | int(rng.integers(0, 8)) | (neg << 31)
                bits = int(rng.integers(1, term.sig_bits - 1))
                r = int(rng.integers(1, 1 << bits)) | 1
                sig = (1 << (term.sig_bits - 1)) - r
                sig = sig if neg else -sig
        sig = min(max(sig, -(1 << (term.sig_bits - 1))), smax)    # the term field's range
        out.append((acc, sig, exp, nan, first))
    return out


def test_window_geometry():
    """The window is about 30 bits, not the full window's 279 (HiF4, NVFP4)."""
    hif4 = BoundedSpec(SPECS["hif4"]())
    assert (hif4.sig, hif4.window) == (24, 27)
    assert hif4.accum.window == 279
    nv = BoundedSpec(SPECS["nvfp4"]())
    assert nv.window == nv.term.sig_bits + 1
    with pytest.raises(ValueError, match="one-term steps"):
        BoundedSpec(HiF4DotUnit(residual="2:4")._terms())


@pytest.mark.parametrize("name", sorted(SPECS))
def test_bounded_add_equals_golden(name):
    terms = SPECS[name]()
    vecs = vectors_for(terms[0], 1500, seed=sorted(SPECS).index(name))
    got, want = run_rtl(terms, vecs), golden(terms[0], vecs)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(vecs[i], hex(got[i]), hex(want[i])) for i in bad[:5]]
    assert (want == NAN_WORD).any() and (want == 0).any()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_bounded_add_equals_golden_long(name):
    """40,000 more steps per term (about 25 s each)."""
    terms = SPECS[name]()
    vecs = vectors_for(terms[0], 40_000, seed=100 + sorted(SPECS).index(name))
    got, want = run_rtl(terms, vecs), golden(terms[0], vecs)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(vecs[i], hex(got[i]), hex(want[i])) for i in bad[:5]]


# ---------------------------------------------------------------------------------------
# Two terms pre-added: HiF4 with a residual (exponent fields Ea + Ew and Er + Ew)

SPECS2 = {
    "hif4_r24": lambda: HiF4DotUnit(residual="2:4")._terms(),
    "hif4_dense": lambda: HiF4DotUnit(residual="dense")._terms(),
}


def run_rtl2(terms, vectors, max_exp_diff):
    """Words of a two-term :class:`BoundedAdd` for ``(acc, s1, e1, s2, e2, nan, first)``."""
    dut = BoundedAdd(terms, max_exp_diff)
    (n1, n2), layout = [t.name for t in terms], accum_layout(terms)
    out = []

    async def bench(ctx):
        for acc, s1, e1, s2, e2, nan, first in vectors:
            ctx.set(dut.acc, int(acc))
            ctx.set(dut.step.as_value(), _pack(layout, {
                f"{n1}_sig": s1, f"{n1}_exp": e1, f"{n2}_sig": s2, f"{n2}_exp": e2,
                "nan": nan, "first": first, "last": 0}))
            out.append(ctx.get(dut.word))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return np.array(out, dtype=np.uint32)


def golden2(terms, vectors):
    bias = terms[0].bias
    acc = np.array([0 if v[6] else v[0] for v in vectors], dtype=np.uint32)
    P = np.array([[v[1], v[3]] for v in vectors], dtype=np.int64)
    E = np.array([[v[2] - bias, v[4] - bias] for v in vectors], dtype=np.int64)
    return accumulate(acc, P, E, np.array([v[5] for v in vectors], dtype=bool))


def vectors2_for(terms, n, seed):
    """The one-term vectors of the main term with a residual term beside it: none, random,
    cancelling the main term exactly, or tiny at the lowest exponent allowed."""
    main, res = terms
    rng = np.random.default_rng(seed)
    smax = (1 << (res.sig_bits - 1)) - 1
    out = []
    for acc, s1, e1, nan, first in vectors_for(main, n, seed):
        lo = max(0, e1 - HIF4_MAX_EXP_DIFF)
        hi = min(main.top_exp, e1 + HIF4_MAX_EXP_DIFF)
        e2 = int(rng.integers(lo, hi + 1))
        kind = int(rng.integers(0, 5))
        if kind == 0:
            s2 = 0
        elif kind == 1:
            bits = int(rng.integers(1, res.sig_bits + 1))
            s2 = int(rng.integers(-(1 << (bits - 1)), 1 << (bits - 1)))
        elif kind == 2 and abs(s1) <= smax:             # the two terms cancel
            s2, e2 = -s1, e1
        else:                                           # tiny, as far below as allowed
            s2, e2 = int(rng.choice([-1, 1])) * int(rng.integers(1, 4)), lo
        out.append((acc, s1, e1, s2, e2, nan, first))
    return out


def test_preadd_geometry():
    b = BoundedSpec(SPECS2["hif4_r24"](), HIF4_MAX_EXP_DIFF)
    assert b.term.sig_bits == 23 + 63 + 1 and b.window == 88
    with pytest.raises(ValueError, match="no max_exp_diff"):
        BoundedSpec(SPECS2["hif4_r24"]())
    with pytest.raises(ValueError, match="max_exp_diff must be"):
        BoundedSpec(SPECS2["hif4_r24"](), 200)


@pytest.mark.parametrize("name", sorted(SPECS2))
def test_preadded_bounded_add_equals_golden(name):
    terms = SPECS2[name]()
    vecs = vectors2_for(terms, 1500, seed=10 + sorted(SPECS2).index(name))
    got, want = run_rtl2(terms, vecs, HIF4_MAX_EXP_DIFF), golden2(terms, vecs)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(vecs[i], hex(got[i]), hex(want[i])) for i in bad[:5]]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS2))
def test_preadded_bounded_add_equals_golden_long(name):
    """40,000 more steps per residual mode."""
    terms = SPECS2[name]()
    vecs = vectors2_for(terms, 40_000, seed=110 + sorted(SPECS2).index(name))
    got, want = run_rtl2(terms, vecs, HIF4_MAX_EXP_DIFF), golden2(terms, vecs)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(vecs[i], hex(got[i]), hex(want[i])) for i in bad[:5]]
