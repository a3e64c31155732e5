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

from fractions import Fraction

from amaranth.hdl import Array, Assert, Assume, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from conftest import e2m1, e6m2, e8m0, s1p2, ue4m3
from hwgen.accum import AccumSpec, Round
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
    """:class:`hwgen.accum.Round` of the window of ``terms`` (a unit's ``terms``): for every window sum ``x``
    (units ``2**lsb``, magnitude ``M``) the word is ``RNE_FP32(x)`` as ``docs/formats.md``
    section 7 states it, written as properties of the word rather than a second rounder:

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
        word = dut.word
        frac, ef, sign = word[:23], word[23:31], word[31]
        wide = unsigned(w + 3)
        mag = Signal(wide)
        m.d.comb += mag.eq(Mux(self.sum < 0, -self.sum, self.sum))
        pad = -149 - lsb                        # window bit of weight 2**-149
        ulp_exp = Signal(range(254 + pad))      # ulp = 2**(max(ef, 1) - 150) = window bit
        m.d.comb += ulp_exp.eq(Mux(ef == 0, 0, ef - 1) + pad)
        ulp, value, below = Signal(wide), Signal(wide), Signal(wide)
        m.d.comb += [ulp.eq(Const(1, wide) << ulp_exp),
                     value.eq(Cat(frac, ef != 0) << ulp_exp),
                     below.eq(Mux((frac == 0) & (ef >= 2), ulp >> 1, ulp))]
        threshold = (1 << (128 - lsb)) - (0 if self._mutant else 1 << (103 - lsb))
        twice = mag << 1
        with m.If(mag == 0):
            m.d.comb += Assert(word == 0)
        with m.Else():
            m.d.comb += Assert(sign == (self.sum < 0))
            with m.If(ef == 255):
                m.d.comb += [Assert(frac == 0), Assert(mag >= threshold)]
            with m.Else():
                upper = (value << 1) + ulp
                lower = (value << 1) - below
                m.d.comb += Assert(twice <= upper)
                with m.If(value != 0):
                    m.d.comb += Assert(twice >= lower)
                with m.If((twice == upper) | ((value != 0) & (twice == lower))):
                    m.d.comb += Assert(~frac[0])
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
