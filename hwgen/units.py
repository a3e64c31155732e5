"""Registry of dot-product units: unit name -> builder, for ``hif4 generate`` / ``verify``.

A builder is a class (or callable) taking keyword-only parameters ``residual``, ``stages``,
``lanes`` and returning an Amaranth ``wiring.Component`` that provides the unit interface
every consumer relies on (``hwgen.manifest`` reads it, the cocotb bench reads the manifest):

* ports ``i`` (``In(stream.Signature(payload_layout))``) and ``o``
  (``Out(stream.Signature(32))``); the emitted Verilog has ``clk``, ``rst``, ``i__valid``,
  ``i__ready``, ``i__payload``, ``o__valid``, ``o__ready``, ``o__payload``;
* properties ``unit`` (str), ``residual``, ``stages``, ``lanes``, ``module_name``,
  ``payload_layout`` (a ``StructLayout``: ``a``, ``w``, ``r`` if present, ``first``,
  ``last``, low bits first), ``latency``, ``ii`` and ``timing`` (a JSON-able dict, see
  ``hwgen.manifest``).

Register a unit with one line, e.g.::

    register(UnitInfo("mxfp4", "hwgen.mxfp4:MXFP4DotUnit", residuals=("none", "2:4")))

The builder is given as ``"module:attribute"`` and imported only when used.
"""

import importlib
from dataclasses import dataclass, field

__all__ = ["UnitInfo", "UNITS", "register", "get_builder", "build_unit", "standard_set",
           "all_configs", "module_name"]


@dataclass(frozen=True)
class UnitInfo:
    """One registered unit.

    Attributes
    ----------
    name : str
        Unit name as given to ``--unit`` (the format name).
    builder : str
        ``"module:attribute"`` of the component class.
    residuals : tuple of str
        Residual modes the unit supports.
    standard : tuple of dict
        Parameter sets written by ``hif4 generate --all`` (missing keys take defaults).
    defaults : dict
        Default parameters (``stages``, ``lanes``, ``residual``).
    """

    name: str
    builder: str
    residuals: tuple = ("none",)
    standard: tuple = ({"residual": "none"},)
    defaults: dict = field(default_factory=lambda: {"residual": "none", "stages": 3,
                                                    "lanes": 64})


UNITS = {}


def register(info):
    """Add ``info`` to the registry (a second registration of a name replaces the first)."""
    UNITS[info.name] = info
    return info


def get_builder(name):
    """The component class of unit ``name``; ``KeyError`` with the known names."""
    try:
        info = UNITS[name]
    except KeyError:
        raise KeyError(f"Unknown unit {name!r}; known units: {', '.join(sorted(UNITS))}") \
            from None
    module, attr = info.builder.split(":")
    return getattr(importlib.import_module(module), attr)


def build_unit(name, **params):
    """Build unit ``name`` with ``params`` completed from its defaults."""
    full = dict(UNITS[name].defaults) if name in UNITS else {}
    full.update({k: v for k, v in params.items() if v is not None})
    return get_builder(name)(**full)


def standard_set():
    """``[(unit, params), ...]`` written by ``hif4 generate --all``, in a fixed order."""
    out = []
    for name in sorted(UNITS):
        info = UNITS[name]
        for params in info.standard:
            full = dict(info.defaults)
            full.update(params)
            out.append((name, full))
    return out


def all_configs():
    """Every configuration a generator accepts, ``[(unit, residual, stages, lanes), ...]``.

    The full grid unit x residual x stages x lanes, in a fixed order (units by name, then
    their residual modes as registered, then stages and lanes ascending).
    """
    from .unit import LANES, STAGES

    return [(name, residual, stages, lanes) for name in sorted(UNITS)
            for residual in UNITS[name].residuals for stages in STAGES for lanes in LANES]


def module_name(unit, residual, stages, lanes):
    """Verilog module name, e.g. ``hif4_dot_r24_s3_l64`` (``rnone``, ``r24``, ``rdense``)."""
    tag = {"none": "rnone", "2:4": "r24", "dense": "rdense"}[residual]
    return f"{unit}_dot_{tag}_s{stages}_l{lanes}"


register(UnitInfo("hif4", "hwgen.hif4:HiF4DotUnit", residuals=("none", "2:4", "dense"),
                  standard=({"residual": "none"}, {"residual": "2:4"})))
register(UnitInfo("mxfp4", "hwgen.mxfp4:MXFP4DotUnit", residuals=("none", "2:4", "dense"),
                  standard=({"residual": "none"}, {"residual": "2:4"})))
register(UnitInfo("nvfp4", "hwgen.nvfp4:NVFP4DotUnit", residuals=("none",)))
