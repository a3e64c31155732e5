"""Amaranth layouts of the packed blocks and unit payloads, built from :mod:`hif4spec` only.

:mod:`hif4spec.formats` states every packed field's offset, width and count, and
:mod:`hif4spec.steps` / :mod:`hif4spec.units` which blocks one step and one unit payload
hold. The golden model packs bytes from the same description and :func:`block_layout` /
:func:`payload_layout` turn it into ``lib.data`` layouts for the RTL ports, so a change to
the table reaches both. What keeps the two in agreement is this shared source plus the
tests that compare RTL and golden model bit for bit; nothing here checks it by itself.
A block or step layout is built from its table when first asked for (:func:`block_of`,
:func:`step_layout`), so a step layout registered in :mod:`hif4spec` needs no entry here,
and one whose table is wrong fails where it is used, not at import. Importing this module
loads Amaranth and :mod:`hif4spec`, no quantizer, and builds the HiF4 blocks the HiF4
generators name (:data:`HIF4_BLOCK`, :data:`RES24_BLOCK`).
"""

from functools import cache

from amaranth.hdl import Shape, unsigned
from amaranth.lib import data

from hif4spec import FORMATS, operand_layout, payload_fields, residual_layout, unit_spec
from hif4spec import step_layout as step_spec

__all__ = ["block_layout", "block_of", "step_layout", "payload_layout", "ELEMENT_SHAPES",
           "S1P2", "HIF4_BLOCK", "RES24_BLOCK"]


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
#: Element type (``hif4spec.ELEMENT_TYPES``) -> the Amaranth layout of one item of a block's
#: ``elem`` field, where it is not a plain bit field; every other type is ``unsigned(bits)``.
ELEMENT_SHAPES = {"S1P2": S1P2}
#: Step layout name -> field renames of its block (a HiF4 2:4 block's elements are ``kept``).
_RENAMES = {"hif4-2:4": {"elem": "kept"}}


@cache
def block_of(name):
    """``StructLayout`` of one block of step layout ``name`` (``hif4spec.STEP_LAYOUTS``),
    built from its table when first asked for; ``ValueError`` naming the known layouts."""
    spec = step_spec(name).spec
    elem_type = FORMATS[getattr(spec, "fmt", spec.name)].elem_type
    items = {"elem": ELEMENT_SHAPES[elem_type]} if elem_type in ELEMENT_SHAPES else None
    return block_layout(spec.layout, items=items, names=_RENAMES.get(name))


#: One packed HiF4 block, 288 bits (spec section 2): elements, L3, L2, E6M2.
HIF4_BLOCK = block_of("hif4")
#: One packed 2:4 HiF4 residual block, 224 bits (spec section 6); ``elem`` is named ``kept``.
RES24_BLOCK = block_of("hif4-2:4")


@cache
def step_layout(name):
    """Layout of step layout ``name`` (``hif4spec.STEP_LAYOUTS``): the block, or an
    ``ArrayLayout`` of its blocks with block 0 in the low bits."""
    lay = step_spec(name)
    block = block_of(name)
    shape = block if lay.blocks == 1 else data.ArrayLayout(block, lay.blocks)
    assert Shape.cast(shape).width == lay.bits, name
    return shape


def payload_layout(unit, residual, interleave=1):
    """``StructLayout`` of a unit's input payload: ``hif4spec.payload_fields`` with the step
    layouts of ``a``, ``w`` and ``r`` (``first``, ``last``: one bit each; ``acc_id`` of an
    interleaved unit), low bits first."""
    fmt = unit_spec(unit).fmt
    steps = {"a": operand_layout(fmt), "w": operand_layout(fmt),
             "r": residual_layout(fmt, residual)}
    members = {}
    for name, bits in payload_fields(unit, residual, interleave=interleave):
        members[name] = step_layout(steps[name].name) if name in steps else unsigned(bits)
        assert Shape.cast(members[name]).width == bits, (unit, residual, name)
    return data.StructLayout(members)
