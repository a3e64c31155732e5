"""BF16 -> HiF4 quantizer core with the Rollout-ResQ residual (spec sections 1, 2 and 6).

One 64-element group per evaluation, combinational, every output bit equal to
``sim.formats.quantize(x, "hif4")`` and ``sim.formats.resq(x, "hif4", mode)`` for the same
BF16 input. ``docs/encoders.md`` (section "HiF4") derives every width used here and shows
why each step is exact; the short form:

* Element magnitudes are floats with an 8-bit BF16 exponent and ``frac`` fraction bits
  (:func:`xf_layout`): ``frac = 7`` is BF16 itself; the residual dX = X - deq(Q(X)) has at
  most 9 significant bits (``frac = 8``) wherever its value can change an output.
* Steps 2-3 (:class:`ScaleCode`): the product Vmax * 73/512 is exact, rounded once to 8
  significant bits (the BF16 rounding, guard and sticky bits), clipped to
  [2^-48, 49152] and rounded again to E6M2 (:class:`E6M2Round`).
* Step 4: REC = BF16(1/S) = R * 2^(48 - rexp) with R one of four 8-bit integers
  (``REC_TABLE``) and ``rexp`` = E6M2 exponent + a per-significand shift.
* Steps 5-6 (:class:`GroupBits`): V * REC >= 2^n is decided exactly from the exponents
  and, in the one binade where they do not decide it, V's significand against a constant.
* Step 7 (:func:`element_code`): k = min(floor(y + 0.5), 7) on the exact y (the float64
  addition t = y + 0.5 never changes floor(t) here), from comparisons of the element's
  significand with 11 per-group thresholds (the exact product a * R against the bounds).
* dX (:class:`HiF4Residual`): X - q aligned in a 14-bit window below which no bit is lost,
  normalized to 9 bits; elements whose dX is too large for any output to depend on its
  value (|dX| > 2^18.7) pass X on instead.
* 2:4 (:class:`HiF4Select24`): the two largest codes k per micro-group, ties to the lower
  position, positions ascending (what ``pack_24`` writes for ``resq(..., "2:4")``).

Stages (:class:`HiF4Quantizer`), each a combinational component with ports ``i`` and ``o``
(``StructLayout`` views of plain bit fields), in datapath order::

    scale        {x}                  -> {x, scale, l2, l3}      max tree, steps 2-6
    elements     {x, scale, l2, l3}   -> {q} or {q, x}           step 7, sign, packing
    dx           {q, x}               -> {q, dx}                 dX = X - deq(Q(X))
    res_scale    {q, dx}              -> {q, dx, scale, l2, l3}  steps 1-6 on dX
    res_elements {q, dx, scale, l2, l3} -> {q, r}                step 7 on dX (r: 288 bits)
    select       {q, r}               -> {q, r}                  2:4 only (r: 224 bits)

``x`` holds 64 BF16 codes (element i at bits [16i, 16i + 16)), ``dx`` 64 codes of 17 bits
(:func:`xf_layout` with ``frac = 8``), ``q`` and ``r`` the packed blocks of spec sections 2
and 6, ``scale``/``l2``/``l3`` the E6M2 code (0xFF for a NaN group) and the L2/L3 bits.
"""

from dataclasses import replace
from fractions import Fraction

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hif4spec import (ELEMENT_TYPES, FORMATS, HIF4_BF16_ONE_SEVENTH, HIF4_GROUP,
                      HIF4_MICROGROUP_ELEMS, HIF4_MICROGROUPS, HIF4_REC_SIGNIFICANDS,
                      HIF4_SUBGROUP_ELEMS, HIF4_SUBGROUPS, RESIDUAL24, operand_layout,
                      residual_layout)

from .core import CoreChain, QuantizerCore
from .layouts import HIF4_BLOCK, RES24_BLOCK
from .parts import Part, probe, times

__all__ = ["xf_layout", "REC_TABLE", "E6M2Round", "ScaleCode", "GroupBits", "top_thresholds",
           "element_thresholds", "element_code",
           "HiF4ScaleSearch", "HiF4Elements", "HiF4Residual", "HiF4Select24",
           "HiF4Quantizer", "HiF4QuantizerComb"]

_BF16 = ELEMENT_TYPES["BF16"]
_E6M2 = ELEMENT_TYPES["E6M2"]
_S1P2 = ELEMENT_TYPES["S1P2"]
_HIF4 = FORMATS["hif4"]

EXP_BITS = _BF16.exp_bits                  # 8: every element float keeps BF16's exponent
BIAS = _BF16.bias                          # 127
BF16_FRAC = _BF16.man_bits                 # 7
#: Fraction bits of dX (9 significant bits; docs/encoders.md).
RES_FRAC = BF16_FRAC + 1
EXP_MAX = (1 << EXP_BITS) - 1              # exponent field of Inf / NaN

SCALE_BIAS = _E6M2.bias                    # 48
SCALE_MAN = _E6M2.man_bits                 # 2
SCALE_BITS = _HIF4.fields["scale"].bits    # 8
NAN_SCALE = _HIF4.nan_scale_code           # 0xFF
_SCALE_EMAX = Fraction(_E6M2.max_finite).numerator.bit_length() - 1   # 15
#: Largest finite E6M2 code (49152) and its significand as 7 BF16 fraction bits.
SCALE_MAX_CODE = ((_SCALE_EMAX + SCALE_BIAS) << SCALE_MAN) | (
    int(Fraction(_E6M2.max_finite) / 2 ** _SCALE_EMAX * (1 << SCALE_MAN)) - (1 << SCALE_MAN))
_SCALE_MAX_FRAC = int((Fraction(_E6M2.max_finite) / 2 ** _SCALE_EMAX - 1) * (1 << BF16_FRAC))

K_BITS = _S1P2.man_bits                    # 3: k in 0..7
K_MAX = (1 << K_BITS) - 1
K_FRAC = 2                                 # S1P2 value k / 4
GROUP = HIF4_GROUP
MG = HIF4_MICROGROUP_ELEMS                 # 4
SG = HIF4_SUBGROUP_ELEMS                   # 8
L2_BITS = _HIF4.fields["l2"].bits
L3_BITS = _HIF4.fields["l3"].bits
Q_BITS = operand_layout("hif4").bits       # 288

# Step 2: BF16(1/7) = ONE7_NUM * 2^-ONE7_SHIFT.
ONE7_NUM, _den = Fraction(HIF4_BF16_ONE_SEVENTH).as_integer_ratio()
ONE7_SHIFT = _den.bit_length() - 1
assert _den == 1 << ONE7_SHIFT
ONE7_BITS = ONE7_NUM.bit_length()

#: Bits of a REC significand R (an integer in [2^(REC_BITS-1), 2^REC_BITS)).
REC_BITS = 8


def _rec_table():
    out = []
    for sig in HIF4_REC_SIGNIFICANDS:
        fr, sh = Fraction(sig), 0
        while fr * 2 ** sh < 1 << (REC_BITS - 1):
            sh += 1
        r = fr * 2 ** sh
        assert r.denominator == 1 and r < 1 << REC_BITS, sig
        out.append((int(r), sh))
    return tuple(out)


#: Step 4: for E6M2 significand index M (0..3), (R, shift): REC = R * 2^(48 - E - shift)
#: for the scale code (E << 2) | M. R = 128, 205, 171, 146; shift = 7, 8, 8, 8.
REC_TABLE = _rec_table()
_REXP_BITS = ((1 << (SCALE_BITS - SCALE_MAN)) - 1 + max(s for _, s in REC_TABLE)).bit_length()

# Exponent offsets (derived in docs/encoders.md).
#: Steps 5-6: d = n + K_DEC + rexp - e decides V * REC >= 2^n (d < 0: yes; d = 0: compare).
K_DEC = BIAS - SCALE_BIAS - REC_BITS
#: Step 7: w = K_ELEM + rexp + b + c - e is the right shift of the top 5 product bits.
K_ELEM = BIAS - SCALE_BIAS + 1 - REC_BITS
#: dX window: guard bits below the LSB of deq(Q(X)) (an X with k >= 1 has none lower).
DX_GUARD = BF16_FRAC - 1
#: dX window: largest left shift of X's significand; X above the window passes as dX.
DX_SHMAX = 6
DX_WIDTH = BF16_FRAC + 1 + DX_SHMAX        # 14
#: shA = e - E - b - c - K_DX_SHIFT is the left shift of X's significand into the window.
K_DX_SHIFT = BIAS + BF16_FRAC - SCALE_BIAS - K_FRAC - SCALE_MAN - DX_GUARD
#: Biased dX exponent = p + E + b + c + K_DX_EXP (p: leading-one position in the window).
K_DX_EXP = BIAS - SCALE_BIAS - K_FRAC - SCALE_MAN - DX_GUARD


def xf_layout(frac):
    """One element as a float code: ``frac`` fraction bits, 8-bit BF16-biased exponent (field
    0: subnormal, value f * 2^(1 - 127 - frac)), sign on top. ``frac = 7`` is a BF16 code."""
    return data.StructLayout({"f": frac, "e": EXP_BITS, "s": 1})


def _group_layout(frac):
    return data.ArrayLayout(xf_layout(frac), GROUP)


def _fields(carry, *pairs):
    members = dict(carry or {})
    members.update(pairs)
    return data.StructLayout(members)


def _max_tree(m, values, name):
    """The largest of unsigned ``values`` by a balanced tree of compare-and-selects; the
    result is a signal ``name``, the levels below it expressions."""
    level = list(values)
    while len(level) > 1:
        nxt = [Mux(level[i + 1] > level[i], level[i + 1], level[i])
               for i in range(0, len(level) - 1, 2)]
        level = nxt + ([level[-1]] if len(level) % 2 else [])
    out = Signal(len(values[0]), name=name)
    m.d.comb += out.eq(level[0])
    return out


def _nest(sub, parts):
    """``parts`` of sub-block ``sub``, keeping their own sub-block names below it."""
    return [replace(p, sub=f"{sub}.{p.sub}" if p.sub else sub) for p in parts]


def _max_parts(n, width):
    """The max tree of ``n`` values of ``width`` bits."""
    return [Part("maxtree", (n, width))]


def _table(values, mant):
    """Constant ``values[mant]`` (a 4:1 selection of constants)."""
    width = max(max(values).bit_length(), 1)
    return Cat(*(Const(v, width) for v in values)).word_select(mant, width)


def _rec(code):
    """Step 4 of scale ``code``: ``(R, rexp)``, REC = R * 2^(48 - rexp) (expressions)."""
    mant, e = code[:SCALE_MAN], code[SCALE_MAN:]
    return (_table([r for r, _ in REC_TABLE], mant),
            e + _table([sh for _, sh in REC_TABLE], mant))


def _rec_parts():
    return [Part("mux", (len(REC_TABLE), REC_BITS)), Part("add", (_REXP_BITS,))]


class E6M2Round(wiring.Component):
    """Step 3: clip SF to [2^-48, 49152] and round it RNE to E6M2 (a carry moves up a binade).

    Members
    -------
    es : In(signed(10))
        Unbiased exponent of SF (any value: the clip takes care of the range).
    frac : In(7)
        SF's 7 fraction bits (SF = (1 + frac / 128) * 2^es, a normal BF16 significand).
    code : Out(8)
        The E6M2 code.
    """

    ES_BITS = 10

    def __init__(self):
        super().__init__({"es": In(signed(self.ES_BITS)), "frac": In(BF16_FRAC),
                          "code": Out(SCALE_BITS)})

    def elaborate(self, platform):
        m = Module()
        es, frac = self.es, self.frac
        drop = BF16_FRAC - SCALE_MAN                                  # 5 bits rounded off
        keep = frac[drop:]
        guard, sticky = frac[drop - 1], frac[:drop - 1].any()
        up = guard & (sticky | keep[0])
        mant = (keep + up)[:SCALE_MAN + 1]
        exp = es + SCALE_BIAS + mant[SCALE_MAN]
        low = es < -SCALE_BIAS
        high = (es > _SCALE_EMAX) | ((es == _SCALE_EMAX) & (frac > _SCALE_MAX_FRAC))
        with m.If(low):
            m.d.comb += self.code.eq(0)
        with m.Elif(high):
            m.d.comb += self.code.eq(SCALE_MAX_CODE)
        with m.Else():
            m.d.comb += self.code.eq(Cat(mant[:SCALE_MAN], exp[:SCALE_BITS - SCALE_MAN]))
        return m

    def parts(self):
        """The 2-bit significand increment, the exponent add, the two clip comparisons."""
        return [Part("add", (SCALE_MAN + 1,)), Part("add", (self.ES_BITS,)),
                Part("cmp", (self.ES_BITS,), 2), Part("mux", (2, SCALE_BITS), 2)]


class ScaleCode(wiring.Component):
    """Steps 2-3: the E6M2 code of a group maximum.

    SF = BF16(Vmax * BF16(1/7)): the product of Vmax's (frac + 1)-bit significand by 73 is
    exact (frac + 8 bits, its leading one at bit frac + 6 or frac + 7); it is rounded RNE to
    8 significant bits with a guard and a sticky bit. The exponent range is unbounded here:
    where BF16 would round into its subnormals (Vmax < 2^-126) SF < 2^-48 anyway, and the
    clip gives code 0, as it does for a subnormal or zero Vmax.

    Parameters
    ----------
    frac : int
        Fraction bits of the element floats (:func:`xf_layout`).

    Members
    -------
    vmax : In(8 + frac)
        Magnitude code of Vmax (exponent field above the fraction).
    code : Out(8)
        E6M2 code; 0xFF when Vmax's exponent field is all ones (a NaN or Inf in the group).
    """

    def __init__(self, frac):
        self._frac = frac
        super().__init__({"vmax": In(EXP_BITS + frac), "code": Out(SCALE_BITS)})

    def elaborate(self, platform):
        m = Module()
        f_bits = self._frac
        f, e = self.vmax[:f_bits], self.vmax[f_bits:]
        pw = f_bits + 1 + ONE7_BITS                       # product width
        prod = Signal(pw)
        m.d.comb += prod.eq(Cat(f, 1) * ONE7_NUM)
        top = prod[pw - 1]                                # leading one at pw-1, else pw-2
        lo = pw - 2 - BF16_FRAC                            # LSB kept when top = 0
        sig = Mux(top, prod[lo + 1:pw], prod[lo:pw - 1])
        guard = Mux(top, prod[lo], prod[lo - 1])
        sticky = Mux(top, prod[:lo].any(), prod[:lo - 1].any())
        up = guard & (sticky | sig[0])
        rnd = Signal(BF16_FRAC + 2)
        m.d.comb += rnd.eq(sig + up)
        carry = rnd[BF16_FRAC + 1]
        m.submodules.e6m2 = e6 = E6M2Round()
        # value = prod * 2^(e - BIAS - frac - ONE7_SHIFT); leading one at pw - 2 + top
        m.d.comb += [
            e6.es.eq(e + (pw - 2 - BIAS - f_bits - ONE7_SHIFT) + top + carry),
            e6.frac.eq(Mux(carry, 0, rnd[:BF16_FRAC])),
        ]
        with m.If(e == EXP_MAX):
            m.d.comb += self.code.eq(NAN_SCALE)
        with m.Elif(e == 0):
            m.d.comb += self.code.eq(0)
        with m.Else():
            m.d.comb += self.code.eq(e6.code)
        return m

    def parts(self):
        """Vmax's significand times 73 (a sum of three shifted copies), the 8-bit rounding
        increment, the exponent add, the E6M2 rounding, the NaN / zero selection."""
        terms = bin(ONE7_NUM).count("1")                  # 73 = 2^6 + 2^3 + 1: 3 terms
        return [Part("addn", (terms, self._frac + 1 + ONE7_BITS)), Part("add", (BF16_FRAC + 2,)),
                Part("add", (E6M2Round.ES_BITS,)), Part("mux", (2, SCALE_BITS), 2),
                *_nest("e6m2", probe(E6M2Round()).parts())]


def _ge_pow2(mag, n, rexp, mant, frac):
    """V * REC >= 2^n, exactly, for magnitude code ``mag`` (``frac`` fraction bits).

    V = Mv * 2^(e - 127 - frac), REC = R * 2^(48 - rexp), Mv * R in [2^(frac+7),
    2^(frac+9)) for a normal V; with d = n + K_DEC + rexp - e the condition is d < 0, or
    d = 0 and Mv * R >= 2^(frac+8), i.e. Mv >= ceil(2^(frac+8) / R). A subnormal V gives 0
    (V * REC < 2^-126 * 2^48).
    """
    f, e = mag[:frac], mag[frac:]
    d = n + K_DEC + rexp - e
    thr = _table([-(-(1 << (frac + REC_BITS)) // r) for r, _ in REC_TABLE], mant)
    return (e != 0) & ((d < 0) | ((d == 0) & (Cat(f, 1) >= thr)))


def _ge_parts(frac, count):
    """The threshold table (one, shared) and per decision: d against 0, which compares the
    exponent with n + K_DEC + rexp (one sum per n, shared), and the significand compare."""
    return [Part("mux", (len(REC_TABLE), frac + 2))] + times(
        [Part("cmp", (EXP_BITS + 2,)), Part("cmp", (frac + 2,))], count)


class GroupBits(wiring.Component):
    """Steps 5-6: L2 bits b_g = (V8[g] * REC >= 4) and L3 bits c_j = (V16[j] * REC >=
    2^(1 + b)), each decided exactly (:func:`_ge_pow2`).

    Members
    -------
    v8 : In(ArrayLayout(8 + frac, 8)), v16 : In(ArrayLayout(8 + frac, 16))
        Sub-group and micro-group maxima (magnitude codes).
    code : In(8)
        The group's E6M2 code (not 0xFF).
    l2 : Out(8), l3 : Out(16)
    """

    def __init__(self, frac):
        self._frac = frac
        w = EXP_BITS + frac
        super().__init__({"v8": In(data.ArrayLayout(w, HIF4_SUBGROUPS)),
                          "v16": In(data.ArrayLayout(w, HIF4_MICROGROUPS)),
                          "code": In(SCALE_BITS), "l2": Out(L2_BITS), "l3": Out(L3_BITS)})

    def elaborate(self, platform):
        m = Module()
        _, rexp = _rec(self.code)
        mant = self.code[:SCALE_MAN]
        b = [_ge_pow2(self.v8[g], 2, rexp, mant, self._frac) for g in range(HIF4_SUBGROUPS)]
        c = [_ge_pow2(self.v16[j], 1 + b[j * MG // SG], rexp, mant, self._frac)
             for j in range(HIF4_MICROGROUPS)]
        m.d.comb += [self.l2.eq(Cat(*b)), self.l3.eq(Cat(*c))]
        return m

    def parts(self):
        """The REC exponent, one exact decision per sub-group and micro-group."""
        return _rec_parts() + _ge_parts(self._frac, HIF4_SUBGROUPS + HIF4_MICROGROUPS)


class HiF4ScaleSearch(wiring.Component):
    """Steps 1-6 of one group: micro-group, sub-group and group maxima, the E6M2 code, the L2
    and L3 bits (0 in a NaN group).

    Parameters
    ----------
    frac : int
        Fraction bits of the element floats: 7 (BF16 ``x``) or 8 (``dx``).
    src : str
        Name of the element field.
    carry : dict
        Fields passed through unchanged, placed first (``{"q": 288}`` on the residual side).

    Members
    -------
    i : In(StructLayout({**carry, src: 64 * (9 + frac)}))
    o : Out(StructLayout({**carry, src, "scale": 8, "l2": 8, "l3": 16}))
    """

    def __init__(self, *, frac=BF16_FRAC, src="x", carry=None):
        self._frac, self._src, self._carry = frac, src, dict(carry or {})
        xbits = _group_layout(frac).size
        i_lay = _fields(carry, (src, xbits))
        o_lay = _fields(carry, (src, xbits), ("scale", SCALE_BITS), ("l2", L2_BITS),
                        ("l3", L3_BITS))
        super().__init__({"i": In(i_lay), "o": Out(o_lay)})

    def elaborate(self, platform):
        m = Module()
        for name in self._carry:
            m.d.comb += self.o[name].eq(self.i[name])
        src = self.i[self._src]
        m.d.comb += self.o[self._src].eq(src)
        xs = data.View(_group_layout(self._frac), src)
        mags = [Cat(xs[i].f, xs[i].e) for i in range(GROUP)]
        v16 = [_max_tree(m, mags[MG * j:MG * j + MG], f"v16_{j}")
               for j in range(HIF4_MICROGROUPS)]
        v8 = [_max_tree(m, v16[2 * g:2 * g + 2], f"v8_{g}") for g in range(HIF4_SUBGROUPS)]
        vmax = _max_tree(m, v8, "vmax")
        m.submodules.code = sc = ScaleCode(self._frac)
        m.submodules.bits = gb = GroupBits(self._frac)
        m.d.comb += [sc.vmax.eq(vmax), gb.code.eq(sc.code)]
        m.d.comb += [gb.v8[g].eq(v8[g]) for g in range(HIF4_SUBGROUPS)]
        m.d.comb += [gb.v16[j].eq(v16[j]) for j in range(HIF4_MICROGROUPS)]
        nan = sc.code == NAN_SCALE
        m.d.comb += [self.o.scale.eq(sc.code),
                     self.o.l2.eq(Mux(nan, 0, gb.l2)), self.o.l3.eq(Mux(nan, 0, gb.l3))]
        return m

    def parts(self):
        """The max tree (48 + 8 + 7 compare-and-selects), :class:`ScaleCode`,
        :class:`GroupBits`, the NaN masking of L2/L3."""
        w = EXP_BITS + self._frac
        return (times(_max_parts(MG, w), HIF4_MICROGROUPS)
                + times(_max_parts(2, w), HIF4_SUBGROUPS) + _max_parts(HIF4_SUBGROUPS, w)
                + _nest("code", probe(ScaleCode(self._frac)).parts())
                + _nest("bits", probe(GroupBits(self._frac)).parts())
                + [Part("mux", (2, L2_BITS + L3_BITS))])


def top_thresholds(frac):
    """Step 7's comparison plan for elements of ``frac`` fraction bits.

    With P = Ma * R (Ma the element's significand, R the REC significand) and
    ``top = floor(P / 2^(frac+4))``, ``floor(2y) = top >> w`` for ``w`` in 0..4 (see
    :func:`element_code`), so ``k >= j`` iff ``top >= (2j - 1) * 2^w``. ``top`` lies in
    [8, 25] for a normal element (P in [2^(frac+7), 205 * 2^(frac+1))), so only the bounds
    ``t`` in 9..25 need a comparison, ``top >= t`` being ``Ma >= ceil(t * 2^(frac+4) / R)``.

    Returns ``(ts, plan)``: the bounds ``t`` compared (ascending) and, for w = 0..4,
    ``(base, [t, ...])`` with ``k = base + #{t in the list : top >= t}``.
    """
    rs = [r for r, _ in REC_TABLE]
    lo = ((1 << frac) * min(rs)) >> (frac + 4)                   # 8
    hi = (((1 << (frac + 1)) - 1) * max(rs)) >> (frac + 4)       # 25
    plan = []
    for w in range(5):
        bounds = [(2 * j - 1) << w for j in range(1, K_MAX + 1)]
        plan.append((sum(t <= lo for t in bounds), [t for t in bounds if lo < t <= hi]))
    ts = sorted({t for _, used in plan for t in used})
    return ts, plan


def element_thresholds(m, mant, frac):
    """The group's significand thresholds ``{t: ceil(t * 2^(frac+4) / R)}`` (signals) for the
    bounds of :func:`top_thresholds`, R selected by the scale's significand ``mant``."""
    out = {}
    for t in top_thresholds(frac)[0]:
        sig = Signal(frac + 2, name=f"thr{t}")
        m.d.comb += sig.eq(_table([-(-(t << (frac + 4)) // r) for r, _ in REC_TABLE], mant))
        out[t] = sig
    return out


def element_code(mag, thr, rexp, shift, frac):
    """Step 7 for one element: k = min(floor(y + 0.5), 7), y = a * REC * 2^(2 - shift).

    a = Ma * 2^(e - 127 - frac) (normal), REC = R * 2^(48 - rexp): 2y = P * 2^-z with the
    exact product P = Ma * R in [2^(frac+7), 2^(frac+9)) and z = frac + 4 + w,
    w = K_ELEM + rexp + shift - e. So floor(2y) = floor(P / 2^(frac+4)) >> w for w in 0..4,
    >= 16 for w < 0 (k = 7), 0 for w > 4 (k = 0), and k = min((floor(2y) + 1) >> 1, 7) =
    #{j in 1..7 : floor(2y) >= 2j - 1}, each condition a comparison of Ma with a group
    threshold ``thr`` (:func:`top_thresholds`, :func:`element_thresholds`). A subnormal a
    gives k = 0 (y < 2^-126 * 2^50). Returns the 3-bit ``k`` (an expression).
    """
    f, e = mag[:frac], mag[frac:]
    ma = Cat(f, 1)
    ge = {t: ma >= sig for t, sig in thr.items()}
    _, plan = top_thresholds(frac)
    by_w = [(base + sum(ge[t] for t in used))[:K_BITS] for base, used in plan]
    w = K_ELEM + rexp + shift - e
    k = Cat(*by_w).word_select(w[:3], K_BITS)
    return Mux((e == 0) | (w > len(plan) - 1), 0, Mux(w < 0, K_MAX, k))


class HiF4Elements(wiring.Component):
    """Steps 7-8 and the packing of one HiF4 block (spec section 2 layout).

    Parameters
    ----------
    frac, src, carry
        As :class:`HiF4ScaleSearch`.
    out : str
        Name of the packed block field (``"q"`` main, ``"r"`` residual).
    keep_src : bool
        Pass the element field on after the block (the main half of a ResQ core, whose
        ``dx`` stage needs X).

    Members
    -------
    i : In(StructLayout({**carry, src, "scale", "l2", "l3"}))
    o : Out(StructLayout({**carry, out: 288[, src]}))
        Element i of the block: k_i and s_i = (x_i < 0) (also for k = 0; -0 gives 0); a NaN
        group (scale 0xFF) gets all elements 0.
    """

    def __init__(self, *, frac=BF16_FRAC, src="x", carry=None, out="q", keep_src=False):
        self._frac, self._src, self._carry = frac, src, dict(carry or {})
        self._out, self._keep = out, keep_src
        xbits = _group_layout(frac).size
        i_lay = _fields(carry, (src, xbits), ("scale", SCALE_BITS), ("l2", L2_BITS),
                        ("l3", L3_BITS))
        pairs = [(out, Q_BITS)] + ([(src, xbits)] if keep_src else [])
        super().__init__({"i": In(i_lay), "o": Out(_fields(carry, *pairs))})

    def elaborate(self, platform):
        m = Module()
        for name in self._carry:
            m.d.comb += self.o[name].eq(self.i[name])
        src = self.i[self._src]
        if self._keep:
            m.d.comb += self.o[self._src].eq(src)
        xs = data.View(_group_layout(self._frac), src)
        blk = data.View(HIF4_BLOCK, self.o[self._out])
        code = self.i.scale
        nan = code == NAN_SCALE
        _, rexp = _rec(code)
        thr = element_thresholds(m, code[:SCALE_MAN], self._frac)
        m.d.comb += [blk.scale.eq(code), blk.l2.eq(self.i.l2), blk.l3.eq(self.i.l3)]
        for j in range(HIF4_MICROGROUPS):
            shift = self.i.l2[j * MG // SG] + self.i.l3[j]
            for i in range(MG * j, MG * j + MG):
                mag = Cat(xs[i].f, xs[i].e)
                k = element_code(mag, thr, rexp, shift, self._frac)
                m.d.comb += [blk.elem[i].k.eq(Mux(nan, 0, k)),
                             blk.elem[i].s.eq(xs[i].s & mag.any() & ~nan)]
        return m

    def parts(self):
        """Step 7 of the 64 elements (REC from the code, the group's significand
        thresholds, the shifts and element codes of :func:`element_code`: the ``hif4rnd``
        primitive is that logic) and the NaN / sign gating."""
        return [Part("hif4rnd", (self._frac, HIF4_MICROGROUPS)),
                Part("mux", (2, K_BITS + 1), GROUP)]


class HiF4Residual(wiring.Component):
    """dX = X - deq(Q(X)) (spec section 6) as 64 floats of 9 significant bits.

    Per element, with q = k * (4 + M) * 2^Eq, Eq = E - 52 + b + c:

    * k = 0: dX = X (the BF16 code, one more fraction bit);
    * else |X| and q are aligned in a 14-bit window of LSB 2^(Eq - 6): |X| = Mx << shA
      with shA = e - E - b - c - 76 in 0..6, q = (k * (4 + M)) << 6; D = |X| - q is exact
      and has at most 9 significant bits, so normalizing it loses nothing; dX has sign
      s_X xor (D < 0) (0 when D = 0);
    * shA > 6 (only in a group whose scale is clipped to 49152, and then k = 7): dX = X.
      Here |dX| >= 214 * 2^11 > 2^18.7: the residual group's scale is clipped too and this
      element gets b = c = 1 and k = 7 whatever its exact value (docs/encoders.md), the
      outputs the golden model's float64 dX gives.

    A NaN group (q's scale 0xFF) gives dX elements with exponent field 255 (the residual
    group is a NaN group).

    Members
    -------
    i : In(StructLayout({"q": 288, "x": 1024}))
    o : Out(StructLayout({"q": 288, "dx": 64 * 17}))
    """

    def __init__(self):
        xbits = _group_layout(BF16_FRAC).size
        dbits = _group_layout(RES_FRAC).size
        super().__init__({"i": In(_fields(None, ("q", Q_BITS), ("x", xbits))),
                          "o": Out(_fields(None, ("q", Q_BITS), ("dx", dbits)))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.q.eq(self.i.q)
        xs = data.View(_group_layout(BF16_FRAC), self.i.x)
        ds = data.View(_group_layout(RES_FRAC), self.o.dx)
        q = data.View(HIF4_BLOCK, self.i.q)
        nan = q.scale == NAN_SCALE
        mant, ex = q.scale[:SCALE_MAN], q.scale[SCALE_MAN:]
        unit = mant + (1 << SCALE_MAN)                                  # 4 + M
        pos_bits = (DX_WIDTH - 1).bit_length()
        for i in range(GROUP):
            j = i // MG
            x, k = xs[i], q.elem[i].k
            shift = q.l2[j * MG // SG] + q.l3[j]
            sha = x.e - ex - shift - K_DX_SHIFT
            a = (Cat(x.f, 1) << sha[:pos_bits])[:DX_WIDTH]
            diff = a - ((k * unit) << DX_GUARD)
            neg = Signal(name=f"neg{i}")
            mag = Signal(DX_WIDTH, name=f"mag{i}")
            m.d.comb += [neg.eq(diff < 0), mag.eq(Mux(diff < 0, -diff, diff))]
            lead = Const(0, pos_bits)                                   # leading one
            for b in range(DX_WIDTH):
                lead = Mux(mag[b], b, lead)
            norm = (mag << (DX_WIDTH - 1 - lead)[:pos_bits])[:DX_WIDTH]
            d = ds[i]
            with m.If(nan):
                m.d.comb += [d.s.eq(0), d.e.eq(EXP_MAX), d.f.eq(0)]
            with m.Elif((k == 0) | (sha > DX_SHMAX)):
                m.d.comb += [d.s.eq(x.s & Cat(x.f, x.e).any()), d.e.eq(x.e),
                             d.f.eq(x.f << (RES_FRAC - BF16_FRAC))]
            with m.Elif(mag == 0):
                m.d.comb += [d.s.eq(0), d.e.eq(0), d.f.eq(0)]
            with m.Else():
                m.d.comb += [d.s.eq(x.s ^ neg),
                             d.e.eq(lead + ex + shift + K_DX_EXP),
                             d.f.eq(norm[DX_WIDTH - 1 - RES_FRAC:DX_WIDTH - 1])]
        return m

    def parts(self):
        """Per element: k * (4 + M), the window shift, X - q (q's low ``DX_GUARD`` bits
        are 0: a subtraction of the bits above them), its magnitude, the leading-one count
        and the normalizing shift (by 0..13, of which only the ``RES_FRAC`` fraction bits
        are kept), the exponent add, and the output selection (dX or X; the NaN and zero
        cases are constants)."""
        return ([Part("add", (SCALE_MAN + 1,))]
                + times([Part("mul", (K_BITS, SCALE_MAN + 1)), Part("add", (EXP_BITS + 2,)),
                         Part("shl", (BF16_FRAC + 1, DX_SHMAX + 1)),
                         Part("add", (DX_WIDTH - DX_GUARD + 1,)), Part("neg", (DX_WIDTH,)),
                         Part("lzc", (DX_WIDTH,)), Part("shl", (RES_FRAC, DX_WIDTH)),
                         Part("add", (EXP_BITS,)), Part("mux", (2, 1 + EXP_BITS + RES_FRAC))],
                        GROUP))


class HiF4Select24(wiring.Component):
    """The 2:4 sparsifier and the packed 224-bit residual block (spec section 6).

    In each micro-group keep the two largest k (all four share the three scales, so the
    largest |R| are the largest codes k); ties keep the lower position. Positions are
    written ascending with their full S1P2 codes; L3, L2 and the E6M2 code are copied. This
    is what ``pack_24(resq(x, "hif4", "2:4"))`` writes: its positions are the nonzero codes
    completed by the lowest zero codes, and a kept element with code 0 is always such a
    lowest zero-code position.

    Members
    -------
    i : In(StructLayout({"q": 288, "r": 288}))
    o : Out(StructLayout({"q": 288, "r": 224}))
    """

    def __init__(self):
        super().__init__({"i": In(_fields(None, ("q", Q_BITS), ("r", Q_BITS))),
                          "o": Out(_fields(None, ("q", Q_BITS),
                                           ("r", residual_layout("hif4", "2:4").bits)))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.q.eq(self.i.q)
        src = data.View(HIF4_BLOCK, self.i.r)
        dst = data.View(RES24_BLOCK, self.o.r)
        m.d.comb += [dst.scale.eq(src.scale), dst.l2.eq(src.l2), dst.l3.eq(src.l3)]
        per = RESIDUAL24.kept // HIF4_MICROGROUPS                       # 2 kept per group
        for j in range(HIF4_MICROGROUPS):
            codes = [src.elem[MG * j + t] for t in range(MG)]
            keep = []
            for t in range(MG):
                above = [(codes[u].k >= codes[t].k) if u < t else (codes[u].k > codes[t].k)
                         for u in range(MG) if u != t]
                keep.append(sum(above) < per)
            lo, hi = Const(MG - 1, 2), Const(0, 2)                      # lowest, highest kept
            for t in reversed(range(MG)):
                lo = Mux(keep[t], t, lo)
            for t in range(MG):
                hi = Mux(keep[t], t, hi)
            for slot, pos in enumerate((lo, hi)):
                n = per * j + slot
                m.d.comb += [dst.pos[n].eq(pos),
                             dst.kept[n].eq(Cat(*(c.as_value() for c in codes))
                                            .word_select(pos, len(codes[0].as_value())))]
        return m

    def parts(self):
        """Per micro-group: six 3-bit comparisons, the four keep counts, two 4:1 selections
        of a 4-bit code."""
        return times([Part("cmp", (K_BITS,), 6), Part("tree", (3, 2), MG),
                      Part("mux", (MG, K_BITS + 1), 2)], HIF4_MICROGROUPS)


class HiF4Quantizer(QuantizerCore):
    """The HiF4 quantizer core for one residual mode: its combinational stages, in order.

    Parameters (keyword-only)
    -------------------------
    residual : str
        ``"none"``, ``"2:4"`` or ``"dense"`` (``hif4spec.residuals_of("hif4_quant")``).

    Attributes
    ----------
    stages : list of (str, Component)
        Fresh stage components on every access (module docstring): ``scale``, ``elements``
        and, with a residual, ``dx``, ``res_scale``, ``res_elements`` and (2:4) ``select``.
        Stage k's ``o`` layout equals stage k + 1's ``i`` layout; the first ``i`` is
        ``{"x": 1024}``, the last ``o`` ``{"q": 288}`` (none), ``{"q": 288, "r": 224}`` (2:4)
        or ``{"q": 288, "r": 288}`` (dense).
    """

    unit = "hif4_quant"

    @property
    def stages(self):
        residual = self.residual != "none"
        out = [("scale", HiF4ScaleSearch()), ("elements", HiF4Elements(keep_src=residual))]
        if residual:
            carry = {"q": Q_BITS}
            out += [("dx", HiF4Residual()),
                    ("res_scale", HiF4ScaleSearch(frac=RES_FRAC, src="dx", carry=carry)),
                    ("res_elements", HiF4Elements(frac=RES_FRAC, src="dx", carry=carry,
                                                  out="r"))]
        if self.residual == "2:4":
            out.append(("select", HiF4Select24()))
        for (_, a), (_, b) in zip(out, out[1:]):
            assert a.o.shape() == b.i.shape(), (a, b)
        return out

    def parts(self):
        """Every stage's parts, each in a sub-block of the stage's name."""
        return [p for name, stage in self.stages for p in _nest(name, probe(stage).parts())]


class HiF4QuantizerComb(CoreChain):
    """All stages of :class:`HiF4Quantizer` chained combinationally
    (:class:`hwgen.core.CoreChain`: ports ``i`` ``{x}`` and ``o`` ``{q}`` or ``{q, r}``).

    Parameters (keyword-only)
    -------------------------
    residual : str
        ``"none"``, ``"2:4"`` or ``"dense"``.
    """

    def __init__(self, *, residual="none"):
        super().__init__(HiF4Quantizer(residual=residual))
