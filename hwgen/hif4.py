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

Pipeline registers (``stages``): the accumulator register is always there; ``stages >= 2``
adds a register before the accumulator (on the terms), ``>= 3`` one after the block sums,
``4`` one on the input payload.

Ranges: a nonzero HiF4 step value has magnitude in [2**-100, 2**44) (main term at most
64 * 49 * 49152**2 < 2**43, the residual term less); so from the port the accumulator never
becomes subnormal, -0 or +-Inf in any realistic K-loop (the back end handles
them anyway; ``tests/test_hwgen_accum.py`` covers them with wider terms). With a residual
the two terms' scales can be up to 2**126 apart; the sum is still exact.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .accum import AccumSpec, Accumulator, TermSpec, accum_layout
from .layouts import HIF4_BLOCK, RES24_BLOCK, S1P2
from .stream import Map, Register, Sequencer, chain
from .unit import DotUnit, check_stages_lanes

__all__ = ["S1P2", "HIF4_BLOCK", "RES24_BLOCK", "MicroGroupDot", "ResidualSelect",
           "BlockSlice", "ScalePair", "TermFormer", "HiF4DotUnit"]

NAN_SCALE = 0xFF
TERM_BIAS = 104         # (k/4)(k/4) -> 2**-4; E6M2 pair -> 2**(Ea + Ew - 100)
RESIDUALS = ("none", "2:4", "dense")
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
        m.d.comb += self.main.eq(_tree_sum(main))
        if res:
            m.d.comb += self.res.eq(_tree_sum(res))
        return m


def _tree_sum(values):
    """Balanced adder tree."""
    while len(values) > 1:
        values = [values[k] + values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


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


def _check_params(residual, stages, lanes):
    if residual not in RESIDUALS:
        raise ValueError(f"Residual must be one of 'none', '2:4', 'dense', not {residual!r}")
    check_stages_lanes(stages, lanes)


class HiF4DotUnit(DotUnit):
    """HiF4 dot-product unit: one 64-element step per transfer into an FP32 accumulator.

    Parameters (keyword-only)
    -------------------------
    residual : str
        ``"none"``, ``"2:4"`` (packed 224-bit residual ``r``) or ``"dense"`` (288-bit ``r``).
    stages : int
        Pipeline registers on the path from ``i`` to ``o``, 1..4 (see the module docstring).
    lanes : int
        16, 32 or 64 element products per cycle; a step takes ``64 // lanes`` cycles.

    Members
    -------
    i : In(stream.Signature(payload_layout))
        Steps: ``a``, ``w`` (HiF4 blocks), ``r`` (if a residual), ``first``, ``last``.
    o : Out(stream.Signature(32))
        The FP32 accumulator word after each ``last`` step.

    Timing (exact; also in the manifest)
    ------------------------------------
    With ``n = 64 // lanes``: the input accepts a step at most every ``n`` cycles. Without
    the input register (``stages <= 3``), ``i.ready`` is high only in the last of the ``n``
    cycles that a presented step spends in the sequencer, and only when the next stage can
    take it; with ``stages == 4`` the input register takes the step (``i.ready = !valid |
    next ready``) and the sequencer works on the register's copy. If the input transfer of a
    ``last`` step happens in cycle ``c`` and the output is always ready, ``o.valid`` is high
    in cycle ``c + latency`` where ``latency = stages`` for ``stages <= 3`` and
    ``stages - 1 + n`` for ``stages == 4``; ``ii = n``. With ``o.ready`` low while
    ``o.valid``, the accumulator takes no step and backpressure propagates through the
    registers (each register: ``ready = !valid | next ready``).
    """

    unit = "hif4"

    def __init__(self, *, residual="none", stages=3, lanes=64):
        _check_params(residual, stages, lanes)
        self._residual, self._stages, self._lanes = residual, stages, lanes
        fields = {"a": HIF4_BLOCK, "w": HIF4_BLOCK}
        if residual == "2:4":
            fields["r"] = RES24_BLOCK
        elif residual == "dense":
            fields["r"] = HIF4_BLOCK
        fields.update(first=1, last=1)
        self._payload = data.StructLayout(fields)
        terms = [TermSpec("main", _sum_bits(64, 4) + 6, 7, TERM_BIAS, exp_max=126)]
        if residual != "none":
            res_bits = _sum_bits(32 if residual == "2:4" else 64, 4)
            terms.append(TermSpec("res", res_bits + 6, 7, TERM_BIAS, exp_max=126))
        self._term_specs = tuple(terms)
        super().__init__({"i": In(stream.Signature(self._payload)),
                          "o": Out(stream.Signature(32))})

    def _sums_layout(self):
        fields = {"main_sum": signed(_sum_bits(64, 4)), "main_mant": 6, "main_exp": 7}
        if self._residual != "none":
            res_bits = _sum_bits(32 if self._residual == "2:4" else 64, 4)
            fields.update(res_sum=signed(res_bits), res_mant=6, res_exp=7)
        fields.update(nan=1, first=1, last=1)
        return data.StructLayout(fields)

    def _plan(self):
        """``[(name, description, factory)]`` of the stream stages, input to output."""
        sums = self._sums_layout()
        terms = accum_layout(self._term_specs)
        n = self.ii
        groups = self._lanes // 4
        sum_fields = ["main_sum"] + (["res_sum"] if self._residual != "none" else [])
        residual = self._residual

        def front(m, p, index, out):
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

        def form(m, p, out):
            m.submodules.main = tm = TermFormer(_sum_bits(64, 4))
            m.d.comb += [tm.sum.eq(p.main_sum), tm.mant.eq(p.main_mant),
                         out.main_sig.eq(tm.sig), out.main_exp.eq(p.main_exp),
                         out.nan.eq(p.nan), out.first.eq(p.first), out.last.eq(p.last)]
            if residual != "none":
                m.submodules.res = tr = TermFormer(len(p.res_sum))
                m.d.comb += [tr.sum.eq(p.res_sum), tr.mant.eq(p.res_mant),
                             out.res_sig.eq(tr.sig), out.res_exp.eq(p.res_exp)]

        kinds = {"register": {"kind": "register"}, "comb": {"kind": "comb"}}
        plan = []
        if self._stages >= 4:
            plan.append(("input_reg", kinds["register"], lambda: Register(self._payload)))
        plan.append(("front", {"kind": "sequencer", "slices": n},
                     lambda: Sequencer(self._payload, sums, slices=n, sum_fields=sum_fields,
                                       build=front, name="front")))
        if self._stages >= 3:
            plan.append(("sums_reg", kinds["register"], lambda: Register(sums)))
        plan.append(("terms", kinds["comb"], lambda: Map(sums, terms, form, name="terms")))
        if self._stages >= 2:
            plan.append(("terms_reg", kinds["register"], lambda: Register(terms)))
        plan.append(("acc", {"kind": "accumulator", **AccumSpec(self._term_specs).describe()},
                     lambda: Accumulator(self._term_specs)))
        return plan

    def elaborate(self, platform):
        m = Module()
        first, last = chain(m, [(name, make()) for name, _, make in self._plan()])
        wiring.connect(m, wiring.flipped(self.i), first.i)
        wiring.connect(m, last.o, wiring.flipped(self.o))
        return m
