"""Step streams: field arrays shaped by ``hif4spec``, K-loop flags, concatenation.

A *stream* is a dict ``{"a", "w", "r", "first", "last"}``: ``a``, ``w`` and ``r`` (None
without a residual) map each field of the operand's step layout
(``hif4spec.STEP_LAYOUTS``) to an array with a leading step dimension S and the layout's
field shape after it (:meth:`hif4spec.StepLayout.shape`); ``first`` and ``last`` are bool
(S,). A stream may also carry ``"expect"``, ``{step: FP32 word}`` derived by hand, at steps
where ``last`` is set. This is the form ``sim.dot.run_steps`` takes.
"""

import numpy as np

from hif4spec import (ELEMENT_TYPES, FORMATS, operand_layout, residual_layout, resolve,
                      unit_spec)

__all__ = ["layouts", "scale_code", "fields", "stream", "loop", "single", "loop_flags",
           "short_loops", "concat", "take"]


def layouts(unit, residual="none"):
    """``(operand, residual)`` step layouts of ``unit`` (the residual one None for "none")."""
    resolve(unit, residual=residual)
    spec = unit_spec(unit)
    return operand_layout(spec.fmt), residual_layout(spec.fmt, residual)


def scale_code(fmt, what):
    """The scale code of format ``fmt`` for ``what``: "one" (1.0), "max" (the largest finite
    scale) or "nan"."""
    t = ELEMENT_TYPES[FORMATS[fmt].scale_type]
    nan = t.nan_codes[0]
    codes = {"one": t.bias << t.man_bits, "max": nan - 1, "nan": nan}
    return codes[what]


def fields(layout, n, **values):
    """Field arrays of ``n`` steps of ``layout``, every item 0 or the value given by name.

    ``fields(operand_layout("hif4"), 4, scale=0xC0)`` is four all-zero HiF4 steps with scale
    code 0xC0. A value broadcasts against ``(n, *layout.shape(field))``.
    """
    unknown = set(values) - set(layout.fields)
    if unknown:
        raise ValueError(f"step layout {layout.name} has no field {sorted(unknown)[0]!r}")
    out = {}
    for name in layout.fields:
        arr = np.zeros((n, *layout.shape(name)), dtype=np.uint8)
        arr[...] = values.get(name, 0)
        out[name] = arr
    return out


def stream(a, w, r, first, last, expect=None):
    """A stream dict (see the module docstring); ``expect`` is ``{step: word}``."""
    out = {"a": a, "w": w, "r": r, "first": np.asarray(first, dtype=bool),
           "last": np.asarray(last, dtype=bool)}
    if expect is not None:
        out["expect"] = {int(k): int(v) for k, v in expect.items()}
    return out


def loop(n):
    """``first``/``last`` flags of one K-loop of ``n`` steps."""
    first = np.zeros(n, dtype=bool)
    last = np.zeros(n, dtype=bool)
    first[0] = last[-1] = True
    return first, last


def single(n):
    """``first``/``last`` flags of ``n`` one-step results."""
    return np.ones(n, dtype=bool), np.ones(n, dtype=bool)


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


def short_loops(n, rng, *, max_len=6):
    """``first``/``last`` for ``n`` steps cut into K-loops of 1..``max_len`` steps (uniform),
    each starting from +0: frequent outputs, for timing checks."""
    first = np.zeros(n, dtype=bool)
    last = np.zeros(n, dtype=bool)
    k = 0
    while k < n:
        length = min(int(rng.integers(1, max_len + 1)), n - k)
        first[k] = True
        last[k + length - 1] = True
        k += length
    return first, last


def concat(streams):
    """Concatenate streams along the step axis (their ``expect`` steps shifted to match)."""
    streams = [s for s in streams if len(s["first"])]
    out = {}
    for key in ("a", "w", "r"):
        if streams[0][key] is None:
            out[key] = None
        else:
            out[key] = {f: np.concatenate([s[key][f] for s in streams]) for f in streams[0][key]}
    for key in ("first", "last"):
        out[key] = np.concatenate([np.asarray(s[key], dtype=bool) for s in streams])
    expect, base = {}, 0
    for s in streams:
        expect.update({base + k: v for k, v in s.get("expect", {}).items()})
        base += len(s["first"])
    if expect:
        out["expect"] = expect
    return out


def take(s, n):
    """The first ``n`` steps of stream ``s``; the last kept step is marked ``last``."""
    out = {}
    for key in ("a", "w", "r"):
        out[key] = None if s[key] is None else {f: v[:n] for f, v in s[key].items()}
    out["first"] = s["first"][:n].copy()
    out["last"] = s["last"][:n].copy()
    if n:
        out["last"][-1] = True
    expect = {k: v for k, v in s.get("expect", {}).items() if k < n}
    if expect:
        out["expect"] = expect
    return out
