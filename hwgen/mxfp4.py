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

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import MXFP4_BLOCK
from .e2m1 import E2M1DotUnitBase, adder_tree, dot_sum_bits, e2m1_product_expr

__all__ = ["E8M0ScalePair", "MXFP4DotUnit", "SCALE_EXP_BITS", "BLOCK", "BLOCK_BITS",
           "BLOCK_LAYOUT", "STEP_LAYOUT", "R24_BLOCK_LAYOUT", "R24_STEP_LAYOUT", "term_specs"]

#: Elements per MXFP4 block.
BLOCK = 32
#: Packed bits per MXFP4 block: 32 x 4-bit elements, then the E8M0 code at [128, 136).
BLOCK_BITS = 136
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
            self.nan.eq((self.sa == 0xFF) | (self.sw == 0xFF)),
        ]
        return m


# ---------------------------------------------------------------------------------------
# Packed layouts (spec section 3; docs/mxfp4_residual.md)

#: One MXFP4 block: 32 E2M1 codes (element i at bits [4i, 4i+4)), E8M0 code at [128, 136).
BLOCK_LAYOUT = MXFP4_BLOCK
#: One step of one operand: two blocks, block 0 in the low 136 bits (272 bits).
STEP_LAYOUT = data.ArrayLayout(BLOCK_LAYOUT, 2)
#: One packed 2:4 residual block: 16 kept E2M1 codes, 16 2-bit positions, E8M0 (104 bits).
R24_BLOCK_LAYOUT = data.StructLayout({"elem": data.ArrayLayout(unsigned(4), 16),
                                      "pos": data.ArrayLayout(unsigned(2), 16),
                                      "scale": unsigned(8)})
#: The residual input of one step: two packed residual blocks, block 0 low (208 bits).
R24_STEP_LAYOUT = data.ArrayLayout(R24_BLOCK_LAYOUT, 2)


def term_specs(residual):
    """The exact terms the MXFP4 front end hands to :class:`hwgen.accum.Accumulator`.

    ``b0``/``b1``: block sums (14 signed bits) at exponent ``sa + sw - 256``; with a
    residual ``r0``/``r1``: residual block sums (13 signed bits for 2:4, 14 for dense) at
    ``rs + sw - 256``. The exponent field is the 9-bit code sum, at most 508 for finite
    scales (a NaN step's result is overridden by the accumulator).
    """
    from .accum import TermSpec

    spec = (SCALE_EXP_BITS, SCALE_EXP_BIAS, 2 * 254)
    terms = [TermSpec(f"b{b}", dot_sum_bits(BLOCK), *spec) for b in range(2)]
    if residual != "none":
        kept = 16 if residual == "2:4" else BLOCK
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
    its slices and 0 otherwise. Returns the sum-field contributions.
    """
    parts = {}
    for b in range(2):
        first, last, tree = _placement(b, per_block, elems)
        name = f"{prefix}{b}_sig"
        if first == slices - 1:
            m.d.comb += op[name].eq(trees[tree])
        else:
            sel = (index >= first) & (index <= last) if last > first else index == first
            parts[name] = Mux(sel, trees[tree], 0)
    return parts


def sum_field_names(prefix, per_block, elems, slices):
    """Names of the block-sum fields that need a partial-sum register."""
    return [f"{prefix}{b}_sig" for b in range(2)
            if _placement(b, per_block, elems)[0] != slices - 1]


class MXFP4DotUnit(E2M1DotUnitBase):
    """MXFP4 dot-product unit: one 64-element step per ``64 // lanes`` cycles into FP32.

    Parameters (keyword-only)
    -------------------------
    residual : str
        ``"none"``, ``"2:4"`` (two packed 104-bit residual blocks ``r``,
        ``docs/mxfp4_residual.md``) or ``"dense"`` (a full MXFP4 step ``r``, 272 bits).
    stages : int
        Pipeline registers on the path from ``i`` to ``o``, 1..4: the accumulator register;
        ``>= 2`` a register on the terms; ``>= 3`` a register after the front end; ``4`` a
        register on the input payload.
    lanes : int
        16, 32 or 64 element products per cycle; a step takes ``64 // lanes`` cycles.

    Members
    -------
    i : In(stream.Signature(payload_layout))
        Steps: ``a``, ``w`` (two MXFP4 blocks each, block 0 in the low 136 bits), ``r`` (if a
        residual), ``first``, ``last``.
    o : Out(stream.Signature(32))
        The FP32 accumulator word after each ``last`` step.

    Datapath per slice (``lanes`` element pairs, ``lanes // 2`` kept residual elements):
    ``lanes // 32`` adder trees of 32 exact E2M1 products (one tree of 16 when ``lanes`` is
    16), each routed to the block sum it belongs to; block sums that span earlier slices
    are sequencer sum fields (a partial-sum register each), a block handled only in the
    last slice drives its term directly. Exponents ``sa + sw`` and the NaN flag come from
    the held payload. The accumulator takes two terms (four with a residual).

    Timing (exact; also in the manifest)
    ------------------------------------
    The same as :class:`hwgen.hif4.HiF4DotUnit`: with ``n = 64 // lanes`` the input accepts
    a step at most every ``n`` cycles; for ``stages <= 3`` ``i.ready`` is high only in the
    last of the ``n`` cycles a presented step spends in the sequencer (and only when the
    next stage can take it); with ``stages == 4`` an input register takes the step
    (``i.ready = !valid | next ready``). If the input transfer of a ``last`` step happens in
    cycle ``c`` and the output is always ready, ``o.valid`` is high in cycle
    ``c + latency``, ``latency = stages`` for ``stages <= 3`` and ``stages - 1 + n`` for
    ``stages == 4``. With ``o.ready`` low while ``o.valid``, the accumulator takes no step
    and backpressure propagates through the registers (``ready = !valid | next ready``).
    """

    unit = "mxfp4"
    RESIDUALS = ("none", "2:4", "dense")

    def _payload_fields(self):
        fields = {"a": STEP_LAYOUT, "w": STEP_LAYOUT}
        if self._residual == "2:4":
            fields["r"] = R24_STEP_LAYOUT
        elif self._residual == "dense":
            fields["r"] = STEP_LAYOUT
        return fields

    def _terms(self):
        return term_specs(self._residual)

    def _kept(self):
        """Residual elements handled per slice and residual elements per block."""
        if self._residual == "2:4":
            return self._lanes // 2, 16
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
                trees.append(adder_tree(m, prods, name=f"{prefix}tree{t}"))
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
