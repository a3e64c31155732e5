"""The BF16 -> MXFP4 / NVFP4 quantizer cores (:mod:`hwgen.quant_mxnv`) in the Amaranth
simulator, bit for bit against the golden model.

Small pieces are enumerated: the MXFP4 E2M1 rounding of every finite BF16 magnitude at
every shift that can round to a nonzero code (and the exact dX beside it), the 2:4 selection
over all 8**4 magnitude quadruples, the NVFP4 E4M3 scale on every E4M3 midpoint (exact ties
and their BF16 neighbours) for a set of tensor scales T, the NVFP4 element rounding on
every E2M1 midpoint of a set of block divisors. Whole groups (random, outliers, NaN/Inf,
subnormals, zeros, ties) run through all stages chained and are compared with
``sim.formats`` (``quantize``, ``resq``, ``pack_24_mxfp4``; NVFP4 through its kernel with the
given T). The exact oracles (``fractions``) are written from ``docs/formats.md``.
"""

import bisect
import time
from fractions import Fraction

import numpy as np
import pytest
from amaranth.hdl import Shape
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.hdl import Module
from amaranth.sim import Simulator

from conftest import e2m1, ue4m3
from hif4spec import operand_layout, residual_layout
from hwgen import quant_mxnv as qm
from hwgen.parts import probe
from hwgen.primitives import FAMILIES
from sim.formats import nvfp4 as nvmod
from sim.formats import packing, quantize
from sim.formats.codecs import e2m1_round, e4m3_round_fast
from sim.formats.resq import resq
from sim.formats.resq_mxfp4 import pack_24_mxfp4, pack_steps_r24

MIDS = [(Fraction(m), up) for m, up in qm.E2M1_MIDPOINTS]
E2M1_MAGS = [Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]


# ------------------------------------------------------------------------------- oracles

def bf16_value(code):
    """Exact value of a BF16 code (None for Inf/NaN)."""
    code = int(code)
    s, f, m = code >> 15, (code >> 7) & 0xFF, code & 0x7F
    if f == 0xFF:
        return None
    v = Fraction(m, 128) * Fraction(2) ** -126 if f == 0 else \
        Fraction(128 + m, 128) * Fraction(2) ** (f - 127)
    return -v if s else v


TWICE = [0, 1, 2, 3, 4, 6, 8, 12]


def bf16_units(code):
    """A finite BF16 code as a signed integer in units of 2**-140."""
    code = int(code)
    s, f, m = code >> 15, (code >> 7) & 0xFF, code & 0x7F
    v = (m if f == 0 else 128 | m) << (max(f, 1) - 134 + 140)
    return -v if s else v


def rne_e2m1(v):
    """E2M1 magnitude code of |v| / 1 (RNE, saturating): the spec's rounding, exactly."""
    v = abs(v)
    return sum(1 for mid, up in MIDS if v > mid or (v == mid and up))


E4M3_GRID = [ue4m3(c) for c in range(0x7F)]
#: Midpoint k lies between E4M3 codes k and k + 1.
E4M3_MIDS = [(lo + hi) / 2 for lo, hi in zip(E4M3_GRID, E4M3_GRID[1:])]
MID_SET = set(E4M3_MIDS)


def rne_e4m3_sat(u):
    """RNE_E4M3(min(u, 448)) code, exact: the midpoints passed, a tie passed when the code
    above it is even."""
    k = bisect.bisect_left(E4M3_MIDS, u)            # midpoints below u
    if k < len(E4M3_MIDS) and E4M3_MIDS[k] == u and (k + 1) % 2 == 0:
        k += 1
    return k


def codes_of(values):
    """BF16 codes (uint16) of float32-exact values (truncation is exact for BF16 values)."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def as_f32(codes):
    return (np.asarray(codes, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def word(codes):
    return int.from_bytes(np.asarray(codes, dtype="<u2").tobytes(), "little")


# ------------------------------------------------------------------------------- golden

def golden_mx(codes, mode):
    """Packed MXFP4 step(s) of groups ``codes`` (G, 64) and the residual step(s)."""
    x = as_f32(codes).reshape(-1, 64)
    g = x.shape[0]
    qt = quantize(x, "mxfp4")
    q = packing.pack_ints(operand_layout("mxfp4"), qt.fields)
    if mode == "none":
        return q, [None] * g
    rs = resq(x, "mxfp4", mode)
    if mode == "dense":
        return q, packing.pack_ints(operand_layout("mxfp4"), rs.residual.fields)
    return q, pack_steps_r24(pack_24_mxfp4(rs.residual))


def golden_nv(codes, t_bits):
    """Packed NVFP4 steps of groups ``codes`` (G, 64) with tensor scale T (float32 bits):
    the golden kernel (``sim.formats.nvfp4.quantize_groups``) with that T."""
    x = as_f32(codes).reshape(-1, 16)
    g = x.shape[0] // 4
    t = float(np.uint32(t_bits).view(np.float32))
    f = nvmod.quantize_groups(x, t)
    return packing.pack_ints(operand_layout("nvfp4"),
                             {"elem": f["elem"].reshape(g, 4, 16),
                              "scale": f["scale"].reshape(g, 4)})


# ------------------------------------------------------------------------------- harness

class Chain(wiring.Component):
    """Stages ``stages`` (a list of (name, component)) chained combinationally."""

    def __init__(self, stages):
        self.stages = stages
        super().__init__({"i": In(stages[0][1].i.shape()), "o": Out(stages[-1][1].o.shape())})

    def elaborate(self, platform):
        m = Module()
        prev = self.i
        for name, s in self.stages:
            m.submodules[name] = s
            m.d.comb += s.i.eq(prev)
            prev = s.o
        m.d.comb += self.o.eq(prev)
        return m


def simulate(dut, inputs, outputs):
    """Drive ``dut.i`` with each dict of ``inputs`` (field -> int); returns per input a dict
    of ``outputs`` (name -> callable(dut.o) -> value)."""
    got = []

    async def bench(ctx):
        for vals in inputs:
            for k, v in vals.items():
                target = getattr(dut.i, k)
                ctx.set(target.as_value() if isinstance(target, data.View) else target, v)
            got.append({n: fn(ctx, dut.o) for n, fn in outputs.items()})

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return got


def stagewise(core, words):
    """Whole-input words through the core's stages one simulation per stage (each stage's
    output words are the next stage's input words; the stages are combinational, so this
    equals the chained circuit, and it avoids the simulator re-evaluating a deep chain)."""
    for name, stage in core.stages:
        dut = Chain([(name, stage)])
        out = []

        async def bench(ctx, dut=dut, words=words, out=out):
            for v in words:
                ctx.set(dut.i.as_value(), v)
                out.append(ctx.get(dut.o.as_value()))

        sim = Simulator(dut)
        sim.add_testbench(bench)
        sim.run()
        words = out
    return words


def _split(words, layout, names):
    lay = data.Layout.cast(layout)
    return [[(v >> lay[n].offset) & ((1 << Shape.cast(lay[n].shape).width) - 1)
             for v in words] for n in names]


def run_mx(codes, mode, chained=False):
    """Packed ``q`` and ``r`` of MXFP4 groups ``codes`` (G, 64) from the RTL."""
    names = ["q"] + (["r"] if mode != "none" else [])
    if chained:
        dut = qm.MXFP4QuantizerComb(residual=mode)
        outs = {n: (lambda ctx, o, n=n: ctx.get(getattr(o, n))) for n in names}
        got = simulate(dut, [{"x": word(g)} for g in codes.reshape(-1, 64)], outs)
        res = [[d[n] for d in got] for n in names]
    else:
        core = qm.MXFP4Quantizer(residual=mode)
        words = stagewise(core, [word(g) for g in codes.reshape(-1, 64)])
        res = _split(words, core.stages[-1][1].o.shape(), names)
    return res[0], (res[1] if mode != "none" else [None] * len(res[0]))


def run_nv(codes, t_bits, chained=False):
    """Packed ``q`` of NVFP4 groups ``codes`` (G, 64) with tensor scales ``t_bits``."""
    inputs = [{"x": word(g), "t": int(t)} for g, t in zip(codes.reshape(-1, 64), t_bits)]
    if chained:
        dut = qm.NVFP4QuantizerComb()
        return [d["q"] for d in simulate(dut, inputs, {"q": lambda ctx, o: ctx.get(o.q)})]
    core = qm.NVFP4Quantizer()
    lay = data.Layout.cast(core.stages[0][1].i.shape())
    words = stagewise(core, [v["x"] << lay["x"].offset | v["t"] << lay["t"].offset
                             for v in inputs])
    return _split(words, core.stages[-1][1].o.shape(), ["q"])[0]


# ------------------------------------------------------------------------------- stimulus

def mx_groups(rng, n):
    """BF16 groups (n, 64) of every kind the MXFP4 path must handle."""
    out = []
    for k in range(n):
        kind = k % 9
        if kind == 0:                                   # any code, specials included
            g = rng.integers(0, 1 << 16, 64)
        elif kind == 1:                                 # Gaussian, one outlier 2**20 above
            v = rng.standard_normal(64) * 2.0 ** int(rng.integers(-100, 80))
            v[rng.integers(64)] *= 2.0 ** 20
            g = codes_of(np.float32(v))
        elif kind == 2:                                 # subnormals and tiny normals
            g = rng.integers(0, 0x300, 64) | (rng.integers(0, 2, 64) << 15)
        elif kind == 3:                                 # E2M1 ties of the scale, and 6 * 2**e
            e = int(rng.integers(-130, 125))
            mids = [float(m) for m, _ in MIDS] + [6.0, 0.0, 0.125]
            v = np.array(rng.choice(mids, 64)) * 2.0 ** e * rng.choice([-1, 1], 64)
            v[rng.integers(64)] = 6.0 * 2.0 ** e
            g = codes_of(np.float32(v))
        elif kind == 4:                                 # zeros, -0 and a few values
            g = rng.choice([0, 0x8000, 0x8000, 0], 64)
            if k % 2:
                g[rng.integers(64, size=3)] = rng.integers(0, 1 << 15, 3)
        elif kind == 5:                                 # one special in one block
            g = codes_of(np.float32(rng.standard_normal(64)))
            g[rng.integers(64)] = rng.choice([0x7F80, 0xFF80, 0x7FC0, 0xFFFF, 0x7F81])
        elif kind == 6:                                 # the top of the BF16 range
            g = (rng.integers(0xF0, 0xFF, 64) << 7 | rng.integers(0, 128, 64)
                 | rng.integers(0, 2, 64) << 15)
        elif kind == 7:                                 # wide spread inside a block
            g = rng.integers(0, 0x7F80, 64) | (rng.integers(0, 2, 64) << 15)
        else:                                           # residual ties: X = q + tie of dX
            e = int(rng.integers(-120, 120))
            base = rng.choice([1.0, 1.5, 2.0, 3.0, 4.0], 64)
            frac = rng.choice([0.25, 0.125, 0.0625, 0.09375, -0.0625], 64)
            v = (base + frac) * 2.0 ** e
            v[0] = 6.0 * 2.0 ** e
            g = codes_of(np.float32(v))
        out.append(np.asarray(g, dtype=np.uint16))
    return np.stack(out)


def t_values(rng, n):
    """Tensor scales T (float32 bits): named extremes and random full-significand values."""
    named = [1.0, 2.0 ** -126, 2.0 ** 127, np.float32(1.9999999), np.float32(2.0 ** -126 * 1.5),
             np.float32(1 / 2688), np.float32(3.0), np.float32(0.37)]
    bits = [int(np.float32(t).view(np.uint32)) for t in named]
    while len(bits) < n:
        bits.append(int(rng.integers(1, 255)) << 23 | int(rng.integers(0, 1 << 23)))
    return bits


# ------------------------------------------------------------------------------- structure

@pytest.mark.parametrize("resq", ["none", "2:4", "dense"])
def test_mxfp4_contract(resq):
    core = probed(qm.MXFP4Quantizer(residual=resq))
    stages = core.stages
    assert stages[0][1].i.shape() == data.StructLayout({"x": 1024})
    for (_, a), (_, b) in zip(stages, stages[1:]):
        assert a.o.shape() == b.i.shape()
    out = {"q": operand_layout("mxfp4").bits}
    if resq != "none":
        out["r"] = residual_layout("mxfp4", resq).bits
    assert stages[-1][1].o.shape() == data.StructLayout(out)
    assert out.get("r") in (None, 208, 272) and out["q"] == 272
    _check_parts(core)


def test_nvfp4_contract():
    core = probed(qm.NVFP4Quantizer())
    stages = core.stages
    assert stages[0][1].i.shape() == data.StructLayout({"x": 1024, "t": 32})
    for (_, a), (_, b) in zip(stages, stages[1:]):
        assert a.o.shape() == b.i.shape()
    assert stages[-1][1].o.shape() == data.StructLayout({"q": 288})
    _check_parts(core)
    with pytest.raises(ValueError, match=r"^Residual mode of nvfp4_quant must be one of none, "
                                         r"not '2:4'$"):
        qm.NVFP4Quantizer(residual="2:4")
    with pytest.raises(ValueError, match=r"^Residual mode of mxfp4_quant must be one of none, "
                                         r"2:4, dense, not 'channel50'$"):
        qm.MXFP4Quantizer(residual="channel50")
    with pytest.raises(TypeError):
        qm.MXFP4Quantizer("2:4")                   # keyword-only


def probed(core):
    """``core`` with every stage marked as possibly never elaborated."""
    for _, stage in core.stages:
        probe(stage)
    return core


def _check_parts(core):
    total = []
    for name, stage in core.stages:
        parts = stage.parts()
        assert parts, name
        for p in parts:
            assert p.family in FAMILIES, (name, p)
            assert p.count >= 1 and all(int(x) >= 1 for x in p.params), (name, p)
        total += parts
    assert core.parts() == total


def test_constants_from_the_spec():
    # the bounds are the midpoints in units 2**-9, minus one where a tie rounds up
    assert qm.FRAC == 9 and qm.FIX == 12
    assert qm.MXFP4_BOUNDS == (128, 383, 640, 895, 1280, 1791, 2560)
    assert [up for _, up in MIDS] == [False, True, False, True, False, True, False]


# ------------------------------------------------------------------------------- MXFP4 pieces

@pytest.mark.slow
def test_mxfp4_element_rounding_and_dx_exhaustive():
    """Every finite BF16 magnitude (both signs alternate) at every scale code that gives a
    shift of -2..4 (all that can round to a nonzero code, one more below), through the
    ``elements`` stage with a residual: the E2M1 code is RNE(|x| / 2**(c - 127)) with
    saturation, the sign is x < 0, and dX = x - deq(q) exactly."""
    stage = qm.MXElements(True)
    dut = Chain([("elements", stage)])
    cases = []                                      # (code, scale code)
    for mag in range(0x7F80):
        f = mag >> 7
        for sh in range(-2, 5):
            c = max(f, 1) + 2 - sh
            if 0 <= c <= 254:
                cases.append((mag | ((len(cases) & 1) << 15), c))
    # each evaluation: 32 elements per block sharing a scale code: group cases by code
    by_code = {}
    for code, c in cases:
        by_code.setdefault(c, []).append(code)
    inputs, expect = [], []
    batch = []
    for c, codes in sorted(by_code.items()):
        for k in range(0, len(codes), 32):
            batch.append((c, codes[k:k + 32]))
    for k in range(0, len(batch), 2):
        pair = batch[k:k + 2]
        if len(pair) == 1:
            pair.append((0, [0] * 32))
        x = []
        for _, codes in pair:
            x += list(codes) + [0] * (32 - len(codes))
        inputs.append({"x": word(x), "scale": pair[0][0] | pair[1][0] << 8})
        expect.append((pair, x))

    lay = stage.o.shape()
    q_bits, d_at = lay["q"].shape, lay["d"].offset
    dl = qm.DX_ELEM
    dw = data.Layout.cast(dl).size

    def field(v, name, i):
        f = dl[name]
        return (v >> (d_at + dw * i + f.offset)) & ((1 << f.width) - 1)

    start = time.time()
    got = simulate(dut, inputs, {"v": lambda ctx, o: ctx.get(o.as_value())})
    checked = 0
    mids4 = [(int(mid * 4), up) for mid, up in MIDS]
    for (pair, x), g in zip(expect, got):
        v_all = g["v"]
        q = v_all & ((1 << Shape.cast(q_bits).width) - 1)
        for b, (c, _) in enumerate(pair):
            assert (q >> (128 + 136 * b)) & 0xFF == c
            for i in range(32 * b, 32 * b + 32):
                vx = bf16_units(x[i])                  # x in units 2**-140
                code = (q >> (136 * b + 4 * (i - 32 * b))) & 0xF
                ref = sum(1 for m4, up in mids4
                          if abs(vx) > m4 << (c + 11) or (abs(vx) == m4 << (c + 11) and up))
                assert code & 7 == ref, (hex(x[i]), c)
                assert code >> 3 == (vx < 0), (hex(x[i]), c)
                m, l, s = (field(v_all, n, i) for n in ("m", "l", "s"))
                qv = TWICE[code & 7] << (c + 12)        # deq(q) in units 2**-140
                d = vx - (-qv if code >> 3 else qv)
                assert (-(m << (l + 4)) if s else m << (l + 4)) == d, (hex(x[i]), c)
                assert s == (d < 0)
                checked += 1
    assert checked >= len(cases)
    print(f"{len(cases)} element roundings in {len(inputs)} evaluations, "
          f"{time.time() - start:.1f} s")


def _select_oracle(codes):
    order = sorted(range(4), key=lambda i: (-(codes[i] & 7), i))
    keep = sorted(order[:2])
    return [(codes[p], p) for p in keep]


def test_select24_all_quadruples():
    """The 2:4 selection over all 8**4 E2M1 magnitude quadruples (random signs): the two
    largest magnitudes, ties to the lower position, positions ascending."""
    stage = qm.MXSelect24()
    dut = Chain([("select", stage)])
    rng = np.random.default_rng(24)
    quads = [[(n >> (3 * k)) & 7 | int(rng.integers(2)) << 3 for k in range(4)]
             for n in range(8 ** 4)]
    lay = residual_layout("mxfp4", "2:4")
    epos, ppos = lay.positions("elem"), lay.positions("pos")
    inputs, groups = [], []
    for k in range(0, len(quads), 16):
        codes = [c for qd in quads[k:k + 16] for c in qd]
        rc = sum(c << (4 * i + 8 * (i >= 32)) for i, c in enumerate(codes))
        rc |= 0x42 << 128 | 0x17 << 264
        inputs.append({"q": 0, "rc": rc})
        groups.append(quads[k:k + 16])
    got = simulate(dut, inputs, {"r": lambda ctx, o: ctx.get(o.r)})
    for qs, g in zip(groups, got):
        r = g["r"]
        assert (r >> 96) & 0xFF == 0x42 and (r >> 200) & 0xFF == 0x17
        for u, qd in enumerate(qs):
            want = _select_oracle(qd)
            for k in range(2):
                j = 2 * u + k
                assert ((r >> epos[j]) & 0xF, (r >> ppos[j]) & 3) == want[k], (qd, k)


# ------------------------------------------------------------------------------- NVFP4 pieces

def _e4m3_cases(t_bits):
    """amax codes around every E4M3 midpoint and the 448 clamp for T: the BF16 values
    nearest below and above 6 T M (and 6 T M itself when it is a BF16 value)."""
    t = Fraction(float(np.uint32(t_bits).view(np.float32)))
    targets = E4M3_MIDS + [E4M3_GRID[-1], Fraction(464)]
    targets += [Fraction(1, 1024), Fraction(1, 2048)]
    out = set()
    for mid in targets:
        a = 6 * t * mid
        if a >= Fraction(2) ** 128 or a < Fraction(2) ** -133:
            continue
        f32 = np.float32(float(a))
        c = int(codes_of([f32])[0])
        for d in (-1, 0, 1):
            cc = c + d
            if 0 < cc < 0x7F80:
                out.add(cc)
    return sorted(out)


def test_nvfp4_scale_on_every_e4m3_midpoint():
    """The UE4M3 block scale for a set of T (powers of two: exact ties reach every midpoint;
    full 24-bit significands; 2**-126 and 2**127): equal to the exact RNE_E4M3(min(amax /
    (6 T), 448)) and to the golden model's two float64 divisions."""
    stage = qm.NVScale()
    dut = Chain([("scale", stage)])
    rng = np.random.default_rng(4)
    ts = [int(np.float32(2.0 ** e).view(np.uint32)) for e in (-126, -20, -3, 0, 5, 60, 127)]
    ts += t_values(rng, 12)[1:]
    inputs, cases = [], []
    for t in ts:
        amaxes = _e4m3_cases(t) + [0, 1, 0x7F7F, 0x0080]
        for k in range(0, len(amaxes), 4):
            four = (amaxes[k:k + 4] + [0, 0, 0])[:4]
            inputs.append({"x": 0, "t": t, "amax": sum(a << (15 * b) for b, a in enumerate(four))})
            cases.append((t, four))
    got = simulate(dut, inputs, {"s": lambda ctx, o: [ctx.get(o.scale[b]) for b in range(4)]})
    ties = 0
    for (t, four), g in zip(cases, got):
        tf = float(np.uint32(t).view(np.float32))
        tq = Fraction(tf)
        for a, s in zip(four, g["s"]):
            av = bf16_value(a)
            exact = rne_e4m3_sat(av / (6 * tq))
            gold = e4m3_round_fast(np.minimum(np.float64(float(av)) / 6.0 / tf, 448.0))
            assert s == exact, (hex(t), hex(a), s, exact)
            assert Fraction(float(gold)) == ue4m3(s), (hex(t), hex(a))
            ties += av / (6 * tq) in MID_SET
    assert ties >= 7 * 120, ties                  # the power-of-two T hit the midpoints
    print(f"{sum(len(f) for _, f in cases)} scales, {ties} exact ties")


def test_nvfp4_elements_on_every_e2m1_midpoint():
    """E2M1 codes against d = T s for T and s with short and full significands (subnormal
    scales included): every BF16 magnitude from d / 16 to 16 d; the exact RNE and the golden
    model's float64 division agree with the hardware."""
    stages = probed(qm.NVFP4Quantizer()).stages
    dut = Chain(stages[2:])
    rng = np.random.default_rng(5)
    pairs = [(1.0, 0x38), (2.0 ** -126, 0x01), (2.0 ** -126, 0x7E), (2.0 ** 127, 0x7E),
             (2.0 ** 127, 0x01), (0.75, 0x3D), (float(np.float32(1.9999999)), 0x45),
             (float(np.float32(0.37)), 0x05), (3.0, 0x33), (2.0 ** -100, 0x7E)]
    while len(pairs) < 18:
        t = float(np.uint32(int(rng.integers(20, 235)) << 23 | int(rng.integers(1 << 23)))
                  .view(np.float32))
        pairs.append((t, int(rng.integers(1, 0x7F))))
    inputs, cases = [], []
    for t, s in pairs:
        d = Fraction(t) * ue4m3(s)
        lo, hi = d / 16, d * 16
        mags = [m for m in range(1, 0x7F80) if lo <= bf16_value(m) <= hi]
        mags = mags[::max(1, len(mags) // 900)]
        # exact midpoints where representable
        for mid, _ in MIDS:
            if d * mid < Fraction(2) ** 127:
                c = int(codes_of([np.float32(float(d * mid))])[0])
                mags += [c - 1, c, c + 1]
        mags = [m for m in mags if 0 < m < 0x7F80]
        tb = int(np.float32(t).view(np.uint32))
        for k in range(0, len(mags), 64):
            chunk = (mags[k:k + 64] + [0] * 64)[:64]
            signs = [int(rng.integers(2)) << 15 for _ in range(64)]
            x = [c | sg for c, sg in zip(chunk, signs)]
            inputs.append({"x": word(x), "t": tb, "scale": s * 0x01010101})
            cases.append((t, s, x))
    got = simulate(dut, inputs, {"q": lambda ctx, o: ctx.get(o.q)})
    ties = 0
    for (t, s, x), g in zip(cases, got):
        d = Fraction(t) * ue4m3(s)
        for i, c in enumerate(x):
            code = (g["q"] >> (72 * (i // 16) + 4 * (i % 16))) & 0xF
            v = bf16_value(c)
            assert code & 7 == rne_e2m1(v / d), (t, hex(s), hex(c))
            assert code >> 3 == (v < 0)
            gold = e2m1_round(abs(float(v)) / (t * float(ue4m3(s))))
            assert Fraction(float(gold)) == E2M1_MAGS[code & 7]
            ties += any(abs(v) / d == mid for mid, _ in MIDS)
    assert ties >= 60, ties
    print(f"{sum(len(x) for *_, x in cases)} elements, {ties} exact ties")


def test_nvfp4_zero_scale_keeps_signs():
    """amax / (6 T) at or below 2**-10 gives scale 0: every element is 0 with its sign."""
    t = int(np.float32(2.0 ** 20).view(np.uint32))
    v = np.float32(6 * 2.0 ** 20 * 2.0 ** -10)            # exactly the tie at 2**-10
    x = codes_of(np.full(64, v))
    x[1::2] |= 0x8000
    x[48:] = codes_of(np.full(16, np.float32(6 * 2.0 ** 20 * 2.0 ** -9)))   # scale 2**-9
    q = run_nv(x, [t])[0]
    assert q == golden_nv(x, t)[0]
    for b in range(3):
        assert (q >> (72 * b + 64)) & 0xFF == 0
        for i in range(16):
            assert (q >> (72 * b + 4 * i)) & 0xF == (8 if i % 2 else 0)
    assert (q >> (72 * 3 + 64)) & 0xFF == 1


# ------------------------------------------------------------------------------- whole groups

@pytest.mark.parametrize("resq,count", [("none", 270), ("2:4", 63), ("dense", 45)])
def test_mxfp4_groups_vs_golden(resq, count):
    rng = np.random.default_rng({"none": 1, "2:4": 2, "dense": 3}[resq])
    codes = mx_groups(rng, count)
    _compare_mx(codes, resq)


def _compare_mx(codes, resq):
    start = time.time()
    q, r = run_mx(codes, resq)
    gq, gr = golden_mx(codes, resq)
    for k in range(len(codes)):
        assert q[k] == gq[k], (k, [hex(c) for c in codes[k]])
        assert r[k] == gr[k], (k, [hex(c) for c in codes[k]])
    print(f"mxfp4 {resq}: {len(codes)} groups, 0 mismatches, {time.time() - start:.1f} s")


def test_nvfp4_groups_vs_golden():
    rng = np.random.default_rng(7)
    codes = mx_groups(rng, 180)
    ts = t_values(rng, 30)
    # also the golden model's own T of each group (quantize(x, "nvfp4") end to end)
    tbits = []
    for k, g in enumerate(codes):
        if k % 3 == 0:
            tbits.append(int(nvmod.tensor_scale(as_f32(g)).view(np.uint32)))
        else:
            tbits.append(ts[k % len(ts)])
    _compare_nv(codes, tbits)
    g = codes[0:1]
    qt = quantize(as_f32(g).reshape(1, 64), "nvfp4")
    assert run_nv(g, [int(qt.fields["tensor_scale"].view(np.uint32))])[0] == \
        packing.pack_ints(operand_layout("nvfp4"), {"elem": qt.fields["elem"],
                                                    "scale": qt.fields["scale"]})[0]


def _compare_nv(codes, tbits):
    start = time.time()
    got = run_nv(codes, tbits)
    for k, (g, t) in enumerate(zip(codes, tbits)):
        assert got[k] == golden_nv(g, t)[0], (k, hex(t), [hex(c) for c in g])
    print(f"nvfp4: {len(codes)} groups, 0 mismatches, {time.time() - start:.1f} s")


@pytest.mark.parametrize("resq", ["none", "2:4", "dense"])
def test_chained_components(resq):
    """MXFP4QuantizerComb / NVFP4QuantizerComb (all stages in one circuit) equal the golden
    model and the stage-by-stage runs; the words compared are distinct Python ints."""
    rng = np.random.default_rng(9)
    codes = mx_groups(rng, 9)
    gq, gr = golden_mx(codes, resq)
    q, r = run_mx(codes, resq, chained=True)
    assert q == list(gq) and r == list(gr)
    assert (q, r) == run_mx(codes, resq)
    assert all(isinstance(v, int) for v in q) and len(set(q)) == len(q)
    if resq == "none":
        t = [int(np.float32(0.37).view(np.uint32))] * len(codes)
        assert run_nv(codes, t, chained=True) == golden_nv(codes, t[0]) == run_nv(codes, t)


@pytest.mark.slow
@pytest.mark.parametrize("resq", ["none", "2:4", "dense"])
def test_mxfp4_groups_vs_golden_many(resq):
    rng = np.random.default_rng(100)
    _compare_mx(mx_groups(rng, 1500), resq)


@pytest.mark.slow
def test_nvfp4_groups_vs_golden_many():
    rng = np.random.default_rng(101)
    codes = mx_groups(rng, 1500)
    ts = t_values(rng, 200)
    _compare_nv(codes, [ts[k % len(ts)] for k in range(len(codes))])
