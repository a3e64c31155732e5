"""Amaranth-simulator tests of the HiF4 front-end sub-blocks against exact references.

Exhaustive where the space is small: every S1P2 x S1P2 code pair at every micro-group shift
and in every lane, every micro-exponent combination (b_a, c_a, b_w, c_w) in every
micro-group position class, all 256 x 256 E6M2 scale pairs. The reference decodes codes
from the spec (``docs/formats.md`` sections 1, 2, 6) independently of the RTL.
"""

from fractions import Fraction

import numpy as np
import pytest
from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from conftest import e6m2, s1p2
from hwgen.hif4 import BlockSlice, HiF4DotUnit, MicroGroupDot, ResidualSelect, ScalePair


def raw(port):
    """The plain Value behind a port (``lib.data`` views are set and read as integers)."""
    return port.as_value() if hasattr(port, "as_value") else port


def run(dut, bench):
    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def test_micro_group_all_pairs_all_shifts_all_lanes():
    dut = MicroGroupDot(4)
    pairs = [(a, w) for a in range(16) for w in range(16)]

    async def bench(ctx):
        for lane in range(4):
            for shift in range(5):
                ctx.set(raw(dut.shift), shift)
                for a, w in pairs:
                    codes_a = [0] * 4
                    codes_w = [0] * 4
                    codes_a[lane], codes_w[lane] = a, w
                    # a second, fixed pair in the next lane checks the sum as well
                    codes_a[(lane + 1) % 4], codes_w[(lane + 1) % 4] = 0xF, 0x6
                    ctx.set(raw(dut.a), sum(c << 4 * i for i, c in enumerate(codes_a)))
                    ctx.set(raw(dut.w), sum(c << 4 * i for i, c in enumerate(codes_w)))
                    expect = (s1p2(a) * s1p2(w) + s1p2(0xF) * s1p2(0x6)) * 16 * 2 ** shift
                    assert ctx.get(raw(dut.sum)) == expect, (lane, shift, a, w)

    run(dut, bench)


def _block_sum(a, w, a_l3, a_l2, w_l3, w_l2, groups):
    total = Fraction(0)
    for j in range(groups):
        shift = a_l2[j // 2] + a_l3[j] + w_l2[j // 2] + w_l3[j]
        total += sum(s1p2(a[4 * j + e]) * s1p2(w[4 * j + e]) for e in range(4)) * 2 ** shift
    return total * 16


def _bits(values, width):
    return sum(int(v) << width * i for i, v in enumerate(values))


def test_block_slice_every_micro_exponent_combination():
    """All 16 (b_a, c_a, b_w, c_w) on micro-groups 0, 1 (shared L2) and the last one."""
    groups = 16
    dut = BlockSlice(groups=groups, residual="none")
    rng = np.random.default_rng(7)

    async def bench(ctx):
        for j in (0, 1, groups - 1):
            for combo in range(16):
                ba, ca, bw, cw = [(combo >> k) & 1 for k in range(4)]
                a = rng.integers(0, 16, 64)
                w = rng.integers(0, 16, 64)
                a_l3 = rng.integers(0, 2, groups)
                w_l3 = rng.integers(0, 2, groups)
                a_l2 = rng.integers(0, 2, groups // 2)
                w_l2 = rng.integers(0, 2, groups // 2)
                a_l3[j], w_l3[j], a_l2[j // 2], w_l2[j // 2] = ca, cw, ba, bw
                ctx.set(raw(dut.a), _bits(a, 4))
                ctx.set(raw(dut.w), _bits(w, 4))
                ctx.set(raw(dut.a_l3), _bits(a_l3, 1))
                ctx.set(raw(dut.w_l3), _bits(w_l3, 1))
                ctx.set(raw(dut.a_l2), _bits(a_l2, 1))
                ctx.set(raw(dut.w_l2), _bits(w_l2, 1))
                expect = _block_sum(a, w, a_l3, a_l2, w_l3, w_l2, groups)
                assert ctx.get(raw(dut.main)) == expect, (j, combo)

    run(dut, bench)


def test_block_slice_extremes_fit_17_bits():
    dut = BlockSlice(groups=16, residual="2:4")

    async def bench(ctx):
        for sign in (0, 8):
            ctx.set(raw(dut.a), _bits([7] * 64, 4))
            ctx.set(raw(dut.w), _bits([7 | sign] * 64, 4))
            for name in ("a_l3", "w_l3", "r_l3"):
                ctx.set(raw(getattr(dut, name)), 0xFFFF)
            for name in ("a_l2", "w_l2", "r_l2"):
                ctx.set(raw(getattr(dut, name)), 0xFF)
            ctx.set(raw(dut.r), _bits([7] * 32, 4))
            ctx.set(raw(dut.r_pos), _bits([3] * 32, 2))
            assert ctx.get(raw(dut.main)) == (-1 if sign else 1) * 64 * 49 * 16
            assert ctx.get(raw(dut.res)) == (-1 if sign else 1) * 32 * 49 * 16

    run(dut, bench)


def test_residual_select_every_position_pair():
    dut = ResidualSelect()
    w = [0x3, 0xA, 0x7, 0xC]

    async def bench(ctx):
        ctx.set(raw(dut.w), _bits(w, 4))
        for p0 in range(4):
            for p1 in range(4):
                ctx.set(raw(dut.pos), p0 | p1 << 2)
                assert ctx.get(raw(dut.sel)) == w[p0] | w[p1] << 4

    run(dut, bench)


class _AllScales(wiring.Component):
    """256 ScalePair instances, one per ``a`` code: all pairs in 256 evaluations."""

    w: In(8)
    out: Out(256 * 14)

    def elaborate(self, platform):
        m = Module()
        outs = []
        for a in range(256):
            m.submodules[f"s{a}"] = s = ScalePair()
            m.d.comb += [s.a.eq(a), s.w.eq(self.w)]
            outs.append(Cat(s.mant, s.exp, s.nan))
        m.d.comb += self.out.eq(Cat(*outs))
        return m


def test_scale_path_all_e6m2_pairs():
    dut = _AllScales()

    async def bench(ctx):
        for w in range(256):
            ctx.set(raw(dut.w), w)
            out = ctx.get(raw(dut.out))
            for a in range(256):
                word = (out >> 14 * a) & 0x3FFF
                mant, exp, nan = word & 63, (word >> 6) & 127, word >> 13
                assert nan == (a == 0xFF or w == 0xFF), (a, w)
                if not nan:
                    assert mant * Fraction(2) ** (exp - 100) == e6m2(a) * e6m2(w), (a, w)

    run(dut, bench)


@pytest.mark.parametrize("kwargs, message", [
    ({"residual": "4:8"}, "Residual mode of hif4 must be one of none, 2:4, dense, not '4:8'"),
    ({"stages": 0}, "Stage count must be an integer from 1 to 4, not 0"),
    ({"stages": True}, "Stage count must be an integer from 1 to 4, not True"),
    ({"stages": 5}, "Stage count must be an integer from 1 to 4, not 5"),
    ({"lanes": 8}, "Lane count must be one of 16, 32, 64, not 8"),
])
def test_parameters_are_validated(kwargs, message):
    with pytest.raises(ValueError) as info:
        HiF4DotUnit(**kwargs)
    assert str(info.value) == message


def test_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        HiF4DotUnit("2:4")


@pytest.mark.parametrize("stages, lanes, latency", [
    (1, 64, 1), (2, 64, 2), (3, 64, 3), (4, 64, 4), (3, 16, 3), (4, 16, 7), (4, 32, 5)])
def test_latency_and_ii(stages, lanes, latency):
    unit = HiF4DotUnit(residual="2:4", stages=stages, lanes=lanes)
    assert unit.latency == latency
    assert unit.ii == 64 // lanes
    assert unit.module_name == f"hif4_dot_r24_s{stages}_l{lanes}_bnd"   # the default back end
    regs = [s for s in unit.timing["pipeline"] if s["kind"] in ("register", "accumulator")]
    assert len(regs) == stages
