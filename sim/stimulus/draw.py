"""Random step fields and random bench streams, for any step layout of ``hif4spec``."""

import numpy as np

from hif4spec import ELEMENT_TYPES, FORMATS, ResidualBlockSpec

from .streams import concat, layouts, loop_flags

__all__ = ["random_fields", "random_steps", "random_stream"]

#: Half-width, in scale codes, of the ``scales="narrow"`` band around the code of 1.0 (a few
#: binades, so that sums rarely overflow and often cancel).
_NARROW_BAND = {"E6M2": 12, "E8M0": 3, "UE4M3": 12}


def _scale_codes(kind, shape, rng, scales, nan_prob, ue4m3_bit7):
    t = ELEMENT_TYPES[kind]
    nan = t.nan_codes[0]                # every code below the NaN code is finite here
    if scales == "uniform":
        s = rng.integers(0, nan, size=shape)
    else:
        band = _NARROW_BAND[kind]
        s = np.clip((t.bias << t.man_bits) + rng.integers(-band, band + 1, size=shape),
                    0, nan - 1)
    s = np.where(rng.random(shape) < nan_prob, nan, s)
    if kind == "UE4M3" and ue4m3_bit7:
        s = s | (rng.integers(0, 2, size=shape) << 7)
    return s.astype(np.uint8)


def random_fields(layout, n, rng, *, nan_prob=0.01, scales="uniform", ue4m3_bit7=False):
    """``n`` random steps of step layout ``layout`` (a ``hif4spec.StepLayout``).

    Every field but the scale is drawn uniformly over its codes (element codes, L3/L2 bits,
    2:4 positions, duplicates included). Scale codes are drawn uniformly over the finite
    codes (``scales="uniform"``) or from a band a few binades wide around 1
    (``scales="narrow"``); each is then replaced by the NaN code with probability
    ``nan_prob``. ``ue4m3_bit7`` sets the ignored bit 7 of UE4M3 scales at random.
    """
    if scales not in ("uniform", "narrow"):
        raise ValueError(f"scales must be 'uniform' or 'narrow', not {scales!r}")
    spec = layout.spec
    kind = (FORMATS[spec.fmt].scale_type if isinstance(spec, ResidualBlockSpec) else
            spec.scale_type)
    out = {}
    for name in layout.fields:
        shape = (n, *layout.shape(name))
        if name == "scale":
            out[name] = _scale_codes(kind, shape, rng, scales, nan_prob, ue4m3_bit7)
        else:
            out[name] = rng.integers(0, 1 << layout.width(name), shape, dtype=np.uint8)
    return out


def random_steps(unit, n, rng, residual="none", *, nan_prob=0.01, scales="uniform",
                 first_prob=0.25, ue4m3_bit7=False):
    """A stream of ``n`` random steps for ``unit`` (golden-model tests and RTL stimulus).

    The fields are :func:`random_fields` of the unit's operand and residual layouts; a step
    starts a K-loop (``first``) with probability ``first_prob`` (always step 0), ``last`` is
    set before every ``first`` and on the final step.
    """
    op, res = layouts(unit, residual)
    kw = dict(nan_prob=nan_prob, scales=scales, ue4m3_bit7=ue4m3_bit7)
    a, w = random_fields(op, n, rng, **kw), random_fields(op, n, rng, **kw)
    r = None if res is None else random_fields(res, n, rng, **kw)
    first = rng.random(n) < first_prob
    last = np.zeros(n, dtype=bool)
    if n:
        first[0] = True
        last[:-1] = first[1:]
        last[-1] = True
    return {"a": a, "w": w, "r": r, "first": first, "last": last}


def random_stream(unit, residual, n, rng, *, segment=512, nan_prob=0.002):
    """``n`` random bench steps: segments alternating uniform and narrow scale codes, cut into
    K-loops by :func:`sim.stimulus.loop_flags`."""
    parts = []
    done = 0
    while done < n:
        size = min(segment, n - done)
        kind = "narrow" if (done // segment) % 2 else "uniform"
        steps = random_steps(unit, size, rng, residual, nan_prob=nan_prob, scales=kind)
        steps["first"], steps["last"] = loop_flags(size, rng)
        parts.append(steps)
        done += size
    return concat(parts)
