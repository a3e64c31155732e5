"""Valid/ready pipeline skeleton shared by every unit (dot products, encoders), and its
timing rules.

A unit is a chain of stream stages joined with :func:`chain`. Every stage has an input stream
``i`` and an output stream ``o`` (``lib.stream.Signature``) and follows ``lib.stream``'s
rules: ``valid`` never depends on ``ready`` of the same stream, a payload is held while
``valid & ~ready``.

Timing rules
------------
This section is the one statement of the units' cycle behaviour; the cycle-level simulator
and the manifest's ``timing`` (``pipeline`` list and ``rules`` text) describe the same. All
state changes on the rising edge of ``clk``; ``rst`` is synchronous; a transfer happens on
an edge where ``valid`` and ``ready`` are both high. Five kinds of stage exist:

``Map`` (kind ``"comb"``)
    Combinational. ``o.valid = i.valid``, ``i.ready = o.ready``, ``o.payload = f(i.payload)``.
    Adds no cycle.
``Register`` (kind ``"register"``)
    One pipeline register. ``i.ready = ~o.valid | o.ready`` (combinational in ``o.ready``).
    On a rising edge: if ``i.valid & i.ready`` the payload is loaded and ``o.valid`` becomes
    1; otherwise, if ``o.ready``, ``o.valid`` becomes 0; otherwise it holds. No bubbles: a
    full pipeline of registers moves one step per cycle while its output is ready.
``Sequencer`` (kind ``"sequencer"``, ``slices`` = n)
    Processes one held input payload in n slices, one per cycle, summing per-slice partial
    values. A counter c (0 after reset) advances on every rising edge where ``i.valid`` is
    high and c < n - 1 (partial sums registered). At c = n - 1, ``o.valid = i.valid`` and
    ``i.ready = o.ready``; the output payload carries the registered partial sums plus the
    last slice's contribution (combinational), and the transfer resets c to 0. So a step
    spends n cycles in the stage when the output is ready: ``i.ready`` is low for the first
    n - 1 of them. With n = 1 the stage is a plain ``Map``.
``Deserializer`` (kind ``"deserializer"``, ``beats`` = n)
    Gathers n input transfers (beats) into one output payload. A counter c (0 after reset)
    counts beats: while c < n - 1, ``i.ready`` is high and a transfer registers the beat
    (slot c) and increments c. At c = n - 1, ``o.valid = i.valid`` and
    ``i.ready = o.ready``; the output payload is the n - 1 registered beats plus the
    current one (combinational), and the transfer resets c to 0. So beats 0..n-2 of a group
    never wait, and the group's last beat moves on like a ``Map``. With n = 1 the stage is a
    plain ``Map``.
``hwgen.accum.Accumulator`` (kind ``"accumulator"``, ends every dot-unit chain)
    ``i.ready = ~o.valid | o.ready``. On a rising edge with ``i.valid & i.ready`` the
    accumulator register takes ``RNE_FP32(acc + step)`` and ``o.valid`` becomes
    ``i.payload.last``; otherwise, if ``o.ready``, ``o.valid`` becomes 0. ``o.payload`` is
    the accumulator register (held while ``o.valid & ~o.ready``: no step is accepted then).

For a unit (:class:`hwgen.unit.DotUnit`, the chain ``[input_reg]``, ``front`` (a sequencer
of ``n = 64 // lanes`` slices), registers, ``acc``) this gives: the input accepts a step at
most every ``n`` cycles (``ii = n``). Without the input register (``stages <= 3``)
``i.ready`` is high only in the last of the ``n`` cycles a presented step spends in the
sequencer, and only when the next stage can take it; with ``stages == 4`` the input register
takes the step and the sequencer works on its copy. If the input transfer of a ``last`` step
happens in cycle ``c`` and the output is always ready, ``o.valid`` is high in cycle
``c + latency`` with ``latency = stages`` for ``stages <= 3`` and ``stages - 1 + n`` for
``stages == 4``. With ``o.ready`` low while ``o.valid``, the accumulator takes no step and
backpressure propagates through the registers.

For an encoder (:class:`hwgen.encoder.EncoderUnit`, the chain ``[beat_reg]``,
``deserializer`` (``n = 64 // lanes`` beats), the quantizer core's stages as ``Map`` stages
with registers between some of them, ``[out_reg]``) a group of 64 elements arrives in n
beats and the input accepts a group at most every n cycles (``ii = n``); every register is
on the path of a group's last beat, so ``o.valid`` is high ``latency = stages - 1`` cycles
after the transfer of the last beat of a group when the output is always ready.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .parts import Part

__all__ = ["Map", "Register", "Sequencer", "Deserializer", "chain"]


class Register(wiring.Component):
    """One valid/ready pipeline register stage.

    Parameters
    ----------
    layout : shape-castable
        Payload layout, the same on both sides.

    Members
    -------
    i : In(stream.Signature(layout))
        Input; ``i.ready = ~o.valid | o.ready``.
    o : Out(stream.Signature(layout))
        Output; ``o.valid`` and ``o.payload`` come from flops.
    """

    kind = "register"

    def __init__(self, layout):
        self._layout = layout
        super().__init__({"i": In(stream.Signature(layout)),
                          "o": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(1)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m

    def parts(self):
        """The payload flops and ``o.valid`` (:mod:`hwgen.parts`)."""
        return [Part("reg", (Shape.cast(self._layout).width + 1,))]


class Map(wiring.Component):
    """A combinational stream stage: transforms the payload, passes valid/ready through.

    Parameters
    ----------
    in_layout, out_layout : shape-castable
        Payload layouts.
    build : callable
        ``build(m, i_payload, o_payload)`` adds the combinational logic (and submodules) to
        ``m`` that drives every field of ``o_payload`` from ``i_payload``.
    name : str
        Stage name (for the manifest).

    Members
    -------
    i : In(stream.Signature(in_layout))
    o : Out(stream.Signature(out_layout))
    """

    kind = "comb"

    def __init__(self, in_layout, out_layout, build, *, name="map"):
        self._build = build
        self.stage_name = name
        super().__init__({"i": In(stream.Signature(in_layout)),
                          "o": Out(stream.Signature(out_layout))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready)]
        self._build(m, self.i.payload, self.o.payload)
        return m


class Sequencer(wiring.Component):
    """Reduce one held input payload over ``slices`` cycles (a narrower datapath).

    Parameters
    ----------
    in_layout, out_layout : shape-castable
        Payload layouts. ``out_layout`` must be a ``StructLayout`` holding every name of
        ``sum_fields``.
    slices : int
        Number of cycles per step (>= 1).
    sum_fields : iterable of str
        Output fields that are sums over the slices.
    build : callable
        ``build(m, i_payload, index, o_payload) -> dict`` adds the logic of one slice:
        ``index`` is the slice number (a Value, or ``Const(0)`` when ``slices == 1``). It
        returns ``{field: value}`` with this slice's contribution to every sum field (sum
        fields must be plain ``signed``/``unsigned`` shapes, wide enough for the total) and
        drives every other field of ``o_payload`` itself (from ``i_payload``, which is held
        stable for the whole step).
    name : str
        Stage name (for the manifest).

    Members
    -------
    i : In(stream.Signature(in_layout))
        ``i.ready`` is low during the first ``slices - 1`` cycles of a step.
    o : Out(stream.Signature(out_layout))
        ``o.valid = i.valid`` in the last slice cycle.

    Timing: the module docstring (kind ``"sequencer"``).
    """

    kind = "sequencer"

    def __init__(self, in_layout, out_layout, *, slices, sum_fields, build, name="sequencer"):
        if not isinstance(slices, int) or slices < 1:
            raise ValueError(f"Slice count must be a positive integer, not {slices!r}")
        self._slices = slices
        self._sum_fields = tuple(sum_fields)
        self._build = build
        self.stage_name = name
        super().__init__({"i": In(stream.Signature(in_layout)),
                          "o": Out(stream.Signature(out_layout))})

    @property
    def slices(self):
        return self._slices

    def elaborate(self, platform):
        m = Module()
        n = self._slices
        if n == 1:
            m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready)]
            parts = self._build(m, self.i.payload, Const(0, 1), self.o.payload)
            for name in self._sum_fields:
                m.d.comb += self.o.payload[name].eq(parts[name])
            return m

        index = Signal(range(n))
        last = Signal()
        m.d.comb += last.eq(index == n - 1)
        parts = self._build(m, self.i.payload, index, self.o.payload)
        for name in self._sum_fields:
            field = self.o.payload[name]
            partial = Signal(field.shape(), name=f"partial_{name}")
            m.d.comb += field.eq(partial + parts[name])
            with m.If(self.i.valid & ~last):
                m.d.sync += partial.eq(partial + parts[name])
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += partial.eq(0)
        m.d.comb += [self.o.valid.eq(self.i.valid & last),
                     self.i.ready.eq(self.o.ready & last)]
        with m.If(self.i.valid & ~last):
            m.d.sync += index.eq(index + 1)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += index.eq(0)
        return m

    def parts(self):
        """The slice counter and its increment, and one partial-sum register and adder per
        sum field (``partial + part`` feeds the output and the register: one adder); none
        with one slice. The slice logic is its ``build`` function's (:mod:`hwgen.parts`)."""
        if self._slices == 1:
            return []
        counter = (self._slices - 1).bit_length()
        out = [Part("reg", (counter,)), Part("add", (counter,))]
        layout = self.o.payload.shape()
        for name in self._sum_fields:
            width = Shape.cast(layout[name].shape).width
            out += [Part("reg", (width,)), Part("add", (width,))]
        return out


class Deserializer(wiring.Component):
    """Gather ``beats`` input transfers into one output payload (a wider datapath).

    Parameters
    ----------
    in_layout : StructLayout
        One beat.
    out_layout : StructLayout
        The gathered payload: every field of ``in_layout``; a field named in ``wide`` is
        ``beats`` times as wide (beat b at bits ``[b w, (b + 1) w)``), every other field has
        the same width and comes from the last beat.
    beats : int
        Beats per output payload (>= 1).
    wide : iterable of str
        The fields gathered over the beats.
    name : str
        Stage name (for the manifest).

    Members
    -------
    i : In(stream.Signature(in_layout))
        ``i.ready`` is high while fewer than ``beats - 1`` beats are held.
    o : Out(stream.Signature(out_layout))
        ``o.valid = i.valid`` while the last beat of a group is presented.

    Timing: the module docstring (kind ``"deserializer"``).
    """

    kind = "deserializer"

    def __init__(self, in_layout, out_layout, *, beats, wide, name="deserializer"):
        if not isinstance(beats, int) or beats < 1:
            raise ValueError(f"Beat count must be a positive integer, not {beats!r}")
        self._beats = beats
        self._wide = tuple(wide)
        self.stage_name = name
        for field_name, fld in in_layout:
            times = beats if field_name in self._wide else 1
            if out_layout[field_name].width != times * fld.width:
                raise ValueError(f"Output field {field_name!r} must have {times * fld.width} "
                                 f"bits, not {out_layout[field_name].width}")
        super().__init__({"i": In(stream.Signature(in_layout)),
                          "o": Out(stream.Signature(out_layout))})

    @property
    def beats(self):
        return self._beats

    def _held_bits(self):
        layout = self.i.payload.shape()
        return sum(layout[name].width for name in self._wide) * (self._beats - 1)

    def elaborate(self, platform):
        m = Module()
        n = self._beats
        i, o = self.i.payload, self.o.payload
        if n == 1:
            m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready)]
            for field_name, _ in i.shape():
                m.d.comb += o[field_name].eq(i[field_name])
            return m
        count = Signal(range(n))
        last = Signal()
        m.d.comb += last.eq(count == n - 1)
        for field_name, fld in i.shape():
            if field_name not in self._wide:
                m.d.comb += o[field_name].eq(i[field_name])
                continue
            w = fld.width
            held = [Signal(w, name=f"held_{field_name}_{b}", reset_less=True)
                    for b in range(n - 1)]
            for b, reg in enumerate(held):
                with m.If(self.i.valid & (count == b)):
                    m.d.sync += reg.eq(i[field_name])
            m.d.comb += o[field_name].eq(Cat(*held, i[field_name]))
        m.d.comb += [self.o.valid.eq(self.i.valid & last),
                     self.i.ready.eq(self.o.ready | ~last)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += count.eq(Mux(last, 0, count + 1))
        return m

    def parts(self):
        """The beat registers (enable, no reset) and the beat counter with its increment;
        none with one beat (:mod:`hwgen.parts`)."""
        if self._beats == 1:
            return []
        counter = (self._beats - 1).bit_length()
        return [Part("rege", (self._held_bits(),)), Part("reg", (counter,)),
                Part("add", (counter,))]


def chain(m, stages):
    """Add ``stages`` (a list of ``(name, component)``) to ``m`` and join them in order.

    Returns ``(first, last)``; connect ``wiring.flipped(self.i)`` to ``first.i`` and
    ``last.o`` to ``wiring.flipped(self.o)`` in the unit.
    """
    previous = None
    for name, stage in stages:
        m.submodules[name] = stage
        if previous is not None:
            wiring.connect(m, previous.o, stage.i)
        previous = stage
    return stages[0][1], stages[-1][1]

