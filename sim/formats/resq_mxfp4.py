"""Packed 2:4 MXFP4 residual (``docs/mxfp4_residual.md``, ``hif4spec.RESIDUAL24_MXFP4``).

Rollout-ResQ (spec section 6) applies to MXFP4 as to HiF4: ``resq(x, "mxfp4", "2:4")`` gives
the residual ``R = Q(dX)`` as an MXFP4 tensor whose dropped elements have code 0, two kept
per micro-group of 4 positions. This module packs that residual the way the HiF4 2:4
residual is packed: only the kept elements (E2M1 codes) and their 2-bit positions, plus the
residual's own E8M0 scale, per 32-position MXFP4 block (the layout is
``hif4spec.RESIDUAL24_MXFP4``, the step ``hif4spec.STEP_LAYOUTS["mxfp4-2:4"]``):

======================  ==========================================================
bits                    field
======================  ==========================================================
[4j, 4j+4), j = 0..15   kept element j (E2M1); it belongs to micro-group j // 2
[64+2j, 66+2j)          position p_j (0..3) of kept element j in its micro-group
[96, 104)               E8M0 code of the residual block
======================  ==========================================================

104 bits = 13 bytes per block; one 64-element dot-product step carries two such blocks
(block 0 in the low 104 bits, 208 bits in all), so a step has two E8M0 residual scales per 64
positions. Kept element j contributes at block position ``4 * (j // 2) + p_j``; two kept
elements on one position both contribute (decoders accept any positions, the encoder writes
the two positions of a micro-group distinct and ascending).

Field arrays (NumPy): ``elem`` uint8 (*lead, nb, 16), ``pos`` uint8 (*lead, nb, 16),
``scale`` uint8 (*lead, nb); at step level ``elem`` (S, 2, 16), ``pos`` (S, 2, 16),
``scale`` (S, 2).

:mod:`sim.dot` evaluates the residual's step terms by expanding the kept elements to their
positions, as it does for the HiF4 2:4 residual.
"""

import numpy as np

from hif4spec import RESIDUAL24_MXFP4, STEP_LAYOUTS

from . import packing
from .codecs import E2M1_VALUES, E8M0_VALUES

__all__ = [
    "RESIDUAL24_MXFP4_LAYOUT",
    "RESIDUAL24_MXFP4_BLOCK_BITS",
    "RESIDUAL24_MXFP4_BLOCK_BYTES",
    "RESIDUAL24_MXFP4_STEP_BITS",
    "pack_24_mxfp4",
    "unpack_24_mxfp4",
    "decode_24_mxfp4",
    "residual24_mxfp4_to_bytes",
    "residual24_mxfp4_from_bytes",
    "pack_step_r24_mxfp4",
    "unpack_step_r24_mxfp4",
    "pack_steps_r24",
    "unpack_steps_r24",
]

#: Packed fields of one 32-position residual block, low bits first (from the spec).
RESIDUAL24_MXFP4_LAYOUT = RESIDUAL24_MXFP4.layout
RESIDUAL24_MXFP4_BLOCK_BITS = RESIDUAL24_MXFP4.block_bits
RESIDUAL24_MXFP4_BLOCK_BYTES = RESIDUAL24_MXFP4.block_bytes
#: One dot-product step: two residual blocks, block 0 in the low bits.
_STEP = STEP_LAYOUTS["mxfp4-2:4"]
RESIDUAL24_MXFP4_STEP_BITS = _STEP.bits

_BLOCK = RESIDUAL24_MXFP4.positions                     # positions per block
_KEPT = RESIDUAL24_MXFP4.kept                           # kept elements per block
_GROUP = 1 << RESIDUAL24_MXFP4.fields["pos"].width      # positions per micro-group
_PER = _KEPT * _GROUP // _BLOCK                         # kept per micro-group


def _fields_of(residual):
    fields = getattr(residual, "fields", residual)
    fmt = getattr(residual, "fmt", RESIDUAL24_MXFP4.fmt)
    if fmt != RESIDUAL24_MXFP4.fmt:
        raise ValueError(f"the MXFP4 2:4 residual packs an mxfp4 tensor, not {fmt!r}")
    try:
        elem = np.asarray(fields["elem"])
        scale = np.asarray(fields["scale"])
    except (KeyError, TypeError):
        raise ValueError("expected MXFP4 fields 'elem' (*lead, nb, 32) and 'scale' "
                         "(*lead, nb)") from None
    if elem.shape[-1:] != (_BLOCK,) or elem.shape[:-1] != scale.shape:
        raise ValueError(f"MXFP4 fields must be elem (*lead, nb, 32) and scale (*lead, nb), "
                         f"not {elem.shape} and {scale.shape}")
    return elem.astype(np.uint8), scale.astype(np.uint8)


def pack_24_mxfp4(residual):
    """Pack a 2:4-sparse MXFP4 residual into kept elements, positions and scales.

    Parameters
    ----------
    residual : QuantizedTensor or dict
        MXFP4 residual with dropped elements' codes zeroed (``resq(x, "mxfp4", "2:4")
        .residual``), or its ``fields`` dict.

    Returns
    -------
    dict
        ``elem`` uint8 (*lead, nb, 16), ``pos`` uint8 (*lead, nb, 16), ``scale`` uint8
        (*lead, nb). In each micro-group the kept positions are those with a nonzero code,
        completed by the lowest zero-code positions, written ascending.

    Raises
    ------
    ValueError
        When a micro-group holds more than two nonzero codes (not a 2:4 residual).
    """
    elem, scale = _fields_of(residual)
    groups = elem.reshape(*elem.shape[:-1], _BLOCK // _GROUP, _GROUP)
    nonzero = groups != 0
    if (nonzero.sum(axis=-1) > _PER).any():
        raise ValueError(f"a micro-group of {_GROUP} positions holds more than {_PER} nonzero "
                         "codes; pack only a 2:4-sparsified residual (resq(..., '2:4').residual)")
    # nonzero codes first, then the lowest positions; the picks written ascending
    key = np.where(nonzero, 0, _GROUP) + np.arange(_GROUP, dtype=np.int64)
    pick = np.sort(np.argsort(key, axis=-1, kind="stable")[..., :_PER], axis=-1)
    kept = np.take_along_axis(groups, pick, axis=-1)
    return {
        "elem": kept.reshape(*elem.shape[:-1], _KEPT).astype(np.uint8),
        "pos": pick.reshape(*elem.shape[:-1], _KEPT).astype(np.uint8),
        "scale": scale.copy(),
    }


def _packed_fields(fields):
    try:
        elem = np.asarray(fields["elem"]).astype(np.uint8)
        pos = np.asarray(fields["pos"]).astype(np.uint8)
        scale = np.asarray(fields["scale"]).astype(np.uint8)
    except (KeyError, TypeError):
        raise ValueError("expected packed residual fields 'elem', 'pos' (*lead, nb, 16) and "
                         "'scale' (*lead, nb)") from None
    if elem.shape != pos.shape or elem.shape[-1:] != (_KEPT,) or elem.shape[:-1] != scale.shape:
        raise ValueError(f"packed MXFP4 2:4 residual fields must be elem and pos (*lead, nb, "
                         f"16) and scale (*lead, nb), not {elem.shape}, {pos.shape}, "
                         f"{scale.shape}")
    if (elem >> RESIDUAL24_MXFP4.fields["elem"].width).any() or (pos >= _GROUP).any():
        raise ValueError(f"elem codes must be 0..{(1 << RESIDUAL24_MXFP4.fields['elem'].width) - 1}"
                         f" and positions 0..{_GROUP - 1}")
    return elem, pos, scale


def _positions(pos):
    return _GROUP * (np.arange(_KEPT) // _PER) + pos.astype(np.int64)


def unpack_24_mxfp4(fields):
    """Scatter packed kept elements back into MXFP4 fields ``elem`` (*lead, nb, 32), ``scale``.

    Raises ValueError when two kept elements of a micro-group share a position (their sum
    is not an E2M1 code; use :func:`decode_24_mxfp4` for values).
    """
    elem, pos, scale = _packed_fields(fields)
    where = _positions(pos)
    pairs = np.sort(where.reshape(*where.shape[:-1], _KEPT // _PER, _PER), axis=-1)
    if (np.diff(pairs, axis=-1) == 0).any():
        raise ValueError("two kept elements share a position; unpack_24_mxfp4 cannot merge "
                         "them into one code (decode_24_mxfp4 gives their summed values)")
    out = np.zeros((*elem.shape[:-1], _BLOCK), dtype=np.uint8)
    np.put_along_axis(out, where, elem, axis=-1)
    return {"elem": out, "scale": scale.copy()}


def decode_24_mxfp4(fields):
    """Values (float64, exact) of a packed residual, shape (*lead, nb, 32).

    Two kept elements on one position add; a NaN scale (255) makes the block NaN.
    """
    elem, pos, scale = _packed_fields(fields)
    where = _positions(pos)
    values = np.zeros((*elem.shape[:-1], _BLOCK), dtype=np.float64)
    lead = np.indices(elem.shape[:-1])
    idx = tuple(np.broadcast_to(ix[..., None], elem.shape) for ix in lead) + (where,)
    np.add.at(values, idx, E2M1_VALUES[elem])        # sums of halves: exact
    return values * E8M0_VALUES[scale][..., None]


def residual24_mxfp4_to_bytes(fields):
    """Serialize packed residual fields: 13 bytes per block, blocks in C order, little-endian."""
    elem, pos, scale = _packed_fields(fields)
    flat = {"elem": elem.reshape(-1, _KEPT), "pos": pos.reshape(-1, _KEPT),
            "scale": scale.reshape(-1)}
    return packing.pack(RESIDUAL24_MXFP4, flat).tobytes()


def residual24_mxfp4_from_bytes(data, blocks_shape):
    """Parse :func:`residual24_mxfp4_to_bytes` output into fields of shape ``blocks_shape``.

    ``blocks_shape`` is (*lead, nb). A byte string of the wrong length is a ValueError.
    """
    blocks_shape = tuple(int(n) for n in blocks_shape)
    count = int(np.prod(blocks_shape, dtype=np.int64))
    need = count * RESIDUAL24_MXFP4_BLOCK_BYTES
    if len(data) != need:
        raise ValueError(f"packed MXFP4 2:4 residual of {count} blocks takes {need} bytes "
                         f"({RESIDUAL24_MXFP4_BLOCK_BYTES} per block), got {len(data)}")
    raw = np.frombuffer(bytes(data), dtype=np.uint8).reshape(count, RESIDUAL24_MXFP4_BLOCK_BYTES)
    f = packing.unpack(RESIDUAL24_MXFP4, raw)
    return {k: v.reshape(blocks_shape + v.shape[1:]) for k, v in f.items()}


def pack_step_r24_mxfp4(step):
    """One step's residual fields (elem (2, 16), pos (2, 16), scale (2,)) -> 208-bit int."""
    return pack_steps_r24({k: np.asarray(v)[None] for k, v in step.items()})[0]


def unpack_step_r24_mxfp4(value):
    """Inverse of :func:`pack_step_r24_mxfp4`."""
    return {k: v[0] for k, v in unpack_steps_r24([value]).items()}


def pack_steps_r24(fields):
    """Residual step fields with a leading step dimension -> list of 208-bit Python ints."""
    elem, pos, scale = _packed_fields(fields)
    if scale.shape[1:] != _STEP.shape("scale"):
        raise ValueError(f"residual step fields need scale shape (S, {_STEP.blocks}), "
                         f"not {scale.shape}")
    return packing.pack_ints(_STEP, {"elem": elem, "pos": pos, "scale": scale})


def unpack_steps_r24(words):
    """Inverse of :func:`pack_steps_r24`."""
    words = [int(x) for x in words]
    if any(not 0 <= x < 1 << RESIDUAL24_MXFP4_STEP_BITS for x in words):
        raise ValueError(f"a packed MXFP4 2:4 residual step has {RESIDUAL24_MXFP4_STEP_BITS} "
                         "bits")
    return packing.unpack_ints(_STEP, words)
