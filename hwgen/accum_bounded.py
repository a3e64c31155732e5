"""A bounded exact back end: ``RNE_FP32(acc + term)`` in a window a little wider than the
term instead of :mod:`hwgen.accum`'s full fixed-point window.

It keeps the contract of :class:`hwgen.accum.ExactAdd` bit for bit (spec section 7: one
RNE rounding of the exact value, gradual underflow, overflow to +-Inf, +0 for an exact
zero, a nonzero value that rounds to zero keeps its sign, Inf and NaN rules, ``first``),
for a step of one term (HiF4 without a residual; NVFP4, whose four blocks are pre-added
into one term), of two terms pre-added into one (HiF4 with a residual, below), of two
independent terms joined into one (MXFP4, :class:`JamPair`) or of four independent terms
split into one term and a few words outside the loop (MXFP4 with a residual,
:mod:`hwgen.accum_split`). Why a window of
``N = max(27, M + 1)`` bits is exact, with ``M`` the wider of the two significands (24 for
the accumulator, ``sig_bits`` for the term):

* Each operand has a top place at the top of ``M`` bits: the term normalized (its leading
  one there), the accumulator in its word's alignment (its hidden-bit place there, so a
  subnormal one has leading zeros and the loop has no count or shift before the add). The
  one with the higher top place, *big* (top weight ``2**pb``), is placed with it at
  window bit ``N - 1``: bit ``i`` weighs ``2**(pb - N + 1 + i)``, and big's lowest bit is
  at bit ``N - M >= 1``. The other, *small*, is shifted right by ``d = pb - ps`` into the
  window; the bits that fall below bit 0 are ORed into bit 0 (a sticky "jam" bit).
* Near case, ``d <= 1``: small's lowest bit is at ``N - M - d >= 0``, nothing falls out,
  the sum is exact. (Only here can the operands cancel to zero or by more than one bit.)
* Far case, ``d >= 2``, big normalized: ``|big| >= 2**pb`` and ``|small| < 2**(pb - 1)``,
  so the exact sum has its leading one at ``pb - 1`` or above. Its rounding boundaries
  (the FP32 values and midpoints near it) are multiples of ``2**(pb - 25)``, or of
  ``2**-150`` when it is subnormal, and both lie at window bit 1 or above (``N >= 27``; a
  subnormal result has ``pb <= -126``). Big is a multiple of bit 1's weight; small's value
  below bit 1 is a remainder ``rem`` in ``[0, 2)`` units of bit 0 that the jam bit replaces
  by 0 when ``rem = 0`` and by 1 otherwise. The exact and the jammed sums therefore lie in
  the same open interval between two multiples of bit 1's weight (or are equal), which holds no
  rounding boundary and no power of two: both round to the same word, and their leading
  ones are at the same place. (27 is the least such N: with 26 the guard bit of a
  result just below ``2**pb`` is the jam bit, and ties go wrong; the tests catch it.)
* Far case, big a subnormal accumulator (``pb = -126``): ``|sum| < 2**-125``, where the
  rounding boundaries are multiples of ``2**-150``, at bit 1 (weight at most ``2**-151``)
  or above: the same interval argument.

Two terms whose exponent fields differ by at most a known ``D`` become one first
(:class:`PreAdd`): HiF4's main and residual terms have exponents ``Ea + Ew`` and
``Er + Ew`` (E6M2 exponents, 0..63), so ``D = 63``, and their exact sum is one term of
``max(S1, S2) + D + 1`` bits at the lower exponent, outside the accumulator loop.

``tests/hwgen/test_accum_bounded.py`` checks the unit against :func:`sim.dot.accumulate` on
random and adversarial steps. Components, one per datapath stage: :class:`PreAdd` (two
terms into one, when there are two), :class:`Decode` (both
operands to sign, normalized significand and top exponent), :class:`SwapAlign` (big,
small shifted with the jam bit), :class:`AddSub` (the window sum, its sign and magnitude),
:class:`RoundAt` (a magnitude with a variable exponent to an FP32 word) and
:class:`BoundedAdd` (them and the special cases, the interface of
:class:`hwgen.accum.ExactAdd`).
"""

from math import log2

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .accum import (NAN_WORD, TERM_DECODE, TERM_SHIFT, AccumSpec, TermSpec, _cut, _held_port,
                    accum_layout, leading_zeros, negated_where, round_to_word)
from .accum_split import (BYPASS, BYPASS_BLOCKS, E_BITS, SPLIT_BLOCKS, SPLIT_GAP, VERSUS,
                          AccVersusE, SplitSpec, SplitSum)
from .parts import Part, of_term, probe, within

__all__ = ["BoundedSpec", "PreAdd", "JamPair", "Decode", "SwapAlign", "AddSub", "RoundAt",
           "BypassRound", "BoundedAdd", "PAIR_WINDOW", "WIDE"]

#: ``K + 1``: bits of the pair window (:class:`JamPair`), the higher term's leading one at
#: bit ``K``. The least width for which jamming the lower term is exact
#: (``docs/accumulator.md``; one bit fewer fails ``tests/hwgen/test_accum_bounded.py``).
PAIR_WINDOW = 51
#: Name of a *wide* term (:class:`BoundedSpec`): one that goes to the loop alone, in place
#: of the pre-added or paired two, on the steps where those two are zero.
WIDE = "wide"


def _signed_bits(lo, hi):
    """Bits of a two's complement signal holding every integer in ``[lo, hi]``."""
    return max((-lo - 1).bit_length(), hi.bit_length()) + 1


class BoundedSpec:
    """Geometry of the bounded back end for the terms of a step.

    Parameters
    ----------
    terms : list of TermSpec
        One term, or two with the same exponent field width and bias: pre-added exactly
        when their exponent fields never differ by more than ``max_exp_diff``, else paired
        (:class:`JamPair`; at most 24 significand bits each); or three or four independent
        ones, split (:mod:`hwgen.accum_split`; at most 24 significand bits each). Two
        pre-added or paired terms may be followed by a term named :data:`WIDE` (any
        width, bias and field): the loop adds it alone where the two are zero, and a step
        where they are not must have it zero (a multi-format unit's format whose one term
        is too wide to pair, :mod:`hwgen.multi`).
    max_exp_diff : int, optional
        For two terms: the bound ``D`` the front end guarantees (HiF4: 63); None for
        independent terms (MXFP4's two blocks).
    pair_window : int, optional
        For two independent terms: ``K + 1`` (default ``PAIR_WINDOW``; a narrower one is not
        exact and exists only to show that it fails).
    split_gap : int, optional
        For three or four: the split's cluster gap (default
        :data:`hwgen.accum_split.SPLIT_GAP`; a narrower one exists only to show that it
        fails).

    Attributes
    ----------
    accum : AccumSpec
        The step's terms as given (the input layout).
    term : TermSpec
        The one term the loop adds: the given one, or the pre-added sum of two; with a
        wide term, as wide as either and on the pre-added or paired term's bias.
    joined : TermSpec
        The pre-added or paired term before the wide term widens it (else ``term``).
    wide : TermSpec or None
        The wide term; ``wide_offset`` is added to its exponent field to put it on
        ``term``'s bias.
    sig : int
        ``M``: bits of a normalized significand (the wider of 24 and the term's).
    window : int
        ``N``: window bits below the carry bit (the sum is ``N + 1`` bits).
    exp_bits : int
        Width of the signed exponent arithmetic; it holds every exponent any exponent
        *field* value gives (the whole field, not only up to ``exp_max``), so no input can
        wrap it.
    pair_sig, pair_window : int or None
        For two independent terms (:class:`JamPair`): ``w``, the wider term's significand
        bits, and ``K + 1``, the bits of the pair window.
    split : SplitSpec or None
        For three or four independent terms: the split's geometry; the loop's one term is
        its 53-bit ``P``.
    """

    def __init__(self, terms, max_exp_diff=None, pair_window=PAIR_WINDOW, split_gap=SPLIT_GAP):
        spec = AccumSpec(terms)
        self.accum = spec
        self.max_exp_diff = max_exp_diff
        self.pair_sig = self.pair_window = self.split = self.wide = None
        core = spec.terms
        if core[-1].name == WIDE:
            core, self.wide = core[:-1], core[-1]
            if len(core) != 2:
                raise ValueError(f"A wide term goes beside two pre-added or paired terms, not "
                                 f"{len(core)}")
        self.core = core
        if len(core) == 1:
            t = core[0]
        elif len(core) == 2 and max_exp_diff is not None:
            t1, t2 = core
            if (t1.exp_bits, t1.bias) != (t2.exp_bits, t2.bias):
                raise ValueError("Pre-added terms must share the exponent field width and "
                                 "bias")
            if not isinstance(max_exp_diff, int) or not 0 <= max_exp_diff < 1 << t1.exp_bits:
                raise ValueError(f"max_exp_diff must be 0 to {(1 << t1.exp_bits) - 1}, "
                                 f"not {max_exp_diff!r}")
            t = TermSpec("pre", max(t1.sig_bits, t2.sig_bits) + max_exp_diff + 1,
                         t1.exp_bits, t1.bias, max(t1.top_exp, t2.top_exp))
        elif len(core) in (3, 4) and max_exp_diff is None:
            self.split = SplitSpec(core, split_gap)
            t = TermSpec("split", self.split.term_bits, self.split.term_exp_bits,
                         self.split.term_bias, self.split.term_exp_max)
        elif len(core) == 2:
            t1, t2 = core
            if (t1.exp_bits, t1.bias) != (t2.exp_bits, t2.bias):
                raise ValueError("Paired terms must share the exponent field width and bias")
            w = max(t1.sig_bits, t2.sig_bits)
            if w > 24:
                raise ValueError(f"Paired terms of at most 24 significand bits (an FP32 "
                                 f"word holds the higher one), not {w}")
            if not isinstance(pair_window, int) or pair_window <= w:
                raise ValueError(f"pair_window must be an integer above {w}, not "
                                 f"{pair_window!r}")
            self.pair_sig, self.pair_window = w, pair_window
            top = max(t1.top_exp, t2.top_exp) + w - 1
            t = TermSpec("pair", self.pair_window + 2,
                         ((1 << t1.exp_bits) + w - 2).bit_length(),
                         t1.bias + self.pair_window - 1, top)
        else:
            raise ValueError(f"The bounded back end takes steps of one to four terms (three "
                             f"or four independent ones); this one has {len(core)} "
                             f"({', '.join(t.name for t in core)})"
                             + (" with a max_exp_diff" if max_exp_diff is not None else ""))
        self.joined = t
        if self.wide is not None:
            w = self.wide
            self.wide_offset = t.bias - w.bias
            if self.wide_offset < 0:
                raise ValueError(f"The wide term's bias {w.bias} is above the joined term's "
                                 f"{t.bias}")
            top = max(t.top_exp, w.top_exp + self.wide_offset)
            t = TermSpec(t.name, max(t.sig_bits, w.sig_bits),
                         max(t.exp_bits, top.bit_length()), t.bias, top)
        self.term = t
        self.sig = max(24, t.sig_bits)
        self.window = max(27, self.sig + 1)
        field_top = (1 << t.exp_bits) - 1
        lo = min(-149, -t.bias) - self.window - 2
        hi = max(105 + 23, field_top - t.bias + t.sig_bits) + self.window + 160
        self.exp_bits = _signed_bits(lo, hi)

    def describe(self):
        """The back end, the terms as given, the pre-add bound and the window geometry, as
        the manifest's ``acc`` stage records them."""
        terms = self.accum.describe()["terms"]
        out = {"accum": "bounded", "terms": terms, "window_bits": self.window,
               "significand_bits": self.sig, "exponent_bits": self.exp_bits}
        if self.pair_window is not None:
            out.update(pair_window_bits=self.pair_window)
        elif self.split is not None:
            out.update(self.split.describe())
        elif len(self.core) == 2:
            out.update(max_exp_diff=self.max_exp_diff, preadd_bits=self.joined.sig_bits)
        if self.wide is not None:
            out.update(wide_term=WIDE)
        return out


class PreAdd(wiring.Component):
    """Two terms whose exponent fields differ by at most ``D`` as one exact term at the
    lower exponent: ``hi << |e1 - e2| + lo``.

    Members
    -------
    step : In(accum_layout(terms))
        The two terms (only their fields are read).
    sig : Out(signed(max(S1, S2) + D + 1))
    exp : Out(exp_bits)
        The lower of the two exponent fields.

    A difference above ``D`` is outside the contract (the front end cannot make one); the
    shift is then limited to ``D`` and the sum is wrong.
    """

    def __init__(self, bspec, cuts=None):
        self._b = b = bspec
        self._cuts = cuts
        super().__init__({"step": In(accum_layout(b.accum.terms)),
                          "sig": Out(signed(b.joined.sig_bits)), "exp": Out(b.joined.exp_bits)})

    def elaborate(self, platform):
        m = Module()
        b = self._b
        cut = _cut(m, self._cuts)
        t1, t2 = b.core
        D = b.max_exp_diff
        s1, e1 = self.step[f"{t1.name}_sig"], self.step[f"{t1.name}_exp"]
        s2, e2 = self.step[f"{t2.name}_sig"], self.step[f"{t2.name}_exp"]
        first_hi = Signal()
        m.d.comb += first_hi.eq(e1 >= e2)
        diff = Signal(t1.exp_bits)
        m.d.comb += diff.eq(Mux(first_hi, e1 - e2, e2 - e1))
        shift = Signal(range(D + 1))
        m.d.comb += shift.eq(Mux(diff > D, D, diff))
        width = b.joined.sig_bits
        hi, lo = Signal(signed(width)), Signal(signed(width))
        m.d.comb += [hi.eq(Mux(first_hi, s1, s2)), lo.eq(Mux(first_hi, s2, s1))]
        hi, lo, shift = (cut(v, "preadd.cmp", "preadd.sum", n)
                         for v, n in ((hi, "pre_hi"), (lo, "pre_lo"), (shift, "pre_shift")))
        m.d.comb += [self.sig.eq(cut((hi << shift) + lo, "preadd.sum", TERM_DECODE,
                                     "pre_sig")),
                     self.exp.eq(cut(Mux(first_hi, e2, e1), "preadd.cmp", TERM_DECODE,
                                     "pre_exp"))]
        return m

    def parts(self):
        """The exponent compare and difference, the choice of the higher term, its shift by
        0..D, the sum and the exponent choice (:mod:`hwgen.parts`)."""
        b = self._b
        t1, t2 = b.core
        s, e = max(t1.sig_bits, t2.sig_bits), t1.exp_bits
        return [Part("cmp", (e,)), Part("add", (e,), 2), Part("mux", (2, s), 2),
                Part("shl", (s, b.max_exp_diff + 1)), Part("add", (b.joined.sig_bits,)),
                Part("mux", (2, e))]


class JamPair(wiring.Component):
    """Two terms with independent exponents as one term ``T = hi + J(lo)``, the higher
    one's FP32 word and the lower one decoded (outside the accumulator loop).

    Both terms are normalized to ``w`` bits; *hi* is the one whose leading one is higher
    (at ``2**ph``). The window has ``K + 1 = PAIR_WINDOW`` bits, hi's leading one at bit
    ``K``; *lo* is shifted into it by the distance of the leading ones, the bits below bit
    0 jammed into bit 0, and added with its sign: ``T``, ``K + 3`` bits signed, bit 0
    weighing ``2**(ph - K)``, the exponent field ``ph + bias``. ``T`` is exact unless lo
    has bits below ``2**(ph - K)`` (``docs/accumulator.md``: why the rounded sum is still
    exact then, unless the accumulator cancels hi exactly, the case :class:`BoundedAdd`
    bypasses with lo alone).

    Members
    -------
    step : In(accum_layout(terms))
        The two terms (only their fields are read).
    sig : Out(signed(K + 3))
    exp : Out
        ``T``'s significand and exponent field (:attr:`BoundedSpec.term`).
    lo_neg, lo_sig, lo_top, lo_zero : Out
        lo as :class:`Decode` gives a term: bit ``M - 1`` of ``lo_sig`` (its leading one)
        weighs ``2**lo_top``.
    hi_word : Out(32)
        hi as an FP32 word, when ``hi_rep``: hi is nonzero and an FP32 value exactly.
    hi_rep : Out(1)
    """

    def __init__(self, bspec, cuts=None):
        self._b = b = bspec
        self._cuts = cuts
        M, E = b.sig, b.exp_bits
        super().__init__({
            "step": In(accum_layout(b.accum.terms)), "sig": Out(signed(b.joined.sig_bits)),
            "exp": Out(b.joined.exp_bits), "lo_neg": Out(1), "lo_sig": Out(M),
            "lo_top": Out(signed(E)), "lo_zero": Out(1), "hi_word": Out(32),
            "hi_rep": Out(1)})

    def elaborate(self, platform):
        m = Module()
        b = self._b
        cut = _cut(m, self._cuts)
        M, E, w, K = b.sig, b.exp_bits, b.pair_sig, b.pair_window - 1
        dec = []
        for i, t in enumerate(b.core):
            s, e = self.step[f"{t.name}_sig"], self.step[f"{t.name}_exp"]
            mag = Signal(w, name=f"mag{i}")        # |sig|: -2**(S-1) fits unsigned
            m.d.comb += mag.eq(Mux(s < 0, -s, s))
            lz = leading_zeros(m, mag, w, f"lz{i}", tree=True)
            norm, top = Signal(w, name=f"norm{i}"), Signal(signed(E), name=f"top{i}")
            m.d.comb += [norm.eq(mag << lz), top.eq(e - t.bias + (w - 1) - lz)]
            dec.append(tuple(cut(v, "pair.norm", "pair.swap", f"{n}{i}") for v, n in
                             ((s < 0, "neg"), (norm, "norm"), (top, "top"), (mag == 0, "zero"))))
        (n0, s0, p0, z0), (n1, s1, p1, z1) = dec
        first_hi = Signal()
        m.d.comb += first_hi.eq(~z0 & (z1 | (p0 >= p1)))
        hi_neg, lo_neg, hi_zero, lo_zero = Signal(), Signal(), Signal(), Signal()
        hi_sig, lo_sig = Signal(w), Signal(w)
        hi_top, lo_top = Signal(signed(E)), Signal(signed(E))
        for dst, a, c in ((hi_neg, n0, n1), (lo_neg, n1, n0), (hi_zero, z0, z1),
                          (lo_zero, z1, z0), (hi_sig, s0, s1), (lo_sig, s1, s0),
                          (hi_top, p0, p1), (lo_top, p1, p0)):
            m.d.comb += dst.eq(Mux(first_hi, a, c))
        # lo into the window below hi, jammed.
        dist = Signal(signed(E + 1))
        m.d.comb += dist.eq(hi_top - lo_top)
        shift = Signal(range(K + 2))
        m.d.comb += shift.eq(Mux(lo_zero | (dist > K + 1), K + 1, dist))
        placed = Cat(Const(0, K + 1 - w), lo_sig)
        wide = Signal(2 * K + 2)
        m.d.comb += wide.eq(Cat(Const(0, K + 1), placed) >> shift)
        lo_j = Signal(K + 1)
        m.d.comb += lo_j.eq(wide[K + 1:] | wide[:K + 1].any())
        if self._cuts is not None:
            hi_neg, lo_neg, hi_zero, lo_zero, hi_sig, lo_sig, hi_top, lo_top, lo_j = (
                cut(v, "pair.swap", "pair.sum", n) for v, n in (
                    (hi_neg, "hi_neg"), (lo_neg, "lo_neg"), (hi_zero, "hi_zero"),
                    (lo_zero, "lo_zero"), (hi_sig, "hi_sig"), (lo_sig, "lo_sig"),
                    (hi_top, "hi_top"), (lo_top, "lo_top"), (lo_j, "lo_j")))
        hi_w = Cat(Const(0, K + 1 - w), hi_sig)

        def out(v, name, dst="decode"):
            return cut(v, "pair.sum", dst, f"pair_{name}")
        m.d.comb += [
            self.sig.eq(out(Mux(hi_neg, -hi_w, hi_w) + Mux(lo_neg, -lo_j, lo_j), "sig",
                            TERM_DECODE)),
            self.exp.eq(out(Mux(hi_zero, 0, hi_top + b.core[0].bias), "exp", TERM_DECODE)),
            self.lo_neg.eq(out(lo_neg, "lo_neg")),
            self.lo_sig.eq(out(Cat(Const(0, M - w), lo_sig), "lo_sig")),
            self.lo_top.eq(out(lo_top, "lo_top")), self.lo_zero.eq(out(lo_zero, "lo_zero")),
        ]
        # hi's FP32 word: normal from 2**-126 up, else its bits shifted to 2**-149.
        sig24 = Cat(Const(0, 24 - w), hi_sig)
        right = Signal(range(25))
        m.d.comb += right.eq(Mux(hi_top >= -126, 0, Mux(hi_top < -150, 24, -126 - hi_top)))
        sub = Signal(48)
        m.d.comb += sub.eq(Cat(Const(0, 24), sig24) >> right)
        normal = hi_top >= -126
        m.d.comb += [
            self.hi_word.eq(out(Cat(Mux(normal, sig24[:23], sub[24:47]),
                                    Mux(normal, hi_top + 127, 0)[:8], hi_neg), "hi_word")),
            self.hi_rep.eq(out(~hi_zero & (hi_top <= 127) & (normal | (sub[:24] == 0)),
                               "hi_rep")),
        ]
        return m

    def parts(self):
        """Per term the absolute value, leading-zero count and normalising shift and the
        top exponent; the compare and the choice of hi, the distance, lo's jamming right
        shift (``w`` bits into the window and the bits below it), the negations (hi has
        ``w`` bits, lo the window's) and the sum; hi's word (a right shift, the exponent
        add and the range compares) (:mod:`hwgen.parts`)."""
        b = self._b
        E, w, K = b.exp_bits, b.pair_sig, b.pair_window - 1
        return [Part("neg", (w,), 2), Part("lzc", (w,), 2), Part("shl", (w, w), 2),
                Part("add", (E,), 2), Part("cmp", (E,)), Part("mux", (2, w), 2),
                Part("mux", (2, E), 2), Part("add", (E + 1,)),
                Part("wshl", (w, K + 2, 2 * K + 2)), Part("neg", (w,)),
                Part("neg", (K + 1,)), Part("add", (K + 3,)), Part("add", (E,)),
                Part("shr", (24, 25)), Part("add", (E,)), Part("cmp", (E,), 3)]


class Decode(wiring.Component):
    """Both operands as (sign, ``M``-bit significand, top exponent, zero): the term
    normalized, the accumulator in its word's alignment.

    Members
    -------
    acc : In(32)
        Accumulator word (Inf/NaN: a meaningless operand, :class:`BoundedAdd` overrides).
    zero_acc : In(1)
        Treat the accumulator as +0 (a ``first`` step).
    sig, exp : In
        The term's two's complement significand and exponent field.
    a_neg, a_sig, a_top, a_zero, t_neg, t_sig, t_top, t_zero : Out
        Bit ``M - 1`` of ``x_sig`` weighs ``2**x_top``; it is the term's leading one, and the
        accumulator's unless the accumulator is subnormal (then ``a_top`` is -126).

    With ``cuts``, the term's inputs are those of block :data:`hwgen.accum.TERM_DECODE`
    (its count), its shift is block :data:`hwgen.accum.TERM_SHIFT` (both ahead of the
    join), its outputs those of block ``decode``, where the accumulator is unpacked.
    """

    def __init__(self, bspec, cuts=None):
        self._b = b = bspec
        self._cuts = cuts
        t, M, E = b.term, b.sig, b.exp_bits
        super().__init__({
            "acc": In(32), "zero_acc": In(1), "sig": In(signed(t.sig_bits)),
            "exp": In(t.exp_bits),
            "a_neg": Out(1), "a_sig": Out(M), "a_top": Out(signed(E)), "a_zero": Out(1),
            "t_neg": Out(1), "t_sig": Out(M), "t_top": Out(signed(E)), "t_zero": Out(1)})

    def elaborate(self, platform):
        m = Module()
        b = self._b
        t, M, E = b.term, b.sig, b.exp_bits
        frac, ef = self.acc[:23], self.acc[23:31]
        ma = Signal(24)
        m.d.comb += ma.eq(Mux(self.zero_acc, 0, Cat(frac, ef != 0)))
        mt = Signal(t.sig_bits)                 # |sig|: -2**(S-1) fits unsigned
        # the split's 53-bit term, cut from the rest: an OR prefix, not an adder's carry
        m.d.comb += mt.eq(negated_where(m, self.sig, self.sig < 0, t.sig_bits, "t_abs",
                                        prefix=self._cuts is not None and b.split is not None))
        lsb_a = Signal(signed(E))               # weight of ma's bit 0
        m.d.comb += lsb_a.eq(Mux(ef == 0, 1, ef) - 150)
        lsb_t = Signal(signed(E))
        m.d.comb += lsb_t.eq(self.exp - t.bias)
        # The accumulator keeps its word's alignment (no count, no shift in the loop): its
        # hidden-bit place at the top, a subnormal with leading zeros below it.
        m.d.comb += [self.a_sig.eq(Cat(Const(0, M - 24), ma) if M > 24 else ma),
                     self.a_top.eq(lsb_a + 23), self.a_zero.eq(ma == 0),
                     self.a_neg.eq(self.acc[31])]
        ext = Cat(Const(0, M - t.sig_bits), mt) if M > t.sig_bits else mt
        lz = leading_zeros(m, ext, M, "t_lz", tree=True)
        cut = _cut(m, self._cuts)
        t_zero, t_neg = mt == 0, self.sig < 0
        if self._cuts is not None:
            ext, lz, lsb_t, t_zero, t_neg = (
                cut(v, TERM_DECODE, TERM_SHIFT, f"dec_{n}") for v, n in (
                    (ext, "ext"), (lz, "lz"), (lsb_t, "lsb"), (t_zero, "zero"),
                    (t_neg, "neg")))

        def out(v, name):
            return cut(v, TERM_SHIFT, "decode", f"dec_{name}")
        m.d.comb += [self.t_sig.eq(out(ext << lz, "t_sig")),
                     self.t_top.eq(out(lsb_t + (t.sig_bits - 1) - lz, "t_top")),
                     self.t_zero.eq(out(t_zero, "t_zero")),
                     self.t_neg.eq(out(t_neg, "t_neg"))]
        return m

    def parts(self):
        """The term's absolute value, leading-zero count and normalising shift, and the
        top-exponent adds (:mod:`hwgen.parts`)."""
        b = self._b
        M, E = b.sig, b.exp_bits
        return [Part("neg", (b.term.sig_bits,)), Part("lzc", (M,)),
                Part("shl", (M, M)), Part("add", (E,), 3)]


class SwapAlign(wiring.Component):
    """The operand with the higher leading one (*big*) at the window's top, the other
    shifted right into the window with the bits below it jammed into bit 0.

    Members
    -------
    a_*, t_* : In
        :class:`Decode`'s outputs.
    big, small : Out(N)
        Window magnitudes; big's top place at bit ``N - 1`` (its leading one, unless big
        is a subnormal accumulator; 0 when both are zero).
    big_neg, small_neg : Out(1)
    base : Out(signed(E))
        Weight exponent of window bit 0, ``pb - N + 1``.
    """

    def __init__(self, bspec, cuts=None):
        self._b = b = bspec
        self._cuts = cuts
        M, N, E = b.sig, b.window, b.exp_bits
        ports = {}
        for pre in ("a", "t"):
            ports.update({f"{pre}_neg": In(1), f"{pre}_sig": In(M),
                          f"{pre}_top": In(signed(E)), f"{pre}_zero": In(1)})
        ports.update({"big": Out(N), "small": Out(N), "big_neg": Out(1),
                      "small_neg": Out(1), "base": Out(signed(E))})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        b = self._b
        cut = _cut(m, self._cuts)
        M, N, E = b.sig, b.window, b.exp_bits
        # Both distances at once; the sign of the first is the compare (no adder after it).
        d_at, d_ta = Signal(signed(E + 1)), Signal(signed(E + 1))
        m.d.comb += [d_at.eq(self.a_top - self.t_top), d_ta.eq(self.t_top - self.a_top)]
        a_big = Signal()
        m.d.comb += a_big.eq(~self.a_zero & (self.t_zero | (d_at >= 0)))
        big_sig, small_sig = Signal(M), Signal(M)
        big_top = Signal(signed(E))
        small_zero = Signal()
        m.d.comb += [
            big_sig.eq(Mux(a_big, self.a_sig, self.t_sig)),
            small_sig.eq(Mux(a_big, self.t_sig, self.a_sig)),
            big_top.eq(Mux(a_big, self.a_top, self.t_top)),
            small_zero.eq(Mux(a_big, self.t_zero, self.a_zero)),
            self.big_neg.eq(cut(Mux(a_big, self.a_neg, self.t_neg), "align.cmp",
                                "align.shift", "big_neg")),
            self.small_neg.eq(cut(Mux(a_big, self.t_neg, self.a_neg), "align.cmp",
                                  "align.shift", "small_neg")),
        ]
        dist = Signal(signed(E + 1))
        m.d.comb += dist.eq(Mux(a_big, d_at, d_ta))
        shift = Signal(range(N + 1))            # a zero small has any top: its bits are 0
        m.d.comb += shift.eq(Mux(small_zero | (dist >= N), N, dist))
        if self._cuts is not None:
            big_sig, small_sig, big_top, shift = (
                cut(v, "align.cmp", "align.shift", n) for v, n in
                ((big_sig, "big_sig"), (small_sig, "small_sig"), (big_top, "big_top"),
                 (shift, "shift")))
        placed = Cat(Const(0, N - M), small_sig)            # top place at bit N - 1
        wide = Signal(2 * N)
        m.d.comb += wide.eq(Cat(Const(0, N), placed) >> shift)
        kept, lost = wide[N:], wide[:N]
        m.d.comb += [self.big.eq(Cat(Const(0, N - M), big_sig)),
                     self.small.eq(kept | lost.any()),
                     self.base.eq(big_top - (N - 1))]
        return m

    def parts(self):
        """The top-exponent compare, the operand swap, the distance, the jamming right
        shift of the smaller operand and the window base (:mod:`hwgen.parts`)."""
        b = self._b
        M, N, E = b.sig, b.window, b.exp_bits
        return [Part("add", (E + 1,), 2), Part("mux", (2, M), 2), Part("mux", (2, E)),
                Part("mux", (2, E + 1)), Part("shr", (N, N + 1)), Part("add", (E,))]


class AddSub(wiring.Component):
    """The window sum ``+-big +- small`` as a sign and an ``N + 1``-bit magnitude.

    Members
    -------
    big, small, big_neg, small_neg : In
    mag : Out(N + 1)
    neg : Out(1)
        Sign of the sum (big's, or small's when small is larger: only in the near case).
    """

    def __init__(self, bspec, cuts=None):
        N = bspec.window
        self._n = N
        self._cuts = cuts
        super().__init__({"big": In(N), "small": In(N), "big_neg": In(1),
                          "small_neg": In(1), "mag": Out(N + 1), "neg": Out(1)})

    def elaborate(self, platform):
        m = Module()
        N = self._n
        if self._cuts is not None:
            return self._cut_sums(m)
        # Both differences at once, the sign of the first choosing (no negation after it).
        d_bs, d_sb = Signal(signed(N + 2)), Signal(signed(N + 2))
        m.d.comb += [d_bs.eq(self.big - self.small), d_sb.eq(self.small - self.big)]
        with m.If(self.big_neg == self.small_neg):
            m.d.comb += [self.mag.eq(self.big + self.small), self.neg.eq(self.big_neg)]
        with m.Elif(d_bs < 0):
            m.d.comb += [self.mag.eq(d_sb), self.neg.eq(self.small_neg)]
        with m.Else():
            m.d.comb += [self.mag.eq(d_bs), self.neg.eq(self.big_neg)]
        return m

    def _cut_sums(self, m):
        """The ring's adder: the three sums, each a low half (block ``addsub``) and a high
        half taking its carry (``addsub.hi``), then the choice (``addsub.pick``); blocks in
        different stages read each other's results through registers. Where both halves
        share a stage, the sums are made whole, as without cuts."""
        N = self._n
        W, h = N + 1, (N + 1) // 2
        cut = _cut(m, self._cuts)
        if self._cuts.stage("addsub") == self._cuts.stage("addsub.hi"):
            # one stage: the sums whole, as the uncut adder makes them (halves would ripple)
            total, d_bs, d_sb = Signal(W), Signal(signed(N + 2)), Signal(signed(N + 2))
            m.d.comb += [total.eq(self.big + self.small), d_bs.eq(self.big - self.small),
                         d_sb.eq(self.small - self.big)]
            sums = {n: cut(v, "addsub", "addsub.pick", n)
                    for v, n in ((total, "total"), (d_bs, "d_bs"), (d_sb, "d_sb"))}
            below = cut(d_bs < 0, "addsub", "addsub.pick", "below")
        else:
            big, small = Signal(W), Signal(W)
            m.d.comb += [big.eq(self.big), small.eq(self.small)]
            lows = {}
            for name, a, b, cin in (("total", big, small, 0), ("d_bs", big, ~small, 1),
                                    ("d_sb", small, ~big, 1)):
                lo = Signal(h + 1, name=f"{name}_lo")
                m.d.comb += lo.eq(a[:h] + b[:h] + cin)
                lows[name] = cut(lo, "addsub", "addsub.hi", f"{name}_lo")
            big_hi, small_hi = (cut(v[h:], "addsub", "addsub.hi", n)
                                for v, n in ((big, "big_hi"), (small, "small_hi")))
            sums = {}
            for name, a, b in (("total", big_hi, small_hi), ("d_bs", big_hi, ~small_hi),
                               ("d_sb", small_hi, ~big_hi)):
                hi = Signal(W - h, name=f"{name}_hi")
                m.d.comb += hi.eq(a + b + lows[name][h])
                sums[name] = cut(Cat(lows[name][:h], hi), "addsub.hi", "addsub.pick", name)
            below = sums["d_bs"][W - 1]             # the sign of big - small
        same, big_neg, small_neg = (
            cut(v, "addsub", "addsub.pick", n) for v, n in (
                (self.big_neg == self.small_neg, "same"), (self.big_neg, "big_neg"),
                (self.small_neg, "small_neg")))
        with m.If(same):
            m.d.comb += [self.mag.eq(sums["total"]), self.neg.eq(big_neg)]
        with m.Elif(below):
            m.d.comb += [self.mag.eq(sums["d_sb"]), self.neg.eq(small_neg)]
        with m.Else():
            m.d.comb += [self.mag.eq(sums["d_bs"]), self.neg.eq(big_neg)]
        return m

    def parts(self):
        """The sum, both differences and the choice (:mod:`hwgen.parts`)."""
        N = self._n
        return [Part("add", (N + 1,)), Part("add", (N + 2,), 2), Part("mux", (2, N + 1))]


class RoundAt(wiring.Component):
    """``RNE_FP32(+-mag * 2**base)``: normalization, subnormals, overflow to +-Inf; with
    ``rz``, rounded toward zero instead (no increment; a magnitude past the largest finite
    FP32 still gives +-Inf, which :class:`hwgen.accum_trunc.TruncAdd` replaces).

    Members
    -------
    mag : In(W)
    neg : In(1)
    base : In(signed(E))
    word : Out(32)
        +0 for a zero ``mag``; a nonzero value that rounds to zero keeps its sign.

    With cuts, its blocks are ``<blocks>.lzc`` (where the inputs arrive), ``.norm``,
    ``.rne`` and ``.pack``.
    """

    def __init__(self, width, exp_bits, rz=False, cuts=None, blocks="round"):
        self._w, self._e, self._rz = width, exp_bits, rz
        self._cuts = cuts
        self._blocks = blocks
        super().__init__({"mag": In(width), "neg": In(1), "base": In(signed(exp_bits)),
                          "word": Out(32)})

    def elaborate(self, platform):
        m = Module()
        W, E = self._w, self._e
        cut = _cut(m, self._cuts)
        lzc, nrm, rne, pack = (f"{self._blocks}.{b}" for b in ("lzc", "norm", "rne", "pack"))
        lz = leading_zeros(m, self.mag, W, "lz", tree=True)
        # A left shift by `cap` puts weight 2**-126 at the top bit (bit W - 1); a value
        # below 2**-126 keeps that alignment (subnormal), and a negative cap is a right
        # shift, its lost bits kept as sticky.
        cap = Signal(signed(E + 1))
        m.d.comb += cap.eq(self.base + (W - 1) + 126)
        shift = Signal(signed(E + 1))
        m.d.comb += shift.eq(Mux(cap < lz, cap, lz))
        # A negative shift is cap itself (lz >= 0): the right shift waits for no count.
        right = Signal(range(W + 3))
        m.d.comb += right.eq(Mux(cap >= 0, 0, Mux(-cap > W + 2, W + 2, -cap)))
        wide = Signal(2 * W + 2)
        if self._cuts is not None:
            mag = cut(self.mag, lzc, nrm, "mag")
            shift, right = (cut(v, lzc, nrm, n)
                            for v, n in ((shift, "shift"), (right, "right")))
            left = cut(cap >= 0, lzc, nrm, "left")
        else:
            mag, left = self.mag, cap >= 0
        m.d.comb += wide.eq(Mux(left,
                                Cat(Const(0, W + 2), mag << shift[:(W - 1).bit_length()]),
                                Cat(Const(0, W + 2), mag) >> right))
        norm, below = wide[W + 2:], wide[:W + 2].any()
        if self._cuts is not None:
            norm = cut(norm, nrm, rne, "norm")
            below = cut(below, nrm, rne, "below")
        if W >= 25:
            mant, guard = norm[W - 24:], norm[W - 25]
            sticky = norm[:W - 25].any() | below
        else:                                   # narrow inputs: pad below
            full = Cat(Const(0, 25 - W), norm)
            mant, guard, sticky = full[1:], full[0], below
        if self._rz:
            guard = Const(0, 1)
        exp_pre = Signal(signed(E + 2))         # biased exponent of the top bit
        m.d.comb += exp_pre.eq(cut(self.base, lzc, nrm, "base")
                               + (W - 1) + 127 - shift)
        round_to_word(m, mant, guard, sticky, cut(exp_pre, nrm, rne, "exp_pre"),
                      cut(self.mag == 0, lzc, rne, "zero"),
                      cut(self.neg, lzc, rne, "neg"), self.word,
                      pack=None if self._cuts is None else
                      lambda v, n: cut(v, rne, pack, n))
        return m

    def parts(self):
        """Leading-zero count and normalising shift, the subnormal right shift, the 25-bit
        RNE increment, the exponent adds and the word's three 32-bit choices
        (:mod:`hwgen.parts`)."""
        W, E = self._w, self._e
        return [Part("norm", (W,)), Part("shr", (W, W + 3))] \
            + ([] if self._rz else [Part("add", (25,))]) \
            + [Part("add", (E + 2,), 3), Part("mux", (2, 32), 3)]


class BypassRound(wiring.Component):
    """For a step split by :class:`hwgen.accum_split.SplitSum`: the bypass result
    ``RNE(T - s * Xe) = RNE(d * s * 2**(q - 24) + E)``, ``d = fn - xe`` in -1..1:
    ``RNE(E)`` when ``d = 0``, else ``+-RNE(2**(q - 24) - |E|)`` (``E`` then has the other
    sign and ``|E| <= 2**(q - 25)``).

    Members
    -------
    fn, xe, a_neg, q, e_* : In
    word : Out(32)

    With cuts, the shift of ``|E|`` is block :data:`BYPASS`, and the subtraction, the
    choice of the operand and its rounding are the blocks of a :class:`RoundAt` named
    after it (:data:`BYPASS_BLOCKS`).
    """

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        sp = sspec
        E = sp.exp_bits
        super().__init__({"fn": In(26), "xe": In(26), "a_neg": In(1), "q": In(signed(E)),
                          "e_neg": In(1), "e_zero": In(1), "e_top": In(signed(E)),
                          "e_sig": In(E_BITS), "e_sticky": In(1), "word": Out(32)})

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        E = sp.exp_bits
        W = E_BITS + 2
        cut = _cut(m, self._cuts)
        m.submodules.round = rnd = RoundAt(W, E + 1, cuts=self._cuts, blocks=BYPASS)
        same = self.fn == self.xe
        # 2**g - |E| in units of 2**(g - 27), g = q - 24: |E| truncated there (its
        # E_BITS bits shifted right by g - 1 - e_top >= 0) and the rest as a borrow.
        k = Signal(signed(E + 1))
        m.d.comb += k.eq(self.q - 25 - self.e_top)
        kk = Signal(range(E_BITS + 2))
        m.d.comb += kk.eq(Mux(self.e_zero, E_BITS + 1,
                              Mux(k > E_BITS + 1, E_BITS + 1, Mux(k < 0, 0, k))))
        wide = Signal(2 * E_BITS + 2)
        m.d.comb += wide.eq(Cat(Const(0, E_BITS + 2), self.e_sig) >> kk)
        et = wide[E_BITS + 2:]
        lost = wide[:E_BITS + 2].any() | (self.e_sticky & ~self.e_zero)
        # the rest in the rounding's first block
        et, lost, same, e_sticky, e_sig, e_top, e_neg, q, flip = (
            cut(v, BYPASS, f"{BYPASS}.lzc", f"bypass_{n}") for v, n in (
                (et, "et"), (lost, "lost"), (same, "same"), (self.e_sticky, "e_sticky"),
                (self.e_sig, "e_sig"), (self.e_top, "e_top"), (self.e_neg, "e_neg"),
                (self.q, "q"), (self.a_neg ^ (self.fn < self.xe), "flip")))
        z = Signal(E_BITS + 1)
        m.d.comb += z.eq((1 << E_BITS) - et - lost)
        with m.If(same):
            m.d.comb += [rnd.mag.eq(Cat(e_sticky, e_sig)),
                         rnd.base.eq(e_top - E_BITS), rnd.neg.eq(e_neg)]
        with m.Else():
            # d * s: the sign of the result (fn - xe = +1 keeps s, -1 flips it).
            m.d.comb += [rnd.mag.eq(Cat(lost, z)), rnd.base.eq(q - 24 - E_BITS - 1),
                         rnd.neg.eq(flip)]
        m.d.comb += self.word.eq(rnd.word)
        return m

    def parts(self):
        """The ``fn``/``xe`` compare, the shift of ``E`` under ``2**(q - 24)`` and the
        subtraction, the operand choice and a :class:`RoundAt`
        (:mod:`hwgen.parts`)."""
        sp = self._s
        E = sp.exp_bits
        return ([Part("cmp", (26,), 2), Part("add", (E + 1,)), Part("shr", (E_BITS, E_BITS + 2)),
                 Part("add", (E_BITS + 1,)), Part("mux", (2, E_BITS + 2 + E + 2))]
                + probe(RoundAt(E_BITS + 2, E + 1)).parts())


#: :meth:`BoundedAdd.term_blocks` weights of the split's blocks (:data:`SPLIT_BLOCKS`), then
#: of the bypass word's (:data:`BYPASS_BLOCKS`), measured with the liberty flow's ``map``
#: script (``benchmarks/ring_blocks.py --script map``).
_SPLIT_WEIGHTS = {"sort": 123, "sort.net": 146, "clusters": 141, "clusters.1": 123,
                  "clusters.0": 118, "pick": 36, "pick.abs": 150, "frame": 144,
                  "frame.shift": 153, "nearest": 143, "nearest.words": 151, "residue": 75,
                  "residue.norm": 81, "residue.sig": 95, "term": 123, "term.sum": 104,
                  "term.neg": 149}
_BYPASS_WEIGHTS = (140, 153, 68, 78, 27)


class BoundedAdd(wiring.Component):
    """One accumulation, the interface and contract of :class:`hwgen.accum.ExactAdd`: a
    one-term step, two terms pre-added (``max_exp_diff``, :class:`PreAdd`), two
    independent terms paired (:class:`JamPair`; an accumulator word exactly minus the higher
    term bypasses the pair and adds the lower term alone), or three or four independent
    terms split (:class:`hwgen.accum_split.SplitSum`: the loop adds their term ``P``, except
    for the one accumulator word that takes the bypass word and for accumulators below
    ``2**(q - 26)``, which take one of ``N``'s words by :class:`hwgen.accum_split.AccVersusE`'s
    compare). Two pre-added or paired terms may come with a wide term
    (:data:`WIDE`, :class:`BoundedSpec`), which the loop adds alone where they are zero.

    Members
    -------
    acc : In(32)
    step : In(accum_layout(terms))
    word : Out(32)
    """

    def __init__(self, terms, max_exp_diff=None, pair_window=PAIR_WINDOW, split_gap=SPLIT_GAP,
                 cuts=None):
        self._b = BoundedSpec(terms, max_exp_diff, pair_window, split_gap)
        self._cuts = cuts
        super().__init__({"acc": In(32), "step": In(accum_layout(self._b.accum.terms)),
                          "word": Out(32), **_held_port(cuts)})

    def term_blocks(self):
        """``[(block, weight)]``, datapath order: the work on the step alone ahead of the
        accumulator's join in :class:`hwgen.ring.Ring` (the pre-add, the pair's normalize,
        swap and sum, or the split's blocks and the rounding of its bypass word; then the
        term's decode). Weights as :meth:`loop_blocks`'."""
        b = self._b
        if b.split is not None:
            ahead = ([(f"split.{k}", _SPLIT_WEIGHTS[k]) for k in SPLIT_BLOCKS]
                     + list(zip(BYPASS_BLOCKS, _BYPASS_WEIGHTS)))
        elif b.pair_window is not None:
            ahead = [("pair.norm", 130), ("pair.swap", 130), ("pair.sum", 130)]
        elif len(b.core) == 2:
            ahead = [("preadd.cmp", 57), ("preadd.sum", 140)]
        else:
            ahead = []
        decode = 147 if b.split is not None else round(13 * log2(b.sig) - 2)
        return ahead + [(TERM_DECODE, decode), (TERM_SHIFT, round(12 * log2(b.sig) + 5))]

    def loop_blocks(self):
        """``[(block, weight)]``, datapath order: the blocks the accumulator word goes
        through in :class:`hwgen.ring.Ring` (the accumulator's unpack with the pair's
        compare or the split's normalization, the split's compares and choice of its word,
        the exponent compare and swap, the jamming shift, the three
        sums and their choice, the leading-zero count, the normalising shift, the rounding
        increment, the word's exponent and packing, and the special cases).

        Weights are delays in units of 10 ps in the FreePDK45 / Nangate library, as a
        function of the window width N where they grow with it, fitted to each block
        synthesized in a stage of its own (``benchmarks/ring_blocks.py``; the register
        overhead every stage pays left out)."""
        b = self._b
        lg = log2(b.window)
        decode = 108 if b.split is not None else 60 if b.pair_window is not None else 32
        versus = [(VERSUS, 84)] if b.split is not None else []
        # The split's sums measure about twice the fit of the others' at the same N.
        sums = (126, 135) if b.split is not None else (round(18 * lg - 42),) * 2
        return [("decode", decode), *versus, ("align.cmp", 75),
                ("align.shift", round(20 + 10 * lg)),
                ("addsub", sums[0]), ("addsub.hi", sums[1]),
                ("addsub.pick", 23),
                ("round.lzc", round(16 * lg - 12)), ("round.norm", round(17 * lg - 25)),
                ("round.rne", 88), ("round.pack", 28), ("special", 30)]

    @property
    def bspec(self):
        return self._b

    def describe(self):
        """:meth:`BoundedSpec.describe`."""
        return self._b.describe()

    def parts(self):
        """:class:`PreAdd` (sub-block ``preadd``, two terms pre-added), :class:`JamPair`
        (``pair``, with ``bypass``; two paired) or the split (``split``, ``versus``,
        ``choose``; three or four), :class:`Decode` (``decode``), :class:`SwapAlign`
        (``align``), :class:`AddSub` (``addsub``),
        :class:`RoundAt` (``round``) and the special cases (``special``: two 8-bit
        compares, two 32-bit choices) (:mod:`hwgen.parts`). What forms and normalizes the
        loop's one term from the step, ahead of the loop (pre-add, pair, split and its
        bypass word, decode), carries the term's name (:func:`hwgen.parts.of_term`)."""
        b = self._b
        name = b.term.name
        out = []
        if b.pair_window is not None:
            bypass = [Part("cmp", (32,)), Part("mux", (2, b.sig + b.exp_bits + 2))]
            out = (of_term(name, within("pair", probe(JamPair(b)).parts()))
                   + within("bypass", bypass))
        elif b.split is not None:
            final = [Part("cmp", (32,)), Part("mux", (2, 32), 3)]
            out = (of_term(name, within("split", probe(SplitSum(b.split)).parts())
                           + within("bypass", probe(BypassRound(b.split)).parts()))
                   + within("versus", probe(AccVersusE(b.split)).parts())
                   + within("choose", final))
        elif len(b.core) == 2:
            out = of_term(name, within("preadd", probe(PreAdd(b)).parts()))
        if b.wide is not None:     # the two terms' zero test and the choice of the wide term
            t = b.term
            out += of_term(name, within("wide", [Part("cmp", (t.sig_bits,)),
                                                 Part("add", (t.exp_bits,)),
                                                 Part("mux", (2, t.sig_bits + t.exp_bits))]))
        return (out + of_term(name, within("decode", probe(Decode(b)).parts()))
                + within("align", probe(SwapAlign(b)).parts())
                + within("addsub", probe(AddSub(b)).parts())
                + within("round", probe(RoundAt(b.window + 1, b.exp_bits)).parts())
                + within("special", [Part("cmp", (8,), 2), Part("mux", (2, 32), 2)]))

    def elaborate(self, platform):
        m = Module()
        b = self._b
        cuts = self._cuts
        cut = _cut(m, cuts)
        held = cut(self.acc, "join", "out", "held", reset=True)
        # the accumulator and the step's flags as the decode stage sees them
        step_first, step_nan = self.step.first, self.step.nan
        acc = cut(self.acc, "join", "decode", "held")
        first = cut(step_first, "in", "decode", "first")
        m.submodules.decode = dec = Decode(b, cuts)
        m.submodules.align = sa = SwapAlign(b, cuts)
        m.submodules.addsub = ad = AddSub(b, cuts)
        m.submodules.round = rnd = RoundAt(b.window + 1, b.exp_bits, cuts=cuts)
        fields = ("neg", "sig", "top", "zero")
        term = {f: getattr(dec, f"t_{f}") for f in fields}

        def feed(sig, exp):
            """The loop's term into the decode: ``sig``/``exp`` (the joined term), or the
            wide term alone where the two joined terms are zero."""
            if b.wide is not None:
                alone = cut(Cat(*(self.step[f"{t.name}_sig"] != 0 for t in b.core)) == 0,
                            "in", TERM_DECODE, "wide_alone")
                wide_sig = cut(self.step[f"{WIDE}_sig"], "in", TERM_DECODE, "wide_sig")
                wide_exp = cut(self.step[f"{WIDE}_exp"] + b.wide_offset, "in", TERM_DECODE,
                               "wide_exp")
                sig, exp = Mux(alone, wide_sig, sig), Mux(alone, wide_exp, exp)
            m.d.comb += [dec.sig.eq(sig), dec.exp.eq(exp)]
        zero_acc = first
        if b.pair_window is not None:
            # The accumulator exactly -hi: the sum is lo, which goes in alone.
            m.submodules.pair = pair = JamPair(b, cuts)
            m.d.comb += pair.step.eq(self.step)
            feed(pair.sig, pair.exp)
            bypass = Signal()
            m.d.comb += bypass.eq(pair.hi_rep & ~first & (acc == (pair.hi_word ^ (1 << 31))))
            term = {f: Mux(bypass, getattr(pair, f"lo_{f}"), v) for f, v in term.items()}
            zero_acc = zero_acc | bypass
        elif b.split is not None:
            m.submodules.split = sp = SplitSum(b.split, cuts)
            m.submodules.bypass = bp = BypassRound(b.split, cuts)
            m.submodules.versus = vs = AccVersusE(b.split, cuts)
            m.d.comb += [bp.fn.eq(sp.fn), bp.xe.eq(sp.xe), bp.a_neg.eq(sp.s_neg), bp.q.eq(sp.q)]
            m.d.comb += sp.step.eq(self.step)
            feed(sp.p_sig, sp.p_exp)
            acc_eff = Signal(32)
            m.d.comb += acc_eff.eq(Mux(first, 0, acc))

            def decode_sees(value, name):
                return cut(value, BYPASS, "decode", f"split_{name}")
            m.d.comb += [vs.acc.eq(acc_eff), vs.q.eq(decode_sees(sp.q, "q"))]
            for f in ("e_neg", "e_zero", "e_top", "e_sig", "e_sticky"):
                m.d.comb += [getattr(vs, f).eq(decode_sees(getattr(sp, f), f)),
                             getattr(bp, f).eq(getattr(sp, f))]
            # The accumulator that P cannot serve takes the bypass word; one below
            # 2**(q - 26) takes N's word or, for a midpoint N, the neighbour that the sign
            # of acc + E picks (a tie: the even one). The choice is in the compares' block.
            is_a, away = Signal(), Signal()
            m.d.comb += is_a.eq(sp.a_valid & (acc_eff == sp.a_word))

            def vs_sees(value, name, src="decode"):
                return cut(value, src, VERSUS, f"versus_{name}")
            is_a_v, zero_v, mid_v = (vs_sees(is_a, "is_a"), vs_sees(sp.zero, "zero"),
                                     vs_sees(sp.mid, "mid"))
            base_v, up_v, bypass_v = (vs_sees(sp.w_base, "w_base"), vs_sees(sp.w_up, "w_up"),
                                      vs_sees(bp.word, "bypass", BYPASS_BLOCKS[-1]))
            m.d.comb += away.eq(Mux(vs.zero, base_v[0],
                                    vs.pos ^ vs_sees(sp.s_neg, "s_neg", BYPASS)))
            split_word = Signal(32)
            with m.If(is_a_v):
                m.d.comb += split_word.eq(bypass_v)
            with m.Else():
                m.d.comb += split_word.eq(Mux(mid_v & away, up_v, base_v))
            use_split = Signal()
            m.d.comb += use_split.eq(~zero_v & (is_a_v | vs.small))
        elif len(b.core) == 2:
            m.submodules.preadd = pre = PreAdd(b, cuts)
            m.d.comb += pre.step.eq(self.step)
            feed(pre.sig, pre.exp)
        else:
            t = b.term
            feed(cut(self.step[f"{t.name}_sig"], "in", TERM_DECODE, "sig"),
                 cut(self.step[f"{t.name}_exp"], "in", TERM_DECODE, "exp"))
        m.d.comb += [dec.acc.eq(acc), dec.zero_acc.eq(zero_acc)]
        for f in fields:
            m.d.comb += getattr(sa, f"a_{f}").eq(cut(getattr(dec, f"a_{f}"), "decode",
                                                     "align.cmp", f"a_{f}"))
        for f in fields:
            m.d.comb += getattr(sa, f"t_{f}").eq(cut(term[f], "decode", "align.cmp", f"t_{f}"))
        m.d.comb += [ad.big.eq(cut(sa.big, "align.shift", "addsub", "big")),
                     ad.small.eq(cut(sa.small, "align.shift", "addsub", "small")),
                     ad.big_neg.eq(cut(sa.big_neg, "align.shift", "addsub", "big_neg")),
                     ad.small_neg.eq(cut(sa.small_neg, "align.shift", "addsub", "small_neg")),
                     rnd.mag.eq(cut(ad.mag, "addsub.pick", "round.lzc", "mag")),
                     rnd.neg.eq(cut(ad.neg, "addsub.pick", "round.lzc", "neg")),
                     rnd.base.eq(cut(sa.base, "align.shift", "round.lzc", "base"))]
        if cuts is None:
            special = ~self.step.first & (self.acc[23:31] == 255)
            acc_nan = special & (self.acc[:23] != 0)
            word = self.word
            nan = self.step.nan | acc_nan
        else:
            m.d.comb += self.held.eq(held)
            acc_s = cut(self.acc, "join", "special", "held")
            special = (~cut(step_first, "in", "special", "first")
                       & (acc_s[23:31] == 255))
            nan = cut(step_nan, "in", "special", "nan") | (special & (acc_s[:23] != 0))
            if b.split is not None:
                use_split = cut(use_split, VERSUS, "special", "use_split")
                split_word = cut(split_word, VERSUS, "special", "split_word")
            word = Signal(32)
            m.d.comb += self.word.eq(cut(word, "special", "out", "word"))
        # Every value the choice reads reaches its stage here, outside the choice: a cut
        # register made inside a branch would load only when that branch is taken.
        acc = cut(self.acc, "join", "special", "held")
        rounded = cut(rnd.word, "round.pack", "special", "rounded")
        with m.If(nan):
            m.d.comb += word.eq(NAN_WORD)
        with m.Elif(special):
            m.d.comb += word.eq(acc)
        if b.split is not None:
            with m.Elif(use_split):
                m.d.comb += word.eq(split_word)
        with m.Else():
            m.d.comb += word.eq(rounded)
        return m
