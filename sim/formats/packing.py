"""The one packer: field arrays <-> packed bytes and Python ints, for any spec layout.

A layout is a :class:`hif4spec.steps.StepLayout` (one dot-product step: ``blocks`` packed
blocks, block 0 in the low bits) or a block spec (a ``FormatSpec`` or ``ResidualBlockSpec``:
one block). Field ``name`` of a layout is an integer array of shape ``(G,) +
layout.shape(name)`` (``G`` rows: blocks or steps), item k of it at bit
``layout.positions(name)[k]`` of its row, ``layout.width(name)`` bits wide. A packed row is
little-endian (byte 0 holds bits 0..7); as a Python int, bit 0 of the int is bit 0 of the row.

The packer checks neither shapes nor ranges beyond what reshaping needs: callers state their
own contract (:func:`check_steps` and :func:`check_range` give the step-level one).
"""

from functools import lru_cache
from math import ceil

import numpy as np

from hif4spec.steps import StepLayout

__all__ = ["as_layout", "nbytes", "pack", "unpack", "pack_ints", "unpack_ints",
           "check_steps", "check_range"]


@lru_cache(maxsize=None)
def as_layout(layout):
    """``layout`` as a :class:`StepLayout` (a block spec becomes a one-block step)."""
    if isinstance(layout, StepLayout):
        return layout
    return StepLayout(layout.name, layout, 1)


def nbytes(layout):
    """Bytes of one packed row of ``layout``."""
    return ceil(as_layout(layout).bits / 8)


@lru_cache(maxsize=None)
def _plan(layout):
    """field -> ``(shape, width, n, groups)`` of one row: ``n`` items, and groups
    ``(items, cols, s, t8)`` of the items that start at bit ``s`` of a byte: bit k of byte
    ``cols`` holds item bit ``k + t8 - s`` (``t8`` = 0, 8, ...). No two items of a group
    share a byte, so each group packs with one vectorized OR."""
    lay = as_layout(layout)
    out = {}
    for name in lay.fields:
        width = lay.width(name)
        pos = np.asarray(lay.positions(name), dtype=np.intp)
        groups = []
        for s in sorted(set((pos % 8).tolist())):
            items = np.flatnonzero(pos % 8 == s)
            for t in range((s + width + 7) // 8):
                groups.append((items, pos[items] // 8 + t, s, 8 * t))
        out[name] = (lay.shape(name), width, pos.size, groups)
    return out


def _dtype(bits):
    """The smallest unsigned integer dtype of at least ``bits`` bits."""
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if np.iinfo(dt).bits >= bits:
            return np.dtype(dt)
    raise ValueError(f"fields wider than 56 bits are not supported, not {bits - 8}")


def pack(layout, fields):
    """Fields with a leading dimension G -> uint8 (G, :func:`nbytes`).

    Values must already lie in their field's range (see :func:`check_range`).
    """
    plan = _plan(layout)
    g = np.shape(fields[next(iter(plan))])[0]
    out = np.zeros((g, nbytes(layout)), dtype=np.uint8)
    for name, (shape, width, n, groups) in plan.items():
        v = np.asarray(fields[name]).reshape(g, n)
        for items, cols, s, t8 in groups:
            x = v[:, items].astype(_dtype(width + s))
            out[:, cols] |= ((x << s) >> t8).astype(np.uint8)
    return out


def unpack(layout, data):
    """Inverse of :func:`pack`: uint8 (G, :func:`nbytes`) -> fields with leading dim G.

    A field of at most 8 bits comes back as uint8, wider ones as the smallest unsigned type.
    """
    data = np.asarray(data, dtype=np.uint8)
    g = data.shape[0]
    out = {}
    for name, (shape, width, n, groups) in _plan(layout).items():
        dt = _dtype(width)
        v = np.zeros((g, n), dtype=dt)
        for items, cols, s, t8 in groups:
            x = data[:, cols].astype(_dtype(t8 + 8))
            v[:, items] |= ((x << t8) >> s).astype(dt, casting="unsafe")
        v &= dt.type((1 << width) - 1)
        out[name] = v.reshape((g,) + shape)
    return out


def pack_ints(layout, fields):
    """Fields with a leading dimension G -> list of G Python ints."""
    rows = pack(layout, fields)
    n = rows.shape[1]
    data = rows.tobytes()
    return [int.from_bytes(data[i:i + n], "little") for i in range(0, len(data), n)]


def unpack_ints(layout, words):
    """Inverse of :func:`pack_ints`; every word must lie in ``0 .. 2**(8 * nbytes) - 1``."""
    n = nbytes(layout)
    words = [int(x) for x in words]
    data = b"".join(x.to_bytes(n, "little") for x in words)
    return unpack(layout, np.frombuffer(data, dtype=np.uint8).reshape(len(words), n))


def check_steps(layout, fields, name, what):
    """Check step fields against ``layout``: ``(fields as arrays, G)`` or ``ValueError``.

    Every field of the layout must be present with shape ``(G,) + layout.shape(field)``
    and one ``G`` for all. ``name`` (the layout name the caller was given) and ``what``
    (which operand) go into the messages.
    """
    lay = as_layout(layout)
    out = {}
    g = None
    for k in lay.fields:
        if k not in fields:
            raise ValueError(f"{what} fields for {name} need {k!r} (have {sorted(fields)})")
        v = np.asarray(fields[k])
        tail = lay.shape(k)
        if v.shape[1:] != tail or v.ndim != len(tail) + 1:
            raise ValueError(f"{what} field {k!r} for {name} must have shape (S, "
                             f"{', '.join(map(str, tail))}), not {v.shape}")
        if g is None:
            g = v.shape[0]
        elif v.shape[0] != g:
            raise ValueError(f"{what} fields have different step counts")
        out[k] = v
    return out, g


def check_range(layout, fields):
    """``ValueError`` unless every field given holds values in ``0 .. 2**width - 1``."""
    lay = as_layout(layout)
    for k, v in fields.items():
        v = np.asarray(v)
        limit = 1 << lay.width(k)
        if v.size and (v.min() < 0 or v.max() >= limit):
            raise ValueError(f"field {k!r} holds values outside 0..{limit - 1}")
