"""Quantizer cores, the datapaths the encoder units (:mod:`hwgen.encoder`) wrap.

A core computes one encoder's output for one whole 64-element group: a plain object whose
``stages`` is a list of ``(name, component)`` in datapath order. Every component is
combinational with ports ``i`` and ``o`` (``data.StructLayout`` views); stage k's ``o``
layout is stage k + 1's ``i`` layout; ``parts()`` counts what it builds
(:mod:`hwgen.parts`). The first stage takes the group's input beat fields gathered (``x``,
and ``t`` for NVFP4), the last gives the encoder's output fields (``q``, and ``r`` with a
residual): :func:`hif4spec.payload_fields` and :func:`hif4spec.output_fields`.

:class:`QuantizerCore` is the base of the cores: it takes the residual mode, keyword-only,
and checks it with :func:`hif4spec.check_residual` against its encoder's registry entry.
:class:`CoreChain` chains a core's stages in one combinational component with the same
ports, ``i`` and ``o``.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hif4spec import check_residual

__all__ = ["QuantizerCore", "CoreChain"]


class QuantizerCore:
    """Base of the quantizer cores.

    Parameters (keyword-only)
    -------------------------
    residual : str
        The residual step emitted beside the operand step, a mode the encoder ``unit``
        accepts (``hif4spec.residuals_of(unit)``); ``ValueError`` otherwise.

    A core sets ``unit`` (the registry name of its encoder) and provides ``stages`` and
    ``parts()`` (module docstring).
    """

    unit = None

    def __init__(self, *, residual="none"):
        check_residual(self.unit, residual)
        self.residual = residual

    def parts(self):
        """Every stage's parts."""
        return [p for _, stage in self.stages for p in stage.parts()]


class CoreChain(wiring.Component):
    """All stages of ``core`` chained combinationally in one component (tests, formal checks).

    Members
    -------
    i : In(first stage's ``i`` layout)
    o : Out(last stage's ``o`` layout)
    """

    def __init__(self, core):
        self.core = core
        self._stages = stages = list(core.stages)
        for (_, a), (_, b) in zip(stages, stages[1:]):
            assert a.o.shape() == b.i.shape(), (a, b)
        super().__init__({"i": In(stages[0][1].i.shape()), "o": Out(stages[-1][1].o.shape())})

    residual = property(lambda self: self.core.residual)

    @property
    def stages(self):
        """The chained stages, ``[(name, component)]``."""
        return self._stages

    def parts(self):
        return self.core.parts()

    def elaborate(self, platform):
        m = Module()
        prev = self.i
        for name, stage in self._stages:
            m.submodules[name] = stage
            m.d.comb += stage.i.eq(prev)
            prev = stage.o
        m.d.comb += self.o.eq(prev)
        return m
