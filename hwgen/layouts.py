"""Amaranth layouts of the packed blocks and unit payloads, built from :mod:`hif4spec` only.

:mod:`hif4spec.formats` states every packed field's offset, width and count, and
:mod:`hif4spec.steps` / :mod:`hif4spec.units` which blocks one step and one unit payload
hold. The golden model packs bytes from the same description and :func:`block_layout` /
:func:`payload_layout` turn it into ``lib.data`` layouts for the RTL ports, so a change to
the table reaches both. What keeps the two in agreement is this shared source plus the
tests that compare RTL and golden model bit for bit; nothing here checks it by itself.
Importing this module loads Amaranth and :mod:`hif4spec`, no quantizer.
"""

from amaranth.hdl import Shape, unsigned
from amaranth.lib import data

from hif4spec import (FORMATS, RESIDUAL24, RESIDUAL24_MXFP4, STEP_LAYOUTS, operand_layout,
                      payload_fields, residual_layout, unit_spec)

__all__ = ["block_layout", "step_layout", "payload_layout", "S1P2", "HIF4_BLOCK",
           "RES24_BLOCK", "MXFP4_BLOCK", "MXFP4_RES24_BLOCK", "NVFP4_BLOCK", "STEPS"]


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
#: One packed 2:4 HiF4 residual block, 224 bits (spec section 6); ``elem`` is named ``kept``.
RES24_BLOCK = block_layout(RESIDUAL24.layout, items={"elem": S1P2}, names={"elem": "kept"})
#: One MXFP4 block: 32 E2M1 codes, E8M0 code at [128, 136).
MXFP4_BLOCK = block_layout(FORMATS["mxfp4"].layout)
#: One packed 2:4 MXFP4 residual block (``docs/mxfp4_residual.md``): 16 kept E2M1 codes,
#: 16 2-bit positions, E8M0 code (104 bits).
MXFP4_RES24_BLOCK = block_layout(RESIDUAL24_MXFP4.layout)
#: One NVFP4 block: 16 E2M1 codes, UE4M3 code at [64, 72).
NVFP4_BLOCK = block_layout(FORMATS["nvfp4"].layout)

_BLOCKS = {"hif4": HIF4_BLOCK, "hif4-2:4": RES24_BLOCK, "mxfp4": MXFP4_BLOCK,
           "mxfp4-2:4": MXFP4_RES24_BLOCK, "nvfp4": NVFP4_BLOCK}


def step_layout(name):
    """Layout of step layout ``name`` (``hif4spec.STEP_LAYOUTS``): the block, or an
    ``ArrayLayout`` of its blocks with block 0 in the low bits."""
    lay = STEP_LAYOUTS[name]
    block = _BLOCKS[name]
    shape = block if lay.blocks == 1 else data.ArrayLayout(block, lay.blocks)
    assert Shape.cast(shape).width == lay.bits, name
    return shape


#: Step layout name -> its Amaranth layout (one 64-element step of an operand or residual).
STEPS = {name: step_layout(name) for name in STEP_LAYOUTS}


def payload_layout(unit, residual):
    """``StructLayout`` of a unit's input payload: ``hif4spec.payload_fields`` with the step
    layouts of ``a``, ``w`` and ``r`` (``first``, ``last``: one bit each), low bits first."""
    fmt = unit_spec(unit).fmt
    steps = {"a": operand_layout(fmt), "w": operand_layout(fmt),
             "r": residual_layout(fmt, residual)}
    members = {}
    for name, bits in payload_fields(unit, residual):
        members[name] = STEPS[steps[name].name] if name in steps else unsigned(bits)
        assert Shape.cast(members[name]).width == bits, (unit, residual, name)
    return data.StructLayout(members)
