"""Multi-format dot-product units: HiF4, MXFP4 and NVFP4 steps on one shared datapath.

A unit ``tc4_<format>_<format>[_<format>]`` (``hif4spec.MULTI_FORMATS``: any two or three
of hif4, mxfp4, nvfp4; ``hif4spec.UnitSpec.formats``) takes one 64-element step per
transfer, as the single-format units do, and each step names its format: the payload's
``hif4spec.FORMAT_FIELD`` (``fmt``) holds the index of the step's format in the unit's
``formats``. Every step of a K-loop has the format of its ``first`` step: the format may
change only at ``first`` (a stream that changes it elsewhere adds steps of two formats into
one accumulator, which no golden model describes). Each format keeps its exact semantics
(``docs/formats.md`` section 7): a step's words are those of the format's own unit.

Payload (``hif4spec.payload_fields``): ``a`` and ``w`` as wide as the widest format's step
(288 bits where hif4 or nvfp4 is in the set, 272 for MXFP4 alone), a narrower step in the
low bits; ``r`` (residual ``"2:4"``) as wide as the widest 2:4 residual step of the formats
that take one (HiF4's 224 bits, MXFP4's 208); then ``fmt``, ``first``, ``last``. An NVFP4
step ignores ``r`` (NVFP4 takes no residual).

Shared, one copy for every format
---------------------------------
1. Operand muxes (:class:`OperandMux`): element ``i`` of a step sits at a different bit in
   each format's layout (HiF4: one 64-element block; MXFP4: two blocks of 32 with a scale
   after each; NVFP4: four of 16); a ``len(formats)``:1 mux per element and operand picks
   the step's format's bits (elements 0..15 sit at the same bits in all three: no mux).
2. Element products (:class:`SharedProduct`, ``lanes`` per cycle, half as many more for
   the 2:4 residual; with the operand muxes: :class:`ElementProducts`):
   a 4-bit code decodes to a magnitude ``mag`` and a shift ``sh``: HiF4's S1P2 ``k`` is
   ``mag = k`` (0..7, quarters), ``sh = 0``; E2M1's ``2|x|`` in {0, 1, 2, 3, 4, 6, 8, 12}
   is ``mag = {e != 0, m}`` (0..3), ``sh = max(e - 1, 0)``. ONE 3x3-bit multiplier forms
   ``mag_a * mag_w`` and ONE 0..4 left shift applies ``sh_a + sh_w`` (E2M1) or the HiF4
   micro-group's ``b_a + c_a + b_w + c_w`` (HiF4 shifts each product by its micro-group's
   micro-exponents rather than the group sum, which is the same integer): a signed 11-bit
   product (|p| <= 784), in units of 1/16 of the scale product for HiF4, 1/4 for E2M1.
3. Block-sum trees: the 64 products add in one tree whose 16-element nodes are the NVFP4
   block sums, whose 32-element nodes are the MXFP4 block sums and whose root is the HiF4
   block sum (17 signed bits); the 2:4 residual's 32 products likewise (16-element nodes:
   MXFP4 residual blocks; root: HiF4's residual).
4. The accumulator: ONE exact FP32 accumulator (either exact back end, ``window`` or
   ``bounded``) whose term slots cover every selected format. Slot ``k`` carries the
   ``k``-th term of the step's format (HiF4: main, residual; MXFP4: block 0, block 1,
   residual block 0, residual block 1), zero where the format has fewer terms. A slot's
   significand is as wide as its widest format's, and every slot has one bias (the largest
   of any format's) and exponent field width: each format's exponent field plus a constant
   (:func:`slot_terms`), so one alignment covers all of them. NVFP4 forms the sum of its
   four blocks on the grid ``2**-20`` as its own unit does (50 bits) and hands it over as
   the one slot where the other formats need one, and as the accumulator's *wide* term
   where they need two (:data:`hwgen.accum_bounded.WIDE`: the bounded back end pairs two
   terms of at most 24 significand bits and adds the wide term alone, in their place, on
   NVFP4's steps); only where another format needs four slots (MXFP4 with the residual,
   whose four terms the bounded back end splits) does it hand over its four block terms
   (:func:`_nv_place`).

Per format
----------
The scale decodes: HiF4's E6M2 pair (:class:`hwgen.hif4.ScalePair`: a 3x3-bit significand
product, an exponent add) and the block sum x significand product
(:class:`hwgen.hif4.TermFormer`); MXFP4's E8M0 pairs (:class:`hwgen.mxfp4.E8M0ScalePair`: an
exponent add each); NVFP4's UE4M3 pairs (:class:`hwgen.nvfp4.UE4M3ScalePair`: a 4x4-bit
significand product and a shift each), its 13x8-bit block products and (one slot) its
0..28 shifts onto the common grid; the NaN compares of each format's scale codes. The
scale paths are kept apart: their multipliers differ in width and in what they multiply
(HiF4 multiplies the block sum after the tree, NVFP4 each block sum), so sharing one would
widen it to the wider of each pair of operands. The step's format selects each slot's
significand and exponent and the NaN flag.

Residual
--------
``"2:4"`` wherever HiF4 or MXFP4 is in the set (``hif4spec.UnitSpec.residuals``): kept
element ``j`` sits in micro-group ``j // 2`` in both formats' 2:4 layouts, so the 4:1
selection of its weight element by its 2-bit position is shared, and so are its products
and trees; the kept codes and positions pass an operand mux when both formats are in the
set. The dense residual is not offered.

Stages and lanes: the stage plan of :class:`hwgen.unit.DotUnit` (``stages`` 1..4) and
``lanes`` 16, 32 or 64 (:class:`MultiDotUnit`: with fewer than 64 lanes a step takes
``64 // lanes`` cycles, a slice's products adding into the block sums).
"""

from functools import cache

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hif4spec import (FORMAT_FIELD, FORMATS, format_residuals, payload_fields,
                      residual_layout, step_layout, unit_spec)

from .accum import TermSpec
from .accum_bounded import WIDE
from .e2m1 import dot_sum_bits
from .hif4 import TERM_BIAS as HIF4_BIAS
from .hif4 import ScalePair, TermFormer
from .mxfp4 import SCALE_EXP_BIAS as MXFP4_BIAS
from .mxfp4 import SCALE_EXP_BITS as MXFP4_EXP_BITS
from .mxfp4 import E8M0ScalePair
from .nvfp4 import BLOCK_TERM_BITS, SCALE_SHIFT_BITS, SCALE_SIG_BITS, TERM_BITS, TERM_LSB
from .nvfp4 import UE4M3ScalePair
from .parts import Part, probe, times
from .unit import DotUnit, adder_tree

__all__ = ["SharedProduct", "OperandMux", "ElementProducts", "MultiDotUnit", "PRODUCT_BITS",
           "unit_class", "slot_terms"]

#: Signed width of one shared element product (|p| <= 49 << 4 = 784).
PRODUCT_BITS = 11
#: Largest shared product magnitude: HiF4 7 * 7 << 4; E2M1 3 * 3 << 4 = 144.
MAX_PRODUCT = 7 * 7 << 4
#: The element type of each format's elements that decodes as S1P2 (else E2M1).
S1P2_TYPE = "S1P2"


def _tree_bits(count):
    """Signed width of a sum of ``count`` shared products."""
    return (MAX_PRODUCT * count).bit_length() + 1


class SharedProduct(wiring.Component):
    """One signed element product for S1P2 (HiF4) and E2M1 (MXFP4, NVFP4) codes.

    Parameters
    ----------
    s1p2 : bool
        Whether the unit has an S1P2 format (else every code is E2M1 and the select and
        micro-exponent shift inputs are absent).

    Members
    -------
    a, w : In(4)
        Element codes (bit 3 the sign).
    sel : In(1)
        1: the codes are S1P2, 0: E2M1 (with ``s1p2`` only).
    shift : In(3)
        The micro-group's ``b_a + c_a + b_w + c_w`` (0..4), used for S1P2 (with ``s1p2``).
    p : Out(signed(11))
        S1P2: ``(-1)**(sa^sw) * ka * kw << shift`` (units of 1/16); E2M1: ``a * w`` in
        units of 1/4 (exactly :func:`hwgen.e2m1.e2m1_product_expr`).
    """

    def __init__(self, s1p2=True):
        self._s1p2 = s1p2
        members = {"a": In(4), "w": In(4), "p": Out(signed(PRODUCT_BITS))}
        if s1p2:
            members.update(sel=In(1), shift=In(3))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()

        def decode(x, name):
            e, man = x[1:3], x[0]
            mag, sh = Signal(3, name=f"{name}_mag"), Signal(2, name=f"{name}_sh")
            e2m1_mag = Cat(man, e.any(), Const(0, 1))
            e2m1_sh = Mux(e.any(), e - 1, 0)
            if self._s1p2:
                m.d.comb += [mag.eq(Mux(self.sel, x[0:3], e2m1_mag)),
                             sh.eq(Mux(self.sel, 0, e2m1_sh))]
            else:
                m.d.comb += [mag.eq(e2m1_mag), sh.eq(e2m1_sh)]
            return mag, sh

        mag_a, sh_a = decode(self.a, "a")
        mag_w, sh_w = decode(self.w, "w")
        prod = Signal(6)
        shift = Signal(3)
        mag = Signal(PRODUCT_BITS - 1)
        m.d.comb += [prod.eq(mag_a * mag_w),                      # the one 3x3-bit product
                     shift.eq(Mux(self.sel, self.shift, sh_a + sh_w) if self._s1p2
                              else sh_a + sh_w),
                     mag.eq(prod << shift),
                     self.p.eq(Mux(self.a[3] ^ self.w[3], -mag, mag))]
        return m

    def parts(self):
        """The 3x3-bit sign-magnitude product, its 0..4 shift and the shift add; with S1P2
        the select of each decode and of the shift (:mod:`hwgen.parts`)."""
        out = [Part("smul", (3, 3)), Part("shl", (6, 5)), Part("add", (2,))]
        if self._s1p2:
            out.append(Part("mux", (2, 5), 2))
            out.append(Part("mux", (2, 3)))
        return out


class OperandMux(wiring.Component):
    """The bits of item ``i`` of one operand field in the step's format's layout.

    Parameters
    ----------
    width : int
        Bits of the operand field (``a``, ``w`` or ``r`` of the payload).
    starts : tuple of tuple of int
        ``starts[k][i]``: bit of item ``i`` in the layout of format code ``k``.
    item_bits : int
        Bits per item.
    code_bits : int
        Width of the format code.

    Members
    -------
    x : In(width)
    code : In(code_bits)
    y : Out(ArrayLayout(item_bits, items))
        Item ``i`` at ``x[starts[code][i]:+item_bits]``; a code beyond the table selects the
        last format's bits.
    """

    def __init__(self, width, starts, item_bits, code_bits):
        self._starts = tuple(tuple(s) for s in starts)
        self._item_bits = item_bits
        self._items = len(self._starts[0])
        super().__init__({"x": In(width), "code": In(code_bits),
                          "y": Out(data.ArrayLayout(item_bits, self._items))})

    def elaborate(self, platform):
        m = Module()
        b = self._item_bits
        for i in range(self._items):
            choices = [self.x[s[i]:s[i] + b] for s in self._starts]
            out = choices[-1]
            for k in range(len(choices) - 2, -1, -1):
                if self._starts[k][i] != self._starts[-1][i]:
                    out = Mux(self.code == k, choices[k], out)
            m.d.comb += self.y[i].eq(out)
        return m

    def muxed(self):
        """Items whose bit differs between formats."""
        return sum(len({s[i] for s in self._starts}) > 1 for i in range(self._items))

    def parts(self):
        """A ``len(formats)``:1 mux of ``item_bits`` per item whose bits differ between the
        formats (:mod:`hwgen.parts`)."""
        n = self.muxed()
        return [Part("mux", (len(self._starts), self._item_bits), n)] if n else []


#: NVFP4's terms as four block terms (``BLOCK_TERM_BITS`` signed bits at exponent field
#: ``max(ea, 1) + max(ew, 1)``, 2..30, bias 22), where the unit has several term slots.
NV_BLOCK_TERM = (BLOCK_TERM_BITS, SCALE_SHIFT_BITS, 22, 30)


def _nv_place(residual, formats):
    """Where NVFP4's terms go in a unit combining ``formats``: ``"one"``, its own unit's one
    pre-added term (50 bits on the grid ``2**-20``) in the one slot, where no other format
    needs a second; ``"wide"``, that term as the accumulator's wide term
    (:data:`hwgen.accum_bounded.WIDE`: the loop adds it alone on NVFP4 steps) where the
    others need two slots, which the bounded back end pairs; ``"blocks"``, its four block
    terms (:data:`NV_BLOCK_TERM`) in four slots where another format needs four, which the
    bounded back end splits (the pair and the split take terms of at most 24 significand
    bits only)."""
    slots = max((len(_own_terms(f, residual, formats)) for f in formats if f != "nvfp4"),
                default=1)
    return "one" if slots <= 1 else "wide" if slots == 2 else "blocks"


def _own_terms(fmt, residual, formats):
    """``[(sig_bits, exp_bits, bias, exp_max), ...]``: the exact terms of a step of ``fmt``
    in a unit combining ``formats`` (the residual's where ``fmt`` takes ``residual``).
    HiF4 and MXFP4 hand over their own units' terms; NVFP4 its one pre-added term or its
    four block terms (:func:`_nv_place`)."""
    res = residual if residual in format_residuals(fmt) else "none"
    if fmt == "hif4":
        out = [(_tree_bits(64) + 6, 7, HIF4_BIAS, 126)]
        if res != "none":
            out.append((_tree_bits(32) + 6, 7, HIF4_BIAS, 126))
        return out
    if fmt == "mxfp4":
        spec = (MXFP4_EXP_BITS, MXFP4_BIAS, 2 * 254)
        out = [(dot_sum_bits(32), *spec)] * 2
        if res != "none":
            out += [(dot_sum_bits(16), *spec)] * 2
        return out
    if fmt == "nvfp4":
        if _nv_place(residual, formats) == "blocks":
            return [NV_BLOCK_TERM] * 4
        return [(TERM_BITS, 1, -TERM_LSB, 0)]
    raise ValueError(f"a multi-format unit has no datapath for format {fmt!r}")


def slot_terms(formats, residual):
    """``(terms, offsets)``: the accumulator's terms of a unit combining ``formats`` (term
    slots ``t0``, ``t1``, ... as ``TermSpec``, then the wide term where NVFP4 has one,
    :func:`_nv_place`) and ``offsets[fmt]``, ``{k: offset}``: format ``fmt``'s terms go
    into ``terms[k]``, in order, each with ``offset`` added to its own exponent field.

    Every slot has the same bias (the largest of any slot user's terms) and exponent field
    width, as the bounded back end's pair and split need; slot ``k``'s significand is as
    wide as the widest ``k``-th term of a format and its ``exp_max`` the largest shifted
    field. The wide term keeps NVFP4's own field (offset 0)."""
    own = {f: _own_terms(f, residual, formats) for f in formats}
    wide = "nvfp4" in formats and _nv_place(residual, formats) == "wide"
    users_of = [f for f in formats if not (wide and f == "nvfp4")]
    bias = max(t[2] for f in users_of for t in own[f])
    slots = max(len(own[f]) for f in users_of)
    tops, sigs = [], []
    offsets = {f: {k: bias - t[2] for k, t in enumerate(own[f])} for f in users_of}
    for k in range(slots):
        users = [f for f in users_of if k < len(own[f])]
        tops.append(max(own[f][k][3] + offsets[f][k] for f in users))
        sigs.append(max(own[f][k][0] for f in users))
    exp_bits = max(tops).bit_length()
    terms = [TermSpec(f"t{k}", sigs[k], exp_bits, bias, tops[k]) for k in range(slots)]
    if wide:
        sig, exp, nv_bias, top = own["nvfp4"][0]
        terms.append(TermSpec(WIDE, sig, exp, nv_bias, top))
        offsets["nvfp4"] = {slots: 0}
    return terms, offsets


def _starts(fmt_layout, field, count=None):
    """Bit of each item of ``field`` in a step layout (the first ``count`` items)."""
    pos = fmt_layout.positions(field)
    return pos if count is None else pos[:count]


class ElementProducts(wiring.Component):
    """The shared front of a multi-format unit: operand muxes and element products.

    Parameters
    ----------
    formats : tuple of str
        The unit's formats (format code ``k`` is ``formats[k]``).
    residual : str
        The unit's residual mode.
    widths : dict
        ``{field: bits}`` of the unit's payload (``hif4spec.payload_fields``).
    lanes : int
        Element products per cycle (64: the whole step).

    Members
    -------
    a, w : In(widths["a"])
        The payload's operand fields.
    r : In(widths["r"])
        The residual field (where a format takes the residual; ``has_residual``).
    code : In(widths["fmt"])
        The step's format code.
    index : In(range(64 // lanes))
        The slice (with ``lanes`` < 64): elements ``[index * lanes, (index + 1) * lanes)``.
    p : Out(ArrayLayout(signed(11), lanes))
        Product ``i`` of element ``i`` of the slice of ``a`` and ``w`` in the step's format
        (:class:`SharedProduct`; for HiF4 shifted by the element's micro-group's
        ``b_a + c_a + b_w + c_w``).
    q : Out(ArrayLayout(signed(11), lanes // 2))
        Product of kept residual element ``j`` of the slice and the weight element its
        position selects in micro-group ``j // 2`` (HiF4: shifted by
        ``b_r + c_r + b_w + c_w``).
    """

    def __init__(self, formats, residual, widths, lanes=64):
        self._formats = tuple(formats)
        self._residual = residual
        self._widths = dict(widths)
        self._lanes = lanes
        self._n = 64 // lanes
        self._res = tuple(f for f in formats
                          if residual != "none" and residual in format_residuals(f))
        self._s1p2 = any(FORMATS[f].elem_type == S1P2_TYPE for f in formats)
        members = {"a": In(widths["a"]), "w": In(widths["w"]),
                   "code": In(widths[FORMAT_FIELD]),
                   "p": Out(data.ArrayLayout(signed(PRODUCT_BITS), lanes))}
        if self._n > 1:
            members["index"] = In(range(self._n))
        if self._res:
            members.update(r=In(widths["r"]),
                           q=Out(data.ArrayLayout(signed(PRODUCT_BITS), lanes // 2)))
        super().__init__(members)

    has_residual = property(lambda self: bool(self._res))
    #: The formats whose steps use ``r``.
    residual_formats = property(lambda self: self._res)

    def muxes(self):
        """``{name: OperandMux}``: elements of ``a`` and ``w`` and, with the residual, kept
        codes and positions of ``r`` (a format without the residual takes the first
        residual format's bits: its residual products are not used)."""
        widths, code_bits = self._widths, self._widths[FORMAT_FIELD]
        elem = [_starts(step_layout(f), "elem") for f in self._formats]
        out = {"a": OperandMux(widths["a"], elem, 4, code_bits),
               "w": OperandMux(widths["w"], elem, 4, code_bits)}
        if self._res:
            lays = [residual_layout(f if f in self._res else self._res[0], self._residual)
                    for f in self._formats]
            out["r"] = OperandMux(widths["r"], [_starts(x, "elem") for x in lays], 4,
                                  code_bits)
            out["pos"] = OperandMux(widths["r"], [_starts(x, "pos") for x in lays], 2,
                                    code_bits)
        return out

    def elaborate(self, platform):
        m = Module()
        s1p2 = self._s1p2
        hif4_code = self._formats.index("hif4") if s1p2 else None
        muxes = self.muxes()
        for name, mux in muxes.items():
            m.submodules[f"mux_{name}"] = mux
            source = {"a": self.a, "w": self.w}.get(name, self.r if self._res else None)
            m.d.comb += [mux.x.eq(source), mux.code.eq(self.code)]
        sel = Signal()
        if s1p2:
            m.d.comb += sel.eq(self.code == hif4_code)
        hif4 = step_layout("hif4")

        def micro_shifts(x, lay, prefix):
            """HiF4 micro-exponent bits of each micro-group: L3 + L2 (0..2)."""
            l3, l2 = lay.positions("l3"), lay.positions("l2")
            out = []
            for g in range(len(l3)):
                s = Signal(2, name=f"{prefix}_mx{g}")
                m.d.comb += s.eq(x[l3[g]] + x[l2[g // 2]])
                out.append(s)
            return out

        def shifts_of(x_mx, w_mx, per, prefix):
            out = []
            for g in range(16):
                s = Signal(3, name=f"{prefix}{g}")
                m.d.comb += s.eq(x_mx[g] + w_mx[g])
                out += [s] * per
            return out

        def products(prefix, a_codes, w_codes, shifts, dest):
            for i, (ac, wc) in enumerate(zip(a_codes, w_codes)):
                m.submodules[f"{prefix}{i}"] = sp = SharedProduct(s1p2)
                m.d.comb += [sp.a.eq(ac), sp.w.eq(wc), dest[i].eq(sp.p)]
                if s1p2:
                    m.d.comb += [sp.sel.eq(sel), sp.shift.eq(shifts[i])]

        def sliced(items, bits, count, name):
            """The slice's ``count`` of ``items`` (``bits`` wide): all of them at 64 lanes,
            else an ``n``:1 selection by ``index``."""
            if self._n == 1:
                return items
            sel = Signal(bits * count, name=f"{name}_slice")
            m.d.comb += sel.eq(Cat(*items).word_select(self.index, bits * count))
            return [sel[bits * i:bits * i + bits] for i in range(count)]

        lanes, kept_n = self._lanes, self._lanes // 2
        a_el = sliced([muxes["a"].y[i] for i in range(64)], 4, lanes, "a")
        w_el = sliced([muxes["w"].y[i] for i in range(64)], 4, lanes, "w")
        w_mx = micro_shifts(self.w, hif4, "w") if s1p2 else None
        shifts = (sliced(shifts_of(micro_shifts(self.a, hif4, "a"), w_mx, 4, "sh"), 3, lanes,
                         "sh") if s1p2 else None)
        products("p", a_el, w_el, shifts, self.p)
        if self._res:
            kept = sliced([muxes["r"].y[j] for j in range(32)], 4, kept_n, "r")
            pos = sliced([muxes["pos"].y[j] for j in range(32)], 2, kept_n, "pos")
            wsel = []
            for j in range(kept_n):
                g = j // 2
                s = Signal(4, name=f"wsel{j}")
                m.d.comb += s.eq(Cat(*w_el[4 * g:4 * g + 4]).word_select(pos[j], 4))
                wsel.append(s)
            rshifts = None
            if s1p2:
                r_mx = micro_shifts(self.r, residual_layout("hif4", self._residual), "r")
                rshifts = sliced(shifts_of(r_mx, w_mx, 2, "rsh"), 3, kept_n, "rsh")
            products("q", kept, wsel, rshifts, self.q)
        return m

    def parts(self):
        """The operand muxes, the shared products (``lanes``, half as many more for the
        residual, each with its 4:1 weight selection), with S1P2 the micro-exponent adds
        and, with several slices, the selection of each slice's codes and shifts
        (:mod:`hwgen.parts`)."""
        out = []
        for mux in self.muxes().values():
            out += probe(mux).parts()
        lanes, n = self._lanes, self._n
        count = lanes + (lanes // 2 if self._res else 0)
        out += times(probe(SharedProduct(self._s1p2)).parts(), count)
        if self._res:
            out.append(Part("mux", (4, 4), lanes // 2))
        if self._s1p2:
            groups = 16 * (2 if self._res else 1)
            out += [Part("add", (2,), 16 * (3 if self._res else 2)),
                    Part("add", (3,), groups)]
        if n > 1:
            out.append(Part("mux", (n, 4 * lanes), 2))
            if self._s1p2:
                out.append(Part("mux", (n, 3 * lanes)))
            if self._res:
                out.append(Part("mux", (n, 6 * (lanes // 2))))
                if self._s1p2:
                    out.append(Part("mux", (n, 3 * (lanes // 2))))
        return out


def _placement(b, per_block, per_slice):
    """``(first, last, tree)``: the slices block ``b`` of ``per_block`` items spans when
    ``per_slice`` items are handled per slice by trees of ``min(per_slice, per_block)``, and
    the tree of a slice that holds it."""
    first = b * per_block // per_slice
    last = ((b + 1) * per_block - 1) // per_slice
    tree = (b * per_block % per_slice) // per_block if per_slice >= per_block else 0
    return first, last, tree


class MultiDotUnit(DotUnit):
    """A multi-format dot-product unit (see the module docstring); ``unit`` names one of the
    registry's multi-format units, whose ``formats`` it reads.

    With 64 lanes the front end forms the accumulator's terms (its register is
    ``front_reg``). With fewer, the front end forms a slice's products and 16-element trees
    per cycle and adds them into the block sums (sequencer sum fields: one partial-sum
    register per block a slice before the last touches), passing the scale codes and the
    format code along; the register after it is ``sums_reg`` and a ``terms`` stage forms the
    terms from the block sums, as the HiF4 unit does.
    """

    @property
    def formats(self):
        return unit_spec(self.unit).formats

    _form = property(lambda self: None if self.ii == 1 else self._form_terms)
    _front_reg = property(lambda self: "front_reg" if self.ii == 1 else "sums_reg")

    def _payload_layout(self):
        self._term_specs = tuple(self._terms())
        return data.StructLayout({name: unsigned(bits) for name, bits
                                  in payload_fields(self.unit, self._residual,
                                                    interleave=self._interleave)})

    def _terms(self):
        return slot_terms(self.formats, self._residual)[0]

    def _blocks(self):
        """``[(prefix, blocks, per slice), ...]``: the block sums of a step (the 16-element
        trees of the main products, ``s16``, and of the residual's, ``r16``) and how many
        of their items one slice handles."""
        out = [("s16", 4, self._lanes)]
        if self._res_formats():
            out.append(("r16", 2, self._lanes // 2))
        return out

    def _sum_fields(self):
        if self.ii == 1:
            return []
        return [f"{prefix}_{b}" for prefix, blocks, per in self._blocks()
                for b in range(blocks) if _placement(b, 16, per)[0] != self.ii - 1]

    def _scale_bytes(self):
        """``[(field, bit), ...]``: the scale codes the step's formats read, each once."""
        out = []
        for f in self.formats:
            for at in step_layout(f).positions("scale"):
                out += [x for x in (("a", at), ("w", at)) if x not in out]
        for f in self._res_formats():
            for at in residual_layout(f, self._residual).positions("scale"):
                out += [x for x in (("r", at),) if x not in out]
        return out

    def _front_layout(self):
        if self.ii == 1:
            return super()._front_layout()
        fields = {f"{prefix}_{b}": signed(_tree_bits(16)) for prefix, blocks, _ in self._blocks()
                  for b in range(blocks)}
        fields.update({f"{f}_s{at}": 8 for f, at in self._scale_bytes()})
        widths = dict(payload_fields(self.unit, self._residual))
        fields.update({FORMAT_FIELD: widths[FORMAT_FIELD], "first": 1, "last": 1})
        return data.StructLayout(fields)

    def _res_formats(self):
        """The unit's formats whose steps use ``r``."""
        if self._residual == "none":
            return ()
        return tuple(f for f in self.formats if self._residual in format_residuals(f))

    def _nv_presum(self):
        """Whether NVFP4's block terms are pre-added into one (:func:`_nv_place`)."""
        return _nv_place(self._residual, self.formats) != "blocks"

    def _s1p2(self):
        return any(FORMATS[f].elem_type == S1P2_TYPE for f in self.formats)

    def _products(self, m, p, index):
        """The :class:`ElementProducts` of the step (of slice ``index``)."""
        residual = self._residual
        m.submodules.products = ep = ElementProducts(
            self.formats, residual, dict(payload_fields(self.unit, residual)), self._lanes)
        m.d.comb += [ep.a.eq(p.a), ep.w.eq(p.w), ep.code.eq(p[FORMAT_FIELD])]
        if self.ii > 1:
            m.d.comb += ep.index.eq(index)
        if ep.has_residual:
            m.d.comb += ep.r.eq(p.r)
        return ep

    def _front(self, m, p, index, out):
        ep = self._products(m, p, index)
        m.d.comb += [out.first.eq(p.first), out.last.eq(p.last)]
        if self.ii == 1:
            prods = [ep.p[i] for i in range(64)]
            s16 = [adder_tree(prods[16 * j:16 * j + 16], m=m, name=f"s16_{j}")
                   for j in range(4)]
            r16 = None
            if ep.has_residual:
                rprods = [ep.q[j] for j in range(32)]
                r16 = [adder_tree(rprods[16 * b:16 * b + 16], m=m, name=f"r16_{b}")
                       for b in range(2)]
            self._terms_from(m, s16, r16, lambda f, at: p[f][at:at + 8], p[FORMAT_FIELD],
                             out)
            return {}
        parts = {}
        sources = {"s16": ep.p, "r16": ep.q if ep.has_residual else None}
        for prefix, blocks, per in self._blocks():
            per_tree = min(per, 16)
            items = [sources[prefix][i] for i in range(per)]
            trees = [adder_tree(items[per_tree * t:per_tree * t + per_tree], m=m,
                                name=f"{prefix}_tree{t}") for t in range(per // per_tree)]
            for b in range(blocks):
                first, last, tree = _placement(b, 16, per)
                name = f"{prefix}_{b}"
                if first == self.ii - 1:
                    m.d.comb += out[name].eq(trees[tree])
                    continue
                tests = ([index == first] if first == last else
                         ([index >= first] if first > 0 else [])
                         + ([index <= last] if last < self.ii - 1 else []))
                sel = tests[0] if len(tests) == 1 else tests[0] & tests[1]
                parts[name] = Mux(sel, trees[tree], 0)
        for f, at in self._scale_bytes():
            m.d.comb += out[f"{f}_s{at}"].eq(p[f][at:at + 8])
        m.d.comb += out[FORMAT_FIELD].eq(p[FORMAT_FIELD])
        return parts

    def _form_terms(self, m, p, out):
        """The ``terms`` stage (fewer than 64 lanes): the terms from the block sums."""
        s16 = [p[f"s16_{j}"] for j in range(4)]
        r16 = [p[f"r16_{b}"] for b in range(2)] if self._res_formats() else None
        self._terms_from(m, s16, r16, lambda f, at: p[f"{f}_s{at}"], p[FORMAT_FIELD], out)
        m.d.comb += [out.first.eq(p.first), out.last.eq(p.last)]

    def _terms_from(self, m, s16, r16, code_at, code, out):
        """Each format's terms from the 16-element block sums ``s16`` (and ``r16``), the
        scale codes (``code_at(field, bit)``) and the format code: the 32- and 64-element
        sums, each format's scale path, the slots' selection and the NaN flag."""
        formats, residual = self.formats, self._residual
        is_fmt = {f: Signal(name=f"is_{f}") for f in formats}
        for k, f in enumerate(formats):
            m.d.comb += is_fmt[f].eq(code == k if k < len(formats) - 1 else code >= k)
        hif4 = step_layout("hif4")
        s32 = [adder_tree(s16[2 * b:2 * b + 2], m=m, name=f"s32_{b}") for b in range(2)]
        s64 = adder_tree(s32, m=m, name="s64")

        own, nan = {}, {}
        if "hif4" in formats:
            m.submodules.hif4_scale = sc = ScalePair()
            m.submodules.hif4_term = tm = TermFormer(len(s64))
            at = hif4.spec.fields["scale"].offset
            m.d.comb += [sc.a.eq(code_at("a", at)), sc.w.eq(code_at("w", at)),
                         tm.sum.eq(s64), tm.mant.eq(sc.mant)]
            own["hif4"] = [(tm.sig, sc.exp)]
            nan["hif4"] = [sc.nan]
        if "mxfp4" in formats:
            sc_at = step_layout("mxfp4").positions("scale")
            own["mxfp4"], nan["mxfp4"] = [], []
            for b in range(2):
                m.submodules[f"mx_scale{b}"] = sp = E8M0ScalePair()
                m.d.comb += [sp.sa.eq(code_at("a", sc_at[b])), sp.sw.eq(code_at("w", sc_at[b]))]
                own["mxfp4"].append((s32[b], sp.exp))
                nan["mxfp4"].append(sp.nan)
        if "nvfp4" in formats:
            sc_at = step_layout("nvfp4").positions("scale")
            blocks, nan["nvfp4"] = [], []
            for j in range(4):
                m.submodules[f"nv_scale{j}"] = sp = UE4M3ScalePair()
                m.d.comb += [sp.sa.eq(code_at("a", sc_at[j])), sp.sw.eq(code_at("w", sc_at[j]))]
                bsum = Signal(signed(dot_sum_bits(16)), name=f"nv_sum{j}")
                m.d.comb += bsum.eq(s16[j])         # exact: E2M1 block sums fit 13 bits
                term = Signal(signed(BLOCK_TERM_BITS), name=f"nv_bterm{j}")
                m.d.comb += term.eq(bsum * sp.sig)
                blocks.append((term, sp.shift))
                nan["nvfp4"].append(sp.nan)
            if self._nv_presum():
                aligned = []
                for j, (term, shift) in enumerate(blocks):
                    al = Signal(signed(TERM_BITS), name=f"nv_aligned{j}")
                    m.d.comb += al.eq(term << shift)
                    aligned.append(al)
                total = Signal(signed(TERM_BITS), name="nv_t")
                m.d.comb += total.eq(sum(aligned))
                own["nvfp4"] = [(total, Const(0, 1))]
            else:                       # field max(ea, 1) + max(ew, 1) = shift + 2
                own["nvfp4"] = [(term, shift + 2) for term, shift in blocks]

        res = self._res_formats()
        if res:
            r32 = adder_tree(r16, m=m, name="r32")
            if "hif4" in res:
                m.submodules.hif4_rscale = sr = ScalePair()
                m.submodules.hif4_rterm = tr = TermFormer(len(r32))
                at = residual_layout("hif4", residual).spec.fields["scale"].offset
                wat = hif4.spec.fields["scale"].offset
                m.d.comb += [sr.a.eq(code_at("r", at)), sr.w.eq(code_at("w", wat)),
                             tr.sum.eq(r32), tr.mant.eq(sr.mant)]
                own["hif4"].append((tr.sig, sr.exp))
                nan["hif4"].append(sr.nan)
            if "mxfp4" in res:
                rat = residual_layout("mxfp4", residual).positions("scale")
                wat = step_layout("mxfp4").positions("scale")
                for b in range(2):
                    m.submodules[f"mx_rscale{b}"] = sp = E8M0ScalePair()
                    m.d.comb += [sp.sa.eq(code_at("r", rat[b])), sp.sw.eq(code_at("w", wat[b]))]
                    own["mxfp4"].append((r16[b], sp.exp))
                    nan["mxfp4"].append(sp.nan)

        terms, offsets = slot_terms(formats, residual)
        for k, t in enumerate(terms):
            sig, exp = Const(0, signed(t.sig_bits)), Const(0, t.exp_bits)
            for f in reversed(formats):
                if k in offsets[f]:
                    fsig, fexp = own[f][list(offsets[f]).index(k)]
                    sig = Mux(is_fmt[f], fsig, sig)
                    exp = Mux(is_fmt[f], fexp + offsets[f][k], exp)
            m.d.comb += [out[f"{t.name}_sig"].eq(sig), out[f"{t.name}_exp"].eq(exp)]
        step_nan = Const(0, 1)
        for f in formats:
            step_nan = Mux(is_fmt[f], Cat(*nan[f]).any(), step_nan)
        m.d.comb += out.nan.eq(step_nan)

    def _front_parts(self):
        """The front end: :class:`ElementProducts` (of one slice) and the 16-element trees;
        with 64 lanes also what :meth:`_form_parts` counts (:mod:`hwgen.parts`)."""
        lanes = self._lanes
        residual = self._residual
        out = probe(ElementProducts(self.formats, residual,
                                    dict(payload_fields(self.unit, residual)), lanes)).parts()
        for prefix, blocks, per in self._blocks():
            per_tree = min(per, 16)
            out.append(Part("tree", (per_tree, PRODUCT_BITS), per // per_tree))
        if self.ii == 1:
            return out + self._form_parts()
        return out

    def _form_parts(self):
        """What forms the terms from the block sums: the 32- and 64-element adds, each
        format's scale path (HiF4: :class:`hwgen.hif4.ScalePair` and
        :class:`hwgen.hif4.TermFormer`; MXFP4: :class:`hwgen.mxfp4.E8M0ScalePair` per block
        pair; NVFP4: :class:`hwgen.nvfp4.UE4M3ScalePair` and the 13x8-bit block product per
        block, with one slot the 0..28 shifts and their sum), the format decode, each slot's
        selection and the NaN selection (:mod:`hwgen.parts`)."""
        formats = self.formats
        n = len(formats)
        res = self._res_formats()
        out = [Part("add", (_tree_bits(16),), 2), Part("add", (_tree_bits(32),))]
        if res:
            out.append(Part("add", (_tree_bits(16),)))
        scale = {"hif4": lambda sums: probe(ScalePair()).parts()
                 + probe(TermFormer(sums)).parts(),
                 "mxfp4": lambda sums: probe(E8M0ScalePair()).parts()}
        if "hif4" in formats:
            out += scale["hif4"](_tree_bits(64))
            if "hif4" in res:
                out += scale["hif4"](_tree_bits(32))
        if "mxfp4" in formats:
            out += times(scale["mxfp4"](0), 4 if "mxfp4" in res else 2)
        if "nvfp4" in formats:
            product = dot_sum_bits(16) + SCALE_SIG_BITS
            out += [*times(probe(UE4M3ScalePair()).parts(), 4),
                    Part("smulx", (dot_sum_bits(16), SCALE_SIG_BITS + 1), 4)]
            if self._nv_presum():
                out += [Part("wshl", (product, 28 + 1, TERM_BITS), 4),
                        Part("addn", (4, TERM_BITS))]
        out.append(Part("cmp", ((n - 1).bit_length(),), n))
        terms, offsets = slot_terms(formats, self._residual)
        for k, t in enumerate(terms):
            users = [f for f in formats if k in offsets[f]]
            out.append(Part("mux", (len(users) + 1, t.sig_bits + t.exp_bits)))
            out.append(Part("add", (t.exp_bits,), sum(offsets[f][k] != 0 for f in users)))
        out.append(Part("mux", (n, 1)))
        return out


@cache
def unit_class(name):
    """The :class:`MultiDotUnit` subclass of registered multi-format unit ``name``."""
    spec = unit_spec(name)
    if not spec.formats:
        raise ValueError(f"unit {name!r} is not a multi-format unit")
    return type(f"MultiDotUnit_{name}", (MultiDotUnit,), {"unit": name,
                                                          "__module__": __name__})


def __getattr__(name):
    """``hwgen.multi.<unit name>``: the class the registry's ``builder`` of a multi-format
    unit names (``"hwgen.multi:<unit name>"``)."""
    try:
        spec = unit_spec(name)
    except ValueError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    if not spec.formats:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return unit_class(name)
