"""The accumulator every dot unit ends with, and its reference back end (``"window"``).

This module holds what every accumulator back end shares, whatever the format: the terms a
step delivers (:class:`TermSpec`, :class:`AccumSpec`, :func:`accum_layout`) and the stream
stage holding the FP32 accumulator register (:class:`Accumulator`, which runs the adder of
any back end: :mod:`hwgen.backend`), and the reference back end itself (:class:`ExactAdd`:
the exact step sum into the FP32 accumulator, one RNE rounding); the others are
:mod:`hwgen.accum_bounded` (with :mod:`hwgen.accum_split`) and :mod:`hwgen.accum_trunc`.

A format's front end reduces one step to a fixed number of exact *terms*. Term ``t`` is the
integer ``sig_t * 2 ** (exp_t - bias_t)``: ``sig_t`` a two's complement significand of
``sig_bits`` bits, ``exp_t`` an unsigned field of ``exp_bits`` bits that never exceeds
``exp_max`` (so the term's range is known when the hardware is built), ``bias_t`` a
constant. An exact back end computes, per step (spec section 7)::

    acc = RNE_FP32(acc + sum_t term_t)          # one rounding of the exact sum

with IEEE gradual underflow and overflow to +-Inf, +0 for an exact zero sum, a nonzero sum
that rounds to zero keeping its sign, +-Inf sticky for finite steps, and NaN (emitted as
0x7FC00000) from a step whose ``nan`` flag is set until the next ``first`` step.

The reference back end gets exactness from a fixed-point window that holds every bit of
every item: its least significant bit has weight ``2**L`` with
``L = min(-149, min_t(-bias_t))`` (-149 is the FP32 subnormal ulp, the lowest bit of any
accumulator value), its top bit is above the largest possible magnitude of the sum. All
items are shifted into the window (one variable shift each), added as two's complement
integers (no information lost), then one leading-zero count, one normalising shift and one
round-to-nearest-even produce the FP32 word. Far-apart scales and full cancellation
(1.0 - 1.0 + 2**-80) are therefore exact by construction; the price is the window width
(``AccumSpec.window``; 280 bits for HiF4).

Components (one per datapath stage):

* :class:`Align` — decodes the accumulator word, shifts it and every term into the window,
  adds them (combinational).
* :class:`Round` — window sum -> FP32 word (LZC, normalise, RNE, overflow; combinational).
* :class:`ExactAdd` — ``Align`` + ``Round`` + NaN / Inf / ``first`` handling.
* :class:`Accumulator` — the stream stage holding the accumulator register (kind
  ``"accumulator"``; its timing is stated in :mod:`hwgen.stream`).
"""

import math
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .parts import Part, probe, within

__all__ = ["TermSpec", "AccumSpec", "Align", "Round", "ExactAdd", "Accumulator",
           "accum_layout", "leading_zeros", "negated_where", "round_to_word", "NAN_WORD"]

NAN_WORD = 0x7FC00000
FP32_MIN_EXP = -149       # weight of the lowest bit of any FP32 value (subnormal ulp)
FP32_TOP = 128            # every finite FP32 magnitude is < 2**128


@dataclass(frozen=True)
class TermSpec:
    """One exact term of a step: ``sig * 2 ** (exp - bias)``.

    Attributes
    ----------
    name : str
        Field prefix in the accumulator's input layout (``<name>_sig``, ``<name>_exp``).
    sig_bits : int
        Width of the two's complement significand.
    exp_bits : int
        Width of the unsigned exponent field.
    bias : int
        Constant subtracted from the exponent field.
    exp_max : int or None
        Largest exponent field value the front end can produce (default: all ones).
    """

    name: str
    sig_bits: int
    exp_bits: int
    bias: int
    exp_max: int | None = None

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"Term name must be an identifier, not {self.name!r}")
        for what in ("sig_bits", "exp_bits"):
            value = getattr(self, what)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Term {what} must be a positive integer, not {value!r}")
        if not isinstance(self.bias, int):
            raise ValueError(f"Term bias must be an integer, not {self.bias!r}")
        field_max = (1 << self.exp_bits) - 1
        if self.exp_max is not None and (not isinstance(self.exp_max, int)
                                         or not 0 <= self.exp_max <= field_max):
            raise ValueError(f"Term exp_max must be an integer from 0 to {field_max} (what "
                             f"a {self.exp_bits}-bit exponent field holds), not "
                             f"{self.exp_max!r}")

    @property
    def top_exp(self):
        """Largest exponent field value."""
        return (1 << self.exp_bits) - 1 if self.exp_max is None else self.exp_max

    @property
    def lsb(self):
        """Weight exponent of the lowest possible significand bit (``-bias``)."""
        return -self.bias

    @property
    def top(self):
        """Every term magnitude is <= ``2 ** top``."""
        return self.sig_bits - 1 + self.top_exp - self.bias


class AccumSpec:
    """The window geometry derived from the term list.

    Attributes
    ----------
    terms : tuple of TermSpec
    lsb : int
        Weight exponent ``L`` of window bit 0.
    window : int
        Window width in bits (two's complement).
    """

    def __init__(self, terms):
        terms = tuple(terms)
        if not terms:
            raise ValueError("An accumulator needs at least one term")
        names = [t.name for t in terms]
        if len(set(names)) != len(names):
            raise ValueError(f"Term names must be distinct, not {names!r}")
        self.terms = terms
        self.lsb = min([FP32_MIN_EXP] + [t.lsb for t in terms])
        top = max([FP32_TOP] + [t.top + 1 for t in terms])
        carries = math.ceil(math.log2(len(terms) + 1))
        self.window = top - self.lsb + carries + 1

    def describe(self):
        """The terms and window geometry, as the manifest's ``acc`` stage records them."""
        return {"terms": [{"name": t.name, "sig_bits": t.sig_bits, "exp_bits": t.exp_bits,
                           "bias": t.bias, "exp_max": t.top_exp} for t in self.terms],
                "window_bits": self.window, "window_lsb_exp": self.lsb}


def accum_layout(terms):
    """Input payload layout of :class:`Accumulator` for ``terms``.

    Fields, low bits first: ``<name>_sig`` (signed) and ``<name>_exp`` for every term in
    order, then ``nan``, ``first``, ``last`` (1 bit each).
    """
    fields = {}
    for t in terms:
        fields[f"{t.name}_sig"] = signed(t.sig_bits)
        fields[f"{t.name}_exp"] = unsigned(t.exp_bits)
    fields.update(nan=1, first=1, last=1)
    return data.StructLayout(fields)


#: The blocks of an adder in :class:`hwgen.ring.Ring` that decode (normalize) the step's
#: term: its leading-zero count, then its shift. They work on the step alone, so they go
#: ahead of the accumulator's join, and the loop's decode stage unpacks only the
#: accumulator word.
TERM_DECODE, TERM_SHIFT = "decode.term", "decode.shift"


def _cut(m, cuts):
    """``cut(value, src, dst, name, reset=False)``: ``value`` moved from block ``src`` to
    block ``dst`` through ``cuts``' registers (:meth:`hwgen.ring.LoopCuts.move`), or
    ``value`` itself without cuts."""
    if cuts is None:
        return lambda value, src, dst, name="cut", reset=False: value
    return lambda value, src, dst, name="cut", reset=False: cuts.move(
        m, value, src, dst, name=name, reset=reset)


def _held_port(cuts):
    """The ``held`` output of a cut adder (its ``acc`` input at the last stage); none
    without cuts."""
    return {} if cuts is None else {"held": Out(32)}


def negated_where(m, value, neg, width, name="neg", prefix=False):
    """``value`` negated where ``neg`` is set, modulo ``2**width`` (its low ``width`` bits,
    two's complement): ``Mux(neg, -value, value)``; with ``prefix``, the same bits as
    ``value ^ (neg & below)``, ``below[i]`` the OR of ``value``'s bits under bit ``i`` (an
    OR prefix of logarithmic depth, no carry chain; about half the delay of the
    negation's adder in the standard-cell library at 183 bits)."""
    if not prefix:
        return Mux(neg, -value, value)
    ext = Signal(signed(width) if value.shape().signed else width, name=f"{name}_in")
    m.d.comb += ext.eq(value)                   # extended (or cut) to width bits
    bits, n = ext.as_unsigned(), width
    level = [bits[i] for i in range(n)]
    d = 1
    while d < n:                            # Kogge-Stone: level[i] = OR of bits[i - 2d + 1 .. i]
        nxt = Signal(n, name=f"{name}_or{d}")
        m.d.comb += nxt.eq(Cat(*(level[i] | level[i - d] if i >= d else level[i]
                                 for i in range(n))))
        level, d = [nxt[i] for i in range(n)], 2 * d
    below = Cat(Const(0, 1), *level[:n - 1])
    out = Signal(n, name=name)
    m.d.comb += out.eq(bits ^ (below & neg.replicate(n)))
    return out


def leading_zeros(m, value, width, name="lzc", tree=False):
    """Leading-zero count of ``value`` (``width`` bits; 0 input -> 0).

    The default is a priority chain (depth linear in ``width``; the full-window back end
    keeps it, so its Verilog and recorded synthesis stay as they are); ``tree`` builds the
    same count as a binary tree of halves (depth logarithmic): a half's count is the upper
    half's when that has a one, else half the width plus the lower half's.
    """
    count = Signal(range(width + 1), name=name)
    if not tree:
        for k in range(width):              # the highest set bit is assigned last and wins
            with m.If(value[k]):
                m.d.comb += count.eq(width - 1 - k)
        return count
    size = 1 << max(width - 1, 0).bit_length()
    padded = Cat(Const(0, size - width), value) if size > width else value

    def node(bits, n):
        """``(any, count)`` of the ``n`` bits ``bits`` (``n`` a power of two)."""
        if n == 1:
            return bits[0], Const(0, 1)
        h = n // 2
        any_hi, c_hi = node(bits[h:], h)
        any_lo, c_lo = node(bits[:h], h)
        return any_hi | any_lo, Mux(any_hi, c_hi, Cat(c_lo, Const(1, 1)) if h > 1
                                    else Const(1, 1))

    any_, cnt = node(padded, size)
    m.d.comb += count.eq(Mux(any_, cnt, 0))
    return count


def round_to_word(m, mant, guard, sticky, exp_pre, zero, sign, word, pack=None):
    """Drive ``word`` with the FP32 word of a normalized significand: ``mant`` (24 bits,
    its top bit at biased exponent ``exp_pre``, or 0 with ``exp_pre`` = 1 for a
    subnormal), rounded to nearest even by ``guard`` and ``sticky``; a carry out raises the
    exponent, an exponent of 255 or more gives +-Inf, ``zero`` gives +0. ``pack(value,
    name)``, where given, moves the increment's result and the other inputs to where the
    word is packed (a ring's cut between blocks ``round.rne`` and ``round.pack``)."""
    rounded = Signal(25)
    m.d.comb += rounded.eq(mant + (guard & (sticky | mant[0])))
    if pack is not None:
        # Cut: the exponent's two candidates and their overflow tests go beside the
        # increment, so that packing is a choice by its carry.
        up, inf_up, inf_at = Signal(8), Signal(), Signal()
        m.d.comb += [up.eq(exp_pre[:8] + 1), inf_up.eq(exp_pre >= 254),
                     inf_at.eq(exp_pre >= 255)]
        rounded, at, up, inf_up, inf_at, zero, sign = (pack(v, n) for v, n in (
            (rounded, "rounded_sig"), (exp_pre[:8], "pack_exp"), (up, "pack_up"),
            (inf_up, "pack_inf_up"), (inf_at, "pack_inf_at"), (zero, "pack_zero"),
            (sign, "pack_sign")))
        with m.If(zero):
            m.d.comb += word.eq(0)
        with m.Elif(Mux(rounded[24], inf_up, rounded[23] & inf_at)):
            m.d.comb += word.eq(Cat(Const(0, 23), Const(255, 8), sign))
        with m.Elif(rounded[24]):
            m.d.comb += word.eq(Cat(Const(0, 23), up, sign))
        with m.Elif(rounded[23]):
            m.d.comb += word.eq(Cat(rounded[:23], at, sign))
        with m.Else():
            m.d.comb += word.eq(Cat(rounded[:23], Const(0, 8), sign))
        return
    exp = Signal(signed(len(exp_pre)))
    frac = Signal(23)
    with m.If(rounded[24]):
        m.d.comb += [exp.eq(exp_pre + 1), frac.eq(0)]
    with m.Elif(rounded[23]):
        m.d.comb += [exp.eq(exp_pre), frac.eq(rounded[:23])]
    with m.Else():
        m.d.comb += [exp.eq(0), frac.eq(rounded[:23])]
    with m.If(zero):
        m.d.comb += word.eq(0)
    with m.Elif(exp >= 255):
        m.d.comb += word.eq(Cat(Const(0, 23), Const(255, 8), sign))
    with m.Else():
        m.d.comb += word.eq(Cat(frac, exp[:8], sign))


class Align(wiring.Component):
    """Shift the accumulator and every term into the fixed-point window and add them.

    Members
    -------
    acc : In(32)
        Accumulator FP32 word (Inf/NaN words give a meaningless sum; :class:`ExactAdd`
        overrides the result then).
    zero_acc : In(1)
        Treat the accumulator as +0 (a ``first`` step).
    terms : In(accum_layout(terms)) (only the term fields are used)
    sum : Out(signed(window))
        ``acc + sum(terms)`` in units of ``2 ** lsb``, exact.
    """

    def __init__(self, spec, cuts=None):
        self._spec = spec
        self._cuts = cuts
        super().__init__({"acc": In(32), "zero_acc": In(1),
                          "terms": In(accum_layout(spec.terms)),
                          "sum": Out(signed(spec.window))})

    def elaborate(self, platform):
        m = Module()
        spec = self._spec
        cut = _cut(m, self._cuts)
        frac, ef, sign = self.acc[:23], self.acc[23:31], self.acc[31]
        shamt = Signal(8)               # acc LSB weight is 2**(max(ef, 1) - 150)
        m.d.comb += shamt.eq(Mux(ef == 0, 0, ef - 1))
        sig = Signal(24)
        m.d.comb += sig.eq(Mux(self.zero_acc, 0, Cat(frac, ef != 0)))
        acc_fixed = Signal(spec.window)
        pad = FP32_MIN_EXP - spec.lsb       # >= 0: weight 2**-149 is window bit `pad`
        m.d.comb += acc_fixed.eq((Cat(Const(0, pad), sig) if pad else sig) << shamt)
        items = [Mux(sign, -acc_fixed, acc_fixed)]
        for t in spec.terms:
            shifted = Signal(signed(spec.window), name=f"{t.name}_aligned")
            offset = t.lsb - spec.lsb
            m.d.comb += shifted.eq((self.terms[f"{t.name}_sig"] << self.terms[f"{t.name}_exp"])
                                   << offset)
            items.append(shifted)
        m.d.comb += self.sum.eq(sum(cut(v, "align.shift", "align.sum", f"item{k}")
                                    for k, v in enumerate(items)))
        return m

    def parts(self):
        """The accumulator significand's shift into the window (by ``max(ef, 1) - 1``,
        0..253) and its exponent decrement, its conditional negation, the window-wide sum,
        then one alignment shifter per term with a variable exponent (:mod:`hwgen.parts`)."""
        w, terms = self._spec.window, self._spec.terms
        out = [Part("wshl", (24, 254, w)), Part("add", (8,)), Part("neg", (w,)),
               Part("addn", (len(terms) + 1, w))]
        out += [Part("wshl", (t.sig_bits, t.top_exp + 1, w), term=t.name)
                for t in terms if t.top_exp > 0]
        return out


class Round(wiring.Component):
    """Round an exact window value to an FP32 word: RNE, subnormals, overflow to +-Inf.

    Members
    -------
    sum : In(signed(window))
        The exact value in units of ``2 ** lsb``.
    word : Out(32)
        ``RNE_FP32(sum * 2 ** lsb)``; +0 for an exact zero.
    """

    def __init__(self, spec, cuts=None):
        self._spec = spec
        self._cuts = cuts
        super().__init__({"sum": In(signed(spec.window)), "word": Out(32)})

    def elaborate(self, platform):
        m = Module()
        w, lsb = self._spec.window, self._spec.lsb
        cut = _cut(m, self._cuts)
        sign = self.sum[w - 1]
        mag = Signal(w)
        m.d.comb += mag.eq(Mux(sign, -self.sum, self.sum))
        lz = leading_zeros(m, cut(mag, "round.abs", "round.lzc", "mag"), w)
        # Shifting by shift_max puts weight 2**-126 at the top bit: results below are
        # subnormal and keep that alignment.
        shift_max = w - 1 + 126 + lsb
        shift = Signal(range(max(shift_max, w) + 1))
        m.d.comb += shift.eq(Mux(lz < shift_max, lz, shift_max))
        norm = Signal(w)
        shift = cut(shift, "round.lzc", "round.norm", "shift")
        m.d.comb += norm.eq(cut(mag, "round.abs", "round.norm", "mag") << shift)
        exp_pre = Signal(signed(12))        # biased exponent of the top bit after shifting
        m.d.comb += exp_pre.eq(lsb + w - 1 + 127 - shift)
        norm = cut(norm, "round.norm", "round.rne", "norm")
        exp_pre = cut(exp_pre, "round.norm", "round.rne", "exp_pre")
        mant, guard, sticky = norm[w - 24:], norm[w - 25], norm[:w - 25].any()
        round_to_word(m, mant, guard, sticky, exp_pre,
                      cut(mag == 0, "round.abs", "round.rne", "zero"),
                      cut(sign, "round.abs", "round.rne", "sign"), self.word,
                      pack=None if self._cuts is None else
                      lambda v, n: cut(v, "round.rne", "round.pack", n))
        return m

    def parts(self):
        """Absolute value, leading-zero count and normalising shift, the 25-bit RNE
        increment, the two 12-bit exponent adds and the word's three 32-bit choices
        (:mod:`hwgen.parts`)."""
        w = self._spec.window
        return [Part("neg", (w,)), Part("norm", (w,)), Part("add", (25,)),
                Part("add", (12,), 2), Part("mux", (2, 32), 3)]


class ExactAdd(wiring.Component):
    """One accumulation: ``RNE_FP32(acc + sum(terms))`` with the spec's special cases.

    Members
    -------
    acc : In(32)
        Current accumulator word.
    step : In(accum_layout(terms))
        The step's terms and flags (``first`` -> start from +0; ``nan`` -> NaN result).
    word : Out(32)
        The new accumulator word (NaN as 0x7FC00000).
    """

    def __init__(self, spec, cuts=None):
        self._spec = spec
        self._cuts = cuts
        super().__init__({"acc": In(32), "step": In(accum_layout(spec.terms)),
                          "word": Out(32), **_held_port(cuts)})

    def loop_blocks(self):
        """``[(block, weight)]`` in datapath order, for :class:`hwgen.ring.Ring`'s cuts:
        the shifts into the window, the window sum, the absolute value, the leading-zero
        count, the normalising shift, the rounding increment, the word's exponent and
        packing, and the special cases. Weights are delays in units of 10 ps in the
        FreePDK45 / Nangate library, each block synthesized in a stage of its own
        (``benchmarks/ring_blocks.py``; HiF4's window, the register overhead left out)."""
        return [("align.shift", 770), ("align.sum", 570), ("round.abs", 710),
                ("round.lzc", 370), ("round.norm", 73), ("round.rne", 94), ("round.pack", 70),
                ("special", 16)]

    def elaborate(self, platform):
        m = Module()
        cut = _cut(m, self._cuts)
        held = cut(self.acc, "join", "out", "held", reset=True)
        m.submodules.align = align = Align(self._spec, self._cuts)
        m.submodules.round = rnd = Round(self._spec, self._cuts)
        m.d.comb += [align.acc.eq(self.acc), align.zero_acc.eq(self.step.first),
                     align.terms.eq(self.step),
                     rnd.sum.eq(cut(align.sum, "align.sum", "round.abs", "sum"))]
        special = ~self.step.first & (self.acc[23:31] == 255)
        acc_nan = special & (self.acc[:23] != 0)
        if self._cuts is None:
            word = self.word
        else:                   # no step-only blocks: the accumulator joins at the input
            m.d.comb += self.held.eq(held)
            special = cut(special, "join", "special", "special")
            acc_nan = cut(acc_nan | self.step.nan, "join", "special", "nan")
            word = Signal(32)
            m.d.comb += self.word.eq(cut(word, "special", "out", "word"))
        # Every value the choice reads reaches its stage here, outside the choice: a cut
        # register made inside a branch would load only when that branch is taken.
        acc = cut(self.acc, "join", "special", "held")
        rounded = cut(rnd.word, "round.pack", "special", "rounded")
        with m.If(self.step.nan | acc_nan if self._cuts is None else acc_nan):
            m.d.comb += word.eq(NAN_WORD)
        with m.Elif(special):
            m.d.comb += word.eq(acc)
        with m.Else():
            m.d.comb += word.eq(rounded)
        return m

    def describe(self):
        """The back end, the terms and the window geometry (:meth:`AccumSpec.describe`)."""
        return {"accum": "window", **self._spec.describe()}

    def parts(self):
        """:class:`Align` (sub-block ``align``), :class:`Round` (``round``) and the special
        cases (``special``: two 8-bit compares, two 32-bit choices) (:mod:`hwgen.parts`)."""
        return (within("align", probe(Align(self._spec)).parts())
                + within("round", probe(Round(self._spec)).parts())
                + within("special", [Part("cmp", (8,), 2), Part("mux", (2, 32), 2)]))


class Accumulator(wiring.Component):
    """Stream stage holding the FP32 accumulator; emits it after a ``last`` step.

    Parameters
    ----------
    terms : iterable of TermSpec
        The exact terms one step delivers.
    make_add : callable, optional
        ``make_add()`` builds the combinational adder of the loop: a component with the
        ports and the contract of :class:`ExactAdd` and its ``parts()`` and ``describe()``
        (default: ``ExactAdd(AccumSpec(terms))``; :func:`hwgen.backend.make_adder` picks a
        registered back end).

    Members
    -------
    i : In(stream.Signature(accum_layout(terms)))
        One step per transfer; ``i.ready = ~o.valid | o.ready``.
    o : Out(stream.Signature(32))
        The accumulator word after a ``last`` step; ``o.valid`` is a flop.

    Timing: :mod:`hwgen.stream` (kind ``"accumulator"``, one cycle).
    """

    kind = "accumulator"

    def __init__(self, terms, make_add=None):
        self._spec = AccumSpec(terms)
        self._make_add = make_add or (lambda: ExactAdd(self._spec))
        super().__init__({"i": In(stream.Signature(accum_layout(self._spec.terms))),
                          "o": Out(stream.Signature(32))})

    @property
    def spec(self):
        return self._spec

    def describe(self):
        """The adder's description (``describe()``), as the manifest's ``acc`` stage
        records it."""
        return probe(self._make_add()).describe()

    def elaborate(self, platform):
        m = Module()
        m.submodules.add = add = self._make_add()
        acc = Signal(32)
        m.d.comb += [add.acc.eq(acc), add.step.eq(self.i.payload),
                     self.o.payload.eq(acc),
                     self.i.ready.eq(~self.o.valid | self.o.ready)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [acc.eq(add.word), self.o.valid.eq(self.i.payload.last)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m

    def parts(self):
        """The adder's parts and the accumulator register with ``o.valid`` (sub-block
        ``reg``) (:mod:`hwgen.parts`)."""
        return probe(self._make_add()).parts() + within("reg", [Part("reg", (33,))])
