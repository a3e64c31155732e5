"""Deterministic Verilog emission and file writing for generated units.

``emit_verilog(unit)`` returns the Verilog text of a unit (``unit.module_name`` is the top
module name) with no source locations, absolute paths or timestamps, so the text depends
only on the unit's parameters and the Amaranth/Yosys versions. ``write_unit(unit, out_dir)``
writes ``<module>.v`` and ``<module>.json`` (see ``hwgen.manifest``) and returns the paths.
"""

from pathlib import Path

from amaranth.back import verilog

from .manifest import manifest_text

__all__ = ["emit_verilog", "write_unit", "unit_files"]


def emit_verilog(unit):
    """The unit's Verilog source (str), deterministic."""
    text = verilog.convert(unit, name=unit.module_name, emit_src=False)
    lines = [line.rstrip() for line in text.splitlines()]
    return "\n".join(lines) + "\n"


def unit_files(unit):
    """``{filename: text}`` for the unit: its Verilog and its manifest."""
    return {f"{unit.module_name}.v": emit_verilog(unit),
            f"{unit.module_name}.json": manifest_text(unit)}


def write_unit(unit, out_dir, *, opener=None):
    """Write the unit's files into ``out_dir``; ``opener(path)`` may give an atomic writer.

    Returns the list of written paths.
    """
    out_dir = Path(out_dir)
    paths = []
    for name, text in unit_files(unit).items():
        path = out_dir / name
        if opener is None:
            path.write_bytes(text.encode())
        else:
            with opener(path) as handle:
                handle.write(text.encode())
        paths.append(path)
    return paths
