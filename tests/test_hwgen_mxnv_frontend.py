"""Exhaustive Amaranth-simulator tests of the MXFP4 / NVFP4 front-end sub-blocks.

Small code spaces are enumerated completely: all 256 E2M1 pairs through the product, all
65536 E8M0 and all 65536 UE4M3 scale-code pairs (bit 7 included) through the scale paths.
The reference decodes codes independently of the hardware (``docs/formats.md`` section 1)
and checks with exact rational arithmetic.
"""

from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from hwgen.e2m1 import E2M1DotSlice, E2M1Product, dot_sum_bits
from hwgen.mxfp4 import E8M0ScalePair
from hwgen.nvfp4 import UE4M3ScalePair

E2M1_MAG = [Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]


def e2m1(code):
    """Exact value of an E2M1 code (spec section 1), independent of the RTL decode."""
    mag = E2M1_MAG[code & 7]
    return -mag if code & 8 else mag


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
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f4 = [float(np.uint8(c).view(ml_dtypes.float4_e2m1fn)) for c in range(16)]
    assert f4 == [float(e2m1(c)) for c in range(16)]
    e4 = [float(np.uint8(c).view(ml_dtypes.float8_e4m3fn)) for c in range(127)]
    assert e4 == [float(e4m3(c)) for c in range(127)]


def test_e2m1_product_all_pairs():
    dut = E2M1Product()

    async def bench(ctx):
        for a in range(16):
            for w in range(16):
                ctx.set(dut.a, a)
                ctx.set(dut.w, w)
                assert ctx.get(dut.p) == e2m1(a) * e2m1(w) * 4, (a, w)

    _run(dut, bench)


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
def test_dot_slice_random_and_extremes(count):
    dut = E2M1DotSlice(count=count)
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

    _run(dut, bench)


def test_parameter_validation_messages():
    with pytest.raises(ValueError, match=r"^Product count must be a power of two from 1 to 64, "
                                         r"not 48$"):
        E2M1DotSlice(count=48)
