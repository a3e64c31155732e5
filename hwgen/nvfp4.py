"""NVFP4 dot-product unit: four 16-element E2M1 blocks with UE4M3 scales per step.

Datapath (``docs/formats.md`` sections 4 and 7)
-----------------------------------------------
One step holds 64 elements of each operand as four NVFP4 blocks of 72 bits (block 0 in the
low bits). For each block pair ``b``:

1. element decode and products: E2M1 x E2M1, exact signed 9-bit integers in units of 1/4
   (:mod:`hwgen.e2m1`);
2. block reduction: 16 products on one grid add exactly in a 13-bit adder tree;
3. scale path: each UE4M3 code (bit 7 ignored) is a 4-bit significand ``{e != 0, m}`` times
   ``2**(max(e, 1) - 10)``, so E4M3 subnormals need no normalisation; the two significands
   meet in one 4x4-bit multiplier (0..225) and the exponents add;
4. the block term is the 13-bit sum times the 8-bit scale product, exact in 20 signed bits,
   at exponent ``max(ea, 1) + max(ew, 1) - 22`` (-20..8). Code 0x7F in either scale makes
   the step NaN; a zero scale gives a zero term.
5. NVFP4 block-term exponents span only 29 binades, so the unit shifts each block term by
   0..28 onto the common grid ``2**-20`` and adds the four exactly (50 signed bits).

The shared exact accumulator (:mod:`hwgen.accum`) then takes ONE term per step with a
constant exponent (no variable alignment shifter for the terms) and adds it to the FP32
accumulator with one RNE rounding. The per-tensor scales T stay outside the unit: the golden
GEMM applies ``RNE_FP32(acc * T_a * T_w)`` after it. NVFP4 units take no residual.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hif4spec import FORMATS

from .accum import TermSpec
from .e2m1 import dot_sum_bits, e2m1_product_expr
from .parts import Part, probe, times
from .unit import DotUnit, adder_tree

__all__ = ["UE4M3ScalePair", "NVFP4DotUnit", "BLOCK", "BLOCK_BITS", "SCALE_SHIFT_BITS",
           "SCALE_SIG_BITS", "term_specs"]

#: Elements per NVFP4 block (16).
BLOCK = FORMATS["nvfp4"].block
#: Packed bits per NVFP4 block (72): 16 x 4-bit elements, then the UE4M3 code.
BLOCK_BITS = FORMATS["nvfp4"].block_bits
#: Bits ``[SCALE_AT, BLOCK_BITS)`` of a block hold the UE4M3 code (64).
SCALE_AT = FORMATS["nvfp4"].fields["scale"].offset
#: Blocks per step (4).
STEP_BLOCKS = FORMATS["nvfp4"].blocks_per_step
#: UE4M3 code of a NaN scale, bit 7 ignored (0x7F).
NAN_SCALE = FORMATS["nvfp4"].nan_scale_code
#: Unsigned width of the product of two UE4M3 significands (0..225).
SCALE_SIG_BITS = 8
#: Width of the block-term shift ``max(ea,1) + max(ew,1) - 2`` (0..28).
SCALE_SHIFT_BITS = 5


class UE4M3ScalePair(wiring.Component):
    """Scale path of one NVFP4 block pair: one 4x4-bit significand product and a shift.

    Combinational. A UE4M3 code (bit 7 ignored) with exponent field ``e`` and mantissa ``m``
    is ``{e != 0, m} * 2**(max(e, 1) - 10)``: normal and subnormal codes share one form, so
    E4M3 subnormals need no normalisation. The block's value is ``sum * sig *
    2**(shift - 20)`` where ``sum`` is the block's exact product sum in units of 1/4,
    ``sig = sig_a * sig_w`` and ``shift = max(ea, 1) + max(ew, 1) - 2`` (0..28): the
    left shift that puts the block term on the unit's common grid ``2**-20``.

    Members
    -------
    sa : In(8)
        UE4M3 code of the activation block (bit 7 ignored).
    sw : In(8)
        UE4M3 code of the weight block (bit 7 ignored).
    sig : Out(8)
        Product of the two 4-bit significands, 0..225.
    shift : Out(5)
        ``max(ea, 1) + max(ew, 1) - 2``, 0..28.
    nan : Out(1)
        Either code is NaN (low seven bits 0x7F).
    """

    sa: In(8)
    sw: In(8)
    sig: Out(SCALE_SIG_BITS)
    shift: Out(SCALE_SHIFT_BITS)
    nan: Out(1)

    def elaborate(self, platform):
        m = Module()
        ea, ma = self.sa[3:7], self.sa[0:3]
        ew, mw = self.sw[3:7], self.sw[0:3]
        m.d.comb += [
            self.sig.eq(Mux(ea.any(), ma | 0b1000, ma) * Mux(ew.any(), mw | 0b1000, mw)),
            self.shift.eq(Mux(ea.any(), ea, 1) + Mux(ew.any(), ew, 1) - 2),
            self.nan.eq((self.sa[0:7] == NAN_SCALE) | (self.sw[0:7] == NAN_SCALE)),
        ]
        return m

    def parts(self):
        """The 4x4-bit significand product, the 5-bit shift add, two NaN compares
        (:mod:`hwgen.parts`)."""
        return [Part("mul", (4, 4)), Part("add", (SCALE_SHIFT_BITS,)), Part("cmp", (7,), 2)]


#: Weight exponent of the lowest bit of the pre-added step term: the smallest block-term
#: exponent, max(ea,1) + max(ew,1) - 22 with ea = ew = 0.
TERM_LSB = -20
#: Signed width of the pre-added term: |sum of 4 block terms| < 4 * 2304 * 225 * 2**28.
TERM_BITS = (4 * 2304 * 225 << 28).bit_length() + 1
#: Signed width of one block term ``block sum * scale significand product`` (|t| <= 518400).
BLOCK_TERM_BITS = (2304 * 225).bit_length() + 1

def term_specs():
    """The single exact term the NVFP4 front end hands to the shared accumulator.

    NVFP4 block-term exponents span only 29 binades (-20..8), so the four block terms are
    aligned and added exactly in the front end (a 50-bit fixed-point sum in units of
    ``2**-20``) and the accumulator sees one term with a constant exponent: it aligns one
    item instead of four.
    """
    return [TermSpec("t", TERM_BITS, 1, -TERM_LSB, 0)]


class NVFP4DotUnit(DotUnit):
    """NVFP4 dot-product unit: one 64-element step per ``64 // lanes`` cycles into FP32.

    The per-tensor scales are not inputs: the unit's words exclude them (spec section 7;
    the golden GEMM applies ``RNE_FP32(acc * T_a * T_w)`` after the unit).

    Parameters and members as :class:`hwgen.unit.DotUnit` (the registry gives NVFP4 units
    no residual): ``a``, ``w`` are four 72-bit NVFP4 blocks each, block 0 low. Timing:
    :mod:`hwgen.stream`.

    Datapath per slice (``lanes // 16`` whole blocks): a 16-product adder tree (13 bits),
    one UE4M3 scale pair (4x4-bit significand product, exponent add), a 13x8-bit multiply
    to the block term and a 0..28 shift onto the common grid ``2**-20``; the block terms add
    into the one step term (a sequencer sum field: one 50-bit partial-sum register when
    ``lanes < 64``). The NaN flag comes from the held payload.
    """

    unit = "nvfp4"

    def _terms(self):
        return term_specs()

    def _sum_fields(self):
        return ["t_sig"]

    def _front(self, m, ip, index, op):
        n = self.ii
        per_slice = self._lanes // BLOCK
        items = []
        for t in range(per_slice):
            if n > 1:
                sel = index * per_slice + t
                a_blk = Cat(*[ip.a[b].as_value() for b in range(STEP_BLOCKS)]).word_select(
                    sel, BLOCK_BITS)
                w_blk = Cat(*[ip.w[b].as_value() for b in range(STEP_BLOCKS)]).word_select(
                    sel, BLOCK_BITS)
            else:
                a_blk, w_blk = ip.a[t].as_value(), ip.w[t].as_value()
            prods = [e2m1_product_expr(m, a_blk[4 * i:4 * i + 4], w_blk[4 * i:4 * i + 4],
                                       name=f"p{t}_{i}") for i in range(BLOCK)]
            bsum = adder_tree(prods, m=m, name=f"tree{t}")
            m.submodules[f"scale{t}"] = sp = UE4M3ScalePair()
            m.d.comb += [sp.sa.eq(a_blk[SCALE_AT:BLOCK_BITS]),
                         sp.sw.eq(w_blk[SCALE_AT:BLOCK_BITS])]
            term = Signal(signed(BLOCK_TERM_BITS), name=f"bterm{t}")
            m.d.comb += term.eq(bsum * sp.sig)
            aligned = Signal(signed(TERM_BITS), name=f"aligned{t}")
            m.d.comb += aligned.eq(term << sp.shift)
            items.append(aligned)
        # NaN from the held payload: every block's codes, not only this slice's
        nan = [ip.a[b].scale[0:7] == NAN_SCALE for b in range(STEP_BLOCKS)]
        nan += [ip.w[b].scale[0:7] == NAN_SCALE for b in range(STEP_BLOCKS)]
        m.d.comb += [op.t_exp.eq(0), op.nan.eq(Cat(*nan).any()), op.first.eq(ip.first),
                     op.last.eq(ip.last)]
        total = Signal(signed(TERM_BITS), name="slice_sum")
        m.d.comb += total.eq(sum(items))
        return {"t_sig": total}

    def _front_parts(self):
        """One slice of the front end, per block: the 16-product E2M1 block dot, a
        :class:`UE4M3ScalePair` (its NaN flag unused), the block sum x scale product and
        the 0..28 shift onto the common grid; the sum of the slice's block terms, the NaN
        compares of every scale code of the step and, with several slices, the selection of
        each block of ``a`` and ``w``. The shift is counted at the product's full width,
        ``dot_sum_bits(BLOCK) + SCALE_SIG_BITS`` (21) bits, as the area model was calibrated;
        the block term it shifts is ``BLOCK_TERM_BITS`` (20) wide."""
        n, per_slice = self.ii, self._lanes // BLOCK
        scale = [p for p in probe(UE4M3ScalePair()).parts() if p.family != "cmp"]
        product = dot_sum_bits(BLOCK) + SCALE_SIG_BITS
        out = [Part("e2m1dot", (BLOCK,), per_slice), *times(scale, per_slice),
               Part("smulx", (dot_sum_bits(BLOCK), SCALE_SIG_BITS + 1), per_slice),
               Part("wshl", (product, 28 + 1, TERM_BITS), per_slice),
               Part("cmp", (7,), 2 * STEP_BLOCKS)]
        if per_slice > 1:
            out.append(Part("addn", (per_slice, TERM_BITS)))
        if n > 1:
            out.append(Part("mux", (n, BLOCK_BITS), 2 * per_slice))
        return out
