"""MXFP4 dot-product unit: two 32-element E2M1 blocks with E8M0 scales per step.

Datapath (``docs/formats.md`` sections 3 and 7)
-----------------------------------------------
One step holds 64 elements of each operand as two MXFP4 blocks (block 0 in the low 136
bits). For each block pair ``b``:

1. element decode and products: E2M1 x E2M1 is an exact signed 9-bit integer in units of 1/4
   (:mod:`hwgen.e2m1`: a 2x2-bit multiplier and a 0..4 shift per product);
2. block reduction: the 32 products share both block scales, so they add as integers in an
   adder tree, exact in 14 bits;
3. scale path (:class:`E8M0ScalePair`): the two E8M0 codes add to the exponent field
   ``sa + sw`` of that sum's unit ``2**(sa + sw - 256)``; code 255 makes the step NaN.

The two block sums are then handed to the shared exact accumulator (:mod:`hwgen.accum`) as
two ``(significand, exponent)`` terms: it aligns them by their exponents and adds them to
the FP32 accumulator exactly, with one RNE rounding per step. With the optional 2:4 residual
(``docs/mxfp4_residual.md``) two more terms join: 16 kept residual elements per block, each
multiplied by the weight element its 2-bit position selects (a 4:1 multiplexer), exact in 13
bits, at ``2**(sr + sw - 256)``. A ``dense`` residual (a second full MXFP4 step, as in
``sim.dot``) adds two 14-bit terms the same way.

Compared with MXDOTP (pulp-platform/cvfpu, ``fpnew_mxdotp_multi``): MXDOTP takes one block
slice (a few elements sharing one scale pair) per instruction together with an FP32 addend;
it shifts every element product into a fixed-point window, sums the window in an adder tree,
then aligns the addend to that window (bits shifted out become a sticky bit), normalises and
rounds. Here a whole 64-element step, two blocks with two scale pairs, costs one rounding:
the products of a block are small integers on one grid, so each block reduces in a plain
integer adder tree, and only the block sums are aligned, exactly, against the accumulator
in the shared window. The result is the correctly rounded exact sum for any scale spread;
the price is the window width, which the E8M0 range sets: block terms span ``2**-256`` to
``2**265``, so the MXFP4 window is 525 bits (526 with a residual) against about 280 for HiF4
and NVFP4.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hif4spec import FORMATS, RESIDUAL24_MXFP4

from .accum import TermSpec
from .e2m1 import dot_sum_bits, e2m1_product_expr
from .parts import Part, probe
from .unit import DotUnit, adder_tree

__all__ = ["E8M0ScalePair", "MXFP4DotUnit", "SCALE_EXP_BITS", "BLOCK", "BLOCK_BITS",
           "term_specs"]

#: Elements per MXFP4 block (32).
BLOCK = FORMATS["mxfp4"].block
#: Packed bits per MXFP4 block (136): 32 x 4-bit elements, then the E8M0 code.
BLOCK_BITS = FORMATS["mxfp4"].block_bits
#: E8M0 code of a NaN scale (255).
NAN_SCALE = FORMATS["mxfp4"].nan_scale_code
#: Width of a block-sum exponent field ``sa + sw`` (bias 256: the sum's unit is
#: ``2**(sa + sw - 256)``; at most 508 for finite codes).
SCALE_EXP_BITS = 9
#: Bias of the exponent field.
SCALE_EXP_BIAS = 256


class E8M0ScalePair(wiring.Component):
    """Scale path of one MXFP4 block pair: two E8M0 codes to one exponent and a NaN flag.

    Combinational: one 8-bit adder and two NaN compares. The block's exact product sum is
    in units of 1/4 of the product of the two scales, ``2**(sa-127) * 2**(sw-127) / 4 =
    2**(exp - 256)`` with ``exp = sa + sw``, the field the shared accumulator takes (bias
    256). ``nan`` is set when either code is 255.

    Members
    -------
    sa : In(8)
        E8M0 code of the activation (or residual) block.
    sw : In(8)
        E8M0 code of the weight block.
    exp : Out(9)
        ``sa + sw``: the block sum's unit is ``2**(exp - 256)``.
    nan : Out(1)
        Either scale is NaN (code 255).
    """

    sa: In(8)
    sw: In(8)
    exp: Out(SCALE_EXP_BITS)
    nan: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.exp.eq(self.sa + self.sw),
            self.nan.eq((self.sa == NAN_SCALE) | (self.sw == NAN_SCALE)),
        ]
        return m

    def parts(self):
        """The 8-bit exponent add and two NaN compares (:mod:`hwgen.parts`)."""
        return [Part("add", (8,)), Part("cmp", (8,), 2)]


def term_specs(residual):
    """The exact terms the MXFP4 front end hands to :class:`hwgen.accum.Accumulator`.

    ``b0``/``b1``: block sums (14 signed bits) at exponent ``sa + sw - 256``; with a
    residual ``r0``/``r1``: residual block sums (13 signed bits for 2:4, 14 for dense) at
    ``rs + sw - 256``. The exponent field is the 9-bit code sum, at most 508 for finite
    scales (a NaN step's result is overridden by the accumulator).
    """
    spec = (SCALE_EXP_BITS, SCALE_EXP_BIAS, 2 * 254)
    terms = [TermSpec(f"b{b}", dot_sum_bits(BLOCK), *spec) for b in range(2)]
    if residual != "none":
        kept = RESIDUAL24_MXFP4.kept if residual == "2:4" else BLOCK
        terms += [TermSpec(f"r{b}", dot_sum_bits(kept), *spec) for b in range(2)]
    return terms


def _placement(b, per_block, elems):
    """Slices ``(first, last)`` and tree index of block ``b`` when ``elems`` items are handled
    per slice by trees of ``min(elems, per_block)`` items."""
    first = (b * per_block) // elems
    last = ((b + 1) * per_block - 1) // elems
    tree = (b * per_block % elems) // per_block if elems >= per_block else 0
    return first, last, tree


def route_block_sums(m, op, index, slices, trees, prefix, per_block, elems):
    """Drive or collect the block-sum significands ``<prefix><b>_sig`` for blocks 0 and 1.

    A block handled entirely in the last slice drives its field directly (no register);
    any other block is a sequencer sum field whose contribution is its tree's sum during
    its slices and 0 otherwise. The slice test compares ``index`` only against bounds that
    can fail (``0 <= index <= slices - 1`` always holds), so the Verilog has no constant
    comparison. Returns the sum-field contributions.
    """
    parts = {}
    for b in range(2):
        first, last, tree = _placement(b, per_block, elems)
        name = f"{prefix}{b}_sig"
        if first == slices - 1:
            m.d.comb += op[name].eq(trees[tree])
            continue
        if last == first:
            tests = [index == first]
        else:
            tests = ([index >= first] if first > 0 else []) + \
                    ([index <= last] if last < slices - 1 else [])
        if not tests:
            parts[name] = trees[tree]
        else:
            sel = tests[0] if len(tests) == 1 else tests[0] & tests[1]
            parts[name] = Mux(sel, trees[tree], 0)
    return parts


def sum_field_names(prefix, per_block, elems, slices):
    """Names of the block-sum fields that need a partial-sum register."""
    return [f"{prefix}{b}_sig" for b in range(2)
            if _placement(b, per_block, elems)[0] != slices - 1]


class MXFP4DotUnit(DotUnit):
    """MXFP4 dot-product unit: one 64-element step per ``64 // lanes`` cycles into FP32.

    Parameters and members as :class:`hwgen.unit.DotUnit`: ``a``, ``w`` are two MXFP4
    blocks each (block 0 in the low 136 bits), ``r`` two packed 104-bit 2:4 residual blocks
    (``"2:4"``, ``docs/mxfp4_residual.md``) or a full MXFP4 step (``"dense"``, 272 bits).
    Timing: :mod:`hwgen.stream`.

    Datapath per slice (``lanes`` element pairs, ``lanes // 2`` kept residual elements):
    ``lanes // 32`` adder trees of 32 exact E2M1 products (one tree of 16 when ``lanes`` is
    16), each routed to the block sum it belongs to; block sums that span earlier slices
    are sequencer sum fields (a partial-sum register each), a block handled only in the
    last slice drives its term directly. Exponents ``sa + sw`` and the NaN flag come from
    the held payload. The accumulator takes two terms (four with a residual).
    """

    unit = "mxfp4"

    def _terms(self):
        return term_specs(self._residual)

    def _kept(self):
        """Residual elements handled per slice and residual elements per block."""
        if self._residual == "2:4":
            return self._lanes // 2, RESIDUAL24_MXFP4.kept
        return self._lanes, BLOCK

    def _sum_fields(self):
        n = self.ii
        names = sum_field_names("b", BLOCK, self._lanes, n)
        if self._residual != "none":
            names += sum_field_names("r", self._kept()[1], self._kept()[0], n)
        return names

    def _front(self, m, ip, index, op):
        n, lanes, residual = self.ii, self._lanes, self._residual

        def flat(operand, field):
            return Cat(*[operand[b][field].as_value() for b in range(2)])

        def sliced(value, width):
            return value.word_select(index, width) if n > 1 else value

        def trees_of(prefix, x_sl, y_of, count, per_block):
            per_tree = min(count, per_block)
            trees = []
            for t in range(count // per_tree):
                prods = [e2m1_product_expr(m, x_sl[4 * k:4 * k + 4], y_of(k),
                                           name=f"{prefix}{k}")
                         for k in range(t * per_tree, (t + 1) * per_tree)]
                trees.append(adder_tree(prods, m=m, name=f"{prefix}tree{t}"))
            return trees

        a_sl = sliced(flat(ip.a, "elem"), 4 * lanes)
        w_sl = sliced(flat(ip.w, "elem"), 4 * lanes)
        trees = trees_of("p", a_sl, lambda k: w_sl[4 * k:4 * k + 4], lanes, BLOCK)
        parts = route_block_sums(m, op, index, n, trees, "b", BLOCK, lanes)
        if residual != "none":
            count, per_block = self._kept()
            r_sl = sliced(flat(ip.r, "elem"), 4 * count)
            if residual == "2:4":
                p_sl = sliced(flat(ip.r, "pos"), 2 * count)

                def w_of(j):                              # 4:1 select in micro-group j // 2
                    wsel = Signal(4, name=f"wsel{j}")
                    group = w_sl[16 * (j // 2):16 * (j // 2) + 16]
                    m.d.comb += wsel.eq(group.word_select(p_sl[2 * j:2 * j + 2], 4))
                    return wsel
            else:
                def w_of(j):
                    return w_sl[4 * j:4 * j + 4]
            rtrees = trees_of("q", r_sl, w_of, count, per_block)
            parts.update(route_block_sums(m, op, index, n, rtrees, "r", per_block, count))
        nan = []
        pairs = [("b", ip.a)] + ([("r", ip.r)] if residual != "none" else [])
        for b in range(2):
            for prefix, x in pairs:
                m.submodules[f"scale_{prefix}{b}"] = sp = E8M0ScalePair()
                m.d.comb += [sp.sa.eq(x[b].scale), sp.sw.eq(ip.w[b].scale),
                             op[f"{prefix}{b}_exp"].eq(sp.exp)]
                nan.append(sp.nan)
        m.d.comb += [op.nan.eq(Cat(*nan).any()), op.first.eq(ip.first), op.last.eq(ip.last)]
        return parts

    def _front_parts(self):
        """One slice of the front end: the E2M1 block dots (an adder tree of exact products
        each) and, for 2:4, the 4:1 weight selection of every kept residual element; an
        :class:`E8M0ScalePair` per block pair, whose NaN compares of the weight codes the
        residual pairs share (one compare per scale code); with several slices, the selection
        of each operand's slice."""
        lanes, n, residual = self._lanes, self.ii, self._residual
        per_tree = min(lanes, BLOCK)
        out = [Part("e2m1dot", (per_tree,), lanes // per_tree)]
        operands = 2
        if residual != "none":
            operands = 3
            count, per_block = self._kept()
            if residual == "2:4":
                out.append(Part("mux", (4, 4), count))
            per_rtree = min(count, per_block)
            out.append(Part("e2m1dot", (per_rtree,), count // per_rtree))
        pairs = 2 * (operands - 1)
        out += [Part(p.family, p.params, p.count * pairs)
                for p in probe(E8M0ScalePair()).parts() if p.family != "cmp"]
        out.append(Part("cmp", (8,), 2 * operands))
        if n > 1:
            out.append(Part("mux", (n, 4 * lanes), 2))
            if residual != "none":
                width = 4 * count + (2 * count if residual == "2:4" else 0)
                out.append(Part("mux", (n, width)))
        return out
