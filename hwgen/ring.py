"""L-way interleaved accumulation: L accumulators share one adder whose loop is cut by
registers into L stages (issue 45; ``hif4spec.INTERLEAVES``).

The exact accumulate ``acc = RNE_FP32(acc + step)`` is a recurrence: a one-accumulator
unit (:class:`hwgen.accum.Accumulator`) must finish the whole adder in one cycle, whatever
the pipeline in front of it. With L independent accumulations (different output
elements), each one's add may take L cycles: the adder's blocks are split over L
register stages (:class:`LoopCuts`, placed by :func:`partition`), and the L accumulators'
words travel round the ring they form, one per stage, so that a step for accumulator
``j`` meets ``j``'s word at the ring's entrance and its new word comes back there L cycles
later. The generator places the registers; the synthesis tool does not retime them.

Where the adder works on the step alone first (the bounded back end's pre-add, pair or
split: ``term_blocks()``), those blocks take P stages of their own ahead of the ring
(:func:`place`), so the step enters P cycles before its accumulator's word joins it.

Timing (kind ``"ring"``, ``interleave`` = L, ``prep`` = P): a turn counter ``t`` (P mod L
after reset) names the accumulator whose step may enter. The ring *moves* on every rising
edge except when ``o.valid & ~o.ready``; every move advances ``t`` by one modulo L and
every stage register by one place. ``i.ready = moves & (i.payload.acc_id == t)``: a step
waits (``i.ready`` low) until its accumulator's turn. A step transferred at turn ``t``
enters accumulator ``t``'s add; P + L moves later the exit register holds
``RNE_FP32(acc_t + step)`` (with the ``first``/NaN/Inf rules of
:class:`hwgen.accum.ExactAdd`) and ``o.valid`` is high if that step was a ``last`` step;
an accumulator without a step in that turn keeps its word. ``o.payload`` is the exit
register. So outputs come in the order of their ``last`` steps' transfers, at least
P + L cycles after them (exactly when the output is ready), and steps naming the
accumulators in turn are taken one per cycle. After reset every accumulator holds +0.

Components: :class:`LoopCuts` (the stage registers inside an adder), :func:`partition`
(which adder block goes to which stage) and :class:`Ring` (the stream stage).
"""

from amaranth.hdl import Fragment, Module, Shape, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hif4spec import ACC_FIELD, acc_id_bits

from .accum import AccumSpec, accum_layout
from .parts import Part, probe, within

__all__ = ["LoopCuts", "partition", "ring_layout", "Ring", "RING_RULES", "CUT_REGISTER"]

#: The ring's timing, as the manifest's ``timing.rules`` states it.
RING_RULES = (
    "ring(L, P = prep): L accumulators; a turn counter t (reset P mod L); the ring moves on "
    "every edge unless o.valid & !o.ready, and each move advances t by 1 mod L; "
    "i.ready = moves & (acc_id == t); a step transferred at turn t is added to accumulator "
    "t (RNE_FP32(acc + step), first/NaN/Inf as the accumulator) and the result reaches the "
    "exit register P + L moves later, with o.valid <= last of that step (a move whose step "
    "slot is empty gives o.valid <= 0, the accumulators keep their words); o.payload is "
    "the exit register; every accumulator is +0 after reset."
)


class LoopCuts:
    """The registers an adder's loop is cut by: each block of the adder sits in one stage,
    and a value made in one block and used in a later stage's block passes through one
    register per stage between them.

    Parameters
    ----------
    stage_of : dict
        Block name -> stage; ``"in"`` (the step input) is stage 0, ``"join"`` (the
        accumulator input) stage ``join`` and ``"out"`` (the outputs) stage
        ``join + stages - 1``, whatever the dict says.
    stages : int
        L: the stages from the accumulator's join to the outputs.
    join : int
        P: the stages ahead of the join, where only the step is worked on.

    Attributes
    ----------
    enable : Signal
        Every cut register loads when it is high (the ring drives it with its move).
    registers : list of (bits, resettable)
        Every register :meth:`move` made (for ``parts()``).
    """

    def __init__(self, stage_of, stages, join=0):
        self._stage = {**stage_of, "in": 0, "join": join, "out": join + stages - 1}
        self.stages, self.join = stages, join
        self.enable = Signal(name="ring_move")
        self.registers = []
        self._made = {}

    def stage(self, block):
        return self._stage[block]

    def move(self, m, value, src, dst, *, name="cut", reset=False):
        """``value`` (made in block ``src``) as block ``dst`` sees it: delayed by one
        register per stage between them (the value itself in the same stage). A resettable
        chain loads 0 on reset; the others have no reset. The same value moved again to a
        stage it already reached reuses the registers. Call it outside ``m.If`` and
        ``m.Switch``: the registers load under the conditions active where they are made."""
        a, b = self._stage[src], self._stage[dst]
        if b < a:
            raise ValueError(f"block {dst!r} (stage {b}) cannot use a value of block {src!r} "
                             f"(stage {a})")
        return self.delay(m, value, a, b, name=name, reset=reset)

    def delay(self, m, value, a, b, *, name="cut", reset=False):
        """``value`` of stage ``a`` at stage ``b`` (:meth:`move` by stage numbers)."""
        out = value
        for k in range(a, b):
            key = (id(value), k + 1)
            if key not in self._made:
                shape = out.shape() if hasattr(out, "shape") else len(out)
                reg = Signal(shape, name=CUT_REGISTER.format(name=name, k=k + 1),
                             reset_less=not reset)
                with m.If(self.enable):
                    m.d.sync += reg.eq(out)
                self._made[key] = (reg, value)
                self.registers.append((Shape.cast(reg.shape()).width, reset))
            out = self._made[key][0]
        return out


#: The name of a cut register: ``<name>_s<k>``, the value ``name`` as stage ``k`` reads it
#: (made in stage ``k - 1`` or before; the manifest's ring stage states it as
#: ``cut_registers``, which :func:`sim.cost.libsynth.ring_stages` relies on).
CUT_REGISTER = "{name}_s{k}"


def partition(blocks, stages):
    """``{block: stage}`` for ``blocks`` (``[(name, weight), ...]`` in datapath order):
    contiguous groups over ``stages`` stages, the heaviest group as light as it can be
    (ties: the earlier cut points); stages beyond the blocks' count stay empty (their
    registers back to back, at the end)."""
    names = [b for b, _ in blocks]
    w = [float(x) for _, x in blocks]
    n = len(w)
    k = min(stages, n)
    prefix = [0.0]
    for x in w:
        prefix.append(prefix[-1] + x)
    inf = float("inf")
    # best[g][i]: least max weight splitting blocks[:i] into g groups; cut[g][i] its last cut
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    cut = [[0] * (n + 1) for _ in range(k + 1)]
    best[0][0] = 0.0
    for g in range(1, k + 1):
        for i in range(g, n + 1):
            for j in range(g - 1, i):
                v = max(best[g - 1][j], prefix[i] - prefix[j])
                if v < best[g][i] - 1e-9:
                    best[g][i], cut[g][i] = v, j
    stage_of, i = {}, n
    for g in range(k, 0, -1):
        j = cut[g][i]
        for b in names[j:i]:
            stage_of[b] = g - 1
        i = j
    return {b: stage_of[b] for b in names}


def place(add, interleave, cuts_class=None):
    """:class:`LoopCuts` for adder ``add`` in a ring of ``interleave`` accumulators: its
    ``loop_blocks()`` (the blocks the accumulator word goes through) over L stages
    (:func:`partition`), and its ``term_blocks()`` (work on the step alone, ahead of the
    accumulator's join; none where the adder has no such method) over as few stages P
    ahead of them as keep each no heavier than the heaviest loop stage or, where one term
    block alone is heavier, than that block. ``cuts_class``
    replaces :class:`LoopCuts` (a subclass)."""
    loop = add.loop_blocks()
    term = getattr(add, "term_blocks", lambda: [])()
    stage_of = partition(loop, interleave)
    heaviest = max(sum(w for b, w in loop if stage_of[b] == s) for s in range(interleave))
    heaviest = max([heaviest] + [w for _, w in term])
    P = 0
    if term:
        while True:
            P += 1
            ahead = partition(term, P)
            if P >= len(term) or max(sum(w for b, w in term if ahead[b] == s)
                                     for s in range(P)) <= heaviest:
                break
    out = {b: s + P for b, s in stage_of.items()}
    if term:
        out.update(ahead)
    return (cuts_class or LoopCuts)(out, interleave, P)


def ring_layout(terms, interleave):
    """The input payload of a :class:`Ring`: :func:`hwgen.accum.accum_layout` of ``terms``
    with :data:`hif4spec.ACC_FIELD` last (the adders take the low bits, the step)."""
    fields = dict(accum_layout(terms).members)
    fields[ACC_FIELD] = acc_id_bits(interleave)
    return data.StructLayout(fields)


class Ring(wiring.Component):
    """Stream stage of L interleaved accumulators (kind ``"ring"``; timing: the module
    docstring).

    Parameters
    ----------
    terms : iterable of TermSpec
        The exact terms one step delivers.
    make_add : callable
        ``make_add(cuts)`` builds the back end's adder (the ports and contract of
        :class:`hwgen.accum.ExactAdd`) cut by ``cuts`` (a :class:`LoopCuts`, or None for
        none), with ``loop_blocks()`` (``[(block, weight)]``, datapath order) and, when
        cut, an output ``held`` (its ``acc`` input at the last stage).
    interleave : int
        L, 2 or more.

    Members
    -------
    i : In(stream.Signature(ring_layout(terms, interleave)))
    o : Out(stream.Signature(32))
    """

    kind = "ring"

    def __init__(self, terms, make_add, interleave):
        if interleave < 2:
            raise ValueError(f"A ring interleaves 2 or more accumulators, not {interleave!r}")
        self._spec = AccumSpec(terms)
        self._make_add = make_add
        self._l = interleave
        super().__init__({"i": In(stream.Signature(ring_layout(self._spec.terms, interleave))),
                          "o": Out(stream.Signature(32))})

    interleave = property(lambda self: self._l)

    def cuts(self):
        """A fresh :class:`LoopCuts` placing the adder's blocks (:func:`place`)."""
        return place(probe(self._make_add(None)), self._l)

    @property
    def prep(self):
        """P: the stages ahead of the accumulator's join."""
        return self.cuts().join

    def describe(self):
        """The adder's description, ``interleave``, ``prep`` (P), each stage's blocks
        (``prep_stages``, P lists, and ``loop_stages``, L lists) and the cut registers'
        names (``cut_registers``, :data:`CUT_REGISTER`)."""
        add = probe(self._make_add(None))
        cuts = self.cuts()
        blocks = [b for b, _ in getattr(add, "term_blocks", lambda: [])() + add.loop_blocks()]
        at = [[b for b in blocks if cuts.stage(b) == s] for s in range(cuts.join + self._l)]
        return {**add.describe(), "interleave": self._l, "prep": cuts.join,
                "prep_stages": at[:cuts.join], "loop_stages": at[cuts.join:],
                "cut_registers": CUT_REGISTER.format(name="<name>", k="<k>")}

    def elaborate(self, platform):
        m = Module()
        L = self._l
        cuts = self.cuts()
        m.submodules.add = add = self._make_add(cuts)
        move = Signal()
        turn = Signal(range(L), init=cuts.join % L)
        word = Signal(32)                  # the exit register: accumulator `turn`'s word
        pending = Signal()                 # its o.valid
        take = Signal()
        m.d.comb += [
            move.eq(~pending | self.o.ready),
            cuts.enable.eq(move),
            self.i.ready.eq(move & (self.i.payload[ACC_FIELD] == turn)),
            take.eq(self.i.valid & self.i.ready),
            add.acc.eq(word),
            add.step.eq(self.i.payload),
            self.o.valid.eq(pending),
            self.o.payload.eq(word),
        ]
        active = cuts.move(m, take, "in", "out", name="ring_active", reset=True)
        last = cuts.move(m, self.i.payload.last, "in", "out", name="ring_last")
        with m.If(move):
            m.d.sync += [turn.eq(turn + 1),          # L is a power of two: wraps
                         pending.eq(active & last)]
            with m.If(active):
                m.d.sync += word.eq(add.word)
            with m.Else():
                m.d.sync += word.eq(add.held)
        return m

    def parts(self):
        """The adder's parts; the cut registers (sub-block ``cuts``: the loop's pipeline
        registers, the accumulators' words among them); the exit register with ``o.valid``,
        the turn counter and its increment (``reg``)."""
        cuts = self.cuts()
        add = self._make_add(cuts)
        Fragment.get(add, None)             # elaborating it makes the cut registers
        bits = sum(b for b, _ in cuts.registers) + 2 * (self._l - 1)
        count = acc_id_bits(self._l)
        return (add.parts() + within("cuts", [Part("reg", (bits,))])
                + within("reg", [Part("reg", (33 + count,)), Part("add", (count,))]))
