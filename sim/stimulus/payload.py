"""Unit payload words and the golden words a unit emits for a stream.

The input payload of a unit (``i__payload``) holds the packed steps ``a``, ``w`` and ``r``
(when the unit has a residual) and the ``first`` and ``last`` bits, at the offsets its
manifest lists (``manifest["payload"]``, written by the generator); without a manifest, at
the offsets ``hif4spec.payload_fields`` implies (fields packed low first, no gaps). Each
step field sits at the bit positions of its ``hif4spec`` step layout.
"""

import numpy as np

from hif4spec import EXACT_ACCUMS, REFERENCE_ACCUM, TRUNC_BITS, payload_fields

from sim import dot

from .streams import layouts

__all__ = ["payload_offsets", "pack_payloads", "expected_words", "manifest_accum"]


def payload_offsets(unit, residual):
    """``{field: {"offset", "width"}}`` of the payload from ``hif4spec.payload_fields``."""
    out, offset = {}, 0
    for name, bits in payload_fields(unit, residual):
        out[name] = {"offset": offset, "width": bits}
        offset += bits
    return out


def pack_payloads(manifest, unit, residual, s):
    """Packed ``i__payload`` words of stream ``s`` as uint8 (S, bytes), little-endian.

    ``manifest`` is the unit's manifest dict (its ``payload`` offsets are used), or None for
    :func:`payload_offsets`. ``ValueError`` if a manifest field's width is not the width of
    the step layout, or a field holds a value wider than its items.
    """
    fields = payload_offsets(unit, residual) if manifest is None else manifest["payload"]
    op, res = layouts(unit, residual)
    width = max(f["offset"] + f["width"] for f in fields.values())
    n = len(s["first"])
    out = np.zeros((n, -(-width // 8)), dtype=np.uint8)
    operands = [("a", op), ("w", op)] + ([("r", res)] if res is not None else [])
    for name, layout in operands:
        if fields[name]["width"] != layout.bits:
            raise ValueError(f"payload field {name!r} has {fields[name]['width']} bits, but a "
                             f"{layout.name} step has {layout.bits}")
        base = fields[name]["offset"]
        for field in layout.fields:
            w = layout.width(field)
            v = np.asarray(s[name][field]).reshape(n, -1)
            if v.size and (v.min() < 0 or v.max() >= 1 << w):
                raise ValueError(f"{name} field {field!r} holds values outside "
                                 f"0..{(1 << w) - 1}")
            _place(out, v.astype(np.uint8 if w <= 8 else np.int64),
                   base + np.asarray(layout.positions(field)), w)
    for name in ("first", "last"):
        bit = fields[name]["offset"]
        out[:, bit // 8] |= np.asarray(s[name], dtype=np.uint8) << (bit % 8)
    return out


def _place(out, v, pos, w):
    """OR items ``v`` (S, items) of ``w`` bits at bit positions ``pos`` into ``out``.

    Runs of items that fill whole bytes (``w`` in 1, 2, 4, 8, consecutive, starting on a
    byte boundary) are packed a byte column at a time; other items bit by bit."""
    k = 0
    per = 8 // w if w <= 8 and 8 % w == 0 else 0
    while k < len(pos):
        run = 1
        while k + run < len(pos) and pos[k + run] == pos[k] + run * w:
            run += 1
        if per and pos[k] % 8 == 0 and run >= per:
            whole = run - run % per
            items = v[:, k:k + whole].reshape(len(v), whole // per, per)
            packed = items[:, :, 0].copy()
            for j in range(1, per):
                packed |= items[:, :, j] << (j * w)
            first = pos[k] // 8
            out[:, first:first + whole // per] |= packed
            k += whole
            continue
        for bit in range(w):
            p = pos[k] + bit
            out[:, p // 8] |= (((v[:, k] >> bit) & 1) << (p % 8)).astype(np.uint8)
        k += 1


def manifest_accum(manifest):
    """``{"accum", "extra_bits"}`` of the dot unit a manifest describes: the keyword
    arguments of :func:`expected_words` that make its golden words."""
    acc = [st for st in manifest["timing"]["pipeline"] if st["stage"] == "acc"]
    return {"accum": manifest["parameters"].get("accum", REFERENCE_ACCUM),
            "extra_bits": acc[0].get("extra_bits", TRUNC_BITS) if acc else TRUNC_BITS}


def expected_words(unit, residual, s, accum=REFERENCE_ACCUM, extra_bits=TRUNC_BITS):
    """``(words, steps)``: the golden words the unit emits (at the ``last`` steps) and their
    step indices, for accumulator back end ``accum`` (the exact ones agree; ``"trunc"``
    keeps ``extra_bits``).

    Where the stream carries hand-derived words (``s["expect"]``) the golden model must give
    them (``AssertionError`` naming the step otherwise), so an RTL checked against these
    words matches both.
    """
    acc = dot.run_steps(unit, s["a"], s["w"], s["first"], s["last"], r=s["r"],
                        residual=residual, accum=accum, extra_bits=extra_bits)
    hand = s.get("expect", {}) if accum in EXACT_ACCUMS else {}
    for k, word in hand.items():
        if not s["last"][k]:
            raise ValueError(f"hand-derived word at step {k}, which is not a last step")
        if int(acc[k]) != word:
            raise AssertionError(f"the golden model gives {int(acc[k]):#010x} at step {k}, "
                                 f"the hand-derived word is {word:#010x}")
    steps = np.flatnonzero(s["last"])
    return acc[steps], steps
