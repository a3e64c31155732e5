"""Steps of more than two independent terms in the bounded back end: the step's exact sum,
split outside the accumulator loop into the few values the loop needs.

MXFP4 with a residual adds four terms per step whose exponents are all independent (two
block sums and two residual block sums, each with an E8M0 activation or residual scale of
its own). No one term summarizes them for every accumulator, but three values and a few
precomputed words do (``docs/accumulator.md``, "Four independent terms", has the argument;
``tests/hwgen/test_accum_bounded.py`` checks it bit for bit against :func:`sim.dot.accumulate`):

* ``T``, the exact sum of the terms, with ``q = max(top(T), -126)``; ``N``, ``T`` rounded
  to the nearest multiple of ``2**(q - 24)`` (half an FP32 ulp at ``T``); ``E = T - N``,
  exactly, as a sign, a top place, 27 bits and a sticky bit; and ``P``, ``T`` truncated at
  ``2**(q - 50)`` with the bits below jammed into that bit (53 bits, one term).
* The loop adds ``acc + P`` with the one-term add of :mod:`hwgen.accum_bounded`, which is
  exact for every accumulator with ``|acc| >= 2**(q - 26)`` but one: ``acc = -s * Xe``,
  with ``Xe`` the one of ``floor(|T|)`` and ``floor(|T|) + 2**(q - 24)`` (to multiples of
  ``2**(q - 24)``) that is an FP32 value. For that accumulator the result is
  ``RNE(T - s * Xe)``, a word made here (``ra``).
* For ``|acc| < 2**(q - 26)`` the sum is within a quarter ulp of ``N``: the result is
  ``N``'s word when ``N`` is an FP32 value, and when ``N`` is a midpoint one of its two
  neighbours, chosen by the sign of ``acc + E`` (the loop compares the accumulator with
  ``-E``; a tie goes to the even one).

Computing ``N`` and ``E`` exactly from independent terms needs their exact sum only where it
can cancel. The terms are sorted by their leading ones and grouped into *clusters*: a term
joins the cluster above it when its leading one is at most ``w - 1 + SPLIT_GAP`` places
below that term's, ``w`` the terms' significand width. Each cluster sums exactly in a window
of its own (:class:`ClusterSums`); the sum of all clusters below a nonzero one is under
``2**-27`` of its lowest unit, so it only ever matters as a sign, or as the whole of ``E``
when the cluster above it is all of ``N``. Components, one per datapath stage:
:class:`SortTerms` (decode and sort), :class:`ClusterSums` (a window per possible cluster
start), :class:`PickClusters` (the first nonzero cluster, the second, the third's sign),
:class:`Frame` (the first cluster placed with ``2**q`` at a fixed bit), :class:`Nearest`
(``N``, the bypass word and ``N``'s FP32 words), :class:`Residue` (``E``), :class:`LoopTerm`
(``P``), :class:`SplitSum` (them together, outside the loop) and :class:`AccVersusE` (the
loop's compares with the accumulator); :class:`hwgen.accum_bounded.BypassRound` rounds the
bypass result beside its :class:`hwgen.accum_bounded.RoundAt`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .accum import TERM_DECODE, _cut, accum_layout, leading_zeros, negated_where
from .parts import Part, probe, within

__all__ = ["SPLIT_GAP", "SPLIT_BLOCKS", "SplitSpec", "SortTerms", "ClusterSums",
           "PickClusters", "Frame", "Nearest", "Residue", "LoopTerm", "SplitSum", "AccVersusE",
           "VERSUS", "BYPASS", "BYPASS_BLOCKS"]

#: Least number of empty places between a cluster's lowest bit and the next term's leading
#: one that keeps that term out of the cluster: the sum of everything below a cluster is
#: then under ``2**-27`` of the cluster's lowest unit (``docs/accumulator.md``).
SPLIT_GAP = 29
#: The loop block of :class:`AccVersusE`'s compares (and the split word's choice), after the
#: adder's ``decode``.
VERSUS = "versus"
#: The block ahead of the join where the bypass word is rounded from :class:`SplitSum`'s
#: ``fn``, ``xe``, ``q``, ``s_neg`` and ``E``, which reach it there (its other outputs reach
#: the adder's ``decode``).
BYPASS = "split.bypass"
#: :data:`BYPASS` and the blocks of the bypass word's rounding after it, in datapath order
#: (:class:`hwgen.accum_bounded.BypassRound`).
BYPASS_BLOCKS = (BYPASS,) + tuple(f"{BYPASS}.{b}" for b in ("lzc", "norm", "rne", "pack"))
#: Bits of ``E`` below its leading one's place that the loop and the bypass read.
E_BITS = 27
#: How far below its normal place (``2**q`` at a fixed bit) :class:`Frame` keeps a
#: subnormal sum's first cluster exact: a sum pushed further is under ``2**-206``, where the
#: loop reads only ``E``'s sign and that it is not 0 (``P`` is 0 and a jam at ``2**-176``,
#: the accumulators below ``2**(q - 26) = 2**-152`` are +-0, the bypass result a signed 0),
#: and the bits a shift within it pushes out weigh under ``2**-267``.
SUBNORMAL_REACH = 80
#: Sorting networks (comparator lists, descending) for the term counts the back end takes.
_NETWORKS = {3: ((0, 1), (1, 2), (0, 1)), 4: ((0, 1), (2, 3), (0, 2), (1, 3), (1, 2))}


def _late(m, cuts, port, src, dst):
    """What a component's block ``src`` drives for its output ``port``, which the
    component's last block ``dst`` presents: the port itself without cuts, else a signal
    that reaches the port through the cuts between the two blocks."""
    if cuts is None:
        return port
    early = Signal.like(port, name=f"{port.name}_early")
    m.d.comb += port.eq(cuts.move(m, early, src, dst, name=port.name))
    return early


def _signed_bits(lo, hi):
    return max((-lo - 1).bit_length(), hi.bit_length()) + 1


def _clog2(n):
    return max(n - 1, 0).bit_length()


class SplitSpec:
    """Geometry of the split for ``terms`` (three or four, one exponent field width and
    bias, at most 24 significand bits each); ``gap`` (default ``SPLIT_GAP``) narrower only
    to show that it fails.

    Attributes
    ----------
    n, w : int
        Terms and their (magnitude) significand bits.
    reach : int
        ``D = w - 1 + gap``: a term joins the cluster above when its leading one is at
        most ``D`` places below the previous term's.
    windows : tuple of int
        ``L_s``, the bits of the cluster window anchored at sorted term ``s``: room for the
        ``n - s`` terms ``D`` apart, ``(n - 1 - s) * D + w``.
    held : int
        ``H``: bits of the first cluster's magnitude (``L_0`` and two carry bits).
    frame : int
        ``F = H + 3``: bits of :class:`Frame` (``2**(q + 1)`` at bit ``F - 1``, a jam bit
        at bit 0).
    exp_bits : int
        Signed width of every exponent here (it holds every top place a field can give,
        the zero terms' sentinel, and their differences).
    term_bits, term_bias : int
        The loop's one term ``P``: ``term_bits``-bit two's complement, exponent field
        ``q - 50 + term_bias``.
    """

    def __init__(self, terms, gap=SPLIT_GAP):
        terms = tuple(terms)
        if not isinstance(gap, int) or not 0 <= gap <= SPLIT_GAP:
            raise ValueError(f"gap must be an integer from 0 to {SPLIT_GAP}, not {gap!r}")
        if len(terms) not in _NETWORKS:
            raise ValueError(f"The split takes 3 or 4 terms, not {len(terms)}")
        if len({(t.exp_bits, t.bias) for t in terms}) != 1:
            raise ValueError("Split terms must share the exponent field width and bias")
        self.terms = terms
        self.n = n = len(terms)
        self.w = w = max(t.sig_bits for t in terms)
        if w > 24:
            raise ValueError(f"Split terms of at most 24 significand bits, not {w}")
        t0 = terms[0]
        self.field_bits, self.bias = t0.exp_bits, t0.bias
        self.gap = gap
        self.reach = w - 1 + gap
        self.windows = tuple((n - 1 - s) * self.reach + w for s in range(n))
        self.held = self.windows[0] + 2
        self.frame = self.held + 3
        top_hi = (1 << t0.exp_bits) - 1 - t0.bias + w - 1
        top_lo = -t0.bias
        self.sentinel = top_lo - 2 * self.frame - 400       # a zero term's top place
        span = top_hi - self.sentinel
        self.exp_bits = _signed_bits(-2 * span - 512, 2 * span + 512)
        self.term_bits = 53
        # P's exponent field q - 50 + bias: q from -126 up to top_hi + 2.
        self.term_bias = 176
        self.term_exp_max = top_hi + 2 - 50 + self.term_bias
        self.term_exp_bits = self.term_exp_max.bit_length()

    def describe(self):
        """What the manifest's ``acc`` stage records of the split."""
        return {"split_gap_bits": self.gap, "cluster_window_bits": self.windows[0],
                "split_frame_bits": self.frame, "residue_bits": E_BITS}


def sorted_ports(sspec, direction):
    """Ports of the sorted terms: ``neg_k``, ``mag_k`` (normalized, leading one at bit
    ``w - 1``), ``top_k``, ``zero_k`` for ``k`` in ``range(n)``."""
    d = In if direction == "in" else Out
    ports = {}
    for k in range(sspec.n):
        ports.update({f"neg_{k}": d(1), f"mag_{k}": d(sspec.w),
                      f"top_{k}": d(signed(sspec.exp_bits)), f"zero_{k}": d(1)})
    return ports


class SortTerms(wiring.Component):
    """Each term as sign, normalized magnitude and top place (its leading one's weight
    exponent), sorted by top place, highest first; a zero term gets a top place far below
    every other (``SplitSpec.sentinel``), so it sorts last and joins no cluster.

    Members
    -------
    step : In(accum_layout(terms))
    neg_k, mag_k, top_k, zero_k : Out
        The ``k``-th highest term.

    With cuts, the terms' normalization is block ``split.sort`` and the sorting network
    ``split.sort.net``.
    """

    BLOCKS = ("sort", "sort.net")

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        super().__init__({"step": In(accum_layout(sspec.terms)), **sorted_ports(sspec, "out")})

    def elaborate(self, platform):
        m = Module()
        s = self._s
        w, E = s.w, s.exp_bits
        cut = _cut(m, self._cuts)
        items = []
        for i, t in enumerate(s.terms):
            sig, ef = self.step[f"{t.name}_sig"], self.step[f"{t.name}_exp"]
            mag = Signal(w, name=f"mag{i}")
            m.d.comb += mag.eq(negated_where(m, sig, sig < 0, w, f"abs{i}",
                                             prefix=self._cuts is not None))
            lz = leading_zeros(m, mag, w, f"lz{i}", tree=True)
            norm, top = Signal(w, name=f"norm{i}"), Signal(signed(E), name=f"top{i}")
            zero = Signal(name=f"zero{i}")
            m.d.comb += [norm.eq(mag << lz), zero.eq(mag == 0),
                         top.eq(Mux(zero, s.sentinel, ef - t.bias + (w - 1) - lz))]
            items.append(tuple(cut(v, "split.sort", "split.sort.net", f"sort{i}_{f}")
                               for f, v in zip(("neg", "norm", "top", "zero"),
                                               (sig < 0, norm, top, zero))))
        shapes = (1, w, signed(E), 1)
        for j, (a, b) in enumerate(_NETWORKS[s.n]):
            swap = Signal(name=f"swap{j}")
            m.d.comb += swap.eq(items[b][2] > items[a][2])
            hi, lo = [], []
            for f, (x, y) in enumerate(zip(items[a], items[b])):
                sh = Signal(shapes[f], name=f"c{j}_hi{f}")
                sl = Signal(shapes[f], name=f"c{j}_lo{f}")
                m.d.comb += [sh.eq(Mux(swap, y, x)), sl.eq(Mux(swap, x, y))]
                hi.append(sh)
                lo.append(sl)
            items[a], items[b] = tuple(hi), tuple(lo)
        for k, (neg, mag, top, zero) in enumerate(items):
            m.d.comb += [getattr(self, f"neg_{k}").eq(neg), getattr(self, f"mag_{k}").eq(mag),
                         getattr(self, f"top_{k}").eq(top), getattr(self, f"zero_{k}").eq(zero)]
        return m

    def parts(self):
        """Per term the absolute value, leading-zero count, normalising shift and top-place
        add; per comparator of the sorting network the compare and the swap
        (:mod:`hwgen.parts`)."""
        s = self._s
        w, E, n = s.w, s.exp_bits, s.n
        c = len(_NETWORKS[n])
        return [Part("neg", (w,), n), Part("lzc", (w,), n), Part("shl", (w, w), n),
                Part("add", (E,), n), Part("cmp", (E,), c), Part("mux", (2, w + E + 2), 2 * c)]


class ClusterSums(wiring.Component):
    """The exact sum of the cluster that would start at each sorted term.

    Sorted term ``j`` joins the cluster of term ``j - 1`` when ``top_(j-1) - top_j <=
    D`` (``chain_(j-1)``); term 0 and every term that does not join start a cluster
    (``start_s``). The window anchored at term ``s`` holds terms ``s, s + 1, ...`` while they
    chain, each at its place: bit ``L_s - 1`` weighs ``2**top_s``. It is built from the
    window below it (term ``s`` plus, when term ``s + 1`` joins, the cluster starting there).

    Members
    -------
    neg_k, mag_k, top_k, zero_k : In
        :class:`SortTerms`'s outputs.
    sum_s : Out(signed(L_s + clog2(n - s) + 1))
        The window's exact sum.
    start_s, nz_s : Out(1)
        A cluster starts at term ``s``; its sum is nonzero.

    With cuts, the chain compares and the windows above window 1 are block
    ``split.clusters``, window 1 ``split.clusters.1`` and window 0 ``split.clusters.0``.
    """

    BLOCKS = ("clusters", "clusters.1", "clusters.0")

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        ports = sorted_ports(sspec, "in")
        for s in range(sspec.n):
            ports.update({f"sum_{s}": Out(signed(self.sum_bits(sspec, s))),
                          f"start_{s}": Out(1), f"nz_{s}": Out(1)})
        super().__init__(ports)

    @staticmethod
    def sum_bits(sspec, s):
        return sspec.windows[s] + _clog2(sspec.n - s) + 1

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        n, w, D, E = sp.n, sp.w, sp.reach, sp.exp_bits
        cuts = self._cuts
        cut = _cut(m, cuts)
        first, last = "split.clusters", "split.clusters.0"

        def block(s):
            return first if s >= 2 else f"split.clusters.{s}"
        top = [getattr(self, f"top_{k}") for k in range(n)]
        chain = []
        for k in range(n - 1):
            c = Signal(name=f"chain{k}")
            m.d.comb += c.eq(top[k] - top[k + 1] <= D)
            chain.append(c)
        # Bottom up: the cluster starting at term s is term s plus, when term s + 1 joins,
        # the cluster starting there, shifted under term s (its anchor D places below the
        # window's, so the shift is D - (top_s - top_(s+1))): one shift and one add per
        # window instead of one shift per member.
        below = None
        for s in reversed(range(n)):
            L, width = sp.windows[s], self.sum_bits(sp, s)
            here = block(s)

            def sees(v, name):
                return cut(v, first, here, f"clusters{s}_{name}")
            neg, mag = (sees(getattr(self, f"{f}_{s}"), f) for f in ("neg", "mag"))
            anchor = Signal(signed(w + 1), name=f"anchor{s}")
            m.d.comb += anchor.eq(negated_where(m, mag, neg, w + 1, f"signed{s}",
                                                prefix=cuts is not None))
            out = _late(m, cuts, getattr(self, f"sum_{s}"), here, last)
            if below is None:
                m.d.comb += out.eq(anchor << (L - w))
            else:
                dist = Signal(range(D + 1), name=f"up{s}")
                m.d.comb += dist.eq(sees(Mux(chain[s], D - (top[s] - top[s + 1]), 0), "up"))
                part = Signal(signed(width), name=f"below{s}")
                m.d.comb += part.eq(Mux(sees(chain[s], "chain"),
                                        cut(below, block(s + 1), here, f"clusters{s}_below")
                                        << dist, 0))
                m.d.comb += out.eq((anchor << (L - w)) + part)
            m.d.comb += [_late(m, cuts, getattr(self, f"nz_{s}"), here, last).eq(out != 0),
                         _late(m, cuts, getattr(self, f"start_{s}"), first, last).eq(
                             1 if s == 0 else ~chain[s - 1])]
            below = out
        return m

    def parts(self):
        """The chain compares; per window the anchor's negation, the shift of the cluster
        below under it and the add; the zero tests (:mod:`hwgen.parts`)."""
        sp = self._s
        n, w, E, D = sp.n, sp.w, sp.exp_bits, sp.reach
        out = [Part("add", (E,), n - 1), Part("cmp", (E,), n - 1), Part("neg", (w,), n)]
        for s in range(n):
            width = self.sum_bits(sp, s)
            out += [Part("cmp", (width,))]
            if s < n - 1:
                out += [Part("add", (E,)), Part("shl", (self.sum_bits(sp, s + 1), D + 1)),
                        Part("add", (width,))]
        return out


class PickClusters(wiring.Component):
    """The first nonzero cluster ``Va`` (magnitude in ``H`` bits, its anchor term's top at
    bit ``H - 3``), the second ``Vb`` (its anchor's top at bit ``L_1 - 1`` of ``L_1 + 2``
    bits) and the third's sign.

    Members
    -------
    sum_s, start_s, nz_s, top_s : In
    zero : Out(1)
        No nonzero cluster: the step's sum is exactly 0.
    a_neg, a_mag, a_top : Out
        ``Va``'s sign and magnitude, its anchor's top place.
    b_any, b_neg, b_mag, b_top : Out
    c_any, c_neg : Out

    With cuts, the choices are block ``split.pick`` and the absolute values
    ``split.pick.abs``.
    """

    BLOCKS = ("pick", "pick.abs")

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        sp = sspec
        E = sp.exp_bits
        ports = {}
        for s in range(sp.n):
            ports.update({f"sum_{s}": In(signed(ClusterSums.sum_bits(sp, s))),
                          f"start_{s}": In(1), f"nz_{s}": In(1),
                          f"top_{s}": In(signed(E))})
        ports.update({"zero": Out(1), "a_neg": Out(1), "a_mag": Out(sp.held),
                      "a_top": Out(signed(E)), "b_any": Out(1), "b_neg": Out(1),
                      "b_mag": Out(sp.windows[1] + 2), "b_top": Out(signed(E)),
                      "c_any": Out(1), "c_neg": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        n, H = sp.n, sp.held
        Lb = sp.windows[1]
        cuts = self._cuts
        cut = _cut(m, cuts)
        first, last = "split.pick", "split.pick.abs"

        def late(port):
            return _late(m, cuts, port, first, last)
        a_top, b_any, b_top, c_any, c_neg = (late(p) for p in (
            self.a_top, self.b_any, self.b_top, self.c_any, self.c_neg))
        live = []
        for s in range(n):
            v = Signal(name=f"live{s}")
            m.d.comb += v.eq(getattr(self, f"start_{s}") & getattr(self, f"nz_{s}"))
            live.append(v)
        # Rank of each live cluster: a (first), b (second), c (third).
        rank_a = [Signal(name=f"is_a{s}") for s in range(n)]
        rank_b = [Signal(name=f"is_b{s}") for s in range(n)]
        rank_c = [Signal(name=f"is_c{s}") for s in range(n)]
        for s in range(n):
            before = live[:s]
            none = Cat(*before).any() if before else Const(0, 1)
            cnt = sum(before) if before else Const(0, 1)
            m.d.comb += [rank_a[s].eq(live[s] & ~none), rank_b[s].eq(live[s] & (cnt == 1)),
                         rank_c[s].eq(live[s] & (cnt == 2))]
        m.d.comb += late(self.zero).eq(~Cat(*live).any())
        # The chosen sums (their anchors aligned), then one absolute value each.
        a_sum = Signal(signed(sp.windows[0] + 3))
        b_sum = Signal(signed(Lb + 3))
        for s in range(n):
            x, top = getattr(self, f"sum_{s}"), getattr(self, f"top_{s}")
            with m.If(rank_a[s]):
                m.d.comb += [a_sum.eq(x << (sp.windows[0] - sp.windows[s])),
                             a_top.eq(top)]
            if s >= 1:
                with m.If(rank_b[s]):
                    m.d.comb += [b_sum.eq(x << (Lb - sp.windows[s])), b_any.eq(1),
                                 b_top.eq(top)]
                with m.If(rank_c[s]):
                    m.d.comb += [c_any.eq(1), c_neg.eq(x < 0)]
        a_sum, b_sum = (cut(v, first, last, n) for v, n in ((a_sum, "pick_a"), (b_sum, "pick_b")))
        fast = cuts is not None
        m.d.comb += [self.a_neg.eq(a_sum < 0),
                     self.a_mag.eq(negated_where(m, a_sum, a_sum < 0, H, "a_abs", fast)),
                     self.b_neg.eq(b_sum < 0),
                     self.b_mag.eq(negated_where(m, b_sum, b_sum < 0, Lb + 2, "b_abs", fast))]
        return m

    def parts(self):
        """The ranks, the choices of ``Va``, ``Vb`` and the third sign, and the two
        absolute values (:mod:`hwgen.parts`)."""
        sp = self._s
        n, E = sp.n, sp.exp_bits
        return [Part("mux", (n, sp.held + E + 1)), Part("mux", (n - 1, sp.windows[1] + E + 3)),
                Part("mux", (n - 2, 2)), Part("neg", (sp.held,)),
                Part("neg", (sp.windows[1] + 2,))]


class Frame(wiring.Component):
    """``Va`` placed with ``2**q`` at bit ``F - 2``: ``q = max(p, -126)``, ``p`` the top
    place of ``T`` (``Va``'s, one less when ``Va`` is a power of two and the clusters below
    have the other sign). Bits that a subnormal ``q`` pushes below bit 1 are jammed into
    bit 0 (all of ``Va`` when it is pushed more than ``SUBNORMAL_REACH`` places); a normal
    ``q`` loses none.

    Members
    -------
    a_neg, a_mag, a_top, b_any, b_neg : In
    frame : Out(F)
    q : Out(signed(E))
    below : Out(2)
        The sign of everything below ``Va`` relative to ``Va``'s: 0 (nothing), 1 (same),
        3 (opposite; a two's complement -1).

    With cuts, the leading-zero count and the top place ``p`` are block ``split.frame``,
    and ``q``, the shift's amount and the shift ``split.frame.shift``.
    """

    BLOCKS = ("frame", "frame.shift")

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        sp = sspec
        super().__init__({"a_neg": In(1), "a_mag": In(sp.held), "a_top": In(signed(sp.exp_bits)),
                          "b_any": In(1), "b_neg": In(1), "frame": Out(sp.frame),
                          "q": Out(signed(sp.exp_bits)), "below": Out(signed(2))})

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        H, F, E = sp.held, sp.frame, sp.exp_bits
        cuts = self._cuts
        cut = _cut(m, cuts)
        first, last = "split.frame", "split.frame.shift"
        opposite = Signal()
        m.d.comb += [opposite.eq(self.b_any & (self.b_neg != self.a_neg)),
                     _late(m, cuts, self.below, first, last).eq(
                         Mux(self.b_any, Mux(opposite, -1, 1), 0))]
        lz = leading_zeros(m, self.a_mag, H, "va_lz", tree=True)
        pow2 = Signal()
        m.d.comb += pow2.eq((self.a_mag & (self.a_mag - 1)) == 0)
        p = Signal(signed(E))
        m.d.comb += p.eq(self.a_top + 2 - lz - (pow2 & opposite))
        p, a_top, a_mag = (cut(v, first, last, f"frame_{n}") for v, n in (
            (p, "p"), (self.a_top, "a_top"), (self.a_mag, "a_mag")))
        q = self.q
        m.d.comb += q.eq(Mux(p < -126, -126, p))
        # A left shift by a_top + 3 - q puts 2**q at bit F - 2 (a_mag bit H - 3 weighs
        # 2**a_top); it is negative only for a subnormal q. One left shift by DEEP more, into
        # DEEP more bits below the frame, does both: what lands there is jammed into bit 0,
        # and a shift of more than DEEP to the right jams all of Va.
        K = SUBNORMAL_REACH
        shift = Signal(signed(E + 1))
        m.d.comb += shift.eq(a_top + 3 - q + K)
        amount = Signal(range(H + 4 + K))
        m.d.comb += amount.eq(Mux(shift < 0, 0, Mux(shift > H + 3 + K, H + 3 + K, shift)))
        wide = Signal(F - 1 + K)
        m.d.comb += wide.eq(a_mag << amount)
        jam = Signal()
        m.d.comb += jam.eq(Mux(shift < 0, a_mag.any(), wide[:K].any()))
        m.d.comb += self.frame.eq(Cat(jam, Mux(shift < 0, 0, wide[K:])))
        return m

    def parts(self):
        """Leading-zero count, power-of-two test, top-place adds, the placing shift with
        its jam (:mod:`hwgen.parts`)."""
        sp = self._s
        H, F, E, K = sp.held, sp.frame, sp.exp_bits, SUBNORMAL_REACH
        return [Part("lzc", (H,)), Part("add", (H,)), Part("cmp", (H,)),
                Part("add", (E,), 3), Part("cmp", (E,), 3), Part("shl", (H, H + 4 + K)),
                Part("cmp", (K,)), Part("mux", (2, F))]


class Nearest(wiring.Component):
    """From the frame: ``N`` (its 26-bit multiple ``fn`` of ``2**(q - 24)``), the bypass
    accumulator word, ``N``'s FP32 words, and ``E``'s part inside the frame (``N``'s
    remainder ``|Ea|`` at bits 0 .. F - 27 and its sign). The clusters below ``Va`` are
    under ``2**(q - 26)``, below the round bit, so they decide ``N`` only as a sign.

    Members
    -------
    frame, q, below, a_neg : In
    fn : Out(26)
    xe : Out(26)
        The even one of ``floor(|T|)`` and ``floor(|T|) + 1`` (units of ``2**(q - 24)``).
    a_word, a_valid : Out
        ``-s * Xe`` as an FP32 word, and whether it is one (finite).
    w_base, w_up, mid : Out
        ``N``'s word with sign ``s`` (for a midpoint ``N``, its neighbour toward zero),
        the next word away from zero, whether ``N`` is a midpoint.
    ea_mag : Out(F - 26)
    ea_neg, ea_zero : Out(1)

    With cuts, ``N`` and ``Xe`` are block ``split.nearest``, and the FP32 words and
    ``|Ea|`` ``split.nearest.words``.
    """

    BLOCKS = ("nearest", "nearest.words")

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        sp = sspec
        F, E = sp.frame, sp.exp_bits
        super().__init__({
            "frame": In(F), "q": In(signed(E)), "below": In(signed(2)), "a_neg": In(1),
            "fn": Out(26), "xe": Out(26), "a_word": Out(32), "a_valid": Out(1),
            "w_base": Out(32), "w_up": Out(32), "mid": Out(1),
            "ea_mag": Out(F - 26), "ea_neg": Out(1), "ea_zero": Out(1)})

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        F, E = sp.frame, sp.exp_bits
        cuts = self._cuts
        cut = _cut(m, cuts)
        first, last = "split.nearest", "split.nearest.words"
        fn, xe, ea_zero = (_late(m, cuts, p, first, last) for p in (
            self.fn, self.xe, self.ea_zero))
        fr = self.frame
        below_neg, below_any = self.below < 0, self.below != 0
        # N: bits F-1 .. F-26 (2**(q+1) .. 2**(q-24)), round bit F-27, the rest below.
        hi, rnd, rest = fr[F - 26:], fr[F - 27], fr[:F - 27]
        rest_any = rest.any()
        up = Signal()
        m.d.comb += up.eq(rnd & (rest_any | ~below_neg))
        m.d.comb += fn.eq(hi + up)
        low = fr[:F - 26]                          # rho, below 2**(q - 24)
        up_w, low_w = cut(up, first, last, "nearest_up"), cut(low, first, last, "nearest_low")
        if cuts is None:
            with m.If(up_w):
                m.d.comb += [self.ea_mag.eq((1 << (F - 26)) - low_w), self.ea_neg.eq(1)]
            with m.Else():
                m.d.comb += [self.ea_mag.eq(low_w), self.ea_neg.eq(0)]
        else:                                      # (1 << (F - 26)) - low is -low there
            m.d.comb += [self.ea_mag.eq(negated_where(m, low_w, up_w, F - 26, "ea", True)),
                         self.ea_neg.eq(up_w)]
        m.d.comb += ea_zero.eq(~up & ~low.any())
        # floor(|T|) in units of 2**(q - 24), and the even one of it and the next.
        xh = Signal(26)
        m.d.comb += xh.eq(hi - (below_neg & ~low.any()))
        m.d.comb += xe.eq(xh + xh[0])
        # FP32 words of multiples of 2**(q - 24): magnitude (q + 126) << 23 + (k >> 1).
        q, a_neg = (cut(v, first, last, f"nearest_{n}") for v, n in ((self.q, "q"),
                                                                     (self.a_neg, "a_neg")))
        base = Signal(signed(E + 24))
        m.d.comb += base.eq((q + 126) << 23)
        over = q >= 128
        for word, k, valid in ((self.a_word, self.xe, self.a_valid), (self.w_base, self.fn, None)):
            mag = Signal(signed(E + 25), name=f"mag_{word.name}")
            m.d.comb += mag.eq(base + (k >> 1))
            fin = Signal(name=f"fin_{word.name}")
            m.d.comb += fin.eq(~over & (mag < 0x7F800000))
            sign = ~a_neg if valid is not None else a_neg
            m.d.comb += word.eq(Cat(Mux(fin, mag[:31], 0x7F800000), sign))
            if valid is not None:
                m.d.comb += valid.eq(fin)
        m.d.comb += [self.w_up.eq(Mux(self.w_base[:31] == 0x7F800000, self.w_base,
                                      self.w_base + 1)),
                     self.mid.eq(self.fn[0] & ~over)]
        return m

    def parts(self):
        """``N``'s increment, ``|Ea|``'s subtraction, the floor and even adjustments, two
        words' adds and range compares (:mod:`hwgen.parts`)."""
        sp = self._s
        F, E = sp.frame, sp.exp_bits
        return [Part("add", (26,), 3), Part("add", (F - 26,)), Part("cmp", (F - 27,)),
                Part("mux", (2, F - 26)), Part("add", (E + 25,), 3), Part("cmp", (32,), 3)]


class LoopTerm(wiring.Component):
    """The loop's term ``P = s * (trunc(|T|, 2**(q - 50)) | jam)`` from ``N`` and ``E``:
    ``|T| = fn * 2**(q - 24) + e``, ``e = s * E`` (``E``'s 27 bits reach ``2**(q - 51)``
    or below, so ``e``'s floor at ``2**(q - 50)`` and whether it is exact are known).
    ``E`` can come from the clusters below ``Va`` (when ``Va`` is narrow they reach above
    ``2**(q - 50)``), so ``P`` is not a slice of the frame.

    Members
    -------
    fn, a_neg, q, e_* : In
    p_sig : Out(signed(53))
    p_exp : Out
        Exponent field ``q - 50 + term_bias``.

    With cuts, ``E``'s shift is block ``split.term``, the sum onto ``fn``
    ``split.term.sum`` and the sign ``split.term.neg``.
    """

    BLOCKS = ("term", "term.sum", "term.neg")

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        sp = sspec
        E = sp.exp_bits
        super().__init__({"fn": In(26), "a_neg": In(1), "q": In(signed(E)), "e_neg": In(1),
                          "e_zero": In(1), "e_top": In(signed(E)), "e_sig": In(E_BITS),
                          "e_sticky": In(1), "p_sig": Out(signed(sp.term_bits)),
                          "p_exp": Out(sp.term_exp_bits)})

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        E = sp.exp_bits
        k = Signal(signed(E + 1))                   # e_sig's bit 0 is 2**(q - 50 - k)
        m.d.comb += k.eq(self.q - 24 - self.e_top)
        kk = Signal(range(E_BITS + 2))
        m.d.comb += kk.eq(Mux(self.e_zero | (k > E_BITS + 1), E_BITS + 1, Mux(k < 0, 0, k)))
        wide = Signal(2 * E_BITS + 2)
        m.d.comb += wide.eq(Cat(Const(0, E_BITS + 2), self.e_sig) >> kk)
        fl = wide[E_BITS + 2:]
        lowb = Signal()
        m.d.comb += lowb.eq(wide[:E_BITS + 2].any() | (self.e_sticky & ~self.e_zero))
        e_neg = self.e_neg ^ self.a_neg             # e's sign
        cut = _cut(m, self._cuts)
        fl, lowb, sub, fn, a_neg, q = (
            cut(v, "split.term", "split.term.sum", f"term_{n}") for v, n in (
                (fl, "fl"), (lowb, "lowb"), (e_neg & ~self.e_zero, "sub"), (self.fn, "fn"),
                (self.a_neg, "a_neg"), (self.q, "q")))
        pm = Signal(52)
        m.d.comb += pm.eq(Mux(sub, (fn << 26) - fl - lowb, (fn << 26) + fl))
        pm, lowb, a_neg, q = (cut(v, "split.term.sum", "split.term.neg", f"term_{n}")
                              for v, n in ((pm, "pm"), (lowb, "lowb"), (a_neg, "a_neg"), (q, "q")))
        pj = Signal(52)
        m.d.comb += pj.eq(pm | lowb)
        m.d.comb += [self.p_sig.eq(Mux(a_neg, -pj, pj) if self._cuts is None else
                                   negated_where(m, Cat(pj, Const(0, 1)), a_neg, 53, "p", True)),
                     self.p_exp.eq(q - 50 + sp.term_bias)]
        return m

    def parts(self):
        """``E``'s shift to ``2**(q - 50)``, the exactness test, the add or subtract onto
        ``fn`` and the negation (:mod:`hwgen.parts`)."""
        sp = self._s
        E = sp.exp_bits
        return [Part("add", (E + 1,)), Part("shr", (E_BITS, E_BITS + 2)),
                Part("cmp", (E_BITS + 2,)), Part("add", (52,), 2), Part("mux", (2, 52)),
                Part("neg", (53,)), Part("add", (E,))]


class Residue(wiring.Component):
    """``E = T - N`` as a sign, a top place, 27 bits and a sticky bit: from ``Ea`` (``N``'s
    remainder inside the frame) unless that is 0, else from ``Vb``; the clusters below the
    source (``Vb``, or the third cluster) are under its lowest unit's ``2**-27`` and count
    as a sticky bit with their sign.

    Members
    -------
    ea_mag, ea_neg, ea_zero, a_neg, q, below : In
    b_any, b_neg, b_mag, b_top, c_any, c_neg : In
    e_neg, e_zero, e_top, e_sig, e_sticky : Out
        ``|E| = e_sig * 2**(e_top - 26) + r`` with ``0 <= r < 2**(e_top - 26)``, ``r != 0``
        exactly when ``e_sticky``; ``e_sig`` has its top bit set unless ``e_zero``, when it
        and ``e_sticky`` are 0.

    With cuts, the source's choice and leading-zero count are block ``split.residue``, its
    normalization ``split.residue.norm`` and the sticky's borrow ``split.residue.sig``.
    """

    BLOCKS = ("residue", "residue.norm", "residue.sig")

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        sp = sspec
        F, E = sp.frame, sp.exp_bits
        super().__init__({
            "ea_mag": In(F - 26), "ea_neg": In(1), "ea_zero": In(1), "a_neg": In(1),
            "q": In(signed(E)), "below": In(signed(2)), "b_any": In(1), "b_neg": In(1),
            "b_mag": In(sp.windows[1] + 2), "b_top": In(signed(E)), "c_any": In(1),
            "c_neg": In(1), "e_neg": Out(1), "e_zero": Out(1), "e_top": Out(signed(E)),
            "e_sig": Out(E_BITS), "e_sticky": Out(1)})

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        F, E = sp.frame, sp.exp_bits
        W = F - 26                                  # source width (Vb's is narrower)
        Lb = sp.windows[1]
        cuts = self._cuts
        cut = _cut(m, cuts)
        first, mid, last = "split.residue", "split.residue.norm", "split.residue.sig"
        e_neg = _late(m, cuts, self.e_neg, first, last)
        src = Signal(W)
        lsb = Signal(signed(E))                     # weight exponent of src bit 0
        tau_neg, tau_any = Signal(), Signal()       # the sticky below: opposite sign / any
        from_a = ~self.ea_zero
        with m.If(from_a):
            # Ea's bit 0 is frame bit 0: 2**(q - F + 2).
            m.d.comb += [src.eq(self.ea_mag), lsb.eq(self.q - F + 2),
                         e_neg.eq(self.a_neg ^ self.ea_neg),
                         tau_any.eq(self.below != 0),
                         tau_neg.eq((self.below < 0) ^ self.ea_neg)]
        with m.Else():
            # Vb's anchor top is at bit Lb - 1.
            m.d.comb += [src.eq(self.b_mag), lsb.eq(self.b_top - Lb + 1),
                         e_neg.eq(self.b_neg), tau_any.eq(self.c_any),
                         tau_neg.eq(self.c_neg != self.b_neg)]
        m.d.comb += _late(m, cuts, self.e_zero, first, last).eq(~from_a & ~self.b_any)
        lz = leading_zeros(m, src, W, "e_lz", tree=True)
        src, lz, lsb, tau_any, tau_neg = (
            cut(v, first, mid, f"residue_{n}") for v, n in (
                (src, "src"), (lz, "lz"), (lsb, "lsb"), (tau_any, "tau_any"),
                (tau_neg, "tau_neg")))
        norm = Signal(W)
        m.d.comb += norm.eq(src << lz)
        top = Signal(signed(E))
        m.d.comb += top.eq(lsb + (W - 1) - lz)
        sig, low = norm[W - E_BITS:], norm[:W - E_BITS].any()
        sig, low, top, tau_any, tau_neg = (
            cut(v, mid, last, f"residue_{n}") for v, n in (
                (sig, "sig"), (low, "low"), (top, "top"), (tau_any, "tau_any"),
                (tau_neg, "tau_neg")))
        pow2 = Signal()
        m.d.comb += pow2.eq((sig == 1 << (E_BITS - 1)) & ~low)
        down = tau_any & tau_neg
        with m.If(down & pow2):
            m.d.comb += [self.e_top.eq(top - 1), self.e_sig.eq((1 << E_BITS) - 1),
                         self.e_sticky.eq(1)]
        with m.Else():
            m.d.comb += [self.e_top.eq(top), self.e_sig.eq(sig - (down & ~low)),
                         self.e_sticky.eq(low | tau_any)]
        return m

    def parts(self):
        """The source choice, leading-zero count and normalising shift, the top-place add,
        the power-of-two test and the borrow of an opposite sticky (:mod:`hwgen.parts`)."""
        sp = self._s
        W, E = sp.frame - 26, sp.exp_bits
        return [Part("mux", (2, W + E + 3)), Part("lzc", (W,)), Part("shl", (W, W)),
                Part("add", (E,), 2), Part("cmp", (W,)), Part("add", (E_BITS,)),
                Part("mux", (2, E_BITS + E + 1))]


class SplitSum(wiring.Component):
    """The split of a step of independent terms, outside the accumulator loop: everything
    :class:`hwgen.accum_bounded.BoundedAdd` needs besides the accumulator (and the bypass
    result, which :class:`hwgen.accum_bounded.BypassRound` rounds from these). With cuts,
    ``fn``, ``xe``, ``q``, ``s_neg`` and ``E`` (``e_*``) reach the block :data:`BYPASS`, the
    loop's term ``p_*`` the term's decode, the others the adder's ``decode``.

    Members
    -------
    step : In(accum_layout(terms))
    zero : Out(1)
        The exact sum is 0 (``P`` is 0 too: the loop adds nothing).
    p_sig, p_exp : Out
        The loop's term ``P``.
    a_word, a_valid : Out
        The bypass word (when ``a_valid``); its result is
        :class:`hwgen.accum_bounded.BypassRound`'s from ``fn``, ``xe`` and ``E``.
    fn, xe : Out(26)
        ``N`` and ``Xe`` in units of ``2**(q - 24)``.
    q : Out(signed(E))
        Accumulators below ``2**(q - 26)`` in magnitude take one of ``N``'s words.
    w_base, w_up, mid : Out
    e_neg, e_zero, e_top, e_sig, e_sticky : Out
        ``E``, for the loop's compare of ``acc + E`` with 0.
    """

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        sp = sspec
        E = sp.exp_bits
        super().__init__({
            "step": In(accum_layout(sp.terms)), "zero": Out(1),
            "p_sig": Out(signed(sp.term_bits)), "p_exp": Out(sp.term_exp_bits),
            "a_word": Out(32), "a_valid": Out(1), "fn": Out(26), "xe": Out(26),
            "q": Out(signed(E)),
            "w_base": Out(32), "w_up": Out(32), "mid": Out(1), "s_neg": Out(1),
            "e_neg": Out(1), "e_zero": Out(1), "e_top": Out(signed(E)),
            "e_sig": Out(E_BITS), "e_sticky": Out(1)})

    def blocks(self):
        """``{name: component}``, datapath order; a component's blocks are its ``BLOCKS``
        (the first named as it is)."""
        sp, c = self._s, self._cuts
        return {"sort": SortTerms(sp, c), "clusters": ClusterSums(sp, c),
                "pick": PickClusters(sp, c), "frame": Frame(sp, c), "nearest": Nearest(sp, c),
                "residue": Residue(sp, c), "term": LoopTerm(sp, c)}

    def elaborate(self, platform):
        m = Module()
        sp = self._s
        cut = _cut(m, self._cuts)
        b = self.blocks()
        for name, blk in b.items():
            m.submodules[name] = blk
        srt, cs, pk, fr, nr, rs, lt = b.values()

        def last(name):
            """The block where component ``name`` presents its outputs."""
            return f"split.{b[name].BLOCKS[-1]}"

        def link(dst, dst_block, src, src_block, fields):
            """``dst.f = src.f`` for ``fields``, through the cuts between the blocks."""
            for f in fields:
                m.d.comb += getattr(dst, f).eq(cut(getattr(src, f), last(src_block),
                                                   f"split.{dst_block}", f"split_{f}"))

        m.d.comb += srt.step.eq(self.step)
        for k in range(sp.n):
            link(cs, "clusters", srt, "sort", [f"{f}_{k}" for f in ("neg", "mag", "top", "zero")])
            link(pk, "pick", cs, "clusters", [f"{f}_{k}" for f in ("sum", "start", "nz")])
            link(pk, "pick", srt, "sort", [f"top_{k}"])
        link(fr, "frame", pk, "pick", ("a_neg", "a_mag", "a_top", "b_any", "b_neg"))
        link(nr, "nearest", fr, "frame", ("frame", "q", "below"))
        link(nr, "nearest", pk, "pick", ("a_neg",))
        link(rs, "residue", nr, "nearest", ("ea_mag", "ea_neg", "ea_zero"))
        link(rs, "residue", pk, "pick", ("b_any", "b_neg", "b_mag", "b_top", "c_any", "c_neg",
                                         "a_neg"))
        link(rs, "residue", fr, "frame", ("q", "below"))
        def out(v, block, name, dst="decode"):
            """A value of block ``block`` where the adder's decode (``dst``) reads it."""
            return cut(v, last(block), dst, f"split_out_{name}")
        link(lt, "term", nr, "nearest", ("fn",))
        link(lt, "term", pk, "pick", ("a_neg",))
        link(lt, "term", fr, "frame", ("q",))
        m.d.comb += [self.fn.eq(out(nr.fn, "nearest", "fn", BYPASS)),
                     self.xe.eq(out(nr.xe, "nearest", "xe", BYPASS))]
        for f in ("e_neg", "e_zero", "e_top", "e_sig", "e_sticky"):
            link(lt, "term", rs, "residue", (f,))
            m.d.comb += getattr(self, f).eq(out(getattr(rs, f), "residue", f, BYPASS))
        zero = out(pk.zero, "pick", "zero")
        p_zero = cut(pk.zero, last("pick"), last("term"), "split_p_zero")
        m.d.comb += [self.zero.eq(zero),
                     self.p_sig.eq(out(Mux(p_zero, 0, lt.p_sig), "term", "p_sig", TERM_DECODE)),
                     self.p_exp.eq(out(lt.p_exp, "term", "p_exp", TERM_DECODE)),
                     self.a_word.eq(out(nr.a_word, "nearest", "a_word")),
                     self.a_valid.eq(out(nr.a_valid, "nearest", "a_valid") & ~zero),
                     self.q.eq(out(fr.q, "frame", "q", BYPASS)),
                     self.w_base.eq(out(nr.w_base, "nearest", "w_base")),
                     self.w_up.eq(out(nr.w_up, "nearest", "w_up")),
                     self.mid.eq(out(nr.mid, "nearest", "mid")),
                     self.s_neg.eq(out(pk.a_neg, "pick", "s_neg", BYPASS))]
        return m

    def parts(self):
        """Its blocks' parts, each a sub-block of its own (:mod:`hwgen.parts`)."""
        out = []
        for name, blk in self.blocks().items():
            out += within(name, probe(blk).parts())
        return out


#: The blocks of :class:`SplitSum`, in datapath order: its components' ``BLOCKS`` (an
#: interleaved unit's ring may put registers between any two, :class:`hwgen.ring.LoopCuts`),
#: named without the ``split.`` prefix the adder gives them.
SPLIT_BLOCKS = tuple(b for c in (SortTerms, ClusterSums, PickClusters, Frame, Nearest, Residue,
                                 LoopTerm) for b in c.BLOCKS)


class AccVersusE(wiring.Component):
    """In the loop: whether ``|acc| < 2**(q - 26)`` and the sign of ``acc + E``.

    With cuts, the accumulator's normalization (its leading-zero count, top place and
    shifted significand) is in the adder's ``decode`` block and the compares are in a block
    of their own, :data:`VERSUS`.

    Members
    -------
    acc : In(32)
        A finite accumulator word (+0 on a ``first`` step).
    q, e_* : In
        Where the adder's decode reads them.
    small : Out(1)
    zero, pos : Out(1)
        ``acc + E = 0``; otherwise, ``acc + E > 0`` (``pos`` is meaningless when ``zero``
        is set, and the adder reads ``zero`` first).
    """

    def __init__(self, sspec, cuts=None):
        self._s = sspec
        self._cuts = cuts
        E = sspec.exp_bits
        super().__init__({"acc": In(32), "q": In(signed(E)), "e_neg": In(1), "e_zero": In(1),
                          "e_top": In(signed(E)), "e_sig": In(E_BITS), "e_sticky": In(1),
                          "small": Out(1), "pos": Out(1), "zero": Out(1)})

    def elaborate(self, platform):
        m = Module()
        E = self._s.exp_bits
        cut = _cut(m, self._cuts)
        frac, ef, neg = self.acc[:23], self.acc[23:31], self.acc[31]
        sig = Cat(frac, ef != 0)
        a_zero = sig == 0
        lz = leading_zeros(m, sig, 24, "acc_lz", tree=True)
        top = Signal(signed(E))
        m.d.comb += top.eq(Mux(ef == 0, -126, ef - 127) - lz)
        norm = Signal(24)
        m.d.comb += norm.eq(sig << lz)

        def vs(value, name):
            return cut(value, "decode", VERSUS, f"versus_{name}")
        a_zero, top, norm, neg = (vs(a_zero, "a_zero"), vs(top, "top"), vs(norm, "norm"),
                                  vs(neg, "neg"))
        q, e_neg, e_zero, e_top, e_sig, e_sticky = (
            vs(getattr(self, f), f) for f in ("q", "e_neg", "e_zero", "e_top", "e_sig",
                                              "e_sticky"))
        m.d.comb += self.small.eq(a_zero | (top < q - 26))
        # |acc| against |E|: top places, then 24 bits, then E's lower bits.
        e_hi = e_sig[E_BITS - 24:]
        e_lo = e_sig[:E_BITS - 24].any() | e_sticky
        acc_big = Signal()                          # |acc| > |E|
        e_big = Signal()                            # |E| > |acc|
        m.d.comb += [
            acc_big.eq(~a_zero & (e_zero | (top > e_top)
                                  | ((top == e_top) & (norm > e_hi)))),
            e_big.eq(~e_zero & (a_zero | (e_top > top)
                                | ((top == e_top) & ((e_hi > norm)
                                                     | ((e_hi == norm) & e_lo))))),
        ]
        with m.If(a_zero & e_zero):
            m.d.comb += [self.zero.eq(1), self.pos.eq(0)]
        with m.Elif(a_zero | (~e_zero & (neg == e_neg))):
            # same signs (or acc zero): E's sign, or acc's when E is zero
            m.d.comb += self.pos.eq(Mux(a_zero, ~e_neg, ~neg))
        with m.Elif(e_zero):
            m.d.comb += self.pos.eq(~neg)
        with m.Else():
            m.d.comb += [self.pos.eq(Mux(acc_big, ~neg, ~e_neg)),
                         self.zero.eq(~acc_big & ~e_big)]
        return m

    def parts(self):
        """The accumulator's leading-zero count and normalising shift, its top place, the
        threshold compare, the top-place and 24-bit compares (:mod:`hwgen.parts`)."""
        E = self._s.exp_bits
        return [Part("lzc", (24,)), Part("shl", (24, 24)), Part("add", (E,), 2),
                Part("cmp", (E,), 3), Part("cmp", (24,), 2), Part("mux", (2, 2), 3)]
