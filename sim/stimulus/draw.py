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
            out[name] = uniform_bits(rng, shape, layout.width(name))
    return out


def uniform_bits(rng, shape, width):
    """``rng.integers(0, 1 << width, shape, dtype=np.uint8)`` for ``width`` 1..8, the same
    values and the same generator state after, drawn faster.

    NumPy draws such a byte from the low byte up of each 32-bit word of the generator
    (``next_uint32``, four bytes a word, a fresh word for each call) and keeps its top
    ``width`` bits: a power-of-two range never rejects. The words come from one full-range
    ``uint32`` draw, which takes them the same way.
    """
    if not 1 <= width <= 8:
        raise ValueError(f"width must be 1 to 8, not {width}")
    n = int(np.prod(shape, dtype=np.int64))
    words = rng.integers(0, 1 << 32, -(-n // 4), dtype=np.uint32)
    out = words.view(np.uint8)[:n]
    if width < 8:
        out = out >> np.uint8(8 - width)
    return out.reshape(shape)


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


def _sign_bit(layout):
    """The sign bit of the layout's element codes (every element type here is signed, the
    sign in the top bit)."""
    spec = layout.spec
    t = ELEMENT_TYPES[FORMATS[spec.fmt].elem_type if isinstance(spec, ResidualBlockSpec)
                      else spec.elem_type]
    return 1 << (t.bits - 1)


def cancel_stream(unit, residual, n, rng):
    """``n`` adversarial steps: K-loops in which random steps alternate with their exact
    negations (every activation element's sign flipped, the residual's too), some of those
    with a scale one code off, so that the accumulator cancels to zero, to a few low bits
    or to the rounding error of what came before, in every alignment."""
    op, res = layouts(unit, residual)
    steps = random_steps(unit, n, rng, residual, nan_prob=0.0,
                         scales="narrow" if rng.random() < 0.8 else "uniform")
    odd = np.arange(n) % 2 == 1
    for name, layout in (("a", op), ("r", res)):
        if layout is None:
            continue
        f = steps[name]
        prev = {k: np.roll(v, 1, axis=0) for k, v in f.items()}
        for k in f:
            f[k][odd] = prev[k][odd]
        flip = _sign_bit(layout)
        f["elem"][odd] ^= flip
        nudge = odd & (rng.random(n) < 0.25)
        f["scale"][nudge] = np.clip(f["scale"][nudge].astype(int)
                                    + rng.choice([-1, 1], f["scale"][nudge].shape), 0,
                                    ELEMENT_TYPES[FORMATS[unit_fmt(unit)].scale_type]
                                    .nan_codes[0] - 1)
    steps["w"] = {k: np.where(_steps_axis(odd, v), np.roll(v, 1, axis=0), v)
                  for k, v in steps["w"].items()}
    steps["first"], steps["last"] = loop_flags(n, rng)
    return steps


def special_stream(unit, residual, n, rng):
    """``n`` steps rich in NaN and Inf: NaN scale codes one in thirty, the largest finite
    scales on half the steps (products near FP32's top, sums that overflow to +-Inf, then
    Inf - Inf), cut into K-loops."""
    op, res = layouts(unit, residual)
    steps = random_steps(unit, n, rng, residual, nan_prob=1 / 30, scales="uniform")
    big = rng.random(n) < 0.5
    for name, layout in (("a", op), ("w", op), ("r", res)):
        if layout is None:
            continue
        t = ELEMENT_TYPES[FORMATS[unit_fmt(unit)].scale_type]
        s = steps[name]["scale"]
        top = np.where(rng.random(s.shape) < 0.5, t.nan_codes[0] - 1,
                       t.nan_codes[0] - 1 - rng.integers(0, 4, s.shape))
        s[_steps_axis(big, s) & (s != t.nan_codes[0])] = top[
            _steps_axis(big, s) & (s != t.nan_codes[0])]
    steps["first"], steps["last"] = loop_flags(n, rng)
    return steps


def _steps_axis(mask, like):
    """A per-step bool mask broadcast to an array with a leading step axis."""
    return np.broadcast_to(mask.reshape((-1,) + (1,) * (like.ndim - 1)), like.shape)


def unit_fmt(unit):
    from hif4spec import unit_spec
    return unit_spec(unit).fmt


#: The soak's default mix of K-loop kinds, by share of steps.
SOAK_MIX = {"random": 0.6, "cancel": 0.3, "special": 0.1}


def mixed_stream(unit, residual, n, rng, mix=None, *, segment=512):
    """``n`` steps in segments of ``segment``, each of a kind drawn with the shares of
    ``mix`` (default :data:`SOAK_MIX`): ``random`` (:func:`random_stream`), ``cancel``
    (:func:`cancel_stream`) or ``special`` (:func:`special_stream`)."""
    mix = SOAK_MIX if mix is None else mix
    kinds = list(mix)
    p = np.array([mix[k] for k in kinds], dtype=float)
    make = {"random": random_stream, "cancel": cancel_stream, "special": special_stream}
    parts, done = [], 0
    while done < n:
        size = min(segment, n - done)
        kind = kinds[rng.choice(len(kinds), p=p / p.sum())]
        parts.append(make[kind](unit, residual, size, rng))
        done += size
    return concat(parts)
