"""Deterministic Verilog emission for generated units.

``emit_verilog(unit)`` returns the Verilog text of a unit (``unit.module_name`` is the top
module name; a unit may list its ports with ``verilog_ports()``, see
:meth:`hwgen.encoder.EncoderUnit.verilog_ports`) with no source locations, absolute paths
or timestamps, so the text depends only on the unit's parameters and the Amaranth/Yosys
versions. ``unit_files(unit)`` gives the text of ``<module>.v`` and ``<module>.json`` (see
``hwgen.manifest``); the callers (``hif4 generate``, the bench cache) write them.
"""

from amaranth.back import verilog

from .manifest import manifest_text

__all__ = ["emit_verilog", "unit_files"]


def emit_verilog(unit):
    """The unit's Verilog source (str), deterministic."""
    ports = getattr(unit, "verilog_ports", lambda: None)()
    extra = {} if ports is None else {"ports": ports}
    text = verilog.convert(unit, name=unit.module_name, emit_src=False, **extra)
    lines = [line.rstrip() for line in text.splitlines()]
    return "\n".join(lines) + "\n"


def unit_files(unit):
    """``{filename: text}`` for the unit: its Verilog and its manifest."""
    return {f"{unit.module_name}.v": emit_verilog(unit),
            f"{unit.module_name}.json": manifest_text(unit)}

