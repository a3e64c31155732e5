"""MXFP4 dot-product unit: two 32-element E2M1 blocks with E8M0 scales per step.

Datapath (``docs/formats.md`` sections 3 and 7)
-----------------------------------------------
One step holds 64 elements of each operand as two MXFP4 blocks (block 0 in the low 136
bits). For each block pair ``b``:

1. element decode and products: E2M1 x E2M1 is an exact signed 9-bit integer in units of 1/4
   (:mod:`hwgen.e2m1`: a 2x2-bit multiplier and a 0..4 shift per product, no alignment);
2. block reduction: the 32 products share both block scales, so they add as integers in an
   adder tree, exact in 14 bits;
3. scale path: the two E8M0 codes add to the exponent of that sum's unit,
   ``ea + ew - 254 - 2`` (-256..252); either code 255 makes the step NaN.

The two block sums are then handed to the shared exact accumulator
(:mod:`hwgen.accum`) as two ``(significand, exponent)`` terms: it aligns them by their
exponents and adds them to the FP32 accumulator exactly, with one RNE rounding per step.
With the optional 2:4 residual (``docs/mxfp4_residual.md``) two more terms join: 16 kept
residual elements per block, each multiplied by the weight element its 2-bit position
selects, exact in 13 bits, at exponent ``er + ew - 256``.

Compared with MXDOTP (pulp-platform/cvfpu, ``fpnew_mxdotp_multi``): MXDOTP takes one
block slice per instruction with its two scales and an FP32 addend, shifts every element
product by its own exponent into one fixed-point window, adds the window with the shifted
addend and rounds. Here the element products are already integers on one grid, so the
per-product shifters disappear (a 2x2 multiplier and a small shift per product); only the
two (four with residual) block sums are aligned, and they are aligned exactly, together with
the accumulator, so a step of 64 elements costs one rounding whatever the scale spread.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .e2m1 import adder_tree, dot_sum_bits, e2m1_product_expr

__all__ = ["E8M0ScalePair", "SCALE_EXP_BITS", "BLOCK", "BLOCK_BITS"]

#: Elements per MXFP4 block.
BLOCK = 32
#: Packed bits per MXFP4 block: 32 x 4-bit elements, then the E8M0 code at [128, 136).
BLOCK_BITS = 136
#: Signed width of a block-sum exponent ``ea + ew - 256`` (-256..252).
SCALE_EXP_BITS = 10


class E8M0ScalePair(wiring.Component):
    """Scale path of one MXFP4 block pair: two E8M0 codes to one exponent and a NaN flag.

    Combinational. ``exp = ea + ew - 256`` is the exponent of one unit of the block's exact
    product sum (the sum is in units of 1/4 of the product of the two scales), so the block's
    value is ``sum * 2**exp``. ``nan`` is set when either code is 255.

    Members
    -------
    sa : In(8)
        E8M0 code of the activation block.
    sw : In(8)
        E8M0 code of the weight block.
    exp : Out(signed(10))
        Exponent of the block sum's unit, -256..252 for non-NaN codes.
    nan : Out(1)
        Either scale is NaN (code 255).
    """

    sa: In(8)
    sw: In(8)
    exp: Out(signed(SCALE_EXP_BITS))
    nan: Out(1)

    def elaborate(self, platform):
        m = Module()
        total = Signal(unsigned(9))
        m.d.comb += [
            total.eq(self.sa + self.sw),
            self.exp.eq(total - 256),   # 10-bit two's complement; the range fits
            self.nan.eq((self.sa == 0xFF) | (self.sw == 0xFF)),
        ]
        return m


# ---------------------------------------------------------------------------------------
# Packed layouts (spec section 3; docs/mxfp4_residual.md)

#: One MXFP4 block: 32 E2M1 codes (element i at bits [4i, 4i+4)), E8M0 code at [128, 136).
BLOCK_LAYOUT = data.StructLayout({"elem": data.ArrayLayout(unsigned(4), BLOCK),
                                  "scale": unsigned(8)})
#: One step of one operand: two blocks, block 0 in the low 136 bits (272 bits).
STEP_LAYOUT = data.ArrayLayout(BLOCK_LAYOUT, 2)
#: One packed 2:4 residual block: 16 kept E2M1 codes, 16 2-bit positions, E8M0 (104 bits).
R24_BLOCK_LAYOUT = data.StructLayout({"elem": data.ArrayLayout(unsigned(4), 16),
                                      "pos": data.ArrayLayout(unsigned(2), 16),
                                      "scale": unsigned(8)})
#: The residual input of one step: two packed residual blocks, block 0 low (208 bits).
R24_STEP_LAYOUT = data.ArrayLayout(R24_BLOCK_LAYOUT, 2)


def input_layout(residual):
    """Payload of the unit's input stream: ``a``, ``w``, ``r`` (2:4 only), ``first``, ``last``."""
    fields = {"a": STEP_LAYOUT, "w": STEP_LAYOUT}
    if residual == "2:4":
        fields["r"] = R24_STEP_LAYOUT
    fields.update(first=unsigned(1), last=unsigned(1))
    return data.StructLayout(fields)


def term_specs(residual):
    """The exact terms the MXFP4 front end hands to :class:`hwgen.accum.Accumulator`.

    ``b0``/``b1``: block sums (14 signed bits) at exponent ``sa + sw - 256``; with the 2:4
    residual ``r0``/``r1``: residual block sums (13 signed bits) at ``rs + sw - 256``. The
    exponent field is the 9-bit code sum, at most 508 for finite scales (NaN steps are
    overridden by the accumulator).
    """
    from .accum import TermSpec

    terms = [TermSpec(f"b{b}", dot_sum_bits(BLOCK), 9, 256, 508) for b in range(2)]
    if residual == "2:4":
        terms += [TermSpec(f"r{b}", dot_sum_bits(16), 9, 256, 508) for b in range(2)]
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


def front_end(*, lanes, residual):
    """The MXFP4 front end as a :class:`hwgen.stream.Sequencer` stage.

    Each cycle handles ``lanes`` element pairs (and ``lanes / 2`` kept residual elements):
    ``lanes // 32`` adder trees of 32 products (one tree of 16 products when ``lanes`` is
    16), each tree's sum routed to the block it belongs to in that slice. Block sums that
    span earlier slices are sequencer sum fields (one partial-sum register each); a block
    handled entirely in the last slice drives its term directly. Exponents and the NaN flag
    come from the held input payload (its scales are stable for the whole step).

    Returns
    -------
    (Sequencer, list of TermSpec)
    """
    from .accum import accum_layout
    from .stream import Sequencer

    slices = 64 // lanes
    terms = term_specs(residual)
    kept = lanes // 2

    def build(m, ip, index, op):
        flat_a = Cat(*[ip.a[b].elem.as_value() for b in range(2)])
        flat_w = Cat(*[ip.w[b].elem.as_value() for b in range(2)])
        a_sl = flat_a.word_select(index, 4 * lanes) if slices > 1 else flat_a
        w_sl = flat_w.word_select(index, 4 * lanes) if slices > 1 else flat_w
        per_tree = min(lanes, BLOCK)
        trees = []
        for t in range(lanes // per_tree):
            prods = [e2m1_product_expr(m, a_sl[4 * k:4 * k + 4], w_sl[4 * k:4 * k + 4],
                                       name=f"p{k}")
                     for k in range(t * per_tree, (t + 1) * per_tree)]
            trees.append(adder_tree(m, prods, name=f"tree{t}"))
        parts = route_block_sums(m, op, index, slices, trees, "b", BLOCK, lanes)
        if residual == "2:4":
            flat_r = Cat(*[ip.r[b].elem.as_value() for b in range(2)])
            flat_p = Cat(*[ip.r[b].pos.as_value() for b in range(2)])
            r_sl = flat_r.word_select(index, 4 * kept) if slices > 1 else flat_r
            p_sl = flat_p.word_select(index, 2 * kept) if slices > 1 else flat_p
            per_rtree = min(kept, 16)
            rtrees = []
            for t in range(kept // per_rtree):
                prods = []
                for j in range(t * per_rtree, (t + 1) * per_rtree):
                    group = w_sl[16 * (j // 2):16 * (j // 2) + 16]   # its micro-group
                    wsel = Signal(4, name=f"wsel{j}")
                    m.d.comb += wsel.eq(group.word_select(p_sl[2 * j:2 * j + 2], 4))
                    prods.append(e2m1_product_expr(m, r_sl[4 * j:4 * j + 4], wsel,
                                                   name=f"q{j}"))
                rtrees.append(adder_tree(m, prods, name=f"rtree{t}"))
            parts.update(route_block_sums(m, op, index, slices, rtrees, "r", 16, kept))
        nan = []
        for b in range(2):
            m.d.comb += op[f"b{b}_exp"].eq(ip.a[b].scale + ip.w[b].scale)
            nan += [ip.a[b].scale == 0xFF, ip.w[b].scale == 0xFF]
            if residual == "2:4":
                m.d.comb += op[f"r{b}_exp"].eq(ip.r[b].scale + ip.w[b].scale)
                nan.append(ip.r[b].scale == 0xFF)
        m.d.comb += [op.nan.eq(Cat(*nan).any()), op.first.eq(ip.first), op.last.eq(ip.last)]
        return parts

    names = sum_field_names("b", BLOCK, lanes, slices)
    if residual == "2:4":
        names += sum_field_names("r", 16, kept, slices)
    seq = Sequencer(input_layout(residual), accum_layout(terms), slices=slices,
                    sum_fields=names, build=build, name="mxfp4_front_end")
    return seq, terms


RESIDUALS = ("none", "2:4")
LANES = (16, 32, 64)


def check_params(unit, residuals, residual, stages, lanes):
    """Validate the keyword parameters shared by the MXFP4 and NVFP4 units."""
    if residual not in residuals:
        extra = "; NVFP4 units take no residual" if unit == "nvfp4" else ""
        raise ValueError(f"Residual of the {unit} unit must be one of "
                         f"{', '.join(map(repr, residuals))}, not {residual!r}{extra}")
    if lanes not in LANES:
        raise ValueError(f"Lane count must be one of 16, 32, 64, not {lanes!r}")
    if not isinstance(stages, int) or isinstance(stages, bool) or stages < 1:
        raise ValueError(f"Stage count must be an integer of at least 1, not {stages!r}")


class MXFP4Dot(wiring.Component):
    """MXFP4 dot-product unit: one 64-element step per ``64 / lanes`` cycles, FP32 accumulator.

    Parameters
    ----------
    residual : {"none", "2:4"}
        With "2:4", the input carries a packed 2:4 MXFP4 residual (docs/mxfp4_residual.md).
    stages : int
        Register stages of the pipeline (>= 1): the accumulator register plus ``stages - 1``
        pipeline registers between the front end and the accumulator.
    lanes : {16, 32, 64}
        Element pairs handled per cycle.

    Members
    -------
    i : In(stream.Signature(input_layout(residual)))
        One step per transfer: ``a``, ``w`` (two 136-bit MXFP4 blocks each, block 0 low),
        ``r`` (two 104-bit packed residual blocks, with "2:4"), ``first``, ``last``.
    o : Out(stream.Signature(32))
        The FP32 accumulator word after each ``last`` step.
    """

    def __init__(self, *, residual="none", stages=2, lanes=64):
        check_params("mxfp4", RESIDUALS, residual, stages, lanes)
        self._residual = residual
        self._stages = stages
        self._lanes = lanes
        super().__init__({"i": In(stream.Signature(input_layout(residual))),
                          "o": Out(stream.Signature(32))})

    residual = property(lambda self: self._residual)
    stages = property(lambda self: self._stages)
    lanes = property(lambda self: self._lanes)

    @property
    def ii(self):
        """Initiation interval: cycles per step."""
        return 64 // self._lanes

    def pipeline(self):
        """The chain of stream stages, front end first, accumulator last."""
        from .accum import Accumulator, accum_layout
        from .stream import Register

        seq, terms = front_end(lanes=self._lanes, residual=self._residual)
        stages = [("front_end", seq)]
        stages += [(f"pipe{k}", Register(accum_layout(terms))) for k in range(self._stages - 1)]
        stages.append(("accum", Accumulator(terms)))
        return stages

    def elaborate(self, platform):
        from .stream import chain

        m = Module()
        first, last = chain(m, self.pipeline())
        wiring.connect(m, wiring.flipped(self.i), first.i)
        wiring.connect(m, last.o, wiring.flipped(self.o))
        return m
