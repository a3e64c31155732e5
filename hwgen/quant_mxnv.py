"""BF16 -> MXFP4 and BF16 -> NVFP4 quantizer cores: one 64-element group per evaluation.

Each core is a :class:`hwgen.core.QuantizerCore` (stages, ports ``i``/``o``, ``parts()``:
:mod:`hwgen.core`). The first stage takes ``x``, 64 BF16 codes (element i at bits
``[16 i, 16 i + 16)``), and for NVFP4 ``t``, the FP32 tensor scale T (raw bits); the last
stage gives ``q``, the packed operand step (:func:`hif4spec.operand_layout`), and with a
residual ``r`` (:func:`hif4spec.residual_layout`). :class:`MXFP4QuantizerComb` and
:class:`NVFP4QuantizerComb` chain all stages in one component (:class:`hwgen.core.CoreChain`).
Every output bit equals the golden model (``sim.formats``; ``docs/encoders.md`` derives the
widths and proves the exact comparisons equal to its float64 steps).

E2M1 rounding (both formats)
----------------------------
An element magnitude ``a`` is rounded against a block divisor ``d`` (MXFP4: ``2**e``;
NVFP4: ``T * s``) as a fixed-point integer ``F = a / 2**(E - 9)``, ``E = exp2floor(d)``,
exact whenever it can matter: a value below ``2**(E - 2) <= d / 4`` rounds to 0, a value at
or above ``2**(E + 4) > 5 d`` saturates. The E2M1 code is the number of the seven rounding
midpoints ``d * {1/4, 3/4, 5/4, 7/4, 5/2, 7/2, 5}`` that ``a`` passes, a midpoint being
passed on a tie only when the code above it is even; in units of ``2**(E - 9)`` that is
``F > H_j`` for integer bounds ``H_j`` (MXFP4: constants; NVFP4: per block, from
``floor(d * m_j)`` and whether it is exact).

MXFP4 (spec section 3; residual: section 6, ``docs/mxfp4_residual.md``)
---------------------------------------------------------------------
``scale``: per 32-element block, the E8M0 code ``max(fmax, 2) - 2`` of the largest BF16
exponent field (255 when a field is 255: a NaN block). ``elements``: E2M1 codes; with a
residual also ``dX = X - deq(Q(X))`` per element, exact, as a 10-bit magnitude ``m`` at
weight ``2**(l - 136)``, and its sign. ``res_scale`` / ``res_elements``: the same
quantization of dX (the residual block is NaN with its main block). ``select`` (2:4): in each
micro-group of four the two largest magnitudes, ties to the lower position, packed with
ascending positions.

NVFP4 (spec section 4)
----------------------
``amax``: per 16-element block the largest BF16 magnitude (NaN block when its exponent field
is 255). ``scale``: ``s = RNE_E4M3(min(amax / 6 / T, 448))`` by a 5-bit restoring division
of the normalized significands with a remainder sticky bit. ``bounds``: ``d = T * s``
(24 x 4-bit product), normalized, and the seven bounds ``H_j``. ``elements``: E2M1 codes.
"""

from fractions import Fraction

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hif4spec import ELEMENT_TYPES, FORMATS, RESIDUAL24_MXFP4, STEP_ELEMS
from hif4spec import operand_layout, residual_layout

from .core import CoreChain, QuantizerCore
from .parts import Part

__all__ = ["MXFP4Quantizer", "NVFP4Quantizer", "MXFP4QuantizerComb", "NVFP4QuantizerComb",
           "E2M1_MIDPOINTS", "FRAC", "MXFP4_BOUNDS", "t_fields", "nv_divisor", "nv_scale_code",
           "nv_block_bounds"]

_BF16 = ELEMENT_TYPES["BF16"]
_E2M1 = ELEMENT_TYPES["E2M1"]
_E4M3 = ELEMENT_TYPES["UE4M3"]
_FP32_MAN = 23                                     # T: IEEE binary32 fraction bits
_FP32_EXP = 8
_FP32_BIAS = 127

#: BF16 fraction bits, exponent field width and bias.
MAN = _BF16.man_bits
EXPW = _BF16.exp_bits
BIAS = _BF16.bias
#: BF16 exponent field of Inf/NaN.
EXP_SPECIAL = (1 << EXPW) - 1
#: Bits of a BF16 magnitude (the code without its sign bit).
MAG = _BF16.bits - 1
#: Elements per group.
GROUP = STEP_ELEMS


def _e2m1_grid():
    """E2M1 magnitudes by code (0..7), exact, from the element type table."""
    t, out = _E2M1, []
    for code in range(1 << (t.bits - 1)):
        e, m = code >> t.man_bits, code & ((1 << t.man_bits) - 1)
        sig = Fraction(m if e == 0 else (1 << t.man_bits) | m, 1 << t.man_bits)
        out.append(sig * Fraction(2) ** (max(e, 1) - t.bias))
    return out


def _exp2floor(v):
    v = Fraction(v)
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


_GRID = _e2m1_grid()
#: ``(midpoint, up)`` between E2M1 codes c and c + 1; ``up``: a tie rounds to c + 1 (even).
E2M1_MIDPOINTS = tuple(((lo + hi) / 2, (c + 1) % 2 == 0)
                       for c, (lo, hi) in enumerate(zip(_GRID, _GRID[1:])))
#: Fraction bits of the fixed-point element magnitude: a BF16 value in the binade of the
#: smallest midpoint (1/4) has its last bit at 2**-9.
FRAC = MAN - _exp2floor(E2M1_MIDPOINTS[0][0])
#: exp2floor of the largest E2M1 magnitude (6): the MXFP4 scale is exp2floor(amax) - 2.
E2M1_EMAX = _exp2floor(_GRID[-1])
#: Integer bounds of the MXFP4 element rounding: code = #{j : F > H_j}, F = a / 2**(e - 9).
MXFP4_BOUNDS = tuple(int(mid * 2 ** FRAC) - int(up) for mid, up in E2M1_MIDPOINTS)
#: Twice the E2M1 magnitudes (integers), by code.
_E2M1_TWICE = tuple(int(2 * v) for v in _GRID)
#: Bits of the fixed-point magnitude F: below 2**(E2M1_EMAX + 1 + FRAC) for MXFP4 (|a| <
#: 2**(e + 3)); NVFP4 keeps one bit more (values up to 2**(E + 4) decide).
FIX = E2M1_EMAX + 1 + FRAC
#: Bits of |dX| in units of 2**(e - 9) (<= 1008, docs/encoders.md).
DX = FRAC + 1


MX = FORMATS["mxfp4"]
NV = FORMATS["nvfp4"]


def _bf16(x, i):
    """``(sign, field, fraction)`` of BF16 element ``i`` of the group word ``x``."""
    w = x[_BF16.bits * i:_BF16.bits * (i + 1)]
    return w[MAG], w[MAN:MAG], w[:MAN]


def _max_tree(m, values, name):
    """Maximum of unsigned ``values`` by a balanced tree of compare-and-select."""
    level, depth = list(values), 0
    while len(level) > 1:
        nxt = []
        for k in range(0, len(level) - 1, 2):
            s = Signal(len(level[k]), name=f"{name}_l{depth}_{k // 2}")
            m.d.comb += s.eq(Mux(level[k] >= level[k + 1], level[k], level[k + 1]))
            nxt.append(s)
        if len(level) % 2:
            nxt.append(level[-1])
        level, depth = nxt, depth + 1
    return level[0]


def _thermo_code(t):
    """3-bit code of a monotone thermometer ``t[0] >= t[1] >= ... >= t[6]`` (its count)."""
    return Cat((t[0] & ~t[1]) | (t[2] & ~t[3]) | (t[4] & ~t[5]) | t[6],
               (t[1] & ~t[3]) | t[5],
               t[3])


def _rne_e2m1(m, fix, bounds, name):
    """E2M1 magnitude code of the fixed-point magnitude ``fix`` against ``bounds`` H_j."""
    t = [Signal(name=f"{name}_t{j}") for j in range(len(bounds))]
    m.d.comb += [tj.eq(fix > h) for tj, h in zip(t, bounds)]
    code = Signal(3, name=f"{name}_code")
    m.d.comb += code.eq(_thermo_code(t))
    return code


def _stage_layout(fields):
    return data.StructLayout(dict(fields))


class _Stage(wiring.Component):
    """A combinational core stage: ``o = f(i)`` built by ``_build(m)``."""

    def __init__(self, i_layout, o_layout):
        super().__init__({"i": In(i_layout), "o": Out(o_layout)})

    def elaborate(self, platform):
        m = Module()
        self._build(m)
        return m


# ------------------------------------------------------------------------------------------
# MXFP4

_MX_STEP = operand_layout("mxfp4")
_MX_BLOCKS = _MX_STEP.blocks
_MX_BLOCK = MX.block
_MX_NAN = MX.nan_scale_code
_MX_ELEM_POS = _MX_STEP.positions("elem")          # step bit of element i (i = 0..63)
_MX_SCALE_POS = _MX_STEP.positions("scale")        # step bit of block b's scale
_MX_ELEM = _MX_STEP.width("elem")
_MX_SCALE = _MX_STEP.width("scale")
#: The residual element of the previous stage: |dX| = m * 2**(l - BIAS - FRAC), sign s.
DX_ELEM = data.StructLayout({"m": DX, "l": EXPW, "s": 1})
_MX_SCALES = data.ArrayLayout(_MX_SCALE, _MX_BLOCKS)


def _mx_scale_code(m, g, name):
    """E8M0 code max(gmax - 2, 0) of a block's exponent fields ``g`` (255: NaN, when a
    field is 255)."""
    gmax = _max_tree(m, g, name)
    code = Signal(_MX_SCALE, name=f"{name}_code")
    m.d.comb += code.eq(Mux(gmax == EXP_SPECIAL, _MX_NAN,
                            Mux(gmax > E2M1_EMAX, gmax - E2M1_EMAX, 0)))
    return code


def _to_fix(m, mag, lsb, code, max_shift, width, name):
    """``mag * 2**(lsb - code)`` as a ``width``-bit integer (``mag`` shifted left by ``lsb -
    code``, 0 when that is negative or above ``max_shift``), and whether it is negative."""
    sh = Signal(signed(EXPW + 2), name=f"{name}_sh")
    fix = Signal(width, name=f"{name}_fix")
    m.d.comb += [sh.eq(lsb - code),
                 fix.eq(Mux((sh < 0) | (sh > max_shift), 0, mag << sh[:max_shift.bit_length()]))]
    return fix, sh


class MXScale(_Stage):
    """Main E8M0 scales: per block ``max(fmax, 2) - 2`` of the BF16 exponent fields (255 for
    a NaN block). ``o`` passes ``x`` on with ``scale``."""

    def __init__(self):
        super().__init__(_stage_layout({"x": GROUP * _BF16.bits}),
                         _stage_layout({"x": GROUP * _BF16.bits, "scale": _MX_SCALES}))

    def _build(self, m):
        x = self.i.x
        for b in range(_MX_BLOCKS):
            g = [_bf16(x, i)[1] for i in range(b * _MX_BLOCK, (b + 1) * _MX_BLOCK)]
            m.d.comb += self.o.scale[b].eq(_mx_scale_code(m, g, f"s{b}"))
        m.d.comb += self.o.x.eq(x)

    def parts(self):
        """Per block: the max tree of the 32 exponent fields, the NaN compare, the clamp
        compare and select and the 8-bit subtraction."""
        n = _MX_BLOCKS
        return [Part("maxtree", (_MX_BLOCK, EXPW), n), Part("cmp", (EXPW,), 2 * n),
                Part("mux", (2, EXPW), n), Part("add", (EXPW,), n)]


class MXElements(_Stage):
    """Main E2M1 codes against the block scales; with a residual also dX per element.

    Element magnitude ``a = A * 2**(max(f, 1) - 134)`` (A: 8-bit significand) is ``F = A <<
    (max(f, 1) + 2 - c)`` in units of ``2**(c - 136)`` (c: E8M0 code); a negative shift
    means ``a < 2**(e - 2)``, code 0. dX: where the shift is >= 0, ``|dX| = |F - 2q * 2**8|``
    (q the E2M1 magnitude; at most 1008) at ``l = c``; elsewhere dX = X, ``m = A`` at ``l =
    max(f, 1) + 2``."""

    def __init__(self, residual):
        self.residual = residual
        i_lay = _stage_layout({"x": GROUP * _BF16.bits, "scale": _MX_SCALES})
        o = {"q": _MX_STEP.bits}
        if residual:
            o["d"] = data.ArrayLayout(DX_ELEM, GROUP)
        super().__init__(i_lay, _stage_layout(o))

    def _build(self, m):
        x, q = self.i.x, self.o.q
        for b in range(_MX_BLOCKS):
            c = self.i.scale[b]
            nan = c == _MX_NAN
            m.d.comb += q[_MX_SCALE_POS[b]:_MX_SCALE_POS[b] + _MX_SCALE].eq(c)
            for i in range(b * _MX_BLOCK, (b + 1) * _MX_BLOCK):
                s, f, frac = _bf16(x, i)
                nz = f.any()
                mag = Cat(frac, nz)                     # A, 8 bits
                lsb = Mux(nz, f, 1) + (FRAC - MAN)
                fix, sh = _to_fix(m, mag, lsb, c, FIX - 1 - MAN, FIX, f"e{i}")
                code = _rne_e2m1(m, fix, MXFP4_BOUNDS, f"e{i}")
                neg = s & (nz | frac.any())             # x < 0
                pos = _MX_ELEM_POS[i]
                m.d.comb += q[pos:pos + _MX_ELEM].eq(Mux(nan, 0, Cat(code, neg)))
                if self.residual:
                    twice = Signal(4, name=f"e{i}_q2")
                    with m.Switch(code):
                        for k, v in enumerate(_E2M1_TWICE):
                            with m.Case(k):
                                m.d.comb += twice.eq(v)
                    qfix = twice << (FRAC - 1)
                    over = fix < qfix
                    dx = Signal(DX, name=f"e{i}_dx")
                    m.d.comb += dx.eq(Mux(over, qfix - fix, fix - qfix))
                    d = self.o.d[i]
                    inside = sh >= 0
                    m.d.comb += [
                        d.m.eq(Mux(nan, 0, Mux(inside, dx, mag))),
                        d.l.eq(Mux(inside, c, lsb)),
                        d.s.eq(~nan & Mux(inside, (dx != 0) & (neg ^ over), neg)),
                    ]

    def parts(self):
        """Per element: the shift-amount subtraction, the 8-bit alignment shift (0..4),
        the E2M1 rounding against the seven constant 12-bit bounds and the code select;
        with a residual the E2M1 value compare and subtraction and the dX select. The
        E2M1 value ``2q * 2**8`` has 8 zero low bits: the compare spans F's upper 4 bits,
        and ``|F - 2q * 2**8|`` is a 4-bit subtraction with a conditional negation of the
        10-bit result."""
        n = GROUP
        out = [Part("add", (EXPW + 1,), n), Part("shl", (MAN + 1, FIX - MAN), n),
               Part("e2m1rnd", (FIX,), n), Part("mux", (2, 4), n),
               Part("cmp", (_MX_SCALE,), _MX_BLOCKS)]
        if self.residual:
            hi = FIX - (FRAC - 1)
            out += [Part("cmp", (hi,), n), Part("add", (hi + 1,), n), Part("neg", (DX,), n),
                    Part("mux", (2, DX + EXPW + 1), n)]
        return out


class MXResScale(_Stage):
    """Residual E8M0 scales: the exponent field of each dX, ``l + msb(m) - 9`` (0 for a zero
    or for anything below field 1), and ``max(gmax - 2, 0)`` per block; NaN with the main
    block."""

    def __init__(self, residual):
        self.residual = residual
        self.lay = _stage_layout({"q": _MX_STEP.bits, "d": data.ArrayLayout(DX_ELEM, GROUP)})
        o = {"q": _MX_STEP.bits, "d": data.ArrayLayout(DX_ELEM, GROUP), "rscale": _MX_SCALES}
        super().__init__(self.lay, _stage_layout(o))

    def _build(self, m):
        q = self.i.q
        for b in range(_MX_BLOCKS):
            c = q[_MX_SCALE_POS[b]:_MX_SCALE_POS[b] + _MX_SCALE]
            gs = []
            for i in range(b * _MX_BLOCK, (b + 1) * _MX_BLOCK):
                d = self.i.d[i]
                msb = Signal(range(DX + 1), name=f"r{i}_msb")
                for k in range(DX):                     # priority: the highest set bit wins
                    with m.If(d.m[k]):
                        m.d.comb += msb.eq(k)
                g = Signal(signed(EXPW + 2), name=f"r{i}_g")
                m.d.comb += g.eq(d.l + msb - FRAC)
                gu = Signal(EXPW, name=f"r{i}_gu")
                m.d.comb += gu.eq(Mux((d.m == 0) | (g < 0), 0, g))
                gs.append(gu)
            code = _mx_scale_code(m, gs, f"rs{b}")
            m.d.comb += self.o.rscale[b].eq(Mux(c == _MX_NAN, _MX_NAN, code))
        m.d.comb += [self.o.q.eq(q), self.o.d.eq(self.i.d)]

    def parts(self):
        """Per element: a 10-bit leading-one detector and the exponent add; per block the
        scale logic of :class:`MXScale` and the NaN compare of the main scale."""
        n = GROUP
        return [Part("lzc", (DX,), n), Part("add", (EXPW + 1,), n),
                Part("maxtree", (_MX_BLOCK, EXPW), _MX_BLOCKS),
                Part("cmp", (EXPW,), 3 * _MX_BLOCKS), Part("mux", (2, EXPW), _MX_BLOCKS),
                Part("add", (EXPW,), _MX_BLOCKS)]


class MXResElements(_Stage):
    """Residual E2M1 codes: ``F = m << (l - c_r)`` (0..11; a shift outside that range only
    meets m = 0 or a value below a quarter of the scale) against the MXFP4 bounds. ``o``:
    ``q`` and the residual as an MXFP4 step ``r`` (``dense``) or ``rc`` (``2:4``, before the
    selection)."""

    def __init__(self, residual):
        self.residual = residual
        i_lay = _stage_layout({"q": _MX_STEP.bits, "d": data.ArrayLayout(DX_ELEM, GROUP),
                               "rscale": _MX_SCALES})
        name = "r" if residual == "dense" else "rc"
        self.out_name = name
        super().__init__(i_lay, _stage_layout({"q": _MX_STEP.bits, name: _MX_STEP.bits}))

    def _build(self, m):
        r = getattr(self.o, self.out_name)
        for b in range(_MX_BLOCKS):
            c = self.i.rscale[b]
            nan = c == _MX_NAN
            m.d.comb += r[_MX_SCALE_POS[b]:_MX_SCALE_POS[b] + _MX_SCALE].eq(c)
            for i in range(b * _MX_BLOCK, (b + 1) * _MX_BLOCK):
                d = self.i.d[i]
                fix, _ = _to_fix(m, d.m, d.l, c, FIX - 1, FIX, f"r{i}")
                code = _rne_e2m1(m, fix, MXFP4_BOUNDS, f"r{i}")
                pos = _MX_ELEM_POS[i]
                m.d.comb += r[pos:pos + _MX_ELEM].eq(Mux(nan, 0, Cat(code, d.s)))
        m.d.comb += self.o.q.eq(self.i.q)

    def parts(self):
        """Per element: the shift-amount subtraction, the 10-bit alignment shift (0..11),
        the E2M1 rounding against the seven constant 12-bit bounds and the code select."""
        n = GROUP
        return [Part("add", (EXPW + 1,), n), Part("shl", (DX, FIX - 1 + 1), n),
                Part("e2m1rnd", (FIX,), n), Part("mux", (2, 4), n),
                Part("cmp", (_MX_SCALE,), _MX_BLOCKS)]


_R24 = residual_layout("mxfp4", "2:4")
_R24_KEPT = RESIDUAL24_MXFP4.kept
_R24_POSW = _R24.width("pos")
_R24_GROUP = 1 << _R24_POSW                     # positions per micro-group
_R24_PER = _R24_KEPT * _R24_GROUP // RESIDUAL24_MXFP4.positions


def select24(m, codes, name):
    """The 2:4 selection of one micro-group: ``codes`` four 4-bit E2M1 codes; returns the
    two kept ``(code, position)`` pairs, positions ascending. Element i is kept when fewer
    than two others beat it: j beats i when |j| > |i|, or |j| == |i| and j < i."""
    mags = [c[:3] for c in codes]
    keep = []
    for i in range(_R24_GROUP):
        beats = [(mags[j] >= mags[i]) if j < i else (mags[j] > mags[i])
                 for j in range(_R24_GROUP) if j != i]
        k = Signal(name=f"{name}_keep{i}")
        # kept iff at most one of the three others beats it
        m.d.comb += k.eq(~((beats[0] & beats[1]) | (beats[0] & beats[2]) |
                           (beats[1] & beats[2])))
        keep.append(k)
    lo = Signal(_R24_POSW, name=f"{name}_p0")
    hi = Signal(_R24_POSW, name=f"{name}_p1")
    for i in reversed(range(_R24_GROUP)):            # lowest kept position
        with m.If(keep[i]):
            m.d.comb += lo.eq(i)
    for i in range(_R24_GROUP):                      # highest kept position
        with m.If(keep[i]):
            m.d.comb += hi.eq(i)
    cat = Cat(*codes)
    return [(cat.word_select(lo, 4), lo), (cat.word_select(hi, 4), hi)]


class MXSelect24(_Stage):
    """2:4 selection and packing of the residual (``docs/mxfp4_residual.md``): per
    micro-group the two codes of largest magnitude (ties: lower position), positions
    ascending, and the residual E8M0 scale."""

    def __init__(self):
        i_lay = _stage_layout({"q": _MX_STEP.bits, "rc": _MX_STEP.bits})
        super().__init__(i_lay, _stage_layout({"q": _MX_STEP.bits, "r": _R24.bits}))

    def _build(self, m):
        rc, r = self.i.rc, self.o.r
        epos, ppos, spos = _R24.positions("elem"), _R24.positions("pos"), _R24.positions("scale")
        ew = _R24.width("elem")
        for b in range(_MX_BLOCKS):
            m.d.comb += r[spos[b]:spos[b] + _MX_SCALE].eq(
                rc[_MX_SCALE_POS[b]:_MX_SCALE_POS[b] + _MX_SCALE])
            for g in range(_MX_BLOCK // _R24_GROUP):
                first = b * _MX_BLOCK + g * _R24_GROUP
                codes = [rc[_MX_ELEM_POS[first + k]:_MX_ELEM_POS[first + k] + _MX_ELEM]
                         for k in range(_R24_GROUP)]
                kept = select24(m, codes, f"g{b}_{g}")
                for k, (code, pos) in enumerate(kept):
                    j = b * _R24_KEPT + g * _R24_PER + k
                    m.d.comb += [r[epos[j]:epos[j] + ew].eq(code),
                                 r[ppos[j]:ppos[j] + _R24_POSW].eq(pos)]
        m.d.comb += self.o.q.eq(self.i.q)

    def parts(self):
        """Per micro-group: six 3-bit magnitude compares, the keep logic and two 4:1 code
        selects."""
        groups = GROUP // _R24_GROUP
        return [Part("cmp", (3,), groups * 6), Part("mux", (4, 4), groups * 2)]


class MXFP4Quantizer(QuantizerCore):
    """BF16 -> MXFP4 quantizer core (keyword-only ``residual`` "none", "2:4" or "dense").

    Stages: ``scale``, ``elements`` and, with a residual, ``res_scale``, ``res_elements``
    and (2:4) ``select``; module docstring."""

    unit = "mxfp4_quant"

    def __init__(self, *, residual="none"):
        super().__init__(residual=residual)
        res = residual != "none"
        self.stages = [("scale", MXScale()), ("elements", MXElements(res))]
        if res:
            self.stages += [("res_scale", MXResScale(residual)),
                            ("res_elements", MXResElements(residual))]
        if residual == "2:4":
            self.stages.append(("select", MXSelect24()))


# ------------------------------------------------------------------------------------------
# NVFP4

_NV_STEP = operand_layout("nvfp4")
_NV_BLOCKS = _NV_STEP.blocks
_NV_BLOCK = NV.block
_NV_NAN = NV.nan_scale_code
_NV_ELEM_POS = _NV_STEP.positions("elem")
_NV_SCALE_POS = _NV_STEP.positions("scale")
_NV_ELEM = _NV_STEP.width("elem")
_NV_SCALE = _NV_STEP.width("scale")
_S_BITS = _E4M3.exp_bits + _E4M3.man_bits       # UE4M3 code bits used (7)
_S_MAN = _E4M3.man_bits
#: E4M3 significand bits (hidden bit included) and T significand bits (24).
_S_SIG = _S_MAN + 1
_T_SIG = _FP32_MAN + 1
#: Quotient bits of the scale division: the E4M3 significand and a guard bit.
_Q_BITS = _S_SIG + 1
#: Bits of the product d = T * s significand.
_P_BITS = _T_SIG + _S_SIG
#: E2M1 midpoints in quarters (1, 3, 5, 7, 10, 14, 20) and the bits of the bounds.
_MID4 = tuple(int(mid * 4) for mid, _ in E2M1_MIDPOINTS)
_NV_FIX = FIX + 1
#: Exponent arithmetic width (signed).
_EW = 12
#: The E4M3 largest finite value 448 = 1.75 * 2**8, as (significand of _Q_BITS bits, exp).
_S_MAX_EXP = _exp2floor(Fraction(_E4M3.max_finite))
_S_MAX_Q = int(Fraction(_E4M3.max_finite) / 2 ** _S_MAX_EXP * 2 ** (_Q_BITS - 1))
_S_EMIN = 1 - _E4M3.bias                         # smallest normal exponent (-6)
_S_MAX_CODE = int(((_S_MAX_EXP + _E4M3.bias) << _S_MAN) |
                  ((_S_MAX_Q >> 1) & ((1 << _S_MAN) - 1)))
_NV_SCALES = data.ArrayLayout(_NV_SCALE, _NV_BLOCKS)
#: The 6 of amax / 6 / T = 3 * 2**1: the 3 enters the divisor, the 2 the exponent.
_SIX = int(_GRID[-1])
_SIX_ODD, _SIX_EXP = _SIX >> 1, 1
assert _SIX == _SIX_ODD << _SIX_EXP
#: Divisor bits: 3 * Ts < 2**26.
_DW = _T_SIG + _SIX_ODD.bit_length()
#: The dividend N0 = A' << _N_SHIFT lies in [2**25, 2**26) like the normalized divisor.
_N_SHIFT = _DW - (MAN + 1)
#: u = N / D * 2**Eu: Eu = (fa - 134) - (ft - 150) - _N_SHIFT - 1 - [N doubled] + [D doubled].
_EU_OFFSET = -(BIAS + MAN) + (_FP32_BIAS + _FP32_MAN) - _N_SHIFT - _SIX_EXP


def t_fields(t):
    """T's exponent field and its 24-bit significand (hidden bit set: T is a normal float)."""
    return t[_FP32_MAN:_FP32_MAN + _FP32_EXP], Cat(t[:_FP32_MAN], 1)


def nv_divisor(m, ts):
    """The divisor ``D = 3 Ts`` of :class:`NVScale`, doubled when below ``2**25``; returns
    ``(div, dn)``, ``dn`` set when it was doubled. Shared by the blocks."""
    dw = _DW
    d3 = Signal(dw, name="d3")
    m.d.comb += d3.eq(ts * _SIX_ODD)
    dn = Signal(name="dn")
    m.d.comb += dn.eq(~d3[dw - 1])
    div = Signal(dw, name="div")                # in [2**25, 2**26)
    m.d.comb += div.eq(Mux(dn, d3 << 1, d3))
    return div, dn


def nv_scale_code(m, a, ft, div, dn, name):
    """The UE4M3 scale code of one block of :class:`NVScale` from its amax ``a`` (15-bit
    BF16 magnitude), T's exponent field ``ft`` and the shared :func:`nv_divisor`."""
    dw = _DW
    fa, frac = a[MAN:MAG], a[:MAN]
    nz = fa.any()
    sig = Cat(frac, nz)
    lz = Signal(range(MAN + 2), name=f"{name}_lz")
    for k in range(MAN + 1):                    # the highest set bit decides
        with m.If(sig[k]):
            m.d.comb += lz.eq(MAN - k)
    norm = Signal(MAN + 1, name=f"{name}_norm")
    m.d.comb += norm.eq(sig << lz)
    fa_eff = Signal(signed(_EW), name=f"{name}_fa")
    m.d.comb += fa_eff.eq(Mux(nz, fa, 1) - lz)
    n0 = Signal(dw, name=f"{name}_n0")
    m.d.comb += n0.eq(norm << _N_SHIFT)
    nn = Signal(name=f"{name}_nn")
    m.d.comb += nn.eq(n0 < div)
    rem = Signal(dw + 1, name=f"{name}_r0")
    m.d.comb += rem.eq(Mux(nn, n0 << 1, n0) - div)
    bits = []
    for k in range(_Q_BITS - 1):
        r2 = Signal(dw + 1, name=f"{name}_r{k}x2")
        m.d.comb += r2.eq(rem << 1)
        bit = Signal(name=f"{name}_q{k}")
        m.d.comb += bit.eq(r2 >= div)
        nrem = Signal(dw + 1, name=f"{name}_r{k + 1}")
        m.d.comb += nrem.eq(Mux(bit, r2 - div, r2))
        bits.append(bit)
        rem = nrem
    quo = Signal(_Q_BITS, name=f"{name}_quo")   # 1.mmmg, MSB first in bits
    m.d.comb += quo.eq(Cat(*reversed(bits), 1))
    eu = Signal(signed(_EW), name=f"{name}_eu")
    m.d.comb += eu.eq(fa_eff - ft + _EU_OFFSET - nn + dn)
    # right shift of the quotient for subnormal results (0 normal, 5 shifts all out)
    rs = Signal(range(_Q_BITS + 1), name=f"{name}_rs")
    m.d.comb += rs.eq(Mux(eu >= _S_EMIN, 0,
                          Mux(eu < _S_EMIN - _Q_BITS, _Q_BITS, _S_EMIN - eu)))
    wide = Signal(2 * _Q_BITS, name=f"{name}_wide")
    m.d.comb += wide.eq(Cat(Const(0, _Q_BITS), quo) >> rs)
    kept = wide[_Q_BITS + 1:]                   # significand at the E4M3 grid
    guard = wide[_Q_BITS]
    sticky = wide[:_Q_BITS].any() | rem.any()
    field = Signal(_EW, name=f"{name}_field")
    m.d.comb += field.eq(Mux(eu >= _S_EMIN, eu - _S_EMIN, 0))
    pre = Signal(_S_BITS + 1, name=f"{name}_pre")
    m.d.comb += pre.eq((field << _S_MAN) + kept)
    up = guard & (sticky | pre[0])
    big = (eu > _S_MAX_EXP) | ((eu == _S_MAX_EXP) & (quo >= _S_MAX_Q))
    code = Signal(_NV_SCALE, name=f"{name}_code")
    with m.If(fa == EXP_SPECIAL):
        m.d.comb += code.eq(_NV_NAN)
    with m.Elif(~a.any()):
        m.d.comb += code.eq(0)
    with m.Elif(big):
        m.d.comb += code.eq(_S_MAX_CODE)
    with m.Else():
        m.d.comb += code.eq(pre + up)
    return code


def nv_block_bounds(m, ft, ts, code, bd, name):
    """Drive ``bd`` (:attr:`NVBounds.BOUND`) for one block of :class:`NVBounds` from its
    scale ``code`` and T's fields ``ft``, ``ts``."""
    code = code[:_S_BITS]
    es, ms = code[_S_MAN:], code[:_S_MAN]
    ssig = Cat(ms, es.any())
    p = Signal(_P_BITS, name=f"{name}_p")
    m.d.comb += p.eq(ts * ssig)
    lz = Signal(range(_P_BITS + 1), name=f"{name}_lz")
    for k in range(_P_BITS):
        with m.If(p[k]):
            m.d.comb += lz.eq(_P_BITS - 1 - k)
    pn = Signal(_P_BITS, name=f"{name}_pn")
    m.d.comb += pn.eq(p << lz)
    # d = P * 2**(ft - 150 + max(es, 1) - 10); Ed = that + 27 - lz
    m.d.comb += [
        bd.ed.eq(ft + Mux(es.any(), es, 1) - lz
                 - (_FP32_BIAS + _FP32_MAN) - (_E4M3.bias + _S_MAN) + (_P_BITS - 1)),
        bd.zero.eq((code == _NV_NAN) | (ssig == 0)),
    ]
    shift = _P_BITS - 1 + 2 - FRAC                # 20: Pn m_j / 4 in units 2**(Ed - 9)
    for j, (m4, (_, up)) in enumerate(zip(_MID4, E2M1_MIDPOINTS)):
        prod = Signal(_P_BITS + m4.bit_length(), name=f"{name}_m{j}")
        m.d.comb += prod.eq(pn * m4)
        fl = prod[shift:]
        if up:
            m.d.comb += bd.h[j].eq(fl - ~prod[:shift].any())
        else:
            m.d.comb += bd.h[j].eq(fl)


class NVAmax(_Stage):
    """Per 16-element block the largest BF16 magnitude (15 bits; exponent field 255 marks
    a NaN block)."""

    def __init__(self):
        lay = {"x": GROUP * _BF16.bits, "t": _FP32_MAN + _FP32_EXP + 1}
        super().__init__(_stage_layout(lay), _stage_layout(
            {**lay, "amax": data.ArrayLayout(MAG, _NV_BLOCKS)}))

    def _build(self, m):
        x = self.i.x
        for b in range(_NV_BLOCKS):
            mags = [x[_BF16.bits * i:_BF16.bits * i + MAG]
                    for i in range(b * _NV_BLOCK, (b + 1) * _NV_BLOCK)]
            m.d.comb += self.o.amax[b].eq(_max_tree(m, mags, f"a{b}"))
        m.d.comb += [self.o.x.eq(x), self.o.t.eq(self.i.t)]

    def parts(self):
        """Per block the max tree of its 16 magnitudes."""
        return [Part("maxtree", (_NV_BLOCK, MAG), _NV_BLOCKS)]


class NVScale(_Stage):
    """UE4M3 block scales ``RNE_E4M3(min(amax / (6 T), 448))``, exact.

    With ``amax = A' * 2**(fa - 134)`` (A' the normalized 8-bit significand, ``fa`` its
    exponent field, ``1 - lz`` for a subnormal) and ``T = Ts * 2**(ft - 150)``: the divisor
    ``D = 3 Ts`` doubled when below ``2**25``, the dividend ``N = A' << 18`` doubled when
    below D, so ``N / D`` lies in [1, 2) and ``u = N / D * 2**Eu`` with ``Eu = fa - ft - 3
    - [N doubled] + [D doubled]``. Four restoring steps give the 5-bit quotient ``1.mmmg``,
    the remainder the sticky bit; a subnormal ``u`` shifts it right by ``-6 - Eu`` (into the
    sticky); the code is rounded to nearest even; ``u >= 448`` gives 448, amax = 0 gives 0,
    a NaN block 0x7F."""

    def __init__(self):
        lay = {"x": GROUP * _BF16.bits, "t": _FP32_MAN + _FP32_EXP + 1}
        super().__init__(_stage_layout({**lay, "amax": data.ArrayLayout(MAG, _NV_BLOCKS)}),
                         _stage_layout({**lay, "scale": _NV_SCALES}))

    def _build(self, m):
        ft, ts = t_fields(self.i.t)
        div, dn = nv_divisor(m, ts)
        for b in range(_NV_BLOCKS):
            m.d.comb += self.o.scale[b].eq(nv_scale_code(m, self.i.amax[b], ft, div, dn,
                                                         f"b{b}"))
        m.d.comb += [self.o.x.eq(self.i.x), self.o.t.eq(self.i.t)]

    def parts(self):
        """The shared divisor and four blocks' scale codes: one ``nvscale`` primitive, the
        generator's own :func:`nv_divisor` and :func:`nv_scale_code`."""
        return [Part("nvscale", (_NV_BLOCKS,))]


class NVBounds(_Stage):
    """Per block ``d = T * s`` (24 x 4-bit product ``P``), normalized to ``Pn`` in [2**27,
    2**28) with ``Ed = exp2floor(d)``, and the seven bounds ``H_j = floor(Pn m_j / 2**20)``,
    minus 1 for a tie-up midpoint when exact (m_j the midpoints in quarters), in units of
    ``2**(Ed - 9)``. ``zero``: a zero or NaN scale (elements 0)."""

    BOUND = data.StructLayout({"h": data.ArrayLayout(_NV_FIX, len(_MID4)),
                               "ed": signed(_EW), "zero": 1})

    def __init__(self):
        x = {"x": GROUP * _BF16.bits}
        super().__init__(
            _stage_layout({**x, "t": _FP32_MAN + _FP32_EXP + 1, "scale": _NV_SCALES}),
            _stage_layout({**x, "scale": _NV_SCALES,
                           "bound": data.ArrayLayout(self.BOUND, _NV_BLOCKS)}))

    def _build(self, m):
        ft, ts = t_fields(self.i.t)
        for b in range(_NV_BLOCKS):
            nv_block_bounds(m, ft, ts, self.i.scale[b], self.o.bound[b], f"b{b}")
        m.d.comb += [self.o.x.eq(self.i.x), self.o.scale.eq(self.i.scale)]

    def parts(self):
        """Four blocks' bounds: one ``nvbounds`` primitive, the generator's own
        :func:`nv_block_bounds`."""
        return [Part("nvbounds", (_NV_BLOCKS,))]


class NVElements(_Stage):
    """E2M1 codes against the block bounds: ``F = A << (max(f, 1) - 125 - Ed)`` (negative
    shift: code 0; ``F >= 2**13``: code 7), compared with the seven ``H_j``."""

    def __init__(self):
        super().__init__(
            _stage_layout({"x": GROUP * _BF16.bits, "scale": _NV_SCALES,
                           "bound": data.ArrayLayout(NVBounds.BOUND, _NV_BLOCKS)}),
            _stage_layout({"q": _NV_STEP.bits}))

    def _build(self, m):
        x, q = self.i.x, self.o.q
        # F = A * 2**(max(f,1) - 134) / 2**(Ed - 9)
        offset = BIAS + MAN - FRAC
        maxsh = _NV_FIX                                   # 13: A << 13 >= 2**13 when A != 0
        for b in range(_NV_BLOCKS):
            bd = self.i.bound[b]
            m.d.comb += q[_NV_SCALE_POS[b]:_NV_SCALE_POS[b] + _NV_SCALE].eq(self.i.scale[b])
            for i in range(b * _NV_BLOCK, (b + 1) * _NV_BLOCK):
                s, f, frac = _bf16(x, i)
                nz = f.any()
                mag = Cat(frac, nz)
                sh = Signal(signed(_EW + 1), name=f"e{i}_sh")
                m.d.comb += sh.eq(Mux(nz, f, 1) - offset - bd.ed)
                wide = Signal(MAN + 1 + maxsh, name=f"e{i}_wide")
                m.d.comb += wide.eq(mag << Mux(sh > maxsh, maxsh, sh[:maxsh.bit_length()]))
                sat = Signal(name=f"e{i}_sat")
                m.d.comb += sat.eq((sh >= 0) & wide[_NV_FIX:].any())
                fix = Signal(_NV_FIX, name=f"e{i}_fix")
                m.d.comb += fix.eq(Mux(sh < 0, 0, wide[:_NV_FIX]))
                code = _rne_e2m1(m, fix, list(bd.h), f"e{i}")
                neg = s & (nz | frac.any())
                mc = Mux(bd.zero, 0, Mux(sat, 7, code))
                nan = self.i.scale[b][:_S_BITS] == _NV_NAN
                pos = _NV_ELEM_POS[i]
                m.d.comb += q[pos:pos + _NV_ELEM].eq(Mux(nan, 0, Cat(mc, neg)))

    def parts(self):
        """Per element: the shift amount (the 8-bit exponent field less the block's
        12-bit offset: a 9-bit subtraction, the offset's upper bits only pass a borrow on),
        the 8-bit shift (0..13) with the saturation test, the seven bound compares and the
        code select. A bound ``H_j`` is below ``m_j * 2**8`` (``Pn < 2**28``), so its
        compare spans only the bits of that range (8 to 13; the bits of F above them only
        OR into the result)."""
        n = GROUP
        return [Part("add", (EXPW + 1,), n), Part("shl", (MAN + 1, _NV_FIX + 1), n),
                *(Part("cmp", (((m4 << 8) - 1).bit_length(),), n) for m4 in _MID4),
                Part("mux", (4, 4), n)]


class NVFP4Quantizer(QuantizerCore):
    """BF16 -> NVFP4 quantizer core for a given tensor scale T (keyword-only ``residual``
    "none" only).

    Stages: ``amax``, ``scale``, ``bounds``, ``elements``; module docstring. T must be a
    positive normal float32 (``sim.formats.nvfp4.tensor_scale`` gives [2**-126, 2**127])."""

    unit = "nvfp4_quant"

    def __init__(self, *, residual="none"):
        super().__init__(residual=residual)
        self.stages = [("amax", NVAmax()), ("scale", NVScale()), ("bounds", NVBounds()),
                       ("elements", NVElements())]


# ------------------------------------------------------------------------------------------

class MXFP4QuantizerComb(CoreChain):
    """:class:`MXFP4Quantizer` as one combinational component (:class:`hwgen.core.CoreChain`;
    keyword-only ``residual``)."""

    def __init__(self, *, residual="none"):
        super().__init__(MXFP4Quantizer(residual=residual))


class NVFP4QuantizerComb(CoreChain):
    """:class:`NVFP4Quantizer` as one combinational component (:class:`hwgen.core.CoreChain`)."""

    def __init__(self):
        super().__init__(NVFP4Quantizer())
