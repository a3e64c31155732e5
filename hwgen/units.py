"""The generator behind every registered unit: ``hif4 generate`` / ``verify`` build through here.

The registry itself (units, residual modes, stages, lanes, defaults, the standard set,
module names) is :mod:`hif4spec.units`; this module re-exports ``UNITS``, ``all_configs``,
``standard_set`` and ``module_name`` from it and adds the Amaranth side: the builder named by
a unit's ``UnitSpec.builder`` (``"module:attribute"``, imported only when used) is a
:class:`hwgen.unit.Unit` subclass (:class:`hwgen.unit.DotUnit` for a dot unit,
:class:`hwgen.encoder.EncoderUnit` for an encoder) taking keyword-only ``residual``,
``stages``, ``lanes`` and, for a dot unit, ``accum``, and provides the interface every
consumer relies on (``hwgen.manifest`` reads it, the benches read the manifest):

* ports ``i`` (``In(stream.Signature(payload_layout))``) and ``o`` (``Out`` of a stream of
  ``output_layout``'s width: a dot unit's 32-bit FP32 word ``acc``, an encoder's ``q`` and
  ``r``); the emitted Verilog has ``clk``, ``rst``, ``i__valid``, ``i__ready``,
  ``i__payload``, ``o__valid``, ``o__ready``, ``o__payload``;
* properties ``unit`` (str), ``residual``, ``stages``, ``lanes``, ``accum`` (None for an
  encoder), ``module_name``, ``payload_layout`` and ``output_layout`` (``StructLayout`` of
  the fields of :func:`hif4spec.payload_fields` and :func:`hif4spec.output_fields`, low
  bits first), ``latency``, ``ii``, ``timing`` and ``structure`` (JSON-able, see
  ``hwgen.manifest``).

A new unit is one ``UnitSpec`` in ``hif4spec/units.py`` plus its generator.
"""

import importlib

from hif4spec import UNITS, all_configs, module_name, resolve, standard_set, unit_spec

__all__ = ["UNITS", "get_builder", "build_unit", "standard_set", "all_configs", "module_name"]


def get_builder(name):
    """The component class of unit ``name``; ``ValueError`` naming the known units."""
    module, attr = unit_spec(name).builder.split(":")
    return getattr(importlib.import_module(module), attr)


def build_unit(name, **params):
    """Build unit ``name``; a missing or None parameter takes its default.

    The parameters are checked by :func:`hif4spec.resolve` (``ValueError``, one line).
    """
    return get_builder(name)(**resolve(name, **params))
