"""E2M1 element datapath shared by the MXFP4 and NVFP4 units.

Both formats carry E2M1 elements (``docs/formats.md`` section 1): bit 3 sign, bits 2..1
exponent ``e`` (bias 1), bit 0 mantissa ``m``. In units of one half every magnitude is an
integer, ``|x| * 2 = sig << sh`` with a 2-bit significand ``sig = {e != 0, m}`` (0..3) and a
shift ``sh = max(e - 1, 0)`` (0..2)::

    code  0 1 2 3 4 5 6  7        (low three bits)
    |x|   0 .5 1 1.5 2 3 4 6
    sig   0 1 2 3 2 3 2  3
    sh    0 0 0 0 1 1 2  2

so a product of two elements is ``(sig_a * sig_w) << (sh_a + sh_w)`` in units of 1/4: a 2x2-bit
multiplier (0..9) and a 0..4 left shift, at most 144, i.e. a signed 9-bit fixed-point number
that is always exact. Products of one block share the block's scales, so a block sum is an
exact integer too: 32 products fit 14 signed bits (MXFP4), 16 products 13 bits (NVFP4).
"""

from amaranth.hdl import Mux, Signal, signed

__all__ = ["PRODUCT_BITS", "dot_sum_bits", "e2m1_product_expr"]

#: Width of one signed E2M1 x E2M1 product in units of 1/4 (|p| <= 144).
PRODUCT_BITS = 9


def dot_sum_bits(count):
    """Signed width that holds any sum of ``count`` E2M1 products exactly.

    ``count * 144`` must fit the magnitude: 32 products need 14 bits, 16 need 13, 8 need 12.
    """
    if count < 1:
        raise ValueError(f"Product count must be at least 1, not {count!r}")
    return (count * 144).bit_length() + 1


def e2m1_product_expr(m, a, w, name="p"):
    """Add the logic of one signed E2M1 x E2M1 product to ``m`` and return its signal.

    Parameters
    ----------
    m : Module
        Module the combinational logic is added to.
    a, w : Value
        4-bit E2M1 codes.
    name : str
        Prefix for the internal signal names.

    Returns
    -------
    Signal(signed(9))
        ``a * w`` in units of 1/4, exact.
    """
    ea, ma, sa = a[1:3], a[0], a[3]
    ew, mw, sw = w[1:3], w[0], w[3]
    sig_a = Signal(2, name=f"{name}_sig_a")
    sig_w = Signal(2, name=f"{name}_sig_w")
    sh_a = Signal(2, name=f"{name}_sh_a")
    sh_w = Signal(2, name=f"{name}_sh_w")
    mag = Signal(8, name=f"{name}_mag")
    out = Signal(signed(PRODUCT_BITS), name=name)
    m.d.comb += [
        sig_a.eq(Mux(ea.any(), ma | 0b10, ma)),
        sig_w.eq(Mux(ew.any(), mw | 0b10, mw)),
        sh_a.eq(Mux(ea.any(), ea - 1, 0)),
        sh_w.eq(Mux(ew.any(), ew - 1, 0)),
        mag.eq((sig_a * sig_w) << (sh_a + sh_w)),
        out.eq(Mux(sa ^ sw, -mag, mag)),
    ]
    return out
