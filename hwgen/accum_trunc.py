"""A truncating back end, for comparison: not spec section 7.

Fasi, Higham, Mikaitis and Pranesh ("Numerical behavior of NVIDIA tensor cores", PeerJ
Computer Science 7:e330, 2021) measured tensor cores that align every addend to the
largest one, drop the bits shifted out and do not round to nearest. This back end computes
the same kind of sum for one step, with the number of bits kept below an FP32 significand
as a parameter (``extra_bits``, default ``hif4spec.TRUNC_BITS``):

* every nonzero operand, the accumulator and each term, has a *top place*: a term's
  leading one, the accumulator's hidden-bit place (its word's alignment, -126 when
  subnormal);
* with ``m`` the highest top place and ``lam = m - 23 - extra_bits``, each operand is
  truncated toward zero to a multiple of ``2**lam`` (a ``24 + extra_bits``-bit window under
  ``m``), and the truncated operands are added exactly;
* the sum is rounded toward zero to FP32, with gradual underflow; a magnitude past the
  largest finite FP32 gives that (0x7F7FFFFF with the sign), an exact zero gives +0 and a
  nonzero sum that truncates to zero keeps its sign; NaN, Inf and ``first`` as in spec
  section 7.

The golden model is :func:`sim.dot.accumulate_trunc`; ``docs/accumulator.md`` compares it
with the exact back ends. Components, one per datapath stage: :class:`TermTop` (one term
normalized into the window, outside the loop), :class:`MaxTop` (the highest top place),
:class:`AlignSum` (every operand shifted down to it, truncated, and added),
:class:`hwgen.accum_bounded.RoundAt` with round-toward-zero, and :class:`TruncAdd` (them and
the special cases, the interface of :class:`hwgen.accum.ExactAdd`).
"""

import math

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hif4spec import TRUNC_BITS, TRUNC_BITS_RANGE

from .accum import NAN_WORD, AccumSpec, accum_layout, leading_zeros
from .accum_bounded import RoundAt, _signed_bits
from .parts import Part, probe, within

__all__ = ["TruncSpec", "TermTop", "MaxTop", "AlignSum", "TruncAdd"]

_MAX_FINITE = 0x7F7FFFFF


class TruncSpec:
    """Geometry of the truncating back end.

    Attributes
    ----------
    accum : AccumSpec
        The step's terms (the input layout).
    extra_bits : int
    keep : int
        ``K = 24 + extra_bits``: bits of each operand kept under the highest top place.
    sum_bits : int
        Bits of the sum's magnitude: ``K`` plus the carries of ``len(terms) + 1`` operands.
    exp_bits : int
        Width of the signed exponent arithmetic; it holds every exponent any exponent
        *field* value gives (the whole field), so no input can wrap it.
    """

    def __init__(self, terms, extra_bits=TRUNC_BITS):
        if isinstance(extra_bits, bool) or not isinstance(extra_bits, int) \
                or extra_bits not in TRUNC_BITS_RANGE:
            raise ValueError(f"extra_bits must be an integer from {TRUNC_BITS_RANGE[0]} to "
                             f"{TRUNC_BITS_RANGE[-1]} (the golden model's range), not "
                             f"{extra_bits!r}")
        self.accum = AccumSpec(terms)
        self.extra_bits = extra_bits
        self.keep = 24 + extra_bits
        self.sum_bits = self.keep + math.ceil(math.log2(len(self.accum.terms) + 1))
        lo = min([-126] + [-t.bias for t in self.accum.terms])
        hi = max([127] + [(1 << t.exp_bits) - 1 - t.bias + t.sig_bits - 1
                          for t in self.accum.terms])
        # lam and RoundAt's exponent arithmetic reach about K + sum_bits + 130 further.
        self.exp_bits = _signed_bits(lo - self.keep - 2, hi + self.sum_bits + 130)

    def describe(self):
        """The back end, the terms and the geometry, as the manifest's ``acc`` stage
        records them."""
        return {"accum": "trunc", "terms": self.accum.describe()["terms"],
                "extra_bits": self.extra_bits, "keep_bits": self.keep,
                "window_bits": self.sum_bits + 1, "exponent_bits": self.exp_bits}


class TermTop(wiring.Component):
    """One term normalized: its leading one at bit ``K - 1`` of ``sig`` (bits below the
    window dropped), its top place and whether it is zero (outside the accumulator loop).

    Members
    -------
    term_sig, term_exp : In
        The term's two's complement significand and exponent field.
    neg, sig, top, zero : Out
        Bit ``K - 1`` of ``sig`` weighs ``2**top``.
    """

    def __init__(self, tspec, term):
        self._s, self._t = tspec, term
        super().__init__({"term_sig": In(signed(term.sig_bits)), "term_exp": In(term.exp_bits),
                          "neg": Out(1), "sig": Out(tspec.keep),
                          "top": Out(signed(tspec.exp_bits)), "zero": Out(1)})

    def elaborate(self, platform):
        m = Module()
        K, t = self._s.keep, self._t
        S = t.sig_bits
        mag = Signal(S)                         # |sig|: -2**(S-1) fits unsigned
        m.d.comb += mag.eq(Mux(self.term_sig < 0, -self.term_sig, self.term_sig))
        lz = leading_zeros(m, mag, S, f"{t.name}_lz", tree=True)
        norm = Signal(S)
        m.d.comb += norm.eq(mag << lz)
        m.d.comb += [self.sig.eq(norm[S - K:] if S >= K else Cat(Const(0, K - S), norm)),
                     self.top.eq(self.term_exp - t.bias + (S - 1) - lz),
                     self.zero.eq(mag == 0), self.neg.eq(self.term_sig < 0)]
        return m

    def parts(self):
        """Absolute value, leading-zero count and normalising shift, the top-place adds
        (:mod:`hwgen.parts`)."""
        S, E = self._t.sig_bits, self._s.exp_bits
        return [Part("neg", (S,)), Part("lzc", (S,)), Part("shl", (S, S)),
                Part("add", (E,), 2)]


class MaxTop(wiring.Component):
    """The highest top place of the nonzero operands (a chain of compare-and-choose; with
    every operand zero, the lowest value the field holds).

    Members
    -------
    tops, zeros : In
        ``n`` top places and zero flags.
    top : Out(signed(E))
    """

    def __init__(self, tspec, n):
        self._s, self._n = tspec, n
        E = tspec.exp_bits
        super().__init__({"tops": In(E * n), "zeros": In(n), "top": Out(signed(E))})

    def elaborate(self, platform):
        m = Module()
        E, n = self._s.exp_bits, self._n
        best = Const(-(1 << (E - 1)), signed(E))
        for k in range(n):
            top = self.tops[k * E:(k + 1) * E].as_signed()
            nxt = Signal(signed(E), name=f"max{k}")
            m.d.comb += nxt.eq(Mux(~self.zeros[k] & (top > best), top, best))
            best = nxt
        m.d.comb += self.top.eq(best)
        return m

    def parts(self):
        """One compare and one choice per operand (:mod:`hwgen.parts`)."""
        E = self._s.exp_bits
        return [Part("cmp", (E,), self._n), Part("mux", (2, E), self._n)]


class AlignSum(wiring.Component):
    """Every operand shifted down from its top place to the highest, truncated to the
    window, signed and added: the sum as a sign and a magnitude of ``sum_bits`` bits.

    Members
    -------
    sigs, negs, tops : In
        ``n`` operands of ``K`` bits (leading one, if any, at bit ``K - 1``), their signs
        and top places (a zero operand's top is not used: its significand is 0).
    top : In(signed(E))
        The highest top place.
    mag : Out(sum_bits)
    neg : Out(1)
    """

    def __init__(self, tspec, n):
        self._s, self._n = tspec, n
        K, E = tspec.keep, tspec.exp_bits
        super().__init__({"sigs": In(K * n), "negs": In(n), "tops": In(E * n),
                          "top": In(signed(E)), "mag": Out(tspec.sum_bits), "neg": Out(1)})

    def elaborate(self, platform):
        m = Module()
        K, E, W, n = self._s.keep, self._s.exp_bits, self._s.sum_bits, self._n
        items = []
        for k in range(n):
            d = Signal(E + 1, name=f"d{k}")         # >= 0 for a nonzero operand
            m.d.comb += d.eq(self.top - self.tops[k * E:(k + 1) * E].as_signed())
            amt = Signal(range(K + 1), name=f"shift{k}")
            m.d.comb += amt.eq(Mux(d > K, K, d))
            kept = Signal(K, name=f"kept{k}")
            m.d.comb += kept.eq(self.sigs[k * K:(k + 1) * K] >> amt)
            item = Signal(signed(W + 1), name=f"item{k}")
            m.d.comb += item.eq(Mux(self.negs[k], -kept, kept))
            items.append(item)
        total = Signal(signed(W + 1))
        m.d.comb += total.eq(sum(items))
        m.d.comb += [self.neg.eq(total < 0),
                     self.mag.eq(Mux(total < 0, -total, total))]
        return m

    def parts(self):
        """Per operand a distance, a saturating right shift and a conditional negation;
        the sum and its absolute value (:mod:`hwgen.parts`)."""
        K, E, W, n = self._s.keep, self._s.exp_bits, self._s.sum_bits, self._n
        return [Part("add", (E + 1,), n), Part("shr", (K, K + 1), n), Part("neg", (W + 1,), n),
                Part("addn", (n, W + 1)), Part("neg", (W + 1,))]


class TruncAdd(wiring.Component):
    """One truncating accumulation, the interface of :class:`hwgen.accum.ExactAdd`.

    Members
    -------
    acc : In(32)
    step : In(accum_layout(terms))
    word : Out(32)
    """

    def __init__(self, terms, extra_bits=TRUNC_BITS):
        self._s = TruncSpec(terms, extra_bits)
        super().__init__({"acc": In(32), "step": In(accum_layout(self._s.accum.terms)),
                          "word": Out(32)})

    @property
    def tspec(self):
        return self._s

    def describe(self):
        """:meth:`TruncSpec.describe`."""
        return self._s.describe()

    def parts(self):
        """:class:`TermTop` per term (sub-block ``decode``), :class:`MaxTop` (``max``),
        :class:`AlignSum` (``align``), :class:`RoundAt` toward zero (``round``) and the
        special cases (``special``: two 8-bit compares, three 32-bit choices)
        (:mod:`hwgen.parts`)."""
        s = self._s
        n = len(s.accum.terms) + 1
        out = []
        for t in s.accum.terms:
            out += probe(TermTop(s, t)).parts()
        return (within("decode", out + [Part("add", (s.exp_bits,))])
                + within("max", probe(MaxTop(s, n)).parts())
                + within("align", probe(AlignSum(s, n)).parts())
                + within("round", probe(RoundAt(s.sum_bits, s.exp_bits, rz=True)).parts())
                + within("special", [Part("cmp", (8,), 2), Part("mux", (2, 32), 3)]))

    def elaborate(self, platform):
        m = Module()
        s = self._s
        K, E = s.keep, s.exp_bits
        terms = s.accum.terms
        n = len(terms) + 1
        # The accumulator in its word's alignment: hidden-bit place at the window's top.
        frac, ef = self.acc[:23], self.acc[23:31]
        ma = Signal(24)
        m.d.comb += ma.eq(Mux(self.step.first, 0, Cat(frac, ef != 0)))
        a_top = Signal(signed(E))
        m.d.comb += a_top.eq(Mux(ef == 0, 1, ef) - 127)
        sigs = [Cat(Const(0, K - 24), ma) if K > 24 else ma]
        negs, tops, zeros = [self.acc[31]], [a_top], [ma == 0]
        for t in terms:
            dec = TermTop(s, t)
            m.submodules[f"decode_{t.name}"] = dec
            m.d.comb += [dec.term_sig.eq(self.step[f"{t.name}_sig"]),
                         dec.term_exp.eq(self.step[f"{t.name}_exp"])]
            sigs.append(dec.sig)
            negs.append(dec.neg)
            tops.append(dec.top)
            zeros.append(dec.zero)
        m.submodules.max = mx = MaxTop(s, n)
        m.submodules.align = al = AlignSum(s, n)
        m.submodules.round = rnd = RoundAt(s.sum_bits, E, rz=True)
        m.d.comb += [mx.tops.eq(Cat(*tops)), mx.zeros.eq(Cat(*zeros)),
                     al.sigs.eq(Cat(*sigs)), al.negs.eq(Cat(*negs)), al.tops.eq(Cat(*tops)),
                     al.top.eq(mx.top),
                     rnd.mag.eq(al.mag), rnd.neg.eq(al.neg),
                     rnd.base.eq(mx.top - (K - 1))]
        special = ~self.step.first & (ef == 255)
        acc_nan = special & (frac != 0)
        with m.If(self.step.nan | acc_nan):
            m.d.comb += self.word.eq(NAN_WORD)
        with m.Elif(special):
            m.d.comb += self.word.eq(self.acc)
        with m.Elif(rnd.word[23:31] == 255):       # past the largest finite: truncated to it
            m.d.comb += self.word.eq(Cat(Const(_MAX_FINITE, 31), rnd.word[31]))
        with m.Else():
            m.d.comb += self.word.eq(rnd.word)
        return m
