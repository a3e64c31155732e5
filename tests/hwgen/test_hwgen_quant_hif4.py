"""Amaranth-simulator tests of the BF16 -> HiF4 quantizer core (``hwgen.quant_hif4``).

Exhaustive where the space is small: the E6M2 code of every Vmax magnitude code (BF16 and the
17-bit dX floats), the E6M2 rounding of every BF16 SF (and beyond the clip range), REC for
every scale code, the 2:4 selection over all 8^4 code quadruples. At the boundaries: the b/c
decisions and the element codes k on both sides of every threshold, for every scale code
and micro-exponent. dX against the golden model's float64 subtraction. Whole groups (random,
with named cases: midpoint ties, Vmax on every E6M2 carry boundary, outliers 2^20 above the
rest, residual underflow, every BF16 special value) through the stages and through
``HiF4QuantizerComb`` against ``sim.formats.quantize`` / ``resq`` packed, bit for bit.

The references are exact ``Fraction`` arithmetic from the spec (``docs/formats.md``) or the
golden model; nothing here reads the RTL's constants except to address its ports.
"""

from fractions import Fraction
from math import floor

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from conftest import e6m2
from hif4spec import FORMATS, RESIDUAL24
from hwgen import quant_hif4 as qh
from hwgen.parts import probe
from hwgen.primitives import FAMILIES, primitive_verilog
from sim.formats import packing, quantize
from sim.formats.codecs import HIF4_REC, encode_e6m2
from sim.formats.hif4 import scale_code_plain
from sim.formats.resq import keep_mask, pack_24, resq

BIAS = 127
TWO = Fraction(2)


def raw(port):
    """The plain Value behind a port (``lib.data`` views are set and read as integers)."""
    return port.as_value() if hasattr(port, "as_value") else port


def simulate(dut, vectors, outputs):
    """Set each ``[(port, int), ...]`` of ``vectors`` and read ``outputs`` (ports)."""
    results = []

    async def bench(ctx):
        for vec in vectors:
            for port, value in vec:
                ctx.set(raw(port), value)
            results.append(tuple(ctx.get(raw(p)) for p in outputs))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return results


def xf_value(mag, frac):
    """Exact value of a magnitude code: 8-bit BF16-biased exponent over ``frac`` bits."""
    e, f = mag >> frac, mag & ((1 << frac) - 1)
    if e == 0:
        return Fraction(f) * TWO ** (1 - BIAS - frac)
    return Fraction((1 << frac) | f) * TWO ** (e - BIAS - frac)


def xf_ceil(v, frac):
    """The least finite magnitude code whose value is >= v > 0 (normal range only)."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if TWO ** e > v:
        e -= 1
    sig = -(-v // TWO ** (e - frac))
    if sig == 1 << (frac + 1):
        e, sig = e + 1, 1 << frac
    assert 1 - BIAS <= e <= BIAS and xf_value(((e + BIAS) << frac) | (sig - (1 << frac)),
                                               frac) >= v
    return ((e + BIAS) << frac) | int(sig - (1 << frac))


def rec(code):
    """REC = BF16(1/S) of a scale code, exact (from the golden model's table)."""
    return Fraction(float(HIF4_REC[code]))


def pack_block(layout, fields):
    return packing.pack_ints(layout, {k: np.asarray(v)[None] for k, v in fields.items()})[0]


# ------------------------------------------------------------------------------ step 2-3


@pytest.mark.parametrize("frac", [7, 8])
def test_scale_code_every_vmax(frac):
    """Steps 2-3 for every magnitude code of Vmax, against the golden steps as written."""
    dut = qh.ScaleCode(frac)
    mags = range(1 << (8 + frac))
    got = simulate(dut, [[(dut.vmax, v)] for v in mags], [dut.code])
    vals = np.array([float(xf_value(v, frac)) if v >> frac != 255 else np.inf for v in mags])
    with np.errstate(invalid="ignore"):
        want = np.where(np.isfinite(vals), scale_code_plain(np.where(np.isfinite(vals), vals,
                                                                     0.0)), 0xFF)
    assert [g[0] for g in got] == want.tolist()


def test_e6m2_rounding_every_sf():
    """Step 3 (clip, E6M2 RNE with carry) for every normal BF16 SF and exponents beyond the
    BF16 range on both sides (the RTL's SF exponent is unbounded)."""
    dut = qh.E6M2Round()
    cases = [(es, f) for es in range(-140, 141) for f in range(128)]
    got = simulate(dut, [[(dut.es, es), (dut.frac, f)] for es, f in cases], [dut.code])
    sf = np.array([np.ldexp(1 + f / 128, es) for es, f in cases])
    assert [g[0] for g in got] == encode_e6m2(sf).tolist()
    # the codes reached: every finite code, the clip at both ends
    assert {g[0] for g in got} == set(range(255))


# ------------------------------------------------------------------------------ step 4


class _RecProbe(wiring.Component):
    code: In(8)
    r: Out(8)
    rexp: Out(8)

    def elaborate(self, platform):
        m = Module()
        r, rexp = qh._rec(self.code)
        m.d.comb += [self.r.eq(r), self.rexp.eq(rexp)]
        return m


def test_rec_every_scale_code():
    """REC = R * 2^(48 - rexp) equals BF16(1/S) (golden table) for every finite scale code;
    the four significands R are the spec's 1.0, 0.80078125, 0.66796875, 0.5703125."""
    dut = _RecProbe()
    got = simulate(dut, [[(dut.code, c)] for c in range(255)], [dut.r, dut.rexp])
    for c, (r, rexp) in enumerate(got):
        assert Fraction(r) * TWO ** (48 - rexp) == rec(c), c
        assert rec(c) * e6m2(c) <= 1 + TWO ** -8 and 128 <= r < 256
    sigs = {Fraction(r, 128) * TWO ** -(c & 3 != 0) for c, (r, _) in enumerate(got)}
    assert sigs == {Fraction(1), Fraction(205, 256), Fraction(171, 256), Fraction(146, 256)}


# ------------------------------------------------------------------------------ steps 5-6


@pytest.mark.parametrize("frac", [7, 8])
def test_group_bits_at_boundaries(frac):
    """b = (V8 * REC >= 4) and c = (V16 * REC >= 2^(1 + b)) for every scale code, with the
    maxima on, just below and just above each threshold (and zero, subnormal, largest)."""
    dut = qh.GroupBits(frac)
    top = (254 << frac) | ((1 << frac) - 1)
    rng = np.random.default_rng(5)
    vectors, cases = [], []
    for code in range(255):
        t1, t2 = (xf_ceil(TWO ** n / rec(code), frac) for n in (1, 2))
        v8 = [t2 - 1, t2, t2 + 1, t2 - 2, t2, 0, top, 1]
        v16 = []
        for g, v in enumerate(v8):
            t = t2 if xf_value(v, frac) * rec(code) >= 4 else t1
            v16 += [t - 1, t] if g % 2 == 0 else [t, t + 1]
        v16[10:12] = [0, int(rng.integers(1, top))]
        cases.append((code, v8, v16))
    for _ in range(300):
        code = int(rng.integers(0, 255))
        cases.append((code, rng.integers(0, top, 8).tolist(), rng.integers(0, top, 16).tolist()))
    w = 8 + frac
    for code, v8, v16 in cases:
        vectors.append([(dut.code, code), (dut.v8, sum(v << w * i for i, v in enumerate(v8))),
                        (dut.v16, sum(v << w * i for i, v in enumerate(v16)))])
    got = simulate(dut, vectors, [dut.l2, dut.l3])
    for (code, v8, v16), (l2, l3) in zip(cases, got):
        b = [int(xf_value(v, frac) * rec(code) >= 4) for v in v8]
        c = [int(xf_value(v, frac) * rec(code) >= TWO ** (1 + b[j // 2]))
             for j, v in enumerate(v16)]
        assert l2 == sum(x << i for i, x in enumerate(b)), (code, v8)
        assert l3 == sum(x << i for i, x in enumerate(c)), (code, v16)


# ------------------------------------------------------------------------------ step 7


def _k_ref(a, code, shift):
    y = a * rec(code) * TWO ** (2 - shift)
    return min(floor(y + Fraction(1, 2)), 7)


@pytest.mark.parametrize("frac", [7, 8])
def test_element_codes_at_midpoints(frac):
    """Step 7-8 through the elements stage: for every scale code and micro-exponent sum
    b + c, the elements on and just below every midpoint y = n - 0.5 (n = 1..8, the exact
    ties round up), with random signs; -0, zero, subnormal, largest; NaN scale."""
    carry = {"q": qh.Q_BITS} if frac == 8 else None
    src = "dx" if frac == 8 else "x"
    dut = qh.HiF4Elements(frac=frac, src=src, carry=carry, out="r" if frac == 8 else "q")
    rng = np.random.default_rng(7)
    w = 9 + frac
    l2, l3 = 0b10101010, 0b1010101010101010          # b+c per micro-group: 0, 1, 1, 2, ...
    shifts = [(l2 >> (j // 2) & 1) + (l3 >> j & 1) for j in range(16)]
    top = (254 << frac) | ((1 << frac) - 1)
    vectors, cases = [], []
    for code in list(range(255)) + [0xFF]:
        mags = {}
        for sh in (0, 1, 2):
            if code == 0xFF:
                pool = rng.integers(0, top, 16).tolist()
            else:
                pool = []
                for n in range(1, 9):
                    t = xf_ceil((n - Fraction(1, 2)) * TWO ** (sh - 2) / rec(code), frac)
                    pool += [t, t - 1]
            mags[sh] = pool
        elems = []
        for j, sh in enumerate(shifts):
            pool = mags[sh]
            elems += [pool.pop(0) if pool else int(rng.integers(0, top)) for _ in range(4)]
        elems[3], elems[7], elems[11], elems[15] = 0, 1, top, 0
        signs = rng.integers(0, 2, 64).tolist()
        signs[3] = 1                                                  # -0
        xcodes = [(s << (8 + frac)) | v for s, v in zip(signs, elems)]
        qin = int(rng.integers(0, 1 << 62)) if carry else 0
        vec = [(dut.i[src], sum(c << w * i for i, c in enumerate(xcodes))),
               (dut.i.scale, code), (dut.i.l2, l2), (dut.i.l3, l3)]
        if carry:
            vec.append((dut.i.q, qin))
        vectors.append(vec)
        cases.append((code, elems, signs, qin))
    out = "r" if frac == 8 else "q"
    got = simulate(dut, vectors, [dut.o[out]] + ([dut.o.q] if carry else []))
    for (code, elems, signs, qin), res in zip(cases, got):
        if code == 0xFF:
            elem = [0] * 64
        else:
            elem = [(_k_ref(xf_value(v, frac), code, shifts[i // 4])
                     | (s << 3 if v else 0)) for i, (v, s) in enumerate(zip(elems, signs))]
        want = pack_block(FORMATS["hif4"], {
            "elem": elem, "l3": [l3 >> j & 1 for j in range(16)],
            "l2": [l2 >> g & 1 for g in range(8)], "scale": code})
        assert res[0] == want, code
        if carry:
            assert res[1] == qin


# ------------------------------------------------------------------------------ 2:4


def test_select24_every_code_quadruple():
    """The 2:4 selection and packing for all 8^4 quadruples of k, with random signs (and
    all-negative signs: a kept k = 0 keeps its sign bit), against keep_mask + pack_24."""
    dut = qh.HiF4Select24()
    rng = np.random.default_rng(3)
    quads = np.array(np.meshgrid(*[range(8)] * 4, indexing="ij")).reshape(4, -1).T
    vectors, blocks = [], []
    for rep in range(2):
        for b0 in range(0, len(quads), 16):
            ks = quads[b0:b0 + 16].reshape(64)
            signs = rng.integers(0, 2, 64) if rep == 0 else np.ones(64, dtype=np.int64)
            elem = (ks | (signs << 3)).astype(np.uint8)
            fields = {"elem": elem, "l3": rng.integers(0, 2, 16), "l2": rng.integers(0, 2, 8),
                      "scale": int(rng.integers(0, 256))}
            vectors.append([(dut.i.r, pack_block(FORMATS["hif4"], fields)),
                            (dut.i.q, int(rng.integers(0, 1 << 62)))])
            blocks.append(fields)
    got = simulate(dut, vectors, [dut.o.r, dut.o.q])
    for vec, fields, (r, q) in zip(vectors, blocks, got):
        values = np.where(fields["elem"] & 8, -1, 1) * (fields["elem"] & 7).astype(float)
        keep = keep_mask(values.reshape(1, 64), "2:4")[0]
        res = dict(fields, elem=np.where(keep, fields["elem"], 0).astype(np.uint8))
        packed = pack_24({k: np.asarray(v)[None, None] for k, v in res.items()})
        want = packing.pack_ints(RESIDUAL24, {k: v[0] for k, v in packed.items()})[0]
        assert r == want
        assert q == vec[1][1]


# ------------------------------------------------------------------------------ groups


def _bf16(values):
    return np.asarray(values, dtype=np.float64).astype(ml_dtypes.bfloat16)


def named_groups(rng):
    """Named cases as (G, 64) bfloat16 groups."""
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.3895313892515355e38,
                -3.3895313892515355e38, 2.0 ** -126, 2.0 ** -133, -(2.0 ** -133),
                2.0 ** -126 - 2.0 ** -133, 6.5, 0.5, 7.5]
    out = []
    # every BF16 special value, alone in a group of ones and in a group of zeros
    for s in specials:
        for base in (0.0, 1.0):
            g = np.full(64, base)
            g[int(rng.integers(0, 64))] = s
            out.append(g)
    sub = rng.integers(1, 128, 64) * 2.0 ** -133 * rng.choice([-1, 1], 64)
    out += [np.zeros(64), -np.zeros(64), sub, np.full(64, 2.0 ** -126)]
    # single outliers 2^20 above the rest (the scale is clipped to 49152 when large)
    for e in (-40, -10, 0, 10, 30, 60, 100):
        g = rng.standard_normal(64) * 2.0 ** e
        g[int(rng.integers(0, 64))] = rng.choice([-1, 1]) * 2.0 ** (e + 20) * rng.uniform(1, 2)
        out.append(g)
    # groups whose residual underflows (dX = 0, or dX below the residual clip)
    for e in (-60, -40, 0, 12):
        out.append(rng.integers(-7, 8, 64) * 2.0 ** e)
        g = rng.integers(1, 8, 64) * 2.0 ** e
        g[0] = 7 * 2.0 ** e + 2.0 ** (e - 60)
        out.append(g)
    # midpoint ties of y: Vmax gives a scale with significand 1.0, elements on k + 1/2
    for e in (-30, 0, 20):
        g = (rng.integers(0, 8, 64) + 0.5) * 2.0 ** e * rng.choice([-1, 1], 64)
        g[0] = 7 * 2.0 ** e
        out.append(g)
    # coarse grids: few significant bits give exact ties in the main and residual halves
    for e in (-20, 0, 40):
        out.append(rng.integers(-255, 256, 64) * 2.0 ** (e + rng.integers(-12, 1, 64)))
    codes = _bf16(np.array(out)).view(np.uint16)
    # NaN payloads (exponent 255, any nonzero fraction, either sign) and Inf among finite
    # values, as raw codes
    odd = _bf16(rng.standard_normal((4, 64))).view(np.uint16).copy()
    for row, code in zip(odd, (0x7F81, 0xFFFF, 0x7FC0, 0xFF80)):
        row[int(rng.integers(0, 64))] = code
    return np.concatenate([codes, odd]).view(ml_dtypes.bfloat16)


def vmax_boundary_groups(rng):
    """Groups whose Vmax is the least BF16 value of each E6M2 code or the one below it."""
    mags = np.arange(1, 0x7F80, dtype=np.uint16)
    vals = mags.view(ml_dtypes.bfloat16).astype(np.float64)
    codes = scale_code_plain(vals)
    first = np.flatnonzero(np.diff(codes)) + 1                  # code changes here
    out = []
    for i in first:
        for vmax in (vals[i], vals[i - 1]):
            g = rng.uniform(0, 1, 64) * vmax
            g[int(rng.integers(0, 64))] = vmax
            out.append(g * rng.choice([-1, 1], 64))
    return _bf16(np.array(out))


def random_groups(rng, n):
    """Random groups with exponent spreads from 0 to 60 binades around random centres."""
    spread = rng.integers(0, 61, (n, 1))
    e = rng.integers(-100, 100, (n, 1)) - rng.integers(0, 1 << 30, (n, 64)) % (spread + 1)
    g = rng.standard_normal((n, 64)) * np.exp2(e.astype(float))
    return _bf16(np.clip(g, -3e38, 3e38))


def golden(xb):
    """Packed q, dense r and 2:4 r (Python ints) of bfloat16 groups ``xb`` (G, 64)."""
    q = packing.pack_ints(FORMATS["hif4"], quantize(xb, "hif4").fields)
    dense = packing.pack_ints(FORMATS["hif4"], resq(xb, "hif4", "dense").residual.fields)
    r24 = packing.pack_ints(RESIDUAL24, pack_24(resq(xb, "hif4", "2:4").residual))
    return q, dense, r24


def _codes(xb):
    return [int.from_bytes(row.tobytes(), "little") for row in xb.view(np.uint16)]


class _Piped(wiring.Component):
    """The 2:4 core's stages with a register after each (one group per clock), tapping the
    dense residual after ``res_elements`` and the main block after ``elements``."""

    def __init__(self):
        self.stages = qh.HiF4Quantizer(residual="2:4").stages
        super().__init__({"x": In(qh.GROUP * 16), "q": Out(qh.Q_BITS),
                          "dense": Out(qh.Q_BITS), "r24": Out(RESIDUAL24.block_bits)})

    def elaborate(self, platform):
        m = Module()
        prev, taps = self.x, {}
        for name, stage in self.stages:
            m.submodules[name] = stage
            m.d.comb += stage.i.eq(prev)
            prev = Signal(stage.o.shape(), name=f"{name}_reg")
            m.d.sync += prev.eq(stage.o)
            taps[name] = prev
        m.d.comb += [self.q.eq(taps["select"].q), self.r24.eq(taps["select"].r)]
        # the dense residual of a group leaves res_elements one cycle before its 2:4 block
        dense = Signal(qh.Q_BITS)
        m.d.sync += dense.eq(taps["res_elements"].r)
        m.d.comb += self.dense.eq(dense)
        return m


def run_piped(xb):
    dut = _Piped()
    depth = len(dut.stages)
    codes = _codes(xb)
    out = []

    async def bench(ctx):
        for t in range(len(codes) + depth - 1):
            if t < len(codes):
                ctx.set(dut.x, codes[t])
            await ctx.tick()
            if t >= depth - 1:
                out.append((ctx.get(dut.q), ctx.get(dut.dense), ctx.get(dut.r24)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def check_groups(xb, got):
    q, dense, r24 = golden(xb)
    bad = [i for i, g in enumerate(got) if g != (q[i], dense[i], r24[i])]
    assert len(got) == len(xb) and not bad, (
        f"{len(bad)} of {len(got)} groups differ, first {bad[0]}: "
        f"{xb[bad[0]].astype(np.float64).tolist()}")


@pytest.fixture(scope="module")
def piped():
    """Every group set of the default run through one simulation of the staged core."""
    sets = {
        "named": named_groups(np.random.default_rng(11)),
        # every 8th group here, all in the slow run; steps 2-3 alone see every Vmax in
        # test_scale_code_every_vmax
        "vmax": vmax_boundary_groups(np.random.default_rng(12))[::8],
        "random": random_groups(np.random.default_rng(13), 400),
    }
    got = run_piped(np.concatenate(list(sets.values())))
    out, at = {}, 0
    for name, xb in sets.items():
        out[name] = (xb, got[at:at + len(xb)])
        at += len(xb)
    return out


def test_groups_named_cases(piped):
    """Every BF16 special value, NaN payloads, all-zero and subnormal groups, outliers 2^20
    above the rest, residual underflow, midpoint ties of y, coarse grids."""
    check_groups(*piped["named"])


def test_groups_vmax_on_carry_boundaries(piped):
    """Vmax on both sides of E6M2 code boundaries."""
    check_groups(*piped["vmax"])


def test_groups_random(piped):
    """Random groups, exponent spreads of 0 to 60 binades."""
    check_groups(*piped["random"])


@pytest.mark.slow
def test_groups_random_many():
    for xb in (random_groups(np.random.default_rng(14), 10000),
               vmax_boundary_groups(np.random.default_rng(15))):
        check_groups(xb, run_piped(xb))


@pytest.mark.parametrize("mode", ["none", "2:4", "dense"])
def test_comb_core(mode):
    """``HiF4QuantizerComb`` (all stages chained combinationally) for each residual mode."""
    rng = np.random.default_rng(17)
    xb = np.concatenate([named_groups(rng)[::6], random_groups(rng, 20)])
    q, dense, r24 = golden(xb)
    dut = qh.HiF4QuantizerComb(residual=mode)
    outs = [dut.o.q] + ([dut.o.r] if mode != "none" else [])
    got = simulate(dut, [[(dut.i.x, c)] for c in _codes(xb)], outs)
    want = {"none": [(a,) for a in q], "2:4": list(zip(q, r24)),
            "dense": list(zip(q, dense))}[mode]
    assert got == want


# ------------------------------------------------------------------------------ dX


def test_dx_against_float64_subtraction():
    """dX of the RTL equals the golden model's X - deq(Q(X)) exactly, except where the RTL
    passes X on (|dX| >= 2^18.7, same sign: every output of the residual is then fixed)."""
    rng = np.random.default_rng(19)
    xb = np.concatenate([named_groups(rng), random_groups(rng, 150)])
    qt = quantize(xb, "hif4")
    q = packing.pack_ints(FORMATS["hif4"], qt.fields)
    with np.errstate(invalid="ignore"):
        dx = xb.astype(np.float64) - qt.decoded()
    dut = qh.HiF4Residual()
    got = simulate(dut, [[(dut.i.q, qq), (dut.i.x, c)] for qq, c in zip(q, _codes(xb))],
                   [dut.o.dx])
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(xb.astype(np.float64)).all(axis=1)
    passed = 0
    for g, (word,) in enumerate(got):
        nan = not finite[g]
        for i in range(64):
            c = word >> (17 * i) & 0x1FFFF
            mag, s = c & 0xFFFF, c >> 16
            if nan:
                assert mag >> 8 == 255
                continue
            v = xf_value(mag, 8) * (-1 if s else 1)
            want = dx[g, i]
            if v == Fraction(want):
                assert s == (want < 0)                                  # -0 -> +0
                continue
            x = float(xb[g, i])
            assert v == Fraction(x) and abs(want) >= 2 ** 18.7 and np.sign(want) == np.sign(x)
            passed += 1
    assert passed > 0                                                   # outliers reach it


def test_dx_window_bounds():
    """The two facts the dX window rests on (docs/encoders.md), from the golden model:
    y < 8 in every group whose scale is below 49152 (Vmax * REC < 8 for every BF16 Vmax of
    code < 254), and a dX of at least 214 * 2^11 (the least one the RTL passes as X) gets
    the residual scale 49152 with b = c = 1 and k = 7, as does every larger one."""
    vals = np.arange(1, 0x7F80, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    codes = scale_code_plain(vals)
    below = codes < 254
    assert (vals[below] * HIF4_REC[codes[below]] < 8).all()
    assert set(codes[~below].tolist()) == {254}                      # 49152, the top clip
    floor_dx = 214.0 * 2 ** 11
    for v in (floor_dx, floor_dx * 1.001, 2.0 ** 40, 3e38):
        g = np.zeros((1, 64))
        g[0, 5] = -v
        f = quantize(g, "hif4").fields
        assert f["scale"].ravel()[0] == 254 and f["elem"].ravel()[5] == 0xF
        assert f["l2"].ravel()[0] == 1 and f["l3"].ravel()[1] == 1


# ------------------------------------------------------------------------------ parts


@pytest.mark.parametrize("mode", ["none", "2:4", "dense"])
def test_parts(mode):
    """Every stage reports parts in families of ``hwgen.primitives`` that generate."""
    core = qh.HiF4Quantizer(residual=mode)
    names = [n for n, s in core.stages if probe(s)]
    assert names == ["scale", "elements"] + (
        ["dx", "res_scale", "res_elements"] if mode != "none" else []) + (
        ["select"] if mode == "2:4" else [])
    parts = core.parts()
    assert {p.sub.split(".")[0] for p in parts} == set(names)
    for p in parts:
        assert p.family in FAMILIES and p.count >= 1
        primitive_verilog(p.family, p.params)
    # dX's k * (4 + M) per element; no other multiplier
    assert sum(p.count for p in parts if p.family == "mul") == (0 if mode == "none" else 64)


def test_stage_layouts():
    """The contract D's encoder relies on: first ``i`` is {x: 1024}, stage k's ``o`` is
    stage k+1's ``i``, the last ``o`` is {q} / {q, r} with the spec's block widths."""
    for mode, r_bits in (("none", None), ("2:4", RESIDUAL24.block_bits),
                         ("dense", FORMATS["hif4"].block_bits)):
        stages = [probe(s) for _, s in qh.HiF4Quantizer(residual=mode).stages]
        first, last = stages[0].i.shape(), stages[-1].o.shape()
        assert [(n, f.width) for n, f in first] == [("x", 1024)]
        want = [("q", FORMATS["hif4"].block_bits)] + ([("r", r_bits)] if r_bits else [])
        assert [(n, f.width) for n, f in last] == want
        for a, b in zip(stages, stages[1:]):
            assert a.o.shape() == b.i.shape()
    with pytest.raises(ValueError, match=r"^Residual mode of hif4_quant must be one of none, "
                                         r"2:4, dense, not 'channel50'$"):
        qh.HiF4Quantizer(residual="channel50")
    with pytest.raises(TypeError):
        qh.HiF4Quantizer("2:4")                    # keyword-only
