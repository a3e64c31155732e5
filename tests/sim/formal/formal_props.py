"""Formal properties of the datapath blocks: hwgen's blocks wrapped with their references.

Each ``*Proof`` component instantiates one block of :mod:`hwgen` (or, for the MXFP4/NVFP4
products and block dots, which the units build inline, the same two library functions the
units call: :func:`hwgen.e2m1.e2m1_product_expr` and :func:`hwgen.unit.adder_tree`; for
:class:`TermExponentProof`, every stage of a unit before its accumulator), drives
it from the component's input ports (free inputs for the solver) and states the block's
contract as ``Assert`` statements against a reference written separately in Amaranth. The
references take element and scale values from the oracles of ``tests/conftest.py``
(``fractions.Fraction`` transcriptions of ``docs/formats.md``), turned into constant tables,
so a proof shows the block against the spec's code values, not against its own formulas.

``mutant=True`` builds the same wrapper with a deliberately wrong reference (a realistic
slip: an off-by-one, a missing hidden bit, a wrong index), which the solver must reject; the
tests use it to show every proof can fail.

All wrapped blocks are combinational: BMC depth 1 covers every input, so a pass is a proof.
"""

import copy
import dataclasses
from fractions import Fraction

from amaranth.hdl import Array, Assert, Assume, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from conftest import e2m1, e6m2, e8m0, s1p2, ue4m3
from hwgen.accum import NAN_WORD, AccumSpec, Round, accum_layout
from hwgen.accum_bounded import AddSub, BypassRound, Decode, JamPair, PreAdd, RoundAt, SwapAlign
from hwgen.accum_split import (E_BITS, SUBNORMAL_REACH, AccVersusE, ClusterSums, Frame, LoopTerm,
                               Nearest, PickClusters, Residue, SortTerms, SplitSum)
from hwgen.e2m1 import e2m1_product_expr
from hwgen.hif4 import BlockSlice, MicroGroupDot, ResidualSelect, ScalePair
from hwgen.mxfp4 import E8M0ScalePair
from hwgen.nvfp4 import UE4M3ScalePair
from hwgen.stream import chain
from hwgen.unit import adder_tree


def _table(values, shape):
    """A constant table indexed by a signal: ``_table(vals, shape)[code]``."""
    return Array([Const(v, shape) for v in values])


def _exact_sum(m, values, width, name):
    """The exact sum of signed ``values``: every partial sum a ``signed(width)`` signal
    (``width`` large enough that none can overflow), added pairwise ``(0, 1), (2, 3), ...``.
    The order is a hint for the solver only (integer addition is associative): a plain
    left-to-right sum of the same values is out of the solvers' reach in minutes."""
    level, depth = list(values), 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            s = Signal(signed(width), name=f"{name}_{depth}_{i // 2}")
            m.d.comb += s.eq(level[i] + level[i + 1])
            nxt.append(s)
        if len(level) % 2:
            nxt.append(level[-1])
        level, depth = nxt, depth + 1
    out = Signal(signed(width), name=name)
    m.d.comb += out.eq(level[0])
    return out


def _as_int(value):
    assert value.denominator == 1, value
    return int(value)


#: S1P2 code -> value * 4 (-7..7).
S1P2_X4 = [_as_int(s1p2(c) * 4) for c in range(16)]
#: E2M1 code -> value * 2 (-12..12).
E2M1_X2 = [_as_int(e2m1(c) * 2) for c in range(16)]


def _e6m2_fields(code):
    """``(sig, exp)`` with ``e6m2(code) == sig * 2**(exp - 50)``, ``4 <= sig <= 7``, read off
    the oracle's exact value (0xFF, NaN: ``(0, 0)``)."""
    v = e6m2(code)
    if v is None:
        return 0, 0
    x = _as_int(v * 2 ** 50)
    exp = x.bit_length() - 3
    sig = x >> exp
    assert 4 <= sig <= 7 and sig << exp == x, code
    return sig, exp


def _e8m0_exp(code):
    """``e`` with ``e8m0(code) == 2**(e - 127)`` (0xFF, NaN: 0)."""
    v = e8m0(code)
    if v is None:
        return 0
    x = v * 2 ** 127
    e = _as_int(x).bit_length() - 1
    assert Fraction(2) ** e == x, code
    return e


class MicroGroupDotProof(wiring.Component):
    """:class:`hwgen.hif4.MicroGroupDot` (``n`` = 4 or 2) equals
    ``(sum_i a_i * w_i) * 16 * 2**shift`` with S1P2 values from the oracle, for every
    code and every shift 0..4 (the range the four micro-exponent bits give).
    Mutant: ``2**4`` read as ``2**3``."""

    def __init__(self, n, mutant=False):
        self._n, self._mutant = n, mutant
        super().__init__({"a": In(4 * n), "w": In(4 * n), "shift": In(3)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = MicroGroupDot(self._n)
        m.d.comb += [dut.a.eq(self.a), dut.w.eq(self.w), dut.shift.eq(self.shift)]
        val = _table(S1P2_X4, signed(4))
        pow2 = _table([1, 2, 4, 8, 8 if self._mutant else 16], 5)
        ref = Signal(signed(16))
        m.d.comb += ref.eq(sum(val[self.a[4 * i:4 * i + 4]] * val[self.w[4 * i:4 * i + 4]]
                               for i in range(self._n)) * pow2[self.shift])
        m.d.comb += [Assume(self.shift <= 4), Assert(dut.sum == ref)]
        return m


class ResidualSelectProof(wiring.Component):
    """:class:`hwgen.hif4.ResidualSelect`: ``sel[j]`` is weight element ``pos[j]`` for every
    weight micro-group and every pair of positions. Mutant: element ``pos[j] ^ 1``."""

    w: In(16)
    pos: In(4)

    def __init__(self, mutant=False):
        self._mutant = mutant
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = ResidualSelect()
        m.d.comb += [dut.w.eq(self.w), dut.pos.eq(self.pos)]
        for j in range(2):
            with m.Switch(self.pos[2 * j:2 * j + 2]):
                for p in range(4):
                    with m.Case(p):
                        q = p ^ 1 if self._mutant else p
                        m.d.comb += Assert(dut.sel.as_value()[4 * j:4 * j + 4]
                                           == self.w[4 * q:4 * q + 4])
        return m


class E6M2ScalePairProof(wiring.Component):
    """:class:`hwgen.hif4.ScalePair`: ``nan`` is set exactly when a code is the oracle's NaN;
    otherwise ``mant == sig_a * sig_w`` and ``exp == exp_a + exp_w`` where ``e6m2(c) ==
    sig_c * 2**(exp_c - 50)`` (``4 <= sig_c <= 7``), i.e. ``Sa * Sw == mant * 2**(exp -
    100)``. Mutant: the significand without its hidden 4."""

    a: In(8)
    w: In(8)

    def __init__(self, mutant=False):
        self._mutant = mutant
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = ScalePair()
        m.d.comb += [dut.a.eq(self.a), dut.w.eq(self.w)]
        fields = [_e6m2_fields(c) for c in range(256)]
        sig = _table([s - 4 if self._mutant else s for s, _ in fields], 3)
        exp = _table([e for _, e in fields], 6)
        nan = _table([e6m2(c) is None for c in range(256)], 1)
        ref_nan = nan[self.a] | nan[self.w]
        m.d.comb += Assert(dut.nan == ref_nan)
        with m.If(~ref_nan):
            m.d.comb += [Assert(dut.mant == sig[self.a] * sig[self.w]),
                         Assert(dut.exp == exp[self.a] + exp[self.w])]
        return m


class E8M0ScalePairProof(wiring.Component):
    """:class:`hwgen.mxfp4.E8M0ScalePair`: ``nan`` exactly for the oracle's NaN codes;
    otherwise ``Sa * Sw / 4 == 2**(exp - 256)``. Mutant: bias 127 read as 128."""

    sa: In(8)
    sw: In(8)

    def __init__(self, mutant=False):
        self._mutant = mutant
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = E8M0ScalePair()
        m.d.comb += [dut.sa.eq(self.sa), dut.sw.eq(self.sw)]
        # log2(Sa * Sw / 4) + 256 = (ea - 127) + (ew - 127) - 2 + 256 = ea + ew
        exp = _table([_e8m0_exp(c) - (1 if self._mutant else 0) for c in range(256)], 9)
        nan = _table([e8m0(c) is None for c in range(256)], 1)
        ref_nan = nan[self.sa] | nan[self.sw]
        m.d.comb += Assert(dut.nan == ref_nan)
        with m.If(~ref_nan):
            m.d.comb += Assert(dut.exp == exp[self.sa] + exp[self.sw])
        return m


class UE4M3ScalePairProof(wiring.Component):
    """:class:`hwgen.nvfp4.UE4M3ScalePair`: ``nan`` exactly for the oracle's NaN codes (bit 7
    ignored); otherwise ``Sa * Sw == sig * 2**(shift - 18)``, compared as integers
    ``(Sa * 2**9) * (Sw * 2**9) == sig << shift`` with ``S * 2**9`` from the oracle (an exact
    integer for every UE4M3 code). Mutant: subnormal codes read as normal ones."""

    sa: In(8)
    sw: In(8)

    def __init__(self, mutant=False):
        self._mutant = mutant
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = UE4M3ScalePair()
        m.d.comb += [dut.sa.eq(self.sa), dut.sw.eq(self.sw)]

        def scaled(c):
            v = ue4m3(c)
            if v is None:
                return 0
            if self._mutant and (c & 0x78) == 0:        # subnormal as if exponent 1
                v = (Fraction(8 + (c & 7), 8)) * Fraction(2) ** -6
            return _as_int(v * 2 ** 9)

        val = _table([scaled(c) for c in range(256)], 18)
        nan = _table([ue4m3(c) is None for c in range(256)], 1)
        ref_nan = nan[self.sa] | nan[self.sw]
        m.d.comb += Assert(dut.nan == ref_nan)
        with m.If(~ref_nan):
            m.d.comb += Assert((dut.sig << dut.shift) == val[self.sa] * val[self.sw])
        return m


class E2M1ProductProof(wiring.Component):
    """:func:`hwgen.e2m1.e2m1_product_expr` equals ``4 * a * w`` with E2M1 values from the
    oracle, for every pair of codes. Mutant: code 7 (6.0) read as 4.0."""

    a: In(4)
    w: In(4)

    def __init__(self, mutant=False):
        self._mutant = mutant
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        p = e2m1_product_expr(m, self.a, self.w)
        vals = list(E2M1_X2)
        if self._mutant:
            vals[7], vals[15] = 8, -8
        val = _table(vals, signed(5))
        m.d.comb += Assert(p == val[self.a] * val[self.w])
        return m


class E2M1DotProof(wiring.Component):
    """The MXFP4 / NVFP4 block dot as the units build it: ``n`` products by
    :func:`hwgen.e2m1.e2m1_product_expr` reduced by :func:`hwgen.unit.adder_tree` (named
    signals, as the units call it) equals the exact sum of the ``n`` product signals, for
    every input. With :class:`E2M1ProductProof` (each product is ``4 * a_i * w_i`` with the
    oracle's values) this gives ``dot == 4 * sum_i a_i * w_i``; the statement in one piece
    (the tree against a sum of table products) is beyond the solvers in 5 minutes.
    Mutant: the reference drops the last product."""

    def __init__(self, n, mutant=False):
        self._n, self._mutant = n, mutant
        super().__init__({"a": In(4 * n), "w": In(4 * n)})

    def elaborate(self, platform):
        m = Module()
        prods = [e2m1_product_expr(m, self.a[4 * i:4 * i + 4], self.w[4 * i:4 * i + 4],
                                   name=f"p{i}") for i in range(self._n)]
        dot = adder_tree(prods, m=m, name="tree")
        refs = prods[:-1] if self._mutant else prods
        m.d.comb += Assert(dot == _exact_sum(m, refs, 24, "ref"))
        return m


class HiF4BlockSumProof(wiring.Component):
    """:class:`hwgen.hif4.BlockSlice` over a whole block (16 micro-groups) against the sum of
    its micro-groups: the main sum equals the plain sum over groups ``j`` of a
    :class:`hwgen.hif4.MicroGroupDot` fed with the group's four element pairs and the shift
    ``a_l2[j // 2] + a_l3[j] + w_l2[j // 2] + w_l3[j]``; with ``residual="2:4"`` the residual
    sum the same over ``MicroGroupDot(2)`` of the two kept elements and the weight elements
    a :class:`hwgen.hif4.ResidualSelect` picks by their positions (residual L3/L2 bits), with
    ``"dense"`` over ``MicroGroupDot(4)`` of the residual block. With the proofs of those
    blocks against the spec values this is the block sum of ``docs/formats.md`` section 7.
    Mutant: L2 bit ``j % 8`` instead of ``j // 2``."""

    def __init__(self, residual="none", mutant=False):
        self._residual, self._mutant = residual, mutant
        members = {"a": In(256), "w": In(256), "a_l3": In(16), "w_l3": In(16),
                   "a_l2": In(8), "w_l2": In(8)}
        if residual == "2:4":
            members.update(r=In(128), r_pos=In(64), r_l3=In(16), r_l2=In(8))
        elif residual == "dense":
            members.update(r=In(256), r_l3=In(16), r_l2=In(8))
        super().__init__(members)

    def _ref(self, m, x, x_l3, x_l2, name, pos=None):
        groups = []
        for j in range(16):
            l2 = j % 8 if self._mutant else j // 2
            w = self.w[16 * j:16 * j + 16]
            if pos is None:
                m.submodules[f"{name}{j}"] = g = MicroGroupDot(4)
                m.d.comb += [g.a.eq(x[16 * j:16 * j + 16]), g.w.eq(w)]
            else:
                m.submodules[f"{name}{j}"] = g = MicroGroupDot(2)
                m.submodules[f"{name}sel{j}"] = sel = ResidualSelect()
                m.d.comb += [sel.w.eq(w), sel.pos.eq(pos[4 * j:4 * j + 4]),
                             g.a.eq(x[8 * j:8 * j + 8]), g.w.eq(sel.sel)]
            m.d.comb += g.shift.eq(x_l2[l2] + x_l3[j] + self.w_l2[j // 2] + self.w_l3[j])
            groups.append(g.sum)
        return _exact_sum(m, groups, 24, f"{name}_ref")

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = BlockSlice(groups=16, residual=self._residual)
        for port in self.signature.members:
            m.d.comb += getattr(dut, port).eq(getattr(self, port))
        m.d.comb += Assert(dut.main == self._ref(m, self.a, self.a_l3, self.a_l2, "main"))
        if self._residual != "none":
            pos = self.r_pos if self._residual == "2:4" else None
            m.d.comb += Assert(dut.res == self._ref(m, self.r, self.r_l3, self.r_l2, "res",
                                                    pos))
        return m


class AdderTreeProof(wiring.Component):
    """:func:`hwgen.unit.adder_tree` of ``n`` free signed ``bits``-bit values (named signals,
    as the units call it) equals their exact sum, for every input: no adder of the tree
    truncates. Mutant: the reference drops the last value."""

    def __init__(self, n, bits=9, mutant=False):
        self._n, self._bits, self._mutant = n, bits, mutant
        super().__init__({"x": In(bits * n)})

    def elaborate(self, platform):
        m = Module()
        b = self._bits
        xs = [self.x[b * i:b * i + b].as_signed() for i in range(self._n)]
        tree = adder_tree(xs, m=m, name="tree")
        ref = _exact_sum(m, xs[:-1] if self._mutant else xs, 32, "ref")
        m.d.comb += Assert(tree == ref)
        return m


class RoundProof(wiring.Component):
    """:class:`hwgen.accum.Round` of the window of ``terms`` (a unit's ``terms``): for every
    window sum ``x`` (units ``2**lsb``, magnitude ``M``) the word is ``RNE_FP32(x)`` as
    ``docs/formats.md`` section 7 states it, written as properties of the word rather than a
    second rounder:

    - ``M == 0`` gives +0; otherwise the sign bit is the sign of ``x``;
    - an Inf word (exponent 255) has a zero fraction and ``M >= 2**128 - 2**103`` (the RNE
      overflow threshold: the midpoint between the largest finite value and ``2**128``);
      no word is a NaN;
    - a finite word of value ``V`` (ulp ``U``; ``D`` the gap to the value below: ``U``, or
      ``U / 2`` at the bottom of a binade) brackets ``M``: ``2V - D <= 2M <= 2V + U`` (the
      lower bound only for ``V > 0``), so ``V`` is a nearest FP32 value; at a tie (either
      bound met) the fraction is even. Then ``M < 2**128 - 2**103`` follows for finite words.
      A nonzero ``M`` that rounds to ``V = 0`` keeps its sign (only possible where the
      window reaches below ``2**-149``).

    These properties determine the word uniquely. Mutant: overflow threshold ``2**128``.
    """

    def __init__(self, terms, mutant=False):
        self._spec = AccumSpec(terms)
        self._mutant = mutant
        super().__init__({"sum": In(signed(self._spec.window))})

    def elaborate(self, platform):
        m = Module()
        spec = self._spec
        w, lsb = spec.window, spec.lsb
        m.submodules.dut = dut = Round(spec)
        m.d.comb += dut.sum.eq(self.sum)
        mag = Signal(w)
        m.d.comb += mag.eq(Mux(self.sum < 0, -self.sum, self.sum))
        _assert_rne(m, dut.word, mag, self.sum < 0, Const(lsb, signed(10)), w, lsb,
                    self._mutant)
        return m


class TermExponentProof(wiring.Component):
    """The width assumptions between a unit's front end and its accumulator back end.

    The back end is sized from the unit's term list (:attr:`hwgen.unit.DotUnit.terms`): the
    full window's shifts assume a term's exponent field never exceeds its ``exp_max``, and
    the bounded pre-add (HiF4 with a residual) assumes the two terms' fields differ by at
    most ``max_exp_diff``. This wraps every stage of the unit before the accumulator (one
    stage, 64 lanes: combinational, one slice), drives its input payload from free inputs
    and asserts, for every payload, on the payload the accumulator would receive: the NaN
    flag, or every ``<term>_exp <= exp_max`` and, with a bound, ``|e1 - e2| <=
    max_exp_diff``. A NaN step's sum is discarded by the accumulator, so its exponents are
    free (MXFP4's NaN scale codes give 510 > 508). Mutant: each bound one lower (for units
    with a pair bound, only that one), which reachable steps exceed.
    """

    def __init__(self, unit_cls, residual="none", mutant=False):
        self._dut = unit_cls(residual=residual, stages=1, lanes=64, accum="window")
        self._mutant = mutant
        super().__init__({"payload": In(self._dut.payload_layout)})

    def elaborate(self, platform):
        m = Module()
        unit = self._dut
        plan = unit._plan()
        assert [desc["kind"] for _, desc, _ in plan][-1] == "accumulator"
        first, last = chain(m, [(name, make()) for name, _, make in plan[:-1]])
        m.d.comb += [first.i.valid.eq(1), first.i.payload.eq(self.payload),
                     last.o.ready.eq(1), Assert(last.o.valid)]
        p = last.o.payload
        diff = unit._max_exp_diff if len(unit.terms) == 2 else None
        lower = 1 if self._mutant and diff is None else 0
        with m.If(~p.nan):
            for t in unit.terms:
                m.d.comb += Assert(p[f"{t.name}_exp"] <= t.top_exp - lower)
            if diff is not None:
                e1, e2 = (p[f"{t.name}_exp"] for t in unit.terms)
                bound = diff - (1 if self._mutant else 0)
                m.d.comb += Assert(Mux(e1 > e2, e1 - e2, e2 - e1) <= bound)
        return m


def _assert_rne(m, word, mag, neg, base, width, base_lo, mutant=False):
    """Assert ``word`` is ``RNE_FP32((-1)**neg * mag * 2**base)`` for a ``width``-bit ``mag``
    and a ``base >= base_lo``, with :class:`RoundProof`'s properties of the word (mutant:
    overflow threshold ``2**128``).

    The comparisons are made in a frame whose bit 0 weighs ``2**(base - 24)``. A correct
    word of a nonzero ``mag`` has its ulp ``2**(max(ef, 1) - 150)`` at frame bit ``k`` with
    ``1 <= k <= kmax`` (an FP32 ulp is at least ``2**-23`` of the value, and at least
    ``2**-149``), which is asserted first; the other properties are then exact."""
    frac, ef, sign = word[:23], word[23:31], word[31]
    kmax = max(width + 1, -149 - base_lo + 25)
    frame = max(width, kmax) + 24 + 3
    k = Signal(signed(len(base) + 3), name="rne_k")
    m.d.comb += k.eq(Mux(ef == 0, 1, ef) - 150 - base + 24)
    ks = Signal(range(kmax + 1), name="rne_ks")
    m.d.comb += ks.eq(Mux(k < 0, 0, Mux(k > kmax, kmax, k)))
    wide = unsigned(frame)
    big, ulp, value, below = (Signal(wide, name=f"rne_{n}") for n in
                              ("mag", "ulp", "value", "below"))
    m.d.comb += [big.eq(Cat(Const(0, 24), mag)), ulp.eq(Const(1, wide) << ks),
                 value.eq(Cat(frac, ef != 0) << ks),
                 below.eq(Mux((frac == 0) & (ef >= 2), ulp >> 1, ulp))]
    # the RNE overflow threshold 2**103 * (2**25 - 1) <= mag * 2**base
    t = (1 << 25) - (0 if mutant else 1)
    up_shift = Signal(signed(len(base) + 2), name="rne_up_shift")
    m.d.comb += up_shift.eq(103 - base)
    lim = width + 2                         # beyond: the threshold exceeds every mag
    up = Signal(26 + (1 << lim.bit_length()), name="rne_up")
    m.d.comb += up.eq(Const(t, 26) << up_shift[:lim.bit_length()])
    down = Signal(width + 26, name="rne_down")
    m.d.comb += down.eq(mag << (-up_shift)[:5])
    over = Signal(name="rne_over")
    m.d.comb += over.eq(Mux(up_shift >= 0, (up_shift <= lim) & (mag >= up),
                            (-up_shift >= 26) | (down >= t)))
    twice = big << 1
    with m.If(mag == 0):
        m.d.comb += Assert(word == 0)
    with m.Else():
        m.d.comb += Assert(sign == neg)
        with m.If(ef == 255):
            m.d.comb += [Assert(frac == 0), Assert(over)]
        with m.Else():
            m.d.comb += Assert((k >= 1) & (k <= kmax))
            upper = (value << 1) + ulp
            lower = (value << 1) - below
            m.d.comb += Assert(twice <= upper)
            with m.If(value != 0):
                m.d.comb += Assert(twice >= lower)
            with m.If((twice == upper) | ((value != 0) & (twice == lower))):
                m.d.comb += Assert(~frac[0])


def _bounded_ranges(bspec):
    """The ranges of :class:`hwgen.accum_bounded.Decode`'s top exponents: the accumulator's
    ``[-126, 127]``; the term's from value 1 at field 0 to ``2**(S-1)`` at the field's top
    (the whole field, not only ``exp_max``)."""
    t = bspec.term
    return (-126, 127), (-t.bias, (1 << t.exp_bits) - 1 - t.bias + t.sig_bits - 1)


class RoundAtProof(wiring.Component):
    """:class:`hwgen.accum_bounded.RoundAt` as the bounded back end ``bspec`` builds it
    (``N + 1`` bits, every ``base`` :class:`hwgen.accum_bounded.SwapAlign` can give:
    ``pb - N + 1`` for a top exponent ``pb`` in :func:`_bounded_ranges`), or with
    ``reference``, as :class:`BoundedAlignProof` builds its reference (:func:`_reference`):
    the word is ``RNE_FP32(+-mag * 2**base)`` for every ``mag`` (:func:`_assert_rne`).
    Mutant: overflow threshold ``2**128``."""

    def __init__(self, bspec, mutant=False, reference=False):
        self._b, self._mutant = bspec, mutant
        if reference:
            x, width, exp_bits = _reference(bspec)
        else:
            x, width, exp_bits = 0, bspec.window + 1, bspec.exp_bits
        (a_lo, a_hi), (t_lo, t_hi) = _bounded_ranges(bspec)
        self._lo = min(a_lo, t_lo) - (bspec.window - 1) - x
        self._hi = max(a_hi, t_hi) - (bspec.window - 1) - x
        self._width, self._exp_bits = width, exp_bits
        super().__init__({"mag": In(width), "neg": In(1), "base": In(signed(exp_bits))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [Assume(self.base >= self._lo), Assume(self.base <= self._hi)]
        m.submodules.dut = dut = RoundAt(self._width, self._exp_bits)
        m.d.comb += [dut.mag.eq(self.mag), dut.neg.eq(self.neg), dut.base.eq(self.base)]
        _assert_rne(m, dut.word, self.mag, self.neg, self.base, self._width, self._lo,
                    self._mutant)
        return m


def _reference(bspec):
    """``(X, width, exp_bits)`` of :class:`BoundedAlignProof`'s reference sum: ``X = M + 1``
    bits deeper than the ``N``-bit window, rounded by a ``RoundAt(N + X + 1, E + 2)``."""
    x = bspec.sig + 1
    return x, bspec.window + x + 1, bspec.exp_bits + 2


class DecodeProof(wiring.Component):
    """:class:`hwgen.accum_bounded.Decode` of the bounded back end ``bspec``: for every
    finite accumulator word (or ``zero_acc``) and every term (any exponent field value),
    the decoded operands are the two values exactly, in the form
    :class:`BoundedAlignProof` assumes:

    - the accumulator: sign bit, ``a_sig`` its 24-bit significand (hidden bit for a normal
      word) at the top of ``M`` bits, ``a_top = max(ef, 1) - 127``, zero as the word is
      (or ``zero_acc``);
    - the term: ``t_neg`` its sign; zero exactly when ``sig`` is; otherwise ``t_sig`` has
      its leading one at bit ``M - 1``, ``t_top`` is in :func:`_bounded_ranges` and
      ``t_sig == |sig| << s`` with ``s = M - 1 - (t_top - (exp - bias))`` in ``[0, M - 1]``
      (``|sig| * 2**(exp - bias) == t_sig * 2**(t_top - M + 1)``).

    Mutant: the accumulator's top one lower (a subnormal's ``ef = 0`` read as 0, not 1)."""

    def __init__(self, bspec, mutant=False):
        self._b, self._mutant = bspec, mutant
        t = bspec.term
        super().__init__({"acc": In(32), "zero_acc": In(1), "sig": In(signed(t.sig_bits)),
                          "exp": In(t.exp_bits)})

    def elaborate(self, platform):
        m = Module()
        b = self._b
        t, M = b.term, b.sig
        m.submodules.dut = dut = Decode(b)
        m.d.comb += [dut.acc.eq(self.acc), dut.zero_acc.eq(self.zero_acc),
                     dut.sig.eq(self.sig), dut.exp.eq(self.exp)]
        frac, ef = self.acc[:23], self.acc[23:31]
        m.d.comb += Assume(self.zero_acc | (ef != 255))
        sig24 = Signal(24)
        m.d.comb += sig24.eq(Mux(self.zero_acc, 0, Cat(frac, ef != 0)))
        top = Mux(ef == 0, 0 if self._mutant else 1, ef) - 127
        m.d.comb += [Assert(dut.a_neg == self.acc[31]), Assert(dut.a_zero == (sig24 == 0)),
                     Assert(dut.a_sig == Cat(Const(0, M - 24), sig24)),
                     Assert(dut.a_top == top)]
        mag = Signal(t.sig_bits)
        m.d.comb += mag.eq(Mux(self.sig < 0, -self.sig, self.sig))
        _, (t_lo, t_hi) = _bounded_ranges(b)
        m.d.comb += [Assert(dut.t_neg == (self.sig < 0)), Assert(dut.t_zero == (mag == 0))]
        with m.If(mag == 0):
            m.d.comb += Assert(dut.t_sig == 0)
        with m.Else():
            s = Signal(signed(b.exp_bits + 2))
            m.d.comb += s.eq((M - 1) - (dut.t_top - (self.exp - t.bias)))
            m.d.comb += [Assert(dut.t_sig[M - 1]), Assert(dut.t_top >= t_lo),
                         Assert(dut.t_top <= t_hi), Assert((s >= 0) & (s <= M - 1)),
                         Assert(dut.t_sig == (Cat(mag, Const(0, M)) << s[:M.bit_length()])
                                [:M])]
        return m


class PreAddProof(wiring.Component):
    """:class:`hwgen.accum_bounded.PreAdd`: for two terms whose exponent fields differ by at
    most ``D``, ``sig * 2**exp == s1 * 2**e1 + s2 * 2**e2`` (one bias): ``exp`` is the
    lower field and ``sig`` equals the exact sum scaled to it, in a signal wide enough for
    every sum. Mutant: the bound one higher than the block is built for."""

    def __init__(self, bspec, mutant=False):
        self._b, self._mutant = bspec, mutant
        super().__init__({"step": In(accum_layout(bspec.accum.terms))})

    def elaborate(self, platform):
        m = Module()
        b = self._b
        (t1, t2), D = b.accum.terms, b.max_exp_diff + (1 if self._mutant else 0)
        s1, e1 = self.step[f"{t1.name}_sig"], self.step[f"{t1.name}_exp"]
        s2, e2 = self.step[f"{t2.name}_sig"], self.step[f"{t2.name}_exp"]
        m.d.comb += Assume(Mux(e1 > e2, e1 - e2, e2 - e1) <= D)
        m.submodules.dut = dut = PreAdd(b)
        m.d.comb += dut.step.eq(self.step)
        width = max(t1.sig_bits, t2.sig_bits) + D + 8
        low = Mux(e1 < e2, e1, e2)
        exact = Signal(signed(width))
        m.d.comb += exact.eq((s1 << (e1 - low)[:D.bit_length()])
                             + (s2 << (e2 - low)[:D.bit_length()]))
        m.d.comb += [Assert(dut.exp == low), Assert(dut.sig == exact)]
        return m


class JamPairProof(wiring.Component):
    """:class:`hwgen.accum_bounded.JamPair` (MXFP4's two blocks): for every step (any
    exponent field values), in a fixed-point frame that holds every value exactly (bit
    ``p`` weighs ``2**(p - bias - F)``; the terms placed by their fields, not normalized):

    - *hi* is the term with the higher leading one (the first on a tie, either when both are
      zero), *lo* the other, chosen by magnitude here (``lo <= smear(hi)``);
    - ``exp`` is hi's leading place plus the bias (0 for a zero pair), so ``u``, the weight
      of the pair term's bit 0, is ``K`` places below hi's leading one;
    - ``sig * u == hi + J(lo)``, ``J`` as ``docs/accumulator.md`` defines it: lo unchanged
      when it has no bits below ``u``, else its magnitude replaced by the odd multiple of
      ``u`` between the two multiples of ``2u`` around it (signs applied);
    - ``lo_neg``, ``lo_sig``, ``lo_top``, ``lo_zero`` are lo exactly, in the form
      :class:`DecodeProof` proves for a term (leading one at bit ``M - 1``);
    - ``hi_rep`` holds exactly when hi is nonzero, below ``2**128`` and a multiple of
      ``2**-149`` (hi has at most 24 significant bits: ``BoundedSpec`` allows no wider
      pair), and then ``hi_word`` is an FP32 word of hi's value.

    With these, the rest of the pair argument (``RNE(acc + hi + lo) == RNE(acc + T)`` unless
    ``acc == -hi``) is arithmetic on the values, in ``docs/accumulator.md``.

    ``parts`` selects what is asserted: ``"term"`` (``exp`` and ``sig``), ``"lo"``, ``"hi"``
    (``hi_rep`` and ``hi_word``); the solvers answer for each part alone sooner than for all
    of them (``docs/formal.md``). Mutant, per part: the reference's ``J`` drops the jam bit
    (lo truncated at ``u``); lo's place one too high; hi's least FP32 place ``2**-148``."""

    def __init__(self, bspec, mutant=False, parts=("term", "lo", "hi")):
        self._parts = parts
        if bspec.pair_window is None:
            raise ValueError("JamPairProof takes a pair geometry (two independent terms)")
        self._b, self._mutant = bspec, mutant
        super().__init__({"step": In(accum_layout(bspec.accum.terms))})

    def elaborate(self, platform):
        m = Module()
        b = self._b
        M, K = b.sig, b.pair_window - 1
        terms = b.accum.terms
        bias = terms[0].bias
        F = max(K, M - 1, 150 - bias, 0)            # every place named below is at bit >= 0
        S = max(t.sig_bits for t in terms)
        W = (1 << terms[0].exp_bits) + S + F + 4    # the largest pair term fits, signed
        m.submodules.dut = dut = JamPair(b)
        m.d.comb += dut.step.eq(self.step)

        def pos(x):                                 # the frame bit of 2**x
            return x + bias + F

        mags, negs = [], []
        for i, t in enumerate(terms):
            s, e = self.step[f"{t.name}_sig"], self.step[f"{t.name}_exp"]
            a = Signal(t.sig_bits, name=f"abs{i}")
            v = Signal(W, name=f"v{i}")
            m.d.comb += [a.eq(Mux(s < 0, -s, s)), v.eq(Cat(Const(0, F), a) << e)]
            mags.append(v)
            negs.append(s < 0)
        smear = mags[0]
        k = 1
        while k < W:
            nxt = Signal(W, name=f"smear{k}")
            m.d.comb += nxt.eq(smear | (smear >> k))
            smear, k = nxt, k * 2
        first_hi = Signal()
        m.d.comb += first_hi.eq((mags[0] != 0) & (mags[1] <= smear))
        hi, lo = Signal(W), Signal(W)
        hi_neg, lo_neg = Signal(), Signal()
        m.d.comb += [hi.eq(Mux(first_hi, mags[0], mags[1])),
                     lo.eq(Mux(first_hi, mags[1], mags[0])),
                     hi_neg.eq(Mux(first_hi, negs[0], negs[1])),
                     lo_neg.eq(Mux(first_hi, negs[1], negs[0]))]

        # the pair term
        up = Signal(range(W), name="u_place")       # the frame bit of u
        m.d.comb += up.eq(dut.exp + (F - K))
        u = Signal(W)
        m.d.comb += u.eq(Const(1, W) << up)
        below = Signal(W)                           # lo's bits below u
        m.d.comb += below.eq(lo & (u - 1))
        jam = Signal(W)
        truncated = lo & ~((u << 1) - 1)
        if self._mutant:
            m.d.comb += jam.eq(lo & ~(u - 1))
        else:
            m.d.comb += jam.eq(Mux(below == 0, lo, truncated | u))
        want = Signal(signed(W + 2))
        m.d.comb += [want.eq(Mux(hi_neg, -hi, hi) + Mux(lo_neg, -jam, jam)),
                     Assert(dut.exp < (1 << terms[0].exp_bits) + K)]
        with m.If(hi == 0):
            m.d.comb += [Assert(dut.exp == 0), Assert(dut.sig == 0)]
        with m.Elif("term" in self._parts):         # (every bit of sig << up compared)
            m.d.comb += [Assert((hi >> (dut.exp + F)) == 1), Assert((dut.sig << up) == want)]

        # lo, decoded
        if "lo" in self._parts:
            m.d.comb += [Assert(dut.lo_zero == (lo == 0)), Assert(dut.lo_neg == lo_neg)]
        with m.If((lo == 0) & ("lo" in self._parts)):
            m.d.comb += Assert(dut.lo_sig == 0)
        with m.Elif("lo" in self._parts):
            place = Signal(signed(b.exp_bits + 2), name="lo_place")
            m.d.comb += place.eq(dut.lo_top + (bias + F - (M - (2 if self._mutant else 1))))
            m.d.comb += [Assert(dut.lo_sig[M - 1]), Assert((place >= 0) & (place < W)),
                         Assert((Cat(dut.lo_sig, Const(0, W)) << place[:len(up)])[:W + M]
                                == lo)]

        # hi, an FP32 word
        frac, ef, sign = dut.hi_word[:23], dut.hi_word[23:31], dut.hi_word[31]
        lsb = pos(-148 if self._mutant else -149)
        fits = (hi != 0) & (hi < (Const(1, W) << pos(128))) & (hi[:lsb] == 0)
        if "hi" in self._parts:
            m.d.comb += Assert(dut.hi_rep == fits)
        with m.If(dut.hi_rep & ("hi" in self._parts)):
            ulp = Signal(range(W), name="hi_ulp")   # the frame bit of the word's ulp
            m.d.comb += ulp.eq(Mux(ef == 0, 1, ef) + (pos(-150)))
            m.d.comb += [Assert(ef != 255), Assert(sign == hi_neg),
                         Assert((Cat(frac, ef != 0, Const(0, W)) << ulp)[:W + 24] == hi)]
        return m


class BoundedAlignProof(wiring.Component):
    """The bounded back end's sum and rounding (:class:`hwgen.accum_bounded.SwapAlign`,
    :class:`~hwgen.accum_bounded.AddSub`, :class:`~hwgen.accum_bounded.RoundAt`, as
    :class:`~hwgen.accum_bounded.BoundedAdd` wires them): for every pair of decoded
    operands (the form :class:`DecodeProof` proves), the word equals a reference rounder's
    word of the exact sum ``a + t``. That rounder is RNE (``RoundAtProof(reference=True)``),
    so this is the whole of the ``N``-bit window argument of ``docs/accumulator.md`` (the
    jam bit, ``N >= 27``, ``N >= M + 1``).

    The reference sum is taken in a window ``X = M + 1`` bits deeper than the design's
    (:func:`_reference`): exact for every distance of the two leading ones up to ``N + 1``;
    an operand further below is a sticky bit there, more than ``M + 2`` bits under any place
    the sum can round at (the textbook sticky rule, which this proof does not restate).
    Mutant: the window one bit narrower (the jam bit is then the guard bit, and ties go
    wrong).
    """

    def __init__(self, bspec, mutant=False):
        self._b, self._mutant = bspec, mutant
        M, E = bspec.sig, bspec.exp_bits
        ports = {}
        for p in ("a", "t"):
            ports.update({f"{p}_neg": In(1), f"{p}_sig": In(M), f"{p}_top": In(signed(E)),
                          f"{p}_zero": In(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        b = self._b
        M, E = b.sig, b.exp_bits
        if self._mutant:
            b = copy.copy(b)
            b.window -= 1
        N = b.window
        ops = {p: {f: getattr(self, f"{p}_{f}") for f in ("neg", "sig", "top", "zero")}
               for p in ("a", "t")}
        a, t = ops["a"], ops["t"]
        (a_lo, a_hi), (t_lo, t_hi) = _bounded_ranges(b)
        m.d.comb += [Assume(a["zero"] == (a["sig"] == 0)), Assume(t["zero"] == (t["sig"] == 0)),
                     Assume(a["sig"][M - 1] | (a["top"] == -126)),
                     Assume((a["top"] >= a_lo) & (a["top"] <= a_hi)),
                     Assume(t["sig"][M - 1] | t["zero"]),
                     Assume((t["top"] >= t_lo) & (t["top"] <= t_hi))]
        if M > 24:
            m.d.comb += Assume(a["sig"][:M - 24] == 0)
        m.submodules.align = sa = SwapAlign(b)
        m.submodules.addsub = ad = AddSub(b)
        m.submodules.round = rnd = RoundAt(N + 1, E)
        for p, fields in ops.items():
            for f, v in fields.items():
                m.d.comb += getattr(sa, f"{p}_{f}").eq(v)
        m.d.comb += [ad.big.eq(sa.big), ad.small.eq(sa.small), ad.big_neg.eq(sa.big_neg),
                     ad.small_neg.eq(sa.small_neg), rnd.mag.eq(ad.mag), rnd.neg.eq(ad.neg),
                     rnd.base.eq(sa.base)]
        m.d.comb += Assert(rnd.word == _reference_word(m, self._b, ops))
        return m


def _reference_word(m, bspec, ops):
    """The word of :func:`_reference`'s rounder for the exact sum of the decoded operands
    ``ops`` (``{"a": fields, "t": fields}``, fields ``neg``, ``sig``, ``top``, ``zero``): both
    operands below the higher leading one, in a window ``X`` bits deeper than the design's
    ``N`` bits, each jammed to one sticky bit below that."""
    M, N, E = bspec.sig, bspec.window, bspec.exp_bits
    X, width, exp_bits = _reference(bspec)
    W = N + X
    a, t = ops["a"], ops["t"]
    top = Signal(signed(E), name="ref_top")
    m.d.comb += top.eq(Mux(a["zero"] | (~t["zero"] & (t["top"] > a["top"])),
                           t["top"], a["top"]))
    vals = []
    for p, op in ops.items():
        dist = Signal(signed(E + 1), name=f"{p}_dist")
        m.d.comb += dist.eq(top - op["top"])
        sh = Signal(range(W + 1), name=f"{p}_sh")
        m.d.comb += sh.eq(Mux(op["zero"] | (dist >= W), W, dist))
        wide = Signal(2 * W, name=f"{p}_wide")
        m.d.comb += wide.eq(Cat(Const(0, W), Const(0, W - M), op["sig"]) >> sh)
        v = Signal(W, name=f"{p}_ref")
        m.d.comb += v.eq(wide[W:] | wide[:W].any())
        vals.append(Mux(op["neg"], -v, v))
    total = Signal(signed(W + 2), name="ref_total")
    m.d.comb += total.eq(vals[0] + vals[1])
    m.submodules.ref = ref = RoundAt(width, exp_bits)
    m.d.comb += [ref.mag.eq(Mux(total < 0, -total, total)), ref.neg.eq(total < 0),
                 ref.base.eq(top - (N - 1) - X)]
    return ref.word


def _assert_step(m, word, acc, step, finite):
    """Assert an accumulation's ``word`` is the spec's (section 7): NaN for a ``nan`` step
    or, unless ``first``, a NaN accumulator; an infinite accumulator kept; else ``finite``."""
    special = ~step.first & (acc[23:31] == 255)
    with m.If(step.nan | (special & (acc[:23] != 0))):
        m.d.comb += Assert(word == NAN_WORD)
    with m.Elif(special):
        m.d.comb += Assert(word == acc)
    with m.Else():
        m.d.comb += Assert(word == finite)


class BoundedAddProof(wiring.Component):
    """A one-term :class:`hwgen.accum_bounded.BoundedAdd` as a unit builds it (``adder``,
    from :func:`hwgen.backend.make_adder`), its own netlist: for every accumulator word and
    every step, the word is the spec's (section 7): NaN for a ``nan`` step or a NaN
    accumulator, an infinite accumulator kept, and otherwise the rounding of the exact sum
    of the two values. The values are a separate :class:`hwgen.accum_bounded.Decode`'s
    (``DecodeProof``) and the rounding is :func:`_reference_word`'s (RNE by
    ``RoundAtProof(reference=True)``), so this covers what ``BoundedAlignProof`` leaves
    out: ``BoundedAdd``'s wiring of its blocks, the ``first`` step and the special cases.
    Mutant: the adder's term bias one too small (every term read at twice its value). (The
    window one bit narrower, ``BoundedAlignProof``'s mutant, is rejected here in 5 s for
    HiF4, but for NVFP4 had no counterexample in 15 minutes.)"""

    def __init__(self, adder, mutant=False):
        b = adder.bspec
        if len(b.accum.terms) != 1 or b.pair_window is not None:
            raise ValueError("BoundedAddProof takes a one-term adder")
        if mutant:
            adder._b = copy.copy(b)
            adder._b.term = dataclasses.replace(b.term, bias=b.term.bias - 1)
        self._adder, self._b = adder, b
        super().__init__({"acc": In(32), "step": In(accum_layout(b.accum.terms))})

    def elaborate(self, platform):
        m = Module()
        b = self._b
        t, acc, step = b.term, self.acc, self.step
        m.submodules.dut = dut = self._adder
        m.d.comb += [dut.acc.eq(acc), dut.step.eq(step)]
        m.submodules.decode = dec = Decode(b)
        m.d.comb += [dec.acc.eq(acc), dec.zero_acc.eq(step.first),
                     dec.sig.eq(step[f"{t.name}_sig"]), dec.exp.eq(step[f"{t.name}_exp"])]
        ops = {p: {f: getattr(dec, f"{p}_{f}") for f in ("neg", "sig", "top", "zero")}
               for p in ("a", "t")}
        want = _reference_word(m, b, ops)
        _assert_step(m, dut.word, acc, step, want)
        return m


class BoundedWiringProof(wiring.Component):
    """:class:`hwgen.accum_bounded.BoundedAdd` as a unit builds it (``adder``), its own
    netlist, against the composition the block proofs above assume, wired here from the
    blocks' contracts: the front (the step's one term; :class:`~hwgen.accum_bounded.PreAdd`
    for two pre-added terms; :class:`~hwgen.accum_bounded.JamPair` for a pair, with the
    bypass: on a step that is not ``first``, an accumulator word exactly ``-hi`` with hi an
    FP32 value adds lo alone to +0), then ``Decode``, ``SwapAlign``, ``AddSub`` and
    ``RoundAt(N + 1)``, and the spec's special cases (section 7: NaN for a ``nan`` step or
    a NaN accumulator, an infinite accumulator kept). The words are equal for every
    accumulator word and step, so what ``DecodeProof``, ``PreAddProof``, ``RoundAtProof``
    and ``BoundedAlignProof`` show of the blocks holds for the adder the unit builds, for
    every geometry. Mutant: the sum's sign taken from the bigger operand (wrong only when
    the smaller one is larger, in the near case)."""

    def __init__(self, adder, mutant=False):
        self._adder, self._b, self._mutant = adder, adder.bspec, mutant
        super().__init__({"acc": In(32), "step": In(accum_layout(adder.bspec.accum.terms))})

    def elaborate(self, platform):
        m = Module()
        b = self._b
        acc, step = self.acc, self.step
        m.submodules.dut = dut = self._adder
        m.d.comb += [dut.acc.eq(acc), dut.step.eq(step)]
        m.submodules.decode = dec = Decode(b)
        fields = ("neg", "sig", "top", "zero")
        term = {f: getattr(dec, f"t_{f}") for f in fields}
        zero_acc = step.first
        if b.pair_window is not None:
            m.submodules.pair = pair = JamPair(b)
            m.d.comb += [pair.step.eq(step), dec.sig.eq(pair.sig), dec.exp.eq(pair.exp)]
            bypass = Signal()
            m.d.comb += bypass.eq(pair.hi_rep & ~step.first
                                  & (acc == (pair.hi_word ^ (1 << 31))))      # acc == -hi
            term = {f: Mux(bypass, getattr(pair, f"lo_{f}"), v) for f, v in term.items()}
            zero_acc = step.first | bypass
        elif b.split is not None:
            split_word, use_split = self._split(m, acc, step, dec)
        elif len(b.accum.terms) == 2:
            m.submodules.preadd = pre = PreAdd(b)
            m.d.comb += [pre.step.eq(step), dec.sig.eq(pre.sig), dec.exp.eq(pre.exp)]
        else:
            (t,) = b.accum.terms
            m.d.comb += [dec.sig.eq(step[f"{t.name}_sig"]), dec.exp.eq(step[f"{t.name}_exp"])]
        m.d.comb += [dec.acc.eq(acc), dec.zero_acc.eq(zero_acc)]
        m.submodules.align = sa = SwapAlign(b)
        for f in fields:
            m.d.comb += [getattr(sa, f"a_{f}").eq(getattr(dec, f"a_{f}")),
                         getattr(sa, f"t_{f}").eq(term[f])]
        m.submodules.addsub = ad = AddSub(b)
        m.submodules.round = rnd = RoundAt(b.window + 1, b.exp_bits)
        m.d.comb += [ad.big.eq(sa.big), ad.small.eq(sa.small), ad.big_neg.eq(sa.big_neg),
                     ad.small_neg.eq(sa.small_neg), rnd.mag.eq(ad.mag),
                     rnd.neg.eq(sa.big_neg if self._mutant and b.split is None else ad.neg),
                     rnd.base.eq(sa.base)]
        finite = rnd.word
        if b.split is not None:
            finite = Mux(use_split, split_word, rnd.word)
        _assert_step(m, dut.word, acc, step, finite)
        return m

    def _split(self, m, acc, step, dec):
        """The split's composition (``hwgen/accum_split.py``, ``docs/accumulator.md``):
        the loop's one-term add of ``P``, except for the bypass accumulator ``-s * Xe``
        (``a_word``, when finite), which takes :class:`~hwgen.accum_bounded.BypassRound`'s
        word, and for a nonzero sum an accumulator below ``2**(q - 26)``
        (:class:`~hwgen.accum_split.AccVersusE`'s ``small``), which takes ``N``'s word or,
        for a midpoint ``N``, the neighbour away from zero when ``acc + E`` moves ``|T|``
        up, and on a tie the even one. Returns that word and whether it is taken."""
        sp = self._b.split
        m.submodules.split = ss = SplitSum(sp)
        m.submodules.bypass = bp = BypassRound(sp)
        m.submodules.versus = vs = AccVersusE(sp)
        m.d.comb += [ss.step.eq(step), dec.sig.eq(ss.p_sig), dec.exp.eq(ss.p_exp)]
        acc_eff = Mux(step.first, 0, acc)
        e = ("e_neg", "e_zero", "e_top", "e_sig", "e_sticky")
        m.d.comb += [bp.fn.eq(ss.fn), bp.xe.eq(ss.xe), bp.a_neg.eq(ss.s_neg), bp.q.eq(ss.q),
                     vs.acc.eq(acc_eff), vs.q.eq(ss.q)]
        m.d.comb += [getattr(blk, f).eq(getattr(ss, f)) for f in e for blk in (bp, vs)]
        bypass = ~ss.zero & ss.a_valid & (acc_eff == ss.a_word)
        small = ~ss.zero & vs.small
        up = Signal(name="away_from_zero")
        with m.If(vs.zero):                         # a tie: to the even neighbour
            m.d.comb += up.eq(ss.w_base[0] ^ (1 if self._mutant else 0))
        with m.Else():                              # |acc + T| above N's midpoint
            m.d.comb += up.eq(vs.pos != ss.s_neg)
        word = Mux(bypass, bp.word, Mux(ss.mid & up, ss.w_up, ss.w_base))
        return word, bypass | small


def _top_places(sspec):
    """The lowest and highest top places (leading one's weight exponent) that a split
    term's exponent field can give."""
    t = sspec.terms[0]
    return -t.bias, (1 << t.exp_bits) - 1 - t.bias + sspec.w - 1


class _SplitBlockProof(wiring.Component):
    """A proof of one block of the split (``BLOCK``): its input ports (and ``EXTRA`` ones,
    free values the reference needs) are the wrapper's own free inputs; :meth:`_wire` adds
    the block and drives them."""

    #: The block proved (built from the split's geometry) and the wrapper's extra inputs
    #: (name: bits).
    BLOCK = None
    EXTRA = {}

    def __init__(self, sspec, mutant=False):
        self._dut, self._s, self._mutant = self.BLOCK(sspec), sspec, mutant
        members = self._dut.signature.members
        super().__init__({**{name: In(member.shape) for name, member in members.items()
                             if member.flow == In},
                          **{name: In(bits) for name, bits in self.EXTRA.items()}})

    def _assume_e(self, m, half_ulp):
        """Assume ``E`` in :class:`hwgen.accum_split.Residue`'s form (``e_sig``'s top bit
        set; ``e_sig`` and ``e_sticky`` 0 when ``e_zero``), ``|E| <= 2**half_ulp`` and
        ``q`` one the split gives (``-126`` up to the highest top place plus 2)."""
        top, sig = self.e_top, self.e_sig
        m.d.comb += [Assume(self.q >= -126), Assume(self.q <= _top_places(self._s)[1] + 2),
                     Assume(Mux(self.e_zero, (sig == 0) & ~self.e_sticky, sig[E_BITS - 1])),
                     Assume(self.e_zero | (top < half_ulp)
                            | ((top == half_ulp) & (sig == 1 << (E_BITS - 1))
                               & ~self.e_sticky))]

    def _assume_r(self, m, bound):
        """Assume the free remainder ``r`` (what ``E`` holds below ``e_sig``) is in
        ``(0, bound)`` when ``e_sticky`` and 0 otherwise."""
        m.d.comb += Assume(Mux(self.e_sticky, (self.r > 0) & (self.r < bound), self.r == 0))

    def _e_units(self, m, shift, near, width):
        """``|E|`` in units ``2**-shift`` of ``e_sig``'s bit 0, a ``width``-bit signal: 0 when
        ``e_zero``; where ``near``, ``e_sig << shift`` plus the free remainder; elsewhere one
        unit, which stands for an ``E`` too far below to matter but as a nonzero sign."""
        e = Signal(width, name="e_units")
        with m.If(self.e_zero):
            m.d.comb += e.eq(0)
        with m.Elif(near):
            self._assume_r(m, Const(1, width) << shift)
            m.d.comb += e.eq((self.e_sig << shift) + self.r)
        with m.Else():
            m.d.comb += e.eq(1)
        return e

    def _wire(self, m):
        m.submodules.dut = dut = self._dut
        for name, member in dut.signature.members.items():
            if member.flow == In:
                m.d.comb += getattr(dut, name).eq(getattr(self, name))
        return dut


def _split_decode_ref(m, sp, sig, ef, bias, name, top_off=0):
    """A term as :class:`hwgen.accum_split.SortTerms` gives it, written separately: sign,
    magnitude shifted until its leading one is at bit ``w - 1`` (the count found by a
    priority scan, not a leading-zero tree), top place ``ef - bias + w - 1 - lz`` (the
    sentinel for a zero term). ``|sig| * 2**(ef - bias) == mag * 2**(top - w + 1)``."""
    w = sp.w
    mag = Signal(w, name=f"{name}_abs")
    m.d.comb += mag.eq(Mux(sig < 0, -sig, sig))
    lz = Signal(range(w + 1), name=f"{name}_lz")
    m.d.comb += lz.eq(w)
    for bit in range(w):                            # the highest set bit wins
        with m.If(mag[bit]):
            m.d.comb += lz.eq(w - 1 - bit)
    norm = Signal(w, name=f"{name}_norm")
    top = Signal(signed(sp.exp_bits), name=f"{name}_top")
    m.d.comb += [norm.eq(mag << lz),
                 top.eq(Mux(mag == 0, sp.sentinel, ef - bias + (w - 1 + top_off) - lz))]
    return Cat(sig < 0, norm, top, mag == 0)


class SplitSortProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.SortTerms` of the split ``sspec``: for every step (any
    exponent fields), the outputs are the terms, each as :func:`_split_decode_ref` writes
    it (sign, normalized magnitude, top place, zero), in an order of non-increasing top
    place: the multiset of output tuples equals the multiset of the references' (every
    tuple counted on both sides). Mutant: the reference's top place one higher."""

    BLOCK = SortTerms

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        dut = self._wire(m)
        refs = [_split_decode_ref(m, sp, self.step[f"{t.name}_sig"], self.step[f"{t.name}_exp"],
                                  t.bias, f"ref{i}", 1 if self._mutant else 0)
                for i, t in enumerate(sp.terms)]
        outs = [Cat(getattr(dut, f"neg_{k}"), getattr(dut, f"mag_{k}"),
                    getattr(dut, f"top_{k}"), getattr(dut, f"zero_{k}")) for k in range(sp.n)]
        for k in range(sp.n - 1):
            m.d.comb += Assert(getattr(dut, f"top_{k}") >= getattr(dut, f"top_{k + 1}"))

        def count(x, among):
            return sum((x == y).as_unsigned() for y in among)

        for x in refs + outs:
            m.d.comb += Assert(count(x, outs) == count(x, refs))
        return m


class SplitClusterProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.ClusterSums`: for sorted terms in the form
    :class:`SplitSortProof` proves (top places non-increasing; a zero term's magnitude 0
    and top the sentinel; a nonzero term's leading one at bit ``w - 1`` and its top place
    one a field can give), window ``s`` is the exact sum of the cluster that would start at
    term ``s``: the terms ``j >= s`` while each is at most ``D`` places below the one
    before, each at its own place, ``sum_s * 2**(top_s - L_s + 1) == sum_j +-mag_j *
    2**(top_j - w + 1)`` (one shift per member here; the block builds each window from the
    one below); ``start_s`` exactly when term ``s`` joins no cluster above, ``nz_s``
    exactly when the sum is not 0.

    ``windows`` (default: all) selects the windows asserted. With ``stacked`` the one
    window ``s`` of ``windows`` is asserted as term ``s`` plus window ``s + 1``'s reference
    moved ``D - (top_s - top_(s+1))`` places down when term ``s + 1`` joins, assuming that
    the block's window ``s + 1`` is its reference (which the proof of window ``s + 1``
    shows): as ``L_s = L_(s+1) + D``, that is window ``s``'s member-by-member sum. It is
    how window 0 is proved: its member-by-member statement had no answer in 15 minutes
    (``docs/formal.md``). Mutant: the reference's reach ``D + 1``."""

    BLOCK = ClusterSums

    def __init__(self, sspec, mutant=False, windows=None, stacked=False):
        self._windows = tuple(range(sspec.n) if windows is None else windows)
        if stacked and (len(self._windows) != 1 or self._windows[0] >= sspec.n - 1):
            raise ValueError("stacked takes one window with a window below it")
        self._stacked = stacked
        super().__init__(sspec, mutant)

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        n, w, D = sp.n, sp.w, sp.reach + (1 if self._mutant else 0)
        top_lo, top_hi = _top_places(sp)
        dut = self._wire(m)
        neg = [getattr(self, f"neg_{k}") for k in range(n)]
        mag = [getattr(self, f"mag_{k}") for k in range(n)]
        top = [getattr(self, f"top_{k}") for k in range(n)]
        zero = [getattr(self, f"zero_{k}") for k in range(n)]
        for k in range(n):
            m.d.comb += [Assume(zero[k] == (mag[k] == 0)),
                         Assume(zero[k] | (mag[k][w - 1] & (top[k] >= top_lo)
                                           & (top[k] <= top_hi))),
                         Assume(~zero[k] | (top[k] == sp.sentinel))]
            if k:
                m.d.comb += Assume(top[k - 1] >= top[k])
        near = []
        for k in range(n - 1):
            c = Signal(name=f"near{k}")
            m.d.comb += c.eq(top[k] - top[k + 1] <= D)
            near.append(c)
        signed_mag = [Mux(neg[j], -mag[j], mag[j]) for j in range(n)]

        def direct(s):                              # window s, member by member
            L, width = sp.windows[s], ClusterSums.sum_bits(sp, s)
            parts, member = [], Const(1, 1)
            for j in range(s, n):
                if j > s:
                    member = member & near[j - 1]
                place = Signal(range(L), name=f"place{s}_{j}")
                m.d.comb += place.eq(Mux(member, (L - w) - (top[s] - top[j]), 0))
                v = Signal(signed(width), name=f"v{s}_{j}")
                m.d.comb += v.eq(Mux(member, signed_mag[j], 0) << place)
                parts.append(v)
            return _exact_sum(m, parts, width, f"want{s}")

        for s in self._windows:
            L, width = sp.windows[s], ClusterSums.sum_bits(sp, s)
            if self._stacked:
                lower = direct(s + 1)
                m.d.comb += Assume(getattr(dut, f"sum_{s + 1}") == lower)
                dist = Signal(range(D + 1), name=f"down{s}")
                m.d.comb += dist.eq(Mux(near[s], D - (top[s] - top[s + 1]), 0))
                want = Signal(signed(width), name=f"want{s}")
                m.d.comb += want.eq((signed_mag[s] << (L - w))
                                    + Mux(near[s], lower << dist, 0))
            else:
                want = direct(s)
            m.d.comb += [Assert(getattr(dut, f"sum_{s}") == want),
                         Assert(getattr(dut, f"nz_{s}") == (want != 0)),
                         Assert(getattr(dut, f"start_{s}") == (1 if s == 0 else ~near[s - 1]))]
        return m


class AccVersusEProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.AccVersusE`: for every finite accumulator word and every
    ``E`` in :class:`hwgen.accum_split.Residue`'s form (``|E| = e_sig * u + r``, ``u =
    2**(e_top - 26)``, ``e_sig``'s bit 26 set, ``0 < r < u`` exactly when ``e_sticky``,
    ``r`` free here; ``E = 0`` when ``e_zero``) and every ``q``: ``small`` exactly when
    ``|acc| < 2**(q - 26)`` (+-0 included), ``zero`` exactly when ``acc + E == 0`` and,
    when it is not, ``pos`` exactly when ``acc + E > 0``.

    The reference sums in a fixed-point frame, bit ``p`` weighing ``2**(p - 200)``, that
    holds every accumulator and every ``E`` with ``-150 <= e_top <= 127`` exactly; an ``E``
    above is larger than every accumulator (``2**128`` stands for it) and one below is
    nonzero and smaller than every nonzero one (``2**-200`` stands for it), which is all a
    sign of the sum depends on. Mutant: the reference's threshold ``2**(q - 25)``."""

    LOW = 200                                       # frame bit 0 weighs 2**-LOW
    FRAME = 330
    BLOCK = AccVersusE
    EXTRA = {"r": FRAME}

    def elaborate(self, platform):
        m = Module()
        W, Z = self.FRAME, self.LOW
        dut = self._wire(m)
        frac, ef, neg = self.acc[:23], self.acc[23:31], self.acc[31]
        m.d.comb += [Assume(ef != 255), Assume(self.e_zero | self.e_sig[E_BITS - 1])]
        sh = Signal(range(W), name="acc_place")     # the frame bit of the word's ulp
        m.d.comb += sh.eq(Mux(ef == 0, 1, ef) - 150 + Z)
        a = Signal(W)
        m.d.comb += a.eq(Cat(frac, ef != 0) << sh)
        # E in the frame: e_sig * u + r, clamped to the frame as the docstring says
        up = Signal(signed(len(self.e_top) + 1), name="u_place")
        m.d.comb += up.eq(self.e_top - (E_BITS - 1) + Z)
        u = Signal(W)
        m.d.comb += u.eq(Const(1, W) << up[:(W - 1).bit_length()])
        inside = (self.e_top >= -150) & (self.e_top <= 127)
        with m.If(inside):
            self._assume_r(m, u)
        e = Signal(W)
        with m.If(self.e_zero):
            m.d.comb += e.eq(0)
        with m.Elif(self.e_top > 127):
            m.d.comb += e.eq(Const(1, W) << (128 + Z))
        with m.Elif(self.e_top < -150):
            m.d.comb += e.eq(1)
        with m.Else():
            m.d.comb += e.eq((self.e_sig << up[:(W - 1).bit_length()]) + self.r)
        total = Signal(signed(W + 2))
        m.d.comb += total.eq(Mux(neg, -a, a) + Mux(self.e_neg, -e, e))
        m.d.comb += [Assert(dut.zero == (total == 0)), Assert(dut.zero | (dut.pos == (total > 0)))]
        # small: |acc| < 2**(q - 26)
        thr = Signal(signed(len(self.q) + 2), name="thr_place")
        m.d.comb += thr.eq(self.q - (25 if self._mutant else 26) + Z)
        small = Signal()
        with m.If(thr >= W - 1):
            m.d.comb += small.eq(1)
        with m.Elif(thr < 0):
            m.d.comb += small.eq(a == 0)
        with m.Else():
            m.d.comb += small.eq(a < (Const(1, W) << thr[:(W - 1).bit_length()]))
        m.d.comb += Assert(dut.small == small)
        return m


class LoopTermProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.LoopTerm`: for every ``fn``, sign ``s`` (``a_neg``),
    ``q`` the split can give and every ``E`` in :class:`hwgen.accum_split.Residue`'s form
    with ``|E| <= 2**(q - 25)`` (half an FP32 ulp at ``2**q``; ``r`` free as in
    :class:`AccVersusEProof`; ``e_sig`` and ``e_sticky`` 0 when ``e_zero``) and ``|T| =
    fn * 2**(q - 24) + s * E >= 0``: ``p_exp`` is ``q - 50 + term_bias`` and ``p_sig *
    2**(q - 50) == s * (trunc(|T|, 2**(q - 50)) | jam)``, the truncation's bit 0 set when
    bits below it are cut off.

    The reference sums ``|T|`` in units of ``2**(q - 50 - G)``, ``G = 30``, exact for every
    ``E`` whose bit 0 is at or above ``2**(q - 50 - 29)``; an ``E`` lower than that is
    under an eighth of ``2**(q - 50)``, where only its sign and that it is not 0 decide the
    truncation and the jam, and one unit with its sign stands for it. Mutant: the jam
    dropped (a plain truncation)."""

    G = 30
    BLOCK = LoopTerm
    EXTRA = {"r": G}

    def elaborate(self, platform):
        m = Module()
        sp, G = self._s, self.G
        dut = self._wire(m)
        self._assume_e(m, self.q - 25)
        k = Signal(signed(len(self.q) + 2), name="k")   # e_sig's bit 0 is 2**(q - 50 - k)
        m.d.comb += k.eq(self.q - 24 - self.e_top)
        e = self._e_units(m, (G - k)[:5], k <= G - 1, E_BITS + G + 1)
        total = Signal(signed(26 + 26 + G + 3), name="t_units")
        m.d.comb += total.eq((self.fn << (26 + G))
                             + Mux(self.e_neg ^ self.a_neg, -e, e).as_signed())
        m.d.comb += Assume(total >= 0)
        want = Signal(53)
        jam = 0 if self._mutant else total[:G].any()
        m.d.comb += want.eq(total[G:] | jam)
        m.d.comb += [Assert(dut.p_exp == self.q - 50 + sp.term_bias),
                     Assert(dut.p_sig == Mux(self.a_neg, -want, want))]
        return m


def _top_bit(m, x, name):
    """The index of ``x``'s leading one (0 for 0), by a priority scan."""
    top = Signal(range(max(len(x), 2)), name=name)
    for bit in range(len(x)):
        with m.If(x[bit]):
            m.d.comb += top.eq(bit)
    return top


class SplitFrameProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.Frame`: for every first cluster ``Va`` (sign, ``H``-bit
    magnitude with its anchor's top place ``a_top`` at bit ``H - 3``, so bit 0 weighs
    ``2**(a_top - H + 3)``; ``a_top`` one a term can give) and the sign of what is below it:

    - ``p`` is ``Va``'s top place (leading one, by a priority scan), one less when ``Va``
      is a power of two and ``b_any`` with the other sign (``T`` is then just under
      ``|Va|``), and ``q == max(p, -126)``;
    - the frame is ``|Va|`` in units of ``2**(q - F + 3)`` above bit 0: bit ``i >= 1``
      weighs ``2**(q - F + 2 + i)``; for a normal ``q`` exactly, with the leading one at
      bit ``F - 2`` (``F - 1`` in the power-of-two case) and bit 0 clear; for ``q = -126``
      truncated (a right shift here, where the block shifts left into a deeper frame),
      with bit 0 set exactly when bits are cut off, unless its bit 0 would land more than
      ``SUBNORMAL_REACH`` places below frame bit 1: then ``|Va| < 2**-206`` and the frame
      is the jam bit alone (``hwgen.accum_split.SUBNORMAL_REACH`` says why that is enough);
    - ``below`` is 0 without ``b_any``, else 1 for ``Vb`` of ``Va``'s sign and -1 for the
      other.

    Mutant: ``p`` not lowered in the power-of-two case."""

    BLOCK = Frame

    def elaborate(self, platform):
        m = Module()
        sp, K = self._s, SUBNORMAL_REACH
        H, F, E = sp.held, sp.frame, sp.exp_bits
        top_lo, top_hi = _top_places(sp)
        dut = self._wire(m)
        m.d.comb += [Assume(self.a_mag != 0), Assume(self.a_top >= top_lo),
                     Assume(self.a_top <= top_hi)]
        lead = _top_bit(m, self.a_mag, "lead")
        ones = sum(self.a_mag[i].as_unsigned() for i in range(H))
        opposite = self.b_any & (self.b_neg != self.a_neg)
        lower = Signal()
        m.d.comb += lower.eq((ones == 1) & opposite & (0 if self._mutant else 1))
        p = Signal(signed(E + 1), name="p")
        m.d.comb += p.eq(self.a_top - (H - 3) + lead - lower)
        q = Signal(signed(E + 1), name="q")
        m.d.comb += q.eq(Mux(p < -126, -126, p))
        m.d.comb += Assert(dut.q == q)
        # a_mag's bit j lands on frame bit j + pos
        pos = Signal(signed(E + 2), name="pos")
        m.d.comb += pos.eq(self.a_top - q + 4)
        body = dut.frame[1:]
        with m.If(pos >= 1):
            up = Signal(range(F), name="up")
            m.d.comb += up.eq(pos - 1)
            placed = Signal(F + H)
            m.d.comb += placed.eq(self.a_mag << up)
            m.d.comb += [Assert(pos - 1 < F), Assert(placed[F - 1:] == 0),
                         Assert(body == placed[:F - 1]), Assert(~dut.frame[0])]
        with m.Elif(pos >= 1 - K):
            down = Signal(range(K + 1), name="down")
            m.d.comb += down.eq(1 - pos)
            cut = Signal(H)
            m.d.comb += cut.eq(self.a_mag & ((Const(1, K + 1) << down) - 1))
            m.d.comb += [Assert(q == -126), Assert(body == (self.a_mag >> down)),
                         Assert(dut.frame[0] == (cut != 0))]
        with m.Else():                              # all of Va jammed: |Va| < 2**-206
            m.d.comb += [Assert(q == -126), Assert(p + lower < -206), Assert(body == 0),
                         Assert(dut.frame[0])]
        with m.If(p >= -126):
            m.d.comb += Assert(Mux(lower, dut.frame[F - 1], dut.frame[F - 2] & ~dut.frame[F - 1]))
        m.d.comb += Assert(dut.below == Mux(self.b_any, Mux(opposite, -1, 1), 0))
        return m


def _assert_fp32_of(m, word, j, q, neg, name):
    """Assert ``word`` is the FP32 word of ``(-1)**neg * j * 2**(q - 23)`` (``j`` at most
    ``2**24 + 1``, ``q >= -126``: every such value below ``2**128`` is an FP32 value), or
    the infinity of that sign when the value is ``2**128`` or more; returns whether the
    value is finite. The two sides compare in a frame whose bit 0 weighs ``2**-149``."""
    W = 280
    frac, ef = word[:23], word[23:31]
    at = Signal(range(W), name=f"{name}_at")
    m.d.comb += at.eq(Mux(q >= 128, 0, q + 126))
    target = Signal(W + 26, name=f"{name}_target")
    m.d.comb += target.eq(j << at)
    finite = Signal(name=f"{name}_finite")
    m.d.comb += finite.eq((q < 128) & (target < (Const(1, W + 26) << 277)))
    place = Signal(8, name=f"{name}_place")            # the frame bit of the word's ulp
    m.d.comb += place.eq(Mux(ef == 0, 1, ef) - 1)
    have = Signal(W + 26, name=f"{name}_have")
    m.d.comb += have.eq(Cat(frac, ef != 0) << place)
    m.d.comb += Assert(word[31] == neg)
    with m.If(finite):
        m.d.comb += [Assert(ef != 255), Assert(have == target)]
    with m.Else():
        m.d.comb += Assert(word[:31] == 0x7F800000)
    return finite


class SplitNearestProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.Nearest`: for every frame in :class:`SplitFrameProof`'s
    form (an ``F``-bit integer ``X``, bit ``F - 26`` weighing ``2**(q - 24)``, the jam bit
    counted as one unit; below ``2**(F - 1)``, or exactly that for a power of two; at least
    ``2**(F - 2)`` unless ``q = -126``), every
    ``q`` the split gives and every sign ``below`` (``beta``) of what is under the frame:

    - ``fn == floor((4X + beta) / 2**(F - 24) + 1/2)``: ``N`` is ``|T|`` to the nearest
      multiple of ``2**(q - 24)``, with ``beta`` a sign below every unit (a tie goes up);
    - ``Ea = X - fn * 2**(F - 26)``: ``ea_mag`` its magnitude, ``ea_zero`` exactly when it
      is 0, else ``ea_neg`` its sign;
    - ``xe`` is the even one of ``floor((4X + beta) / 2**(F - 24))`` and the next;
    - ``w_base``, ``a_word``, ``w_up`` are the FP32 words (or infinities) of ``s * (fn >> 1)``,
      ``-s * (xe >> 1)`` and, for a midpoint, ``s * ((fn >> 1) + 1)``, times ``2**(q - 23)``
      (:func:`_assert_fp32_of`); ``a_valid`` exactly when ``a_word`` is finite; ``mid``
      exactly when ``fn`` is odd and ``q < 128``.

    Mutant: a tie goes down."""

    BLOCK = Nearest

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        F = sp.frame
        q_hi = _top_places(sp)[1] + 2
        dut = self._wire(m)
        X, q, s = self.frame, self.q, self.a_neg
        m.d.comb += [Assume(q >= -126), Assume(q <= q_hi), Assume(self.below != -2),
                     Assume(~X[F - 1] | (X[:F - 1] == 0)), Assume((q == -126) | X[F - 2:].any())]
        z = Signal(signed(F + 4), name="z")
        m.d.comb += z.eq((X << 2) + self.below)
        half = (1 << (F - 25)) - (1 if self._mutant else 0)
        fn = Signal(27, name="fn_ref")
        m.d.comb += fn.eq((z + half) >> (F - 24))
        m.d.comb += [Assert(fn < (1 << 26)), Assert(dut.fn == fn)]
        ea = Signal(signed(F + 3), name="ea_ref")
        m.d.comb += ea.eq(X - (fn << (F - 26)))
        m.d.comb += [Assert(dut.ea_zero == (ea == 0)),
                     Assert(dut.ea_mag == Mux(ea < 0, -ea, ea))]
        with m.If(ea != 0):
            m.d.comb += Assert(dut.ea_neg == (ea < 0))
        fl = Signal(27, name="floor_ref")
        m.d.comb += fl.eq(z >> (F - 24))
        xe = Signal(27, name="xe_ref")
        m.d.comb += xe.eq(fl + fl[0])
        m.d.comb += [Assert(dut.xe == xe), Assert(dut.mid == (fn[0] & (q < 128)))]
        _assert_fp32_of(m, dut.w_base, fn >> 1, q, s, "base")
        valid = _assert_fp32_of(m, dut.a_word, xe >> 1, q, ~s, "bypass")
        m.d.comb += Assert(dut.a_valid == valid)
        with m.If(dut.mid):
            _assert_fp32_of(m, dut.w_up, (fn >> 1) + 1, q, s, "up")
        return m


class SplitBypassProof(_SplitBlockProof):
    """:class:`hwgen.accum_bounded.BypassRound`: for every ``fn`` and ``xe`` at most one
    apart, ``q`` the split gives, sign ``s`` (``a_neg``) and ``E`` in
    :class:`hwgen.accum_split.Residue`'s form (``r`` free as in :class:`AccVersusEProof`;
    ``e_top >= -400``, below every top place the split gives), with ``|E| <= 2**(q - 25)``
    and ``E`` of the sign opposite to ``d * s`` when ``d = fn - xe`` is not 0: ``word`` is
    ``RNE_FP32(d * s * 2**(q - 24) + E)`` (:func:`_assert_rne`).

    The reference has ``r`` in 8 bits below ``E``'s 27 for ``d = 0``; for ``d != 0`` it
    sums in units of ``2**(q - 94)``, exact for ``E``'s bit 0 down to ``2**(q - 91)``; an
    ``E`` lower than that is under ``2**(q - 65)``, far under half the result's ulp (it is
    ``2**(q - 48)`` or coarser), so one unit with its sign stands for it. Mutant: ``d``'s
    sign not applied (``+s`` for ``fn < xe``)."""

    G = 8
    BLOCK = BypassRound
    EXTRA = {"r": 50}

    def elaborate(self, platform):
        m = Module()
        G = self.G
        dut = self._wire(m)
        q = self.q
        same = self.fn == self.xe
        flip = self.fn < self.xe                    # d = -1
        k = Signal(signed(len(q) + 2), name="k")    # e_top = q - 25 - k
        m.d.comb += k.eq(q - 25 - self.e_top)
        self._assume_e(m, q - 25)
        m.d.comb += [
            Assume(self.e_top >= -400), Assume((self.fn - self.xe <= 1) & (self.xe - self.fn <= 1)),
            Assume(same | self.e_zero | (self.e_neg != (self.a_neg ^ flip)))]
        width = 72
        mag = Signal(width, name="ref_mag")
        base = Signal(signed(len(q) + 3), name="ref_base")
        neg = Signal(name="ref_neg")
        with m.If(same):
            self._assume_r(m, 1 << G)
            m.d.comb += [mag.eq((self.e_sig << G) + self.r), base.eq(self.e_top - 26 - G),
                         neg.eq(self.e_neg)]
        with m.Else():
            e = self._e_units(m, (43 - k)[:6], k <= 40, width)
            m.d.comb += [mag.eq((Const(1, width) << 70) - e), base.eq(q - 94),
                         neg.eq(self.a_neg ^ (0 if self._mutant else flip))]
        _assert_rne(m, dut.word, mag, neg, base, width, -400 - 26 - G)
        return m


class SplitResidueProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.Residue`: ``E`` from its source, ``Ea`` (``N``'s remainder
    in the frame, bit 0 weighing ``2**(q - F + 2)``, sign ``s * ea_neg``) unless that is 0,
    else ``Vb`` (its bit ``L_1 - 1`` weighing ``2**b_top``); what lies below the source
    (the clusters under ``Va``, signed by ``below`` relative to ``Va``; or the third
    cluster, ``c_neg``) is under the source's lowest unit and under ``2**-27`` of its
    leading one, so it counts as an infinitesimal ``tau`` of its sign. For every input so
    formed (``ea_zero`` exactly when ``ea_mag`` is 0, ``b_any`` when ``b_mag`` is not,
    ``c_any`` only with ``b_any``):

    - ``e_zero`` exactly when both sources are 0, and then ``e_sig`` and ``e_sticky`` are 0;
    - otherwise ``e_neg`` is the source's sign and, with ``|E| = src + tau`` in units of
      ``2**-30`` of the source's bit 0 (``tau`` one such unit: less than any ``2**-27`` of
      the leading one), ``e_top`` is its leading one's place, ``e_sig`` its 27 bits from
      there and ``e_sticky`` whether any bit below them is set.

    Mutant: an opposite ``tau`` not borrowed (its sign ignored)."""

    BLOCK = Residue

    T = 30

    def elaborate(self, platform):
        m = Module()
        sp, T = self._s, self.T
        F, E = sp.frame, sp.exp_bits
        W, Lb = F - 26, sp.windows[1]
        top_lo, top_hi = _top_places(sp)
        dut = self._wire(m)
        m.d.comb += [Assume(self.ea_zero == (self.ea_mag == 0)), Assume(self.below != -2),
                     Assume(self.b_any == (self.b_mag != 0)), Assume(~self.c_any | self.b_any),
                     Assume(self.q >= -126), Assume(self.q <= top_hi + 2),
                     Assume(self.b_top >= top_lo), Assume(self.b_top <= top_hi)]
        from_a = ~self.ea_zero
        src = Signal(W, name="src")
        lsb = Signal(signed(E + 1), name="lsb")
        neg = Signal(name="src_neg")
        tau_any, tau_neg = Signal(name="tau_any"), Signal(name="tau_neg")
        with m.If(from_a):
            m.d.comb += [src.eq(self.ea_mag), lsb.eq(self.q - F + 2),
                         neg.eq(self.a_neg ^ self.ea_neg), tau_any.eq(self.below != 0),
                         tau_neg.eq((self.below < 0) ^ self.ea_neg)]
        with m.Else():
            m.d.comb += [src.eq(self.b_mag), lsb.eq(self.b_top - Lb + 1), neg.eq(self.b_neg),
                         tau_any.eq(self.c_any), tau_neg.eq(self.c_neg != self.b_neg)]
        z = Signal(W + T + 1, name="z")
        tau_down = tau_any & tau_neg & (0 if self._mutant else 1)
        m.d.comb += z.eq((src << T) + (tau_any & ~tau_down) - tau_down)
        lead = _top_bit(m, z, "lead")
        sh = Signal(range(W + T + 1), name="sh")
        m.d.comb += sh.eq(lead - (E_BITS - 1))
        sig = Signal(E_BITS, name="sig_ref")
        m.d.comb += sig.eq(z >> sh)
        cut = Signal(W + T + 1, name="cut")
        m.d.comb += cut.eq(z & ((Const(1, W + T + 2) << sh) - 1))
        zero = ~from_a & ~self.b_any
        m.d.comb += Assert(dut.e_zero == zero)
        with m.If(zero):
            m.d.comb += [Assert(dut.e_sig == 0), Assert(~dut.e_sticky)]
        with m.Else():
            m.d.comb += [Assert(lead >= T - 1), Assert(dut.e_neg == neg),
                         Assert(dut.e_top == lsb + lead - T), Assert(dut.e_sig == sig),
                         Assert(dut.e_sticky == (cut != 0))]
        return m


class SplitPickProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.PickClusters`: for every set of windows in
    :class:`SplitClusterProof`'s form (``nz_s`` exactly when ``sum_s`` is not 0,
    ``|sum_s| <= (n - s) * (2**L_s - 1)``, window 0 a start), with the live clusters those
    that start at their window and are not 0: ``Va`` is the first live one (``a_neg`` its
    sign, ``a_mag`` its magnitude with its anchor's top at bit ``H - 3``, ``a_top`` that
    top place), ``Vb`` the first live one after it (its anchor's top at bit ``L_1 - 1``;
    ``b_any`` whether there is one; ``b_mag`` 0 without it), ``c_any`` and ``c_neg``
    whether there is a live one after that and its sign; ``zero`` exactly when none is
    live. Each is found by a priority scan after the one before (the block counts the live
    windows before each). Mutant: ``Vb`` the first live window at or after ``Va``'s."""

    BLOCK = PickClusters

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        n, L = sp.n, sp.windows
        dut = self._wire(m)
        sums = [getattr(self, f"sum_{s}") for s in range(n)]
        tops = [getattr(self, f"top_{s}") for s in range(n)]
        live = []
        for s in range(n):
            bound = (n - s) * ((1 << L[s]) - 1)     # n - s members, each under 2**L_s
            m.d.comb += [Assume(getattr(self, f"nz_{s}") == (sums[s] != 0)),
                         Assume((sums[s] <= bound) & (sums[s] >= -bound))]
            live.append(getattr(self, f"start_{s}") & getattr(self, f"nz_{s}"))
        m.d.comb += Assume(self.start_0)

        def first_after(after, name):               # index of the first live s > after
            idx, found = Signal(range(n + 1), name=f"{name}_idx"), Signal(name=f"{name}_any")
            m.d.comb += idx.eq(n)
            for s in reversed(range(n)):
                with m.If(live[s] & (s > after)):
                    m.d.comb += [idx.eq(s), found.eq(1)]
            return idx, found

        a, a_any = first_after(Const(-1, signed(2)), "a")
        b, b_any = first_after(a - (1 if self._mutant else 0), "b")
        c, c_any = first_after(b, "c")
        m.d.comb += [Assert(dut.zero == ~a_any), Assert(dut.b_any == b_any),
                     Assert(dut.c_any == c_any), Assert(b_any | (dut.b_mag == 0))]
        for s in range(n):
            x = sums[s]
            mag = Mux(x < 0, -x, x)
            with m.If(a_any & (a == s)):
                m.d.comb += [Assert(dut.a_neg == (x < 0)), Assert(dut.a_top == tops[s]),
                             Assert(dut.a_mag == (mag << (L[0] - L[s])))]
            if s >= 1:
                with m.If(b_any & (b == s)):
                    m.d.comb += [Assert(dut.b_neg == (x < 0)), Assert(dut.b_top == tops[s]),
                                 Assert(dut.b_mag == (mag << (L[1] - L[s])))]
                with m.If(c_any & (c == s)):
                    m.d.comb += Assert(dut.c_neg == (x < 0))
        return m


class SplitSumProof(_SplitBlockProof):
    """:class:`hwgen.accum_split.SplitSum`, the whole split, for every step whose exponent
    fields are at most ``exp_max`` (what the front end hands it, ``TermExponentProof``):
    the facts the block proofs take from the argument of ``docs/accumulator.md`` hold at
    its outputs. ``q`` is one the split gives; ``E`` is in
    :class:`hwgen.accum_split.Residue`'s form with ``|E| <= 2**(q - 25)``; ``fn`` and
    ``xe`` are at most one apart and, when they differ, ``E`` is 0 or has the sign opposite
    to ``(fn - xe) * s``. Mutant: ``|E| <= 2**(q - 26)``."""

    BLOCK = SplitSum

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        dut = self._wire(m)
        for t in sp.terms:
            m.d.comb += Assume(self.step[f"{t.name}_exp"] <= t.exp_max)
        half = dut.q - (26 if self._mutant else 25)
        top, sig = dut.e_top, dut.e_sig
        with m.If(~dut.zero):
            m.d.comb += [
                Assert(dut.q >= -126), Assert(dut.q <= _top_places(sp)[1] + 2),
                Assert(Mux(dut.e_zero, (sig == 0) & ~dut.e_sticky, sig[E_BITS - 1])),
                Assert(dut.e_zero | (top < half)
                       | ((top == half) & (sig == 1 << (E_BITS - 1)) & ~dut.e_sticky)),
                Assert((dut.fn - dut.xe <= 1) & (dut.xe - dut.fn <= 1)),
                Assert((dut.fn == dut.xe) | dut.e_zero
                       | (dut.e_neg != (dut.s_neg ^ (dut.fn < dut.xe))))]
        return m

