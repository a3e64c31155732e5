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
4. the block term is the 13-bit sum times the 8-bit scale product, exact in 21 signed bits,
   at exponent ``max(ea, 1) + max(ew, 1) - 22`` (-20..8). Code 0x7F in either scale makes
   the step NaN; a zero scale gives a zero term.

The four block terms go to the shared exact accumulator (:mod:`hwgen.accum`), which adds
them to the FP32 accumulator with one RNE rounding per step. The per-tensor scales T stay
outside the unit: the golden GEMM applies ``RNE_FP32(acc * T_a * T_w)`` after it. NVFP4 units
take no residual.
"""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UE4M3ScalePair", "BLOCK", "BLOCK_BITS", "SCALE_EXP_BITS", "SCALE_SIG_BITS"]

#: Elements per NVFP4 block.
BLOCK = 16
#: Packed bits per NVFP4 block: 16 x 4-bit elements, then the UE4M3 code at [64, 72).
BLOCK_BITS = 72
#: Unsigned width of the product of two UE4M3 significands (0..225).
SCALE_SIG_BITS = 8
#: Signed width of a block-term exponent ``max(ea,1) + max(ew,1) - 22`` (-20..8).
SCALE_EXP_BITS = 6


class UE4M3ScalePair(wiring.Component):
    """Scale path of one NVFP4 block pair: one 4x4-bit significand product and an exponent.

    Combinational. A UE4M3 code (bit 7 ignored) with exponent field ``e`` and mantissa ``m``
    is ``{e != 0, m} * 2**(max(e, 1) - 10)``: normal and subnormal codes share one form. The
    block's value is ``sum * sig * 2**exp`` where ``sum`` is the block's exact product sum in
    units of 1/4, ``sig = sig_a * sig_w`` and ``exp = max(ea, 1) + max(ew, 1) - 22``.

    Members
    -------
    sa : In(8)
        UE4M3 code of the activation block (bit 7 ignored).
    sw : In(8)
        UE4M3 code of the weight block (bit 7 ignored).
    sig : Out(8)
        Product of the two 4-bit significands, 0..225.
    exp : Out(signed(6))
        Exponent of one unit of ``sum * sig``, -20..8.
    nan : Out(1)
        Either code is NaN (low seven bits 0x7F).
    """

    sa: In(8)
    sw: In(8)
    sig: Out(SCALE_SIG_BITS)
    exp: Out(signed(SCALE_EXP_BITS))
    nan: Out(1)

    def elaborate(self, platform):
        m = Module()
        ea, ma = self.sa[3:7], self.sa[0:3]
        ew, mw = self.sw[3:7], self.sw[0:3]
        sig_a = Signal(4)
        sig_w = Signal(4)
        be_a = Signal(4)
        be_w = Signal(4)
        m.d.comb += [
            sig_a.eq(Mux(ea.any(), ma | 0b1000, ma)),
            sig_w.eq(Mux(ew.any(), mw | 0b1000, mw)),
            be_a.eq(Mux(ea.any(), ea, 1)),
            be_w.eq(Mux(ew.any(), ew, 1)),
            self.sig.eq(sig_a * sig_w),
            self.exp.eq(be_a + be_w - 22),
            self.nan.eq((self.sa[0:7] == 0x7F) | (self.sw[0:7] == 0x7F)),
        ]
        return m
