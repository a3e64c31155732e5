"""What every dot-product unit exposes, whatever its format.

:class:`DotUnit` holds the parameters and the numbers derived from them that
:mod:`hwgen.manifest`, the registry and the tests read: ``residual``, ``stages``, ``lanes``,
``payload_layout``, ``terms``, ``ii``, ``latency``, ``module_name`` and ``timing``. A format's
unit sets ``_residual``, ``_stages``, ``_lanes``, ``_payload`` and ``_term_specs`` before
calling ``super().__init__(signature)`` and implements ``_plan()``, the list of
``(name, description, factory)`` stream stages from input to output.
"""

from amaranth.lib import wiring

__all__ = ["DotUnit", "STAGES", "LANES", "check_stages_lanes"]

#: Pipeline register counts every unit accepts (``stages``).
STAGES = (1, 2, 3, 4)
#: Element products per cycle every unit accepts (``lanes``); a step is 64 elements.
LANES = (16, 32, 64)


def check_stages_lanes(stages, lanes):
    """Raise ``ValueError`` with a one-line message unless ``stages``/``lanes`` are valid."""
    if isinstance(stages, bool) or not isinstance(stages, int) or stages not in STAGES:
        raise ValueError(f"Stage count must be an integer from {STAGES[0]} to {STAGES[-1]}, "
                         f"not {stages!r}")
    if isinstance(lanes, bool) or lanes not in LANES:
        raise ValueError(f"Lane count must be one of {', '.join(map(str, LANES))}, "
                         f"not {lanes!r}")


class DotUnit(wiring.Component):
    """Base of the HiF4, MXFP4 and NVFP4 units (see the module docstring)."""

    residual = property(lambda self: self._residual)
    stages = property(lambda self: self._stages)
    lanes = property(lambda self: self._lanes)
    payload_layout = property(lambda self: self._payload)
    terms = property(lambda self: self._term_specs)

    @property
    def ii(self):
        """Cycles per step, ``64 // lanes``."""
        return 64 // self._lanes

    @property
    def latency(self):
        """Rising edges from the input transfer of a ``last`` step to ``o.valid``."""
        return self._stages if self._stages <= 3 else self._stages - 1 + self.ii

    @property
    def module_name(self):
        from .units import module_name

        return module_name(self.unit, self._residual, self._stages, self._lanes)

    @property
    def timing(self):
        """The stage chain as the manifest records it (``timing.pipeline``)."""
        return {"pipeline": [{"stage": name, **desc} for name, desc, _ in self._plan()]}

    def _plan(self):
        raise NotImplementedError
