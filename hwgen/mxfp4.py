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

from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

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
