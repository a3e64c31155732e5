"""Streams of a multi-format dot unit (``hif4spec.UnitSpec.formats``): steps of several
formats, the format switching between accumulations.

A multi-format stream is a dict ``{"formats", "fmt", "first", "last", "parts", "a", "w",
"r"}``: ``formats`` is the unit's formats, ``fmt`` (uint8, (S,)) each step's format code
(its index in ``formats``, the payload's ``hif4spec.FORMAT_FIELD``), ``first`` and
``last`` are the stream's flags, and ``parts`` maps each format to the stream
(:mod:`sim.stimulus.streams`) of its own steps in order, with their flags, as that
format's single-format unit takes them (the residual where the format takes the unit's
residual mode, else none); ``a``, ``w`` and ``r`` are None. A step's format changes only
at a ``first`` step, so every accumulator chain (from a ``first`` step to the next) lies
in one part, and the golden words of the stream are each part's words
(``sim.dot.run_steps`` of its format, the format's own unit's golden model) at the part's
steps.

The benches (:mod:`sim.bench.runner`) take a multi-format unit's streams, payloads and
golden words from here (:func:`make_stream`, :func:`pack_payloads`, :func:`expected_words`),
chosen by the registry's ``UnitSpec.formats``.
"""

import numpy as np

from hif4spec import FORMAT_FIELD, format_residuals, unit_spec, units_of_kind

from . import payload as _payload
from . import streams as _streams
from .cases import named_cases as _single_cases
from .draw import mixed_stream as _single_mixed

__all__ = ["single_unit", "part_residual", "wrap", "interleave", "named_cases",
           "random_stream", "concat", "take", "make_stream", "pack_payloads", "expected_words"]


def single_unit(fmt):
    """The single-format dot unit of format ``fmt`` (the grid's)."""
    return next(u.name for u in units_of_kind("dot") if u.fmt == fmt)


def part_residual(fmt, residual):
    """The residual mode of format ``fmt``'s steps in a unit with ``residual``."""
    return residual if residual in format_residuals(fmt) else "none"


def _chains(s):
    """``[(start, stop), ...]``: the accumulator chains of a single-format stream (a new
    chain at step 0 and at every ``first`` step)."""
    n = len(s["first"])
    starts = [0] + [int(k) for k in np.flatnonzero(s["first"]) if k]
    return list(zip(starts, starts[1:] + [n]))


def wrap(unit, fmt, s):
    """Single-format stream ``s`` of format ``fmt`` as a multi-format stream of ``unit``;
    its first step is made a ``first`` step (the format may change before it)."""
    s = dict(s)
    s["first"] = np.asarray(s["first"], dtype=bool).copy()
    if len(s["first"]):
        s["first"][0] = True
    code = unit_spec(unit).formats.index(fmt)
    n = len(s["first"])
    return {"a": None, "w": None, "r": None, "formats": unit_spec(unit).formats,
            "fmt": np.full(n, code, dtype=np.uint8),
            "first": s["first"].copy(), "last": np.asarray(s["last"], dtype=bool).copy(),
            "parts": {fmt: s}}


def interleave(unit, parts, rng):
    """A multi-format stream of ``unit`` from single-format streams ``parts`` (``{fmt:
    stream}``): their accumulator chains in a random order, each part's in its own order,
    so that the format switches between accumulations (at ``first`` steps only)."""
    formats = unit_spec(unit).formats
    parts = {f: dict(s) for f, s in parts.items() if len(s["first"])}
    for s in parts.values():
        s["first"] = np.asarray(s["first"], dtype=bool).copy()
        s["first"][0] = True
    chains = {f: _chains(s) for f, s in parts.items()}
    order = np.concatenate([np.full(len(c), formats.index(f), dtype=np.uint8)
                            for f, c in chains.items()]) if chains else np.zeros(0, np.uint8)
    rng.shuffle(order)
    fmt, first, last = [], [], []
    at = {f: 0 for f in parts}
    for code in order.tolist():
        f = formats[code]
        start, stop = chains[f][at[f]]
        at[f] += 1
        fmt.append(np.full(stop - start, code, dtype=np.uint8))
        first.append(parts[f]["first"][start:stop])
        last.append(np.asarray(parts[f]["last"][start:stop], dtype=bool))
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    return {"a": None, "w": None, "r": None, "formats": formats, "fmt": cat(fmt, np.uint8),
            "first": cat(first, bool), "last": cat(last, bool), "parts": parts}


def named_cases(unit, residual="none"):
    """``[(name, stream), ...]``: every format's named cases (its single-format unit's, the
    hand-checked ones with their words), the formats taking turns, each case a stream of
    its own starting at a ``first`` step; names are ``<format>:<case>``."""
    per = {f: _single_cases(single_unit(f), part_residual(f, residual))
           for f in unit_spec(unit).formats}
    out = []
    for k in range(max(len(c) for c in per.values())):
        for f, cases in per.items():
            if k < len(cases):
                name, s = cases[k]
                out.append((f"{f}:{name}", wrap(unit, f, s)))
    return out


def random_stream(unit, residual, n, rng, mix=None, *, segment=512):
    """``n`` steps of ``unit``: each format's share drawn at random, each share a
    :func:`sim.stimulus.draw.mixed_stream` of its single-format unit (random, cancelling
    and NaN/Inf-rich K-loops, adversarial K-loop lengths), their chains interleaved
    (:func:`interleave`)."""
    formats = unit_spec(unit).formats
    counts = rng.multinomial(n, [1 / len(formats)] * len(formats))
    parts = {f: _single_mixed(single_unit(f), part_residual(f, residual), int(c), rng, mix,
                             segment=segment)
             for f, c in zip(formats, counts) if c}
    return interleave(unit, parts, rng)


def concat(streams):
    """Multi-format streams concatenated (each part's steps in stream order)."""
    streams = [s for s in streams if len(s["first"])]
    parts = {}
    for s in streams:
        for f, p in s["parts"].items():
            if len(p["first"]):
                parts.setdefault(f, []).append(p)
    out = {"a": None, "w": None, "r": None, "formats": streams[0]["formats"],
           "fmt": np.concatenate([s["fmt"] for s in streams]).astype(np.uint8),
           "first": np.concatenate([s["first"] for s in streams]).astype(bool),
           "last": np.concatenate([s["last"] for s in streams]).astype(bool),
           "parts": {f: _streams.concat(ps) for f, ps in parts.items()}}
    return out


def _codes(s):
    """``{fmt: stream indices of its steps}`` of the formats with a part in ``s``."""
    return {f: np.flatnonzero(s["fmt"] == s["formats"].index(f)) for f in s["parts"]}


def take(s, n):
    """The first ``n`` steps of multi-format stream ``s``; the last kept step is ``last``
    (a part cut short ends at the end of a chain, a ``last`` step, or at the stream's)."""
    fmt = s["fmt"][:n]
    parts = {}
    for f, p in s["parts"].items():
        count = int((fmt == s["formats"].index(f)).sum())
        if count:
            parts[f] = _streams.take(p, count)
    out = {"a": None, "w": None, "r": None, "formats": s["formats"], "fmt": fmt.copy(),
           "first": s["first"][:n].copy(), "last": s["last"][:n].copy(), "parts": parts}
    if n:
        out["last"][-1] = True
    return out


def make_stream(unit, residual, vectors, seed, *, named=True):
    """Exactly ``vectors`` steps of ``unit``: the named cases (:func:`named_cases`) first,
    then :func:`random_stream`; a stream cut short ends with a ``last`` step (what
    :func:`sim.bench.runner.make_stream` gives a single-format unit)."""
    rng = np.random.default_rng(seed)
    parts = [s for _, s in named_cases(unit, residual)] if named else []
    have = sum(len(p["first"]) for p in parts)
    if vectors > have:
        parts.append(random_stream(unit, residual, vectors - have, rng))
    return take(concat(parts), vectors)


def pack_payloads(manifest, unit, residual, s):
    """Packed ``i__payload`` words of multi-format stream ``s`` (uint8 (S, bytes)): each
    part packed as its single-format unit's steps at the unit's ``a``, ``w``, ``r``,
    ``first`` and ``last`` offsets (a narrower step in the low bits of its field), and
    each step's format code in ``fmt``."""
    fields = (_payload.payload_offsets(unit, residual) if manifest is None
              else manifest["payload"])
    width = max(f["offset"] + f["width"] for f in fields.values())
    n = len(s["first"])
    out = np.zeros((n, -(-width // 8)), dtype=np.uint8)
    for f, idx in _codes(s).items():
        res = part_residual(f, residual)
        su = single_unit(f)
        own = _payload.payload_offsets(su, res)
        sub = {name: {"offset": fields[name]["offset"], "width": own[name]["width"]}
               for name in own}
        for name in own:
            if own[name]["width"] > fields[name]["width"]:
                raise ValueError(f"payload field {name!r} has {fields[name]['width']} bits, "
                                 f"fewer than a {f} step's {own[name]['width']}")
        rows = _payload.pack_payloads({"payload": sub}, su, res, s["parts"][f])
        out[idx, :rows.shape[1]] = rows
    code = fields[FORMAT_FIELD]
    if int(s["fmt"].max(initial=0)) >= 1 << code["width"]:
        raise ValueError(f"format codes beyond the {code['width']}-bit {FORMAT_FIELD} field")
    for bit in range(code["width"]):
        pos = code["offset"] + bit
        out[:, pos // 8] |= (((s["fmt"] >> bit) & 1) << (pos % 8)).astype(np.uint8)
    return out


def expected_words(unit, residual, s, **accum):
    """``(words, steps)``: the golden words the unit emits for multi-format stream ``s``:
    each part's words (:func:`sim.stimulus.expected_words` of its single-format unit, the
    hand-derived words of a checked case included) at the stream steps of the part."""
    words, steps = [], []
    for f, idx in _codes(s).items():
        w, k = _payload.expected_words(single_unit(f), part_residual(f, residual),
                                       s["parts"][f], **accum)
        words.append(np.asarray(w, dtype=np.uint32))
        steps.append(idx[k])
    if not words:
        return np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.intp)
    words, steps = np.concatenate(words), np.concatenate(steps)
    order = np.argsort(steps, kind="stable")
    return words[order], steps[order]
