"""HiF4 dot-product unit (spec sections 2, 6, 7), with optional 2:4 or dense residual.

Datapath, one component per stage (each step = one 64-element HiF4 block of ``a`` and
``w``, plus one residual block ``r``):

1. :class:`MicroGroupDot` — per 4-element micro-group: 3x3-bit magnitude products, signs,
   their sum, then ONE shift by the micro-group's four micro-exponent bits
   ``b_a + c_a + b_w + c_w`` (0..4).
   :class:`ResidualSelect` — per residual micro-group: the 4:1 selection of the weight
   element for each kept element by its 2-bit position.
2. :class:`BlockSlice` — ``lanes / 4`` micro-groups and their adder tree; over the
   ``64 / lanes`` slices of a step (``hwgen.stream.Sequencer``) this gives the exact block
   sums: main 17 bits signed in units of ``2**-4 * Sa * Sw``, residual (2:4) 16 bits.
   :class:`ScalePair` — per block pair: one 3x3-bit product of the E6M2 significands
   ``(4 + Ma)(4 + Mw)`` and one exponent add ``Ea + Ew``; NaN flag for code 0xFF.
3. :class:`TermFormer` — block sum x significand product: the exact term
   ``sig * 2**(Ea + Ew - 104)``.
4. ``hwgen.accum.Accumulator`` — one alignment, one exact add, one RNE rounding per step.

Pipeline registers (``stages``) are placed as :class:`hwgen.unit.DotUnit` says (the one
after the front end, on the block sums, is ``sums_reg``); timing: :mod:`hwgen.stream`.

Ranges: a nonzero HiF4 step value has magnitude in [2**-100, 2**44) (main term at most
64 * 49 * 49152**2 < 2**43, the residual term less); so from the port the accumulator never
becomes subnormal, -0 or +-Inf in any realistic K-loop (the back end handles
them anyway; ``tests/hwgen/test_hwgen_accum.py`` covers them with wider terms). With a residual
the two terms' scales can be up to 2**126 apart; the sum is still exact.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hif4spec import ELEMENT_TYPES, FORMATS

from .accum import TermSpec
from .layouts import HIF4_BLOCK, RES24_BLOCK, S1P2
from .parts import Part, probe, times
from .unit import DotUnit, adder_tree

__all__ = ["S1P2", "HIF4_BLOCK", "RES24_BLOCK", "MicroGroupDot", "ResidualSelect",
           "BlockSlice", "ScalePair", "TermFormer", "HiF4DotUnit"]

NAN_SCALE = FORMATS["hif4"].nan_scale_code      # E6M2 0xFF
TERM_BIAS = 104         # (k/4)(k/4) -> 2**-4; E6M2 pair -> 2**(Ea + Ew - 100)
#: The main and residual terms' exponent fields are Ea + Ew and Er + Ew: they differ by at
#: most the largest E6M2 exponent field (what a bounded back end may pre-add over).
MAX_TERM_EXP_DIFF = (1 << ELEMENT_TYPES["E6M2"].exp_bits) - 1
MAX_PRODUCT = 49        # 7 * 7


def _sum_bits(count, max_shift):
    """Signed width of a sum of ``count`` products of up to 49 shifted by up to ``max_shift``."""
    return (MAX_PRODUCT * count << max_shift).bit_length() + 1


class MicroGroupDot(wiring.Component):
    """Signed sum of ``n`` S1P2 x S1P2 products, shifted once by the micro-exponents.

    Parameters
    ----------
    n : int
        Elements per micro-group (4 for the main path, 2 for the 2:4 residual).

    Members
    -------
    a, w : In(ArrayLayout(S1P2, n))
        Element codes.
    shift : In(3)
        ``b_a + c_a + b_w + c_w`` (0..4).
    sum : Out(signed)
        ``(sum_i (-1)**(sa_i ^ sw_i) * ka_i * kw_i) << shift``.
    """

    def __init__(self, n):
        self._n = n
        self.sum_bits = _sum_bits(n, 4)
        super().__init__({"a": In(data.ArrayLayout(S1P2, n)),
                          "w": In(data.ArrayLayout(S1P2, n)),
                          "shift": In(3),
                          "sum": Out(signed(self.sum_bits))})

    def elaborate(self, platform):
        m = Module()
        products = []
        for i in range(self._n):
            mag = Signal(6, name=f"mag{i}")
            prod = Signal(signed(7), name=f"prod{i}")
            m.d.comb += [mag.eq(self.a[i].k * self.w[i].k),               # 3x3-bit product
                         prod.eq(Mux(self.a[i].s ^ self.w[i].s, -mag, mag))]
            products.append(prod)
        group = Signal(signed((MAX_PRODUCT * self._n).bit_length() + 1))
        m.d.comb += [group.eq(sum(products)), self.sum.eq(group << self.shift)]
        return m

    def parts(self):
        """``n`` 3x3-bit sign-magnitude products, their 7-bit sum, the 0..4 shift of the
        group sum (:mod:`hwgen.parts`)."""
        group_bits = (MAX_PRODUCT * self._n).bit_length() + 1
        return [Part("smul", (3, 3), self._n), Part("tree", (self._n, 7)),
                Part("shl", (group_bits, 5))]


class ResidualSelect(wiring.Component):
    """The 4:1 selection of the weight element for each kept residual element.

    Members
    -------
    w : In(ArrayLayout(S1P2, 4))
        One weight micro-group.
    pos : In(ArrayLayout(2, 2))
        Positions of the micro-group's two kept residual elements (any values accepted).
    sel : Out(ArrayLayout(S1P2, 2))
        ``w[pos[0]]``, ``w[pos[1]]``.
    """

    def __init__(self):
        super().__init__({"w": In(data.ArrayLayout(S1P2, 4)),
                          "pos": In(data.ArrayLayout(2, 2)),
                          "sel": Out(data.ArrayLayout(S1P2, 2))})

    def elaborate(self, platform):
        m = Module()
        for j in range(2):
            m.d.comb += self.sel[j].eq(self.w[self.pos[j]])
        return m

    def parts(self):
        """Two 4:1 selections of a 4-bit element (:mod:`hwgen.parts`)."""
        return [Part("mux", (4, 4), 2)]


class BlockSlice(wiring.Component):
    """Products, micro-group shifts and the adder tree of ``groups`` micro-groups.

    Parameters
    ----------
    groups : int
        Micro-groups per slice (``lanes // 4``; 16 = the whole block).
    residual : str
        ``"none"``, ``"2:4"`` or ``"dense"``.

    Members
    -------
    a, w : In(ArrayLayout(S1P2, 4 * groups))
        Element codes of the slice.
    a_l3, w_l3 : In(groups)
        L3 bits of the slice's micro-groups.
    a_l2, w_l2 : In(groups // 2)
        L2 bits of the slice's sub-groups.
    r, r_pos, r_l3, r_l2 : In
        Residual slice: 2:4 -> ``2 * groups`` kept codes and positions; dense -> like ``a``.
    main : Out(signed(17))
        Sum over the slice in units of ``2**-4 * Sa * Sw``.
    res : Out(signed)
        Residual sum in units of ``2**-4 * Sr * Sw`` (16 bits for 2:4, 17 for dense).
    """

    def __init__(self, *, groups, residual):
        self._groups = groups
        self._residual = residual
        members = {
            "a": In(data.ArrayLayout(S1P2, 4 * groups)),
            "w": In(data.ArrayLayout(S1P2, 4 * groups)),
            "a_l3": In(groups), "w_l3": In(groups),
            "a_l2": In(groups // 2), "w_l2": In(groups // 2),
            "main": Out(signed(_sum_bits(64, 4))),
        }
        if residual == "2:4":
            members.update(r=In(data.ArrayLayout(S1P2, 2 * groups)),
                           r_pos=In(data.ArrayLayout(2, 2 * groups)),
                           r_l3=In(groups), r_l2=In(groups // 2),
                           res=Out(signed(_sum_bits(32, 4))))
        elif residual == "dense":
            members.update(r=In(data.ArrayLayout(S1P2, 4 * groups)),
                           r_l3=In(groups), r_l2=In(groups // 2),
                           res=Out(signed(_sum_bits(64, 4))))
        super().__init__(members)

    def _shift(self, m, x_l3, x_l2, j, name):
        shift = Signal(3, name=name)
        m.d.comb += shift.eq(x_l2[j // 2] + x_l3[j] + self.w_l2[j // 2] + self.w_l3[j])
        return shift

    def elaborate(self, platform):
        m = Module()
        main, res = [], []
        for j in range(self._groups):
            elems = slice(4 * j, 4 * j + 4)
            m.submodules[f"mg{j}"] = mg = MicroGroupDot(4)
            m.d.comb += [mg.a.eq(self.a.as_value()[4 * elems.start:4 * elems.stop]),
                         mg.w.eq(self.w.as_value()[4 * elems.start:4 * elems.stop]),
                         mg.shift.eq(self._shift(m, self.a_l3, self.a_l2, j, f"sh{j}"))]
            main.append(mg.sum)
            if self._residual == "2:4":
                m.submodules[f"sel{j}"] = sel = ResidualSelect()
                m.submodules[f"rg{j}"] = rg = MicroGroupDot(2)
                m.d.comb += [sel.w.eq(self.w.as_value()[16 * j:16 * j + 16]),
                             sel.pos.eq(self.r_pos.as_value()[4 * j:4 * j + 4]),
                             rg.a.eq(self.r.as_value()[8 * j:8 * j + 8]),
                             rg.w.eq(sel.sel),
                             rg.shift.eq(self._shift(m, self.r_l3, self.r_l2, j, f"rsh{j}"))]
                res.append(rg.sum)
            elif self._residual == "dense":
                m.submodules[f"rg{j}"] = rg = MicroGroupDot(4)
                m.d.comb += [rg.a.eq(self.r.as_value()[16 * j:16 * j + 16]),
                             rg.w.eq(self.w.as_value()[16 * j:16 * j + 16]),
                             rg.shift.eq(self._shift(m, self.r_l3, self.r_l2, j, f"rsh{j}"))]
                res.append(rg.sum)
        m.d.comb += self.main.eq(adder_tree(main))
        if res:
            m.d.comb += self.res.eq(adder_tree(res))
        return m

    def parts(self):
        """Per micro-group a :class:`MicroGroupDot` and the sum of its four micro-exponent
        bits, then the adder tree of the group sums; the same for the residual, with a
        :class:`ResidualSelect` per group for 2:4 (:mod:`hwgen.parts`)."""
        groups = self._groups
        shifts = [Part("tree", (4, 1), groups)]         # b_a + c_a + b_w + c_w per group
        paths = [(probe(MicroGroupDot(4)), [])]
        if self._residual == "2:4":
            paths.append((probe(MicroGroupDot(2)),
                          times(probe(ResidualSelect()).parts(), groups)))
        elif self._residual == "dense":
            paths.append((probe(MicroGroupDot(4)), []))
        out = []
        for group, select in paths:
            out += select + times(group.parts(), groups) + shifts
            if groups > 1:
                out.append(Part("tree", (groups, group.sum_bits)))
        return out


class ScalePair(wiring.Component):
    """E6M2 x E6M2: one 3x3-bit significand product and one exponent add.

    ``S = 2**(E - 50) * (4 + M)``, so ``Sa * Sw = mant * 2**(exp - 100)``.

    Members
    -------
    a, w : In(8)
        E6M2 codes ``(E << 2) | M``.
    mant : Out(6)
        ``(4 + Ma) * (4 + Mw)`` (16..49).
    exp : Out(7)
        ``Ea + Ew`` (0..126).
    nan : Out(1)
        Either code is 0xFF.
    """

    def __init__(self):
        super().__init__({"a": In(8), "w": In(8), "mant": Out(6), "exp": Out(7),
                          "nan": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.mant.eq(Cat(self.a[:2], Const(1, 1)) * Cat(self.w[:2], Const(1, 1))),
            self.exp.eq(self.a[2:] + self.w[2:]),
            self.nan.eq((self.a == NAN_SCALE) | (self.w == NAN_SCALE)),
        ]
        return m

    def parts(self):
        """The 3x3-bit significand product, the 6-bit exponent add, two NaN compares
        (:mod:`hwgen.parts`)."""
        return [Part("mul", (3, 3)), Part("add", (6,)), Part("cmp", (8,), 2)]


class TermFormer(wiring.Component):
    """Block sum x scale significand product: the exact term significand.

    Parameters
    ----------
    sum_bits : int
        Signed width of the block sum.

    Members
    -------
    sum : In(signed(sum_bits))
    mant : In(6)
    sig : Out(signed(sum_bits + 6))
        ``sum * mant``; the term is ``sig * 2**(Ea + Ew - 104)``.
    """

    def __init__(self, sum_bits):
        super().__init__({"sum": In(signed(sum_bits)), "mant": In(6),
                          "sig": Out(signed(sum_bits + 6))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.sig.eq(self.sum * self.mant)
        return m

    def parts(self):
        """One signed x unsigned multiply (:mod:`hwgen.parts`: ``smulx`` takes the unsigned
        operand's width plus one)."""
        return [Part("smulx", (self.sum.shape().width, self.mant.shape().width + 1))]


class HiF4DotUnit(DotUnit):
    """HiF4 dot-product unit: one 64-element step per transfer into an FP32 accumulator.

    Parameters and members as :class:`hwgen.unit.DotUnit`: ``a``, ``w`` are HiF4 blocks,
    ``r`` a packed 224-bit 2:4 residual block (``"2:4"``) or a HiF4 block (``"dense"``).
    The front end delivers block sums and scale products (``sums``); the ``terms`` stage
    (:class:`TermFormer`) turns them into the accumulator's terms, and the register after
    the front end is named ``sums_reg``. Timing: :mod:`hwgen.stream`.
    """

    unit = "hif4"
    _front_reg = "sums_reg"
    _max_exp_diff = MAX_TERM_EXP_DIFF

    def _terms(self):
        terms = [TermSpec("main", _sum_bits(64, 4) + 6, 7, TERM_BIAS, exp_max=126)]
        if self._residual != "none":
            res_bits = _sum_bits(32 if self._residual == "2:4" else 64, 4)
            terms.append(TermSpec("res", res_bits + 6, 7, TERM_BIAS, exp_max=126))
        return terms

    def _front_layout(self):
        fields = {"main_sum": signed(_sum_bits(64, 4)), "main_mant": 6, "main_exp": 7}
        if self._residual != "none":
            res_bits = _sum_bits(32 if self._residual == "2:4" else 64, 4)
            fields.update(res_sum=signed(res_bits), res_mant=6, res_exp=7)
        fields.update(nan=1, first=1, last=1)
        return data.StructLayout(fields)

    def _sum_fields(self):
        return ["main_sum"] + (["res_sum"] if self._residual != "none" else [])

    def _front(self, m, p, index, out):
        groups, residual = self._lanes // 4, self._residual
        m.submodules.slice = sl = BlockSlice(groups=groups, residual=residual)
        m.submodules.scale_main = sc = ScalePair()
        elem_bits = 16 * groups

        def elems(block):
            return block.as_value()[:256].word_select(index, elem_bits)

        def l3(block):
            return block.l3.word_select(index, groups)

        def l2(block):
            return block.l2.word_select(index, groups // 2)

        m.d.comb += [sl.a.eq(elems(p.a)), sl.w.eq(elems(p.w)),
                     sl.a_l3.eq(l3(p.a)), sl.w_l3.eq(l3(p.w)),
                     sl.a_l2.eq(l2(p.a)), sl.w_l2.eq(l2(p.w)),
                     sc.a.eq(p.a.scale), sc.w.eq(p.w.scale),
                     out.main_mant.eq(sc.mant), out.main_exp.eq(sc.exp),
                     out.first.eq(p.first), out.last.eq(p.last)]
        parts = {"main_sum": sl.main}
        nan = sc.nan
        if residual != "none":
            m.submodules.scale_res = sr = ScalePair()
            m.d.comb += [sr.a.eq(p.r.scale), sr.w.eq(p.w.scale),
                         out.res_mant.eq(sr.mant), out.res_exp.eq(sr.exp),
                         sl.r_l3.eq(l3(p.r)), sl.r_l2.eq(l2(p.r))]
            nan = nan | sr.nan
            parts["res_sum"] = sl.res
            if residual == "2:4":
                m.d.comb += [
                    sl.r.eq(p.r.kept.as_value().word_select(index, 8 * groups)),
                    sl.r_pos.eq(p.r.pos.as_value().word_select(index, 4 * groups))]
            else:
                m.d.comb += sl.r.eq(elems(p.r))
        m.d.comb += out.nan.eq(nan)
        return parts

    def _form(self, m, p, out):
        m.submodules.main = tm = TermFormer(_sum_bits(64, 4))
        m.d.comb += [tm.sum.eq(p.main_sum), tm.mant.eq(p.main_mant),
                     out.main_sig.eq(tm.sig), out.main_exp.eq(p.main_exp),
                     out.nan.eq(p.nan), out.first.eq(p.first), out.last.eq(p.last)]
        if self._residual != "none":
            m.submodules.res = tr = TermFormer(len(p.res_sum))
            m.d.comb += [tr.sum.eq(p.res_sum), tr.mant.eq(p.res_mant),
                         out.res_sig.eq(tr.sig), out.res_exp.eq(p.res_exp)]

    def _front_parts(self):
        """One slice of the front end: a :class:`BlockSlice`, a :class:`ScalePair` per
        block pair and, with several slices, the selection of each operand's slice (its
        elements, L3 and L2 bits; the 2:4 residual is counted as an operand plus its
        positions, 8 * groups bits more than it selects, as the area model was calibrated).
        """
        groups, n, residual = self._lanes // 4, self.ii, self._residual
        pairs = 1 if residual == "none" else 2
        out = (probe(BlockSlice(groups=groups, residual=residual)).parts()
               + times(probe(ScalePair()).parts(), pairs))
        if n > 1:
            out.append(Part("mux", (n, 16 * groups + groups + groups // 2), 2 + pairs - 1))
            if residual == "2:4":
                out.append(Part("mux", (n, 4 * groups)))
        return out

    def _form_parts(self):
        """The ``terms`` stage: a :class:`TermFormer` per block sum."""
        layout = self._front_layout()
        return [p for name in self._sum_fields()
                for p in probe(TermFormer(Shape.cast(layout[name].shape).width)).parts()]
