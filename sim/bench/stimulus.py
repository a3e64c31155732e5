"""Step streams for the bench: random K-loops, named cases, payload packing, expected words.

Everything here is format-generic: a stream is a dict ``{"a", "w", "r", "first", "last"}``
of ``sim.dot`` step fields (leading step dimension), the payload bit offsets come from the
unit's manifest and the expected words from ``sim.dot.run_steps``.
"""

import numpy as np

from sim import dot

__all__ = ["residual_layout", "loop_flags", "random_stream", "concat", "take",
           "pack_payloads", "expected_words"]


def residual_layout(unit, residual):
    """``sim.dot`` step layout name of the residual operand (None without a residual)."""
    if residual == "none":
        return None
    if residual == "2:4":
        return "2:4" if unit == "hif4" else f"{unit}-2:4"
    return unit


def loop_flags(n, rng, *, max_len=64):
    """``first``/``last`` for ``n`` steps cut into K-loops of 1..``max_len`` steps.

    Lengths: half short (1..4), the rest uniform in 1..max_len or exactly max_len; one loop in
    ten continues the previous accumulator (no ``first``, spec section 7).
    """
    first = np.zeros(n, dtype=bool)
    last = np.zeros(n, dtype=bool)
    k = 0
    while k < n:
        u = rng.random()
        length = (int(rng.integers(1, 5)) if u < 0.5 else
                  int(rng.integers(1, max_len + 1)) if u < 0.85 else max_len)
        length = min(length, n - k)
        first[k] = k == 0 or rng.random() >= 0.1
        last[k + length - 1] = True
        k += length
    return first, last


def concat(streams):
    """Concatenate streams (dicts of step fields) along the step axis."""
    streams = [s for s in streams if len(s["first"])]
    out = {}
    for key in ("a", "w", "r"):
        if streams[0][key] is None:
            out[key] = None
        else:
            out[key] = {f: np.concatenate([s[key][f] for s in streams]) for f in streams[0][key]}
    for key in ("first", "last"):
        out[key] = np.concatenate([np.asarray(s[key], dtype=bool) for s in streams])
    return out


def take(stream, n):
    """The first ``n`` steps of ``stream``; the last kept step is marked ``last``."""
    out = {}
    for key in ("a", "w", "r"):
        out[key] = None if stream[key] is None else {f: v[:n] for f, v in stream[key].items()}
    out["first"] = stream["first"][:n].copy()
    out["last"] = stream["last"][:n].copy()
    if n:
        out["last"][-1] = True
    return out


def random_stream(unit, residual, n, rng, *, segment=512, nan_prob=0.002):
    """``n`` random steps: segments alternating wide (uniform) and narrow scale codes."""
    parts = []
    done = 0
    while done < n:
        size = min(segment, n - done)
        kind = "narrow" if (done // segment) % 2 else "uniform"
        steps = dot.random_steps(unit, size, rng, residual, nan_prob=nan_prob, scales=kind)
        steps["first"], steps["last"] = loop_flags(size, rng)
        parts.append(steps)
        done += size
    return concat(parts)


def pack_payloads(manifest, unit, residual, stream):
    """Packed ``i__payload`` words as a uint8 array (S, bytes), little-endian, per manifest."""
    fields = manifest["payload"]
    width = manifest["ports"][4]["width"]
    nbytes = (width + 7) // 8
    words = [0] * len(stream["first"])
    operands = [("a", unit), ("w", unit)]
    if residual != "none":
        operands.append(("r", residual_layout(unit, residual)))
    for name, layout in operands:
        offset = fields[name]["offset"]
        for k, value in enumerate(dot.pack_steps(layout, stream[name])):
            words[k] |= value << offset
    for name in ("first", "last"):
        offset = fields[name]["offset"]
        for k in np.flatnonzero(stream[name]):
            words[k] |= 1 << offset
    data = b"".join(word.to_bytes(nbytes, "little") for word in words)
    return np.frombuffer(data, dtype=np.uint8).reshape(len(words), nbytes)


def expected_words(unit, residual, stream):
    """``(words, steps)``: the golden words the unit emits (at ``last`` steps) and their steps."""
    acc = dot.run_steps(unit, stream["a"], stream["w"], stream["first"], stream["last"],
                        r=stream["r"], residual=residual)
    steps = np.flatnonzero(stream["last"])
    return acc[steps], steps
