"""Amaranth layouts of the packed blocks, built from the one format table.

``sim/formats/table.py`` (pure Python, no simulator code) states every packed field's offset,
width and count; the golden model packs bytes from it and :func:`block_layout` turns the same
description into a ``lib.data.StructLayout`` for the RTL ports, so the two cannot drift.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

from sim.formats.table import FORMATS, RESIDUAL24

__all__ = ["block_layout", "S1P2", "HIF4_BLOCK", "RES24_BLOCK", "MXFP4_BLOCK", "NVFP4_BLOCK"]


def block_layout(fields, *, items=None, names=None):
    """``StructLayout`` of a table layout (a tuple of ``FieldLayout``, low bits first).

    A field of one item is ``unsigned(width)``, a field of one-bit items a bit vector
    ``unsigned(count)``, any other an ``ArrayLayout`` of ``items.get(name, width)``.
    ``names`` renames fields. The fields must tile the block without gaps.
    """
    items, names = items or {}, names or {}
    members, at = {}, 0
    for f in fields:
        if f.offset != at:
            raise ValueError(f"Field {f.name!r} starts at bit {f.offset}, not {at}")
        if f.name in items:
            shape = data.ArrayLayout(items[f.name], f.count)
        elif f.count == 1 or f.width == 1:
            shape = unsigned(f.bits)
        else:
            shape = data.ArrayLayout(unsigned(f.width), f.count)
        members[names.get(f.name, f.name)] = shape
        at = f.end
    return data.StructLayout(members)


#: A HiF4 element: bits 2..0 = k, bit 3 = sign.
S1P2 = data.StructLayout({"k": 3, "s": 1})
#: One packed HiF4 block, 288 bits (spec section 2): elements, L3, L2, E6M2.
HIF4_BLOCK = block_layout(FORMATS["hif4"].layout, items={"elem": S1P2})
#: One packed 2:4 HiF4 residual block, 224 bits (spec section 6).
RES24_BLOCK = block_layout(RESIDUAL24.layout, items={"elem": S1P2}, names={"elem": "kept"})
#: One MXFP4 block: 32 E2M1 codes, E8M0 code at [128, 136).
MXFP4_BLOCK = block_layout(FORMATS["mxfp4"].layout)
#: One NVFP4 block: 16 E2M1 codes, UE4M3 code at [64, 72).
NVFP4_BLOCK = block_layout(FORMATS["nvfp4"].layout)
