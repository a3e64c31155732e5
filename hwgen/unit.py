"""What every unit shares, whatever its kind or format.

:class:`Unit` is the base of every unit, dot-product unit (:class:`DotUnit`) or encoder
(:class:`hwgen.encoder.EncoderUnit`): it checks the parameters against the registry with
:func:`hif4spec.check_params` (one check, one set of messages) and exposes what
:mod:`hwgen.manifest`, the registry and the tests read: ``unit``, ``residual``, ``stages``,
``lanes``, ``accum``, ``payload_layout``, ``output_layout``, ``ii``, ``latency``,
``module_name``, ``timing`` and ``structure``. :class:`DotUnit` builds the input payload
from the step layouts (:func:`hwgen.layouts.payload_layout`) and chains the dot units'
pipeline plan. :func:`adder_tree` is the one adder tree of the front ends.
"""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hif4spec import (ACC_FIELD, DEFAULTS, STEP_ELEMS, acc_id_bits, check_params,
                      default_accum, module_name, output_fields)

from .accum import Accumulator, accum_layout
from .backend import make_adder
from .layouts import payload_layout
from .parts import entries, probe
from .ring import Ring
from .stream import Map, Register, Sequencer, chain

__all__ = ["Unit", "DotUnit", "adder_tree"]


def adder_tree(values, *, m=None, name=None):
    """Exact sum of signed ``values`` by a balanced tree of two-input adders.

    Pairs are ``(0, 1), (2, 3), ...`` with an odd last value passed up a level; each adder
    is one bit wider than its wider input, so no sum overflows. With ``m`` and ``name``
    every adder output is a signal ``<name>_l<level>_<pair>`` of ``m`` and the root a
    signal ``<name>``; without them the tree is one expression.
    """
    level, depth = list(values), 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            total = level[i] + level[i + 1]
            if name is not None:
                width = max(len(level[i]), len(level[i + 1])) + 1
                s = Signal(signed(width), name=f"{name}_l{depth}_{i // 2}")
                m.d.comb += s.eq(total)
                total = s
            nxt.append(total)
        if len(level) % 2:
            nxt.append(level[-1])
        level, depth = nxt, depth + 1
    if name is None:
        return level[0]
    root = Signal(signed(len(level[0])), name=name)
    m.d.comb += root.eq(level[0])
    return root


class Unit(wiring.Component):
    """Base of every unit: the parameters, checked once, and the members every unit has.

    Parameters (keyword-only)
    -------------------------
    residual : str
        A residual mode the unit accepts (``hif4spec.residuals_of(unit)``): a dot unit's
        residual input, an encoder's residual output.
    stages : int
        Pipeline depth (``hif4spec.STAGES`` says what it counts in each kind).
    lanes : int
        Elements per cycle (``hif4spec.LANES``): a 64-element step or group takes
        ``64 // lanes`` cycles.
    accum : str
        A dot unit's accumulator back end (``hif4spec.accums_of(unit)``,
        :mod:`hwgen.backend`); None: the unit's default one (``hif4spec.default_accum``).
        An encoder has none and takes only None.
    interleave : int
        A dot unit's accumulators (``hif4spec.INTERLEAVES``): more than one makes its
        accumulator a :class:`hwgen.ring.Ring`. An encoder takes only 1.

    A bad parameter raises ``ValueError`` with the one-line message of
    :func:`hif4spec.check_params`.

    Members
    -------
    i : In(stream.Signature(payload_layout))
        The input payload (:func:`hif4spec.payload_fields`).
    o : Out(stream.Signature(...))
        The output payload, laid out as ``output_layout`` (:func:`hif4spec.output_fields`).

    A unit kind implements ``_payload_layout()`` (called once the parameters are stored),
    ``_plan()`` (``[(name, description, factory)]`` of its stream stages, input to output),
    ``latency`` and ``structure``, and may override ``_output_shape()`` (the shape of ``o``'s
    payload, ``output_layout`` unless overridden); a format's unit sets ``unit``, its
    registry name.
    """

    unit = None

    def __init__(self, *, residual=DEFAULTS["residual"], stages=DEFAULTS["stages"],
                 lanes=DEFAULTS["lanes"], accum=None, interleave=1):
        if accum is None:
            accum = default_accum(self.unit, residual)
        check_params(self.unit, residual, stages, lanes, accum, interleave)
        self._residual, self._stages, self._lanes = residual, stages, lanes
        self._accum, self._interleave = accum, interleave
        self._output = data.StructLayout(dict(output_fields(self.unit, residual)))
        self._payload = self._payload_layout()
        super().__init__({"i": In(stream.Signature(self._payload)),
                          "o": Out(stream.Signature(self._output_shape()))})

    residual = property(lambda self: self._residual)
    stages = property(lambda self: self._stages)
    lanes = property(lambda self: self._lanes)
    accum = property(lambda self: self._accum)
    interleave = property(lambda self: self._interleave)
    payload_layout = property(lambda self: self._payload)
    output_layout = property(lambda self: self._output)

    def _payload_layout(self):
        raise NotImplementedError

    def _output_shape(self):
        return self._output

    def _plan(self):
        raise NotImplementedError

    @property
    def ii(self):
        """Cycles per step or group, ``64 // lanes``."""
        return STEP_ELEMS // self._lanes

    @property
    def module_name(self):
        return module_name(self.unit, self._residual, self._stages, self._lanes, self._accum,
                           self._interleave)

    @property
    def timing(self):
        """The stage chain as the manifest records it (``timing.pipeline``)."""
        return {"pipeline": [{"stage": name, **desc} for name, desc, _ in self._plan()]}


class DotUnit(Unit):
    """Base of the HiF4, MXFP4 and NVFP4 dot-product units.

    Parameters (keyword-only): those of :class:`Unit`. ``stages`` counts the pipeline
    registers on the path from ``i`` to ``o``: the accumulator register; ``>= 2`` a register
    on the terms; ``>= 3`` a register after the front end; ``4`` a register on the input
    payload.

    Members
    -------
    i : In(stream.Signature(payload_layout))
        Steps: ``a``, ``w``, ``r`` (if a residual), ``first``, ``last``.
    o : Out(stream.Signature(32))
        The FP32 accumulator word after each ``last`` step (``output_layout``: ``acc``).

    Pipeline plan, input to output: ``input_reg`` (``stages == 4``), ``front`` (a
    :class:`hwgen.stream.Sequencer` of ``64 // lanes`` slices running :meth:`_front`), the
    front-end register (``stages >= 3``, named by ``_front_reg``), ``terms`` (a
    :class:`hwgen.stream.Map` running ``_form``, only where the front end delivers block
    sums rather than terms), ``terms_reg`` (``stages >= 2``) and ``acc``
    (:class:`hwgen.accum.Accumulator`). Its timing (``ii``, ``latency``, the handshakes) is
    stated once, in :mod:`hwgen.stream`.

    A format's unit sets ``unit`` (its registry name) and implements ``_terms()`` (the
    :class:`hwgen.accum.TermSpec` list), ``_sum_fields()`` and ``_front(m, payload, index,
    out)`` (one slice: a :class:`hwgen.stream.Sequencer` build function); it may override
    ``_front_layout()`` and set ``_form``; a unit with two terms whose exponent fields
    never differ by more than a bound sets ``_max_exp_diff`` (the bounded back end pre-adds
    them).
    """

    #: Name of the register after the front end.
    _front_reg = "front_reg"
    #: ``form(m, front_payload, terms_payload)`` of the ``terms`` stage, or None.
    _form = None
    #: Bound on the difference of two terms' exponent fields, or None.
    _max_exp_diff = None

    def _payload_layout(self):
        self._term_specs = tuple(self._terms())
        return payload_layout(self.unit, self._residual, self._interleave)

    def _output_shape(self):
        return self._output.size

    terms = property(lambda self: self._term_specs)

    @property
    def latency(self):
        """Rising edges from the input transfer of a ``last`` step to ``o.valid``; an
        interleaved unit's ring adds ``interleave - 1`` and its stages ahead of the
        accumulator's join, ``prep`` (the least: a step may wait for its turn)."""
        base = self._stages if self._stages <= 3 else self._stages - 1 + self.ii
        if self._interleave == 1:
            return base
        return base + self._interleave - 1 + probe(self._accumulator()).prep

    @property
    def structure(self):
        """What the unit is built from, stage by stage: the manifest's ``structure`` entries
        (:func:`hwgen.parts.entries`). A register stage's parts are in block
        ``pipe.<stage>``, the accumulator's in ``accum.<sub-block>``, the front end's (one
        slice, ``_front_parts()``, and the sequencer's own) in ``front`` and the ``terms``
        stage's (``_form_parts()``) in ``terms``."""
        out = []
        for name, desc, make in self._plan():
            stage, kind = probe(make()), desc["kind"]
            if kind == Register.kind:
                out += entries(f"pipe.{name}", stage.parts())
            elif kind in (Accumulator.kind, Ring.kind):
                out += entries("accum", stage.parts())
            elif kind == Sequencer.kind:
                out += entries(name, self._front_parts() + stage.parts())
            else:
                out += entries(name, self._form_parts())
        return out

    def _front_layout(self):
        """Output layout of the front end: the accumulator's terms unless ``_form`` is set."""
        return accum_layout(self._term_specs)

    def _with_id(self, layout):
        """``layout`` with :data:`hif4spec.ACC_FIELD` last where the unit interleaves."""
        if self._interleave == 1:
            return layout
        return data.StructLayout({**dict(layout.members),
                                  ACC_FIELD: acc_id_bits(self._interleave)})

    def _front_build(self, m, payload, index, out):
        """:meth:`_front`, the step's accumulator passed on where the unit interleaves."""
        parts = self._front(m, payload, index, out)
        if self._interleave != 1:
            m.d.comb += out[ACC_FIELD].eq(payload[ACC_FIELD])
        return parts

    def _form_build(self, m, payload, out):
        """``_form``, the step's accumulator passed on where the unit interleaves."""
        self._form(m, payload, out)
        if self._interleave != 1:
            m.d.comb += out[ACC_FIELD].eq(payload[ACC_FIELD])

    def _plan(self):
        """``[(name, description, factory)]`` of the stream stages, input to output."""
        terms = self._with_id(accum_layout(self._term_specs))
        front = self._with_id(self._front_layout())
        n = self.ii
        register = {"kind": Register.kind}
        plan = []
        if self._stages >= 4:
            plan.append(("input_reg", register, lambda: Register(self._payload)))
        plan.append(("front", {"kind": Sequencer.kind, "slices": n},
                     lambda: Sequencer(self._payload, front, slices=n,
                                       sum_fields=self._sum_fields(), build=self._front_build,
                                       name="front")))
        if self._stages >= 3:
            plan.append((self._front_reg, register, lambda: Register(front)))
        if self._form is not None:
            plan.append(("terms", {"kind": Map.kind},
                         lambda: Map(front, terms, self._form_build, name="terms")))
        if self._stages >= 2:
            plan.append(("terms_reg", register, lambda: Register(terms)))
        acc = self._accumulator
        kind = Accumulator.kind if self._interleave == 1 else Ring.kind
        plan.append(("acc", {"kind": kind, **probe(acc()).describe()}, acc))
        return plan

    def _accumulator(self):
        """The accumulator stage, with the unit's back end: an
        :class:`hwgen.accum.Accumulator`, or a :class:`hwgen.ring.Ring` of ``interleave``
        accumulators."""
        if self._interleave == 1:
            return Accumulator(self._term_specs, lambda: make_adder(
                self._accum, self._term_specs, self._max_exp_diff))
        return Ring(self._term_specs, lambda cuts: make_adder(
            self._accum, self._term_specs, self._max_exp_diff, cuts), self._interleave)

    def elaborate(self, platform):
        m = Module()
        first, last = chain(m, [(name, make()) for name, _, make in self._plan()])
        wiring.connect(m, wiring.flipped(self.i), first.i)
        wiring.connect(m, last.o, wiring.flipped(self.o))
        return m
