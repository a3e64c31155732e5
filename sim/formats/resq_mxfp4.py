"""Packed 2:4 MXFP4 residual (``docs/mxfp4_residual.md``) and its exact step terms.

Rollout-ResQ (spec section 6) applies to MXFP4 as to HiF4: ``resq(x, "mxfp4", "2:4")`` gives
the residual ``R = Q(dX)`` as an MXFP4 tensor whose dropped elements have code 0, two kept
per micro-group of 4 positions. This module packs that residual the way the HiF4 2:4
residual is packed: only the kept elements (E2M1 codes) and their 2-bit positions, plus the
residual's own E8M0 scale, per 32-position MXFP4 block:

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

Exact step terms: with main blocks ``(a_b, sa_b)``, ``(w_b, sw_b)`` and residual block
``(r_b, rs_b)`` the step value is ``sum_b S_b * 2**(sa_b + sw_b - 256) + R_b * 2**(rs_b + sw_b
- 256)`` where ``S_b = 4 * sum_i a_i w_i`` (an integer, |S_b| <= 4608) and ``R_b = 4 * sum_j
r_j w_pos(j)`` (|R_b| <= 2304); any scale code 255 makes the step NaN.
"""

import numpy as np

from .table import FieldLayout

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
    "E2M1_QUARTERS",
    "r24_step_terms",
    "random_r24_steps",
]

#: Packed fields of one 32-position residual block, low bits first.
RESIDUAL24_MXFP4_LAYOUT = (
    FieldLayout("elem", 0, 4, 16),     # kept element j (E2M1), micro-group j // 2
    FieldLayout("pos", 64, 2, 16),     # position of kept element j inside its micro-group
    FieldLayout("scale", 96, 8, 1),    # E8M0 code of the residual block
)
RESIDUAL24_MXFP4_BLOCK_BITS = 104
RESIDUAL24_MXFP4_BLOCK_BYTES = 13
#: One dot-product step: two residual blocks, block 0 in the low bits.
RESIDUAL24_MXFP4_STEP_BITS = 2 * RESIDUAL24_MXFP4_BLOCK_BITS

_BLOCK = 32
_KEPT = 16

#: E2M1 code -> value times 4 (an exact small integer; bit 3 is the sign).
E2M1_QUARTERS = np.array([0, 2, 4, 6, 8, 12, 16, 24, 0, -2, -4, -6, -8, -12, -16, -24],
                         dtype=np.int64)


def _fields_of(residual):
    fields = getattr(residual, "fields", residual)
    fmt = getattr(residual, "fmt", "mxfp4")
    if fmt != "mxfp4":
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
    groups = elem.reshape(*elem.shape[:-1], _BLOCK // 4, 4)
    nonzero = groups != 0
    if (nonzero.sum(axis=-1) > 2).any():
        raise ValueError("a micro-group of 4 positions holds more than 2 nonzero codes; "
                         "pack only a 2:4-sparsified residual (resq(..., '2:4').residual)")
    # nonzero codes first, then the lowest positions; the two picks written ascending
    key = np.where(nonzero, 0, 4) + np.arange(4, dtype=np.int64)
    pick = np.sort(np.argsort(key, axis=-1, kind="stable")[..., :2], axis=-1)
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
    if (elem > 15).any() or (pos > 3).any():
        raise ValueError("elem codes must be 0..15 and positions 0..3")
    return elem, pos, scale


def _positions(pos):
    return 4 * (np.arange(_KEPT) // 2) + pos.astype(np.int64)


def unpack_24_mxfp4(fields):
    """Scatter packed kept elements back into MXFP4 fields ``elem`` (*lead, nb, 32), ``scale``.

    Raises ValueError when two kept elements of a micro-group share a position (their sum
    is not an E2M1 code; use :func:`decode_24_mxfp4` for values).
    """
    elem, pos, scale = _packed_fields(fields)
    where = _positions(pos)
    pairs = where.reshape(*where.shape[:-1], _KEPT // 2, 2)
    if (pairs[..., 0] == pairs[..., 1]).any():
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
    quarters = np.zeros((*elem.shape[:-1], _BLOCK), dtype=np.int64)
    lead = np.indices(elem.shape[:-1])
    idx = tuple(np.broadcast_to(ix[..., None], elem.shape) for ix in lead) + (where,)
    np.add.at(quarters, idx, E2M1_QUARTERS[elem])
    values = quarters.astype(np.float64) / 4 * np.ldexp(1.0, scale.astype(np.int64) - 127)[
        ..., None]
    values[scale == 0xFF] = np.nan
    return values


def residual24_mxfp4_to_bytes(fields):
    """Serialize packed residual fields: 13 bytes per block, blocks in C order, little-endian."""
    elem, pos, scale = _packed_fields(fields)
    e = elem.reshape(-1, _KEPT)
    p = pos.reshape(-1, _KEPT)
    raw = np.concatenate([
        (e[:, 0::2] | (e[:, 1::2] << 4)).astype(np.uint8),
        (p[:, 0::4] | (p[:, 1::4] << 2) | (p[:, 2::4] << 4) | (p[:, 3::4] << 6)).astype(
            np.uint8),
        scale.reshape(-1, 1),
    ], axis=1)
    return raw.tobytes()


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
    nib = np.empty((count, 16), dtype=np.uint8)
    nib[:, 0::2] = raw[:, :8] & 0xF
    nib[:, 1::2] = raw[:, :8] >> 4
    pos = np.empty((count, 16), dtype=np.uint8)
    for k in range(4):
        pos[:, k::4] = (raw[:, 8:12] >> (2 * k)) & 3
    return {"elem": nib.reshape(*blocks_shape, _KEPT), "pos": pos.reshape(*blocks_shape, _KEPT),
            "scale": raw[:, 12].copy().reshape(blocks_shape)}


def pack_step_r24_mxfp4(step):
    """One step's residual fields (elem (2, 16), pos (2, 16), scale (2,)) -> 208-bit int."""
    return pack_steps_r24({k: np.asarray(v)[None] for k, v in step.items()})[0]


def unpack_step_r24_mxfp4(value):
    """Inverse of :func:`pack_step_r24_mxfp4`."""
    return {k: v[0] for k, v in unpack_steps_r24([value]).items()}


def r24_step_terms(r, w):
    """Exact residual terms of MXFP4 steps: two per step (residual blocks 0 and 1).

    Parameters
    ----------
    r : dict
        Packed 2:4 residual step fields ``elem``/``pos`` (S, 2, 16), ``scale`` (S, 2).
    w : dict
        The weight operand's MXFP4 step fields ``elem`` (S, 2, 32), ``scale`` (S, 2).

    Returns
    -------
    P, E : ndarray[int64], shape (S, 2)
        Residual block b contributes ``P[:, b] * 2.0**E[:, b]`` exactly: ``P`` is 4 times the
        sum of ``r_j * w_pos(j)`` (|P| <= 2304), ``E = rs_b + sw_b - 256``.
    nan : ndarray[bool], shape (S,)
        A residual scale is the NaN code 255 (the weight's NaN scales are the main terms').
    """
    re, rp, rs = _packed_fields(r)
    we = np.asarray(w["elem"]).astype(np.int64)
    sw = np.asarray(w["scale"]).astype(np.int64)
    if re.ndim != 3 or re.shape[1:] != (2, _KEPT) or we.shape != (re.shape[0], 2, _BLOCK) \
            or sw.shape != rs.shape:
        raise ValueError("residual step fields must be elem/pos (S, 2, 16) and scale (S, 2), "
                         "with weight fields elem (S, 2, 32) and scale (S, 2)")
    wsel = np.take_along_axis(we, _positions(rp), axis=-1)
    # E2M1_QUARTERS products are in units of 1/16 and always multiples of 4
    P = (E2M1_QUARTERS[re.astype(np.int64)] * E2M1_QUARTERS[wsel & 15]).sum(axis=-1) // 4
    rs = rs.astype(np.int64)
    return P, rs + sw - 256, (rs == 255).any(axis=1)


def random_r24_steps(n, rng, *, nan_prob=0.01, scales="uniform"):
    """Random packed residual step fields (any positions, duplicates included) for tests."""
    if scales == "uniform":
        s = rng.integers(0, 255, size=(n, 2))
    else:
        s = np.clip(127 + rng.integers(-3, 4, size=(n, 2)), 0, 254)
    s = np.where(rng.random((n, 2)) < nan_prob, 255, s)
    return {"elem": rng.integers(0, 16, (n, 2, _KEPT), dtype=np.uint8),
            "pos": rng.integers(0, 4, (n, 2, _KEPT), dtype=np.uint8),
            "scale": s.astype(np.uint8)}


def pack_steps_r24(fields):
    """Residual step fields with a leading step dimension -> list of 208-bit Python ints."""
    elem, pos, scale = _packed_fields(fields)
    if scale.ndim != 2 or scale.shape[1] != 2:
        raise ValueError(f"residual step fields need scale shape (S, 2), not {scale.shape}")
    data = residual24_mxfp4_to_bytes({"elem": elem, "pos": pos, "scale": scale})
    n = 2 * RESIDUAL24_MXFP4_BLOCK_BYTES
    return [int.from_bytes(data[i:i + n], "little") for i in range(0, len(data), n)]


def unpack_steps_r24(words):
    """Inverse of :func:`pack_steps_r24`."""
    words = [int(x) for x in words]
    if any(not 0 <= x < 1 << RESIDUAL24_MXFP4_STEP_BITS for x in words):
        raise ValueError(f"a packed MXFP4 2:4 residual step has {RESIDUAL24_MXFP4_STEP_BITS} "
                         "bits")
    data = b"".join(x.to_bytes(2 * RESIDUAL24_MXFP4_BLOCK_BYTES, "little") for x in words)
    return residual24_mxfp4_from_bytes(data, (len(words), 2))
