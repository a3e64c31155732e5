"""Exhaustive Amaranth-simulator tests of the MXFP4 / NVFP4 front-end sub-blocks.

Small code spaces are enumerated completely: all 256 E2M1 pairs through the product
(``hwgen.e2m1.e2m1_product_expr``, the logic both units instantiate), all 65536 E8M0 and
all 65536 UE4M3 scale-code pairs (bit 7 included) through the scale paths; the block
reduction (products into ``hwgen.unit.adder_tree``, as the units build it) runs on extremes
and random blocks.
The reference decodes codes independently of the hardware (``docs/formats.md`` section 1)
and checks with exact rational arithmetic.
"""

from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from conftest import e2m1
from hwgen.e2m1 import PRODUCT_BITS, dot_sum_bits, e2m1_product_expr
from hwgen.mxfp4 import E8M0ScalePair
from hwgen.nvfp4 import UE4M3ScalePair
from hwgen.unit import adder_tree

@lru_cache(maxsize=None)
def e4m3(code):
    """Exact value of an E4M3 code without sign (UE4M3 decode: bit 7 ignored)."""
    code &= 0x7F
    e, m = code >> 3, code & 7
    if e == 0:
        return Fraction(m, 8) * Fraction(1, 2 ** 6)
    return (1 + Fraction(m, 8)) * Fraction(2) ** (e - 7)


@lru_cache(maxsize=None)
def pow2(e):
    return Fraction(2) ** e


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def test_reference_decoders_match_ml_dtypes():
    import ml_dtypes                    # a required dependency: missing is a failure
    f4 = [float(np.uint8(c).view(ml_dtypes.float4_e2m1fn)) for c in range(16)]
    assert f4 == [float(e2m1(c)) for c in range(16)]
    e4 = [float(np.uint8(c).view(ml_dtypes.float8_e4m3fn)) for c in range(127)]
    assert e4 == [float(e4m3(c)) for c in range(127)]


class _BlockDot:
    """Harness: ``count`` E2M1 products summed by the units' adder tree, as MXFP4 and NVFP4
    build a block sum (``count == 1``: one product, no tree)."""

    def __init__(self, count):
        self.m = Module()
        self.a = Signal(4 * count)
        self.w = Signal(4 * count)
        prods = [e2m1_product_expr(self.m, self.a[4 * i:4 * i + 4], self.w[4 * i:4 * i + 4],
                                   name=f"p{i}") for i in range(count)]
        self.sum = adder_tree(prods, m=self.m, name="tree") if count > 1 else prods[0]


def test_e2m1_product_all_pairs():
    h = _BlockDot(1)
    assert h.sum.shape().width == PRODUCT_BITS and h.sum.shape().signed

    async def bench(ctx):
        for a in range(16):
            for w in range(16):
                ctx.set(h.a, a)
                ctx.set(h.w, w)
                assert ctx.get(h.sum) == e2m1(a) * e2m1(w) * 4, (a, w)

    _run(h.m, bench)


class _ScaleArray:
    """Harness: one scale-pair instance per activation code, all sharing the weight code."""

    def __init__(self, cls):
        self.m = Module()
        self.units = []
        for sa in range(256):
            u = cls()
            self.m.submodules[f"u{sa}"] = u
            self.units.append(u)


def test_e8m0_scale_pair_all_codes():
    h = _ScaleArray(E8M0ScalePair)

    async def bench(ctx):
        for sa, u in enumerate(h.units):
            ctx.set(u.sa, sa)
        for sw in range(256):
            for u in h.units:
                ctx.set(u.sw, sw)
            for sa, u in enumerate(h.units):
                nan = sa == 255 or sw == 255
                assert ctx.get(u.nan) == nan, (sa, sw)
                if not nan:
                    # the block sum is in units of 1/4 of the product of the two scales
                    unit = pow2(ctx.get(u.exp) - 256)
                    assert unit == pow2(sa - 127) * pow2(sw - 127) / 4, (sa, sw)

    _run(h.m, bench)


def test_ue4m3_scale_pair_all_codes():
    h = _ScaleArray(UE4M3ScalePair)

    async def bench(ctx):
        for sa, u in enumerate(h.units):
            ctx.set(u.sa, sa)
        for sw in range(256):
            for u in h.units:
                ctx.set(u.sw, sw)
            for sa, u in enumerate(h.units):
                nan = (sa & 0x7F) == 0x7F or (sw & 0x7F) == 0x7F
                assert ctx.get(u.nan) == nan, (sa, sw)
                if not nan:
                    # block sum unit (1/4) times the scales, on the grid 2**-20 after the shift
                    got = ctx.get(u.sig) * pow2(ctx.get(u.shift) - 20)
                    assert got == e4m3(sa) * e4m3(sw) / 4, (sa, sw)

    _run(h.m, bench)


@pytest.mark.parametrize("count", [16, 32])
def test_block_sum_random_and_extremes(count):
    dut = _BlockDot(count)
    assert dut.sum.shape().width == {16: 13, 32: 14}[count] == dot_sum_bits(count)
    rng = np.random.default_rng(count)
    cases = [np.full((2, count), 7), np.full((2, count), 15),           # +max * +max, -max*-max
             np.stack([np.full(count, 7), np.full(count, 15)]),          # most negative sum
             np.full((2, count), 8)]                                     # all -0
    cases += [rng.integers(0, 16, (2, count)) for _ in range(300)]

    async def bench(ctx):
        for a, w in cases:
            ctx.set(dut.a, sum(int(c) << (4 * i) for i, c in enumerate(a)))
            ctx.set(dut.w, sum(int(c) << (4 * i) for i, c in enumerate(w)))
            ref = sum(e2m1(int(x)) * e2m1(int(y)) for x, y in zip(a, w)) * 4
            assert ctx.get(dut.sum) == ref

    _run(dut.m, bench)


def test_dot_sum_bits_message():
    with pytest.raises(ValueError, match=r"^Product count must be at least 1, not 0$"):
        dot_sum_bits(0)
