"""Encoder stimulus: BF16 groups, their input beats and the golden outputs of an encoder.

A *group set* is a dict ``{"x", "t"}``: ``x`` uint16 (G, 64), the BF16 codes of G groups
of 64 activations (one 64-element step each); ``t`` uint32 (G,), the raw FP32 bits of the
NVFP4 tensor scale T of each group, or None for the other formats. It may also carry
``"names"``: ``[(first_group, name), ...]`` of the named cases it starts with.

- :func:`random_groups`: groups drawn from many distributions, cycling through
  :data:`KINDS` (uniform codes, Gaussians over the whole BF16 range, outliers 2^20 above
  the rest, residual underflow, zero groups, subnormals, special values, values on fine
  grids with rounding ties, exactly representable groups, sparse and equal-magnitude
  groups for the 2:4 selection);
- :func:`named_groups`: the named cases (every BF16 special value, Vmax on every scale
  boundary of the format, rounding ties of the elements, groups whose residual underflows,
  single outliers 2^20 above the rest; NVFP4: tensor scales at the clamps, full 24-bit
  significands, block scales on E4M3 rounding midpoints);
- :func:`encoder_stream`: the named cases then random groups, exactly ``vectors`` groups;
- :func:`pack_beats`: the ``i__payload`` beats of a group set at the manifest's offsets
  (``t`` goes with a group's last beat; the other beats carry a random ``t`` that the unit
  must ignore);
- :func:`expected_outputs`: the golden ``o__payload`` of every group, ``q`` (the packed
  operand step of ``sim.formats.quantize``) and ``r`` (``sim.formats.resq``'s residual,
  packed by ``pack_24`` / ``pack_24_mxfp4``, or a dense step) as one int each. NVFP4 groups
  are quantized with their own T (``sim.formats.nvfp4.quantize_groups``).
"""

import numpy as np

from hif4spec import (STEP_ELEMS, operand_layout, output_fields, payload_fields,
                      residual_layout, step_layout, unit_spec)

from sim.formats.registry import EncoderHooks, golden, register

__all__ = ["KINDS", "random_groups", "named_groups", "encoder_stream", "concat_groups",
           "take_groups", "pack_beats", "expected_outputs", "bf16_codes", "tensor_scale_bits"]

#: Distributions of :func:`random_groups`, drawn in turn.
KINDS = ("codes", "narrow", "gauss", "outlier", "underflow", "zero", "subnormal", "special",
         "grid", "exact", "sparse", "equal")

_EXP_MASK = 0x7F80


def bf16_codes(values):
    """BF16 codes (uint16) of float values: RNE (IEEE), overflow to Inf, -0 kept."""
    import ml_dtypes

    return np.asarray(values, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def _values(codes):
    import ml_dtypes

    return np.ascontiguousarray(codes, dtype=np.uint16).view(ml_dtypes.bfloat16)


def tensor_scale_bits(t):
    """Raw FP32 bits (uint32) of tensor scales ``t``."""
    return np.asarray(t, dtype=np.float32).view(np.uint32)


def _fmt(unit):
    spec = unit_spec(unit)
    if spec.kind != "encoder":
        raise ValueError(f"{unit} is not an encoder unit")
    return spec.fmt


def _gauss(rng, n, exps):
    """n groups: standard normal values times 2**exps (per group), as BF16 codes."""
    v = rng.standard_normal((n, STEP_ELEMS)) * np.exp2(np.asarray(exps, dtype=np.float64))[:, None]
    with np.errstate(over="ignore"):
        return bf16_codes(v)


def _random_t(rng, x, fmt):
    """A tensor scale per group: the group's own (format ``fmt``'s per-tensor T of the
    group), a random normal float with a full 24-bit significand, or a power of two."""
    tensor_scale = golden(fmt).tensor_scale

    g = len(x)
    out = np.empty(g, dtype=np.float32)
    kind = rng.integers(0, 3, g)
    vals = _values(x)
    for i in range(g):
        if kind[i] == 0:
            out[i] = tensor_scale(vals[i].astype(np.float32))
        elif kind[i] == 1:
            bits = (int(rng.integers(1, 255)) << 23) | int(rng.integers(0, 1 << 23))
            out[i] = np.uint32(bits).view(np.float32)
        else:
            out[i] = np.float32(2.0 ** int(rng.integers(-126, 128)))
    return tensor_scale_bits(out)


def random_groups(unit, n, rng, *, kinds=KINDS):
    """``n`` random groups for encoder ``unit``, the distributions of ``kinds`` in turn."""
    fmt = _fmt(unit)
    x = np.zeros((n, STEP_ELEMS), dtype=np.uint16)
    which = np.arange(n) % len(kinds)
    for j, kind in enumerate(kinds):
        idx = np.flatnonzero(which == j)
        if len(idx):
            x[idx] = _draw(kind, len(idx), rng, fmt)
    t = _random_t(rng, x, fmt) if golden(fmt).has_tensor_scale else None
    return {"x": x, "t": t}


def _hooks(fmt):
    """The encoder stimulus hooks of format ``fmt`` (``GoldenFormat.encoder``)."""
    return golden(fmt).need("encoder")


def _draw(kind, n, rng, fmt):
    e = STEP_ELEMS
    if kind == "codes":                          # every finite BF16 code, uniform
        c = rng.integers(0, 1 << 16, (n, e)).astype(np.uint16)
        bad = (c & _EXP_MASK) == _EXP_MASK
        return np.where(bad, c & 0x807F, c).astype(np.uint16)
    if kind == "narrow":                         # one binade band, random mantissas
        ex = rng.integers(1, 254, n)[:, None] + rng.integers(-3, 1, (n, e))
        c = (np.clip(ex, 1, 254) << 7) | rng.integers(0, 128, (n, e)) \
            | (rng.integers(0, 2, (n, e)) << 15)
        return c.astype(np.uint16)
    if kind == "gauss":
        return _gauss(rng, n, rng.integers(-135, 125, n))
    if kind == "outlier":                        # one element 2^20 above the rest
        c = _gauss(rng, n, rng.integers(-120, 100, n))
        v = _values(c).astype(np.float64)
        pos = rng.integers(0, e, n)
        v[np.arange(n), pos] = np.abs(v).max(axis=1) * 2.0 ** 20 * rng.choice([-1, 1], n)
        with np.errstate(over="ignore"):
            return bf16_codes(v)
    if kind == "underflow":                      # the residual falls below the least scale
        return _gauss(rng, n, rng.integers(*_hooks(fmt).underflow_exps, n))
    if kind == "zero":
        return (rng.integers(0, 2, (n, e)) << 15).astype(np.uint16)
    if kind == "subnormal":                      # BF16 subnormals, zeros, a few normals
        c = rng.integers(0, 128, (n, e)) | (rng.integers(0, 2, (n, e)) << 15)
        normal = rng.random((n, e)) < 0.1
        c = np.where(normal, c | (rng.integers(1, 4, (n, e)) << 7), c)
        return c.astype(np.uint16)
    if kind == "special":                        # Inf and NaN codes among normal values
        c = _gauss(rng, n, rng.integers(-60, 60, n))
        hit = rng.random((n, e)) < 0.05
        hit[np.arange(n), rng.integers(0, e, n)] = True
        spec = (_EXP_MASK | (rng.integers(0, 2, (n, e)) << 15)
                | np.where(rng.random((n, e)) < 0.5, 0, rng.integers(1, 128, (n, e))))
        return np.where(hit, spec, c).astype(np.uint16)
    if kind == "grid":                           # multiples of fine powers of two: ties
        ex = rng.integers(-130, 120, n)[:, None]
        m = rng.integers(0, 128, (n, e)) * rng.choice([-1.0, 1.0], (n, e))
        v = m * np.exp2(ex - rng.integers(0, 6, (n, e)).astype(np.float64))
        return bf16_codes(v)
    if kind == "exact":                          # values the format represents: dX = 0
        from sim.formats import fake_quantize

        c = _gauss(rng, n, rng.integers(-40, 40, n))
        if not _hooks(fmt).exact_groups:
            return c
        return bf16_codes(fake_quantize(_values(c).astype(np.float32), fmt, axis=1))
    if kind == "sparse":                         # mostly zeros: 2:4 picks among zeros
        c = _gauss(rng, n, rng.integers(-30, 30, n))
        return np.where(rng.random((n, e)) < 0.8, 0, c).astype(np.uint16)
    if kind == "equal":                          # equal magnitudes: 2:4 ties
        mag = _gauss(rng, n, rng.integers(-30, 30, n))[:, :1] & 0x7FFF
        sign = rng.integers(0, 2, (n, e)) << 15
        c = np.where(rng.random((n, e)) < 0.3, 0, mag | sign)
        return c.astype(np.uint16)
    raise ValueError(f"unknown group kind {kind!r}")


_SPECIALS = {"+0": 0x0000, "-0": 0x8000, "+inf": 0x7F80, "-inf": 0xFF80, "qnan": 0x7FC0,
             "snan": 0x7F81, "-nan": 0xFFFF, "max": 0x7F7F, "-max": 0xFF7F,
             "min_normal": 0x0080, "-min_normal": 0x8080, "min_subnormal": 0x0001,
             "-min_subnormal": 0x8001, "max_subnormal": 0x007F, "-max_subnormal": 0x807F}


def _around(values, rng, below=1.0):
    """Groups with ``values`` (BF16 codes, one per group) at a random position and the other
    elements Gaussian, at most ``below`` times the value's magnitude."""
    values = np.asarray(values, dtype=np.uint16)
    n = len(values)
    mag = _values(values & 0x7FFF).astype(np.float64)
    v = rng.standard_normal((n, STEP_ELEMS)) * mag[:, None] * below / 4
    v = np.clip(v, -mag[:, None] * below, mag[:, None] * below)
    x = bf16_codes(v)
    x[np.arange(n), rng.integers(0, STEP_ELEMS, n)] = values
    return x


def _neighbours(codes, k=2):
    """The positive BF16 codes within ``k`` codes of each of ``codes`` (finite ones)."""
    out = np.add.outer(np.asarray(codes, dtype=np.int64), np.arange(-k, k + 1)).ravel()
    out = out[(out > 0) & (out < 0x7F80)]
    return np.unique(out).astype(np.uint16)


# Per format: BF16 codes of group maxima on and around every scale boundary, and groups whose
# elements sit on the element rounding midpoints of their scale (EncoderHooks).


def _hif4_boundaries():
    from sim.formats.hif4 import _SCALE_THRESHOLDS

    thr = _SCALE_THRESHOLDS[np.isfinite(_SCALE_THRESHOLDS) & (_SCALE_THRESHOLDS < 3e38)]
    return _neighbours(bf16_codes(thr))


def _mxfp4_boundaries():                        # amax at and below every power of two
    return _neighbours(np.arange(1, 255) << 7, 1)


def _nvfp4_boundaries():
    """NVFP4 with T = 1: amax / 6 on every UE4M3 value and rounding midpoint."""
    from sim.formats.codecs import UE4M3_VALUES

    grid = np.unique(UE4M3_VALUES[np.isfinite(UE4M3_VALUES)])
    mids = np.concatenate([grid, (grid[1:] + grid[:-1]) / 2, [448.0 * 17 / 16, 480.0]])
    return _neighbours(bf16_codes(6.0 * mids), 1)


def _hif4_ties(rng):
    out = []
    for e in range(-40, 41, 4):                  # Vmax = 7 * 2^e: S = 2^e, b = c = 1 there
        top = 7.0 * 2.0 ** e
        half = (rng.integers(0, 7, (6, STEP_ELEMS)) + 0.5) * 2.0 ** e
        half = half * np.exp2(-rng.integers(0, 3, (6, STEP_ELEMS)).astype(np.float64))
        half = half * rng.choice([-1.0, 1.0], half.shape)
        half[:, 0] = top
        out.append(bf16_codes(half))
    return np.concatenate(out)


def _e2m1_ties(rng):
    out = []
    for e in range(-40, 41, 4):                  # amax = 6 * 2^e: X = 2^e (MXFP4), T = 1
        top = 6.0 * 2.0 ** e
        mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
        half = rng.choice(mids, (6, STEP_ELEMS)) * 2.0 ** e
        half = half * rng.choice([-1.0, 1.0], half.shape)
        half[:, 0] = top
        out.append(bf16_codes(half))
    return np.concatenate(out)


def named_groups(unit, residual="none", *, seed=0):
    """``[(name, group set), ...]``: the named cases of encoder ``unit``."""
    fmt = _fmt(unit)
    hooks = _hooks(fmt)
    tensor_scale = golden(fmt).has_tensor_scale
    rng = np.random.default_rng(seed)
    cases = []
    specials = np.array(list(_SPECIALS.values()), dtype=np.uint16)
    # every special value filling a whole group, then at one position of normal groups
    cases.append(("special_whole_groups", np.repeat(specials[:, None], STEP_ELEMS, axis=1)))
    normal = _gauss(rng, 2 * len(specials), rng.integers(-20, 20, 2 * len(specials)))
    normal[np.arange(len(normal)), rng.integers(0, STEP_ELEMS, len(normal))] = \
        np.tile(specials, 2)
    cases.append(("special_in_normal_groups", normal))
    tiny = _around(np.array([0x0001, 0x8001, 0x007F, 0x0080, 0x0100], dtype=np.uint16), rng)
    cases.append(("subnormal_groups", tiny))
    cases.append(("vmax_on_scale_boundaries", _around(hooks.boundaries(), rng)))
    cases.append(("element_rounding_ties", hooks.ties(rng)))
    out = _gauss(rng, 16, rng.integers(-100, 80, 16))
    v = _values(out).astype(np.float64)
    v[:, 5] = np.abs(v).max(axis=1) * 2.0 ** 20
    cases.append(("single_outlier_2^20", bf16_codes(v)))
    cases.append(("residual_underflow",
                  _gauss(rng, 16, np.full(16, hooks.residual_underflow_exp))))
    out = []
    for name, x in cases:
        t = None
        if tensor_scale:
            t = tensor_scale_bits(np.ones(len(x), dtype=np.float32))
        out.append((name, {"x": x.astype(np.uint16), "t": t}))
    if hooks.extra_groups is not None:
        out += hooks.extra_groups(rng)
    return out


def _nvfp4_groups(rng):
    """NVFP4's further named groups: tensor scales at the clamps and with full significands,
    block scales clamped at 448."""
    out = []
    x = _gauss(rng, 24, rng.integers(-60, 60, 24))
    t = np.array([2.0 ** -126, 2.0 ** 127, 1 + 2.0 ** -23, 2 - 2.0 ** -23] * 6)
    t[8:] = np.clip(t[8:] * np.exp2(rng.integers(-60, 60, 16)), 2.0 ** -126, 2.0 ** 127)
    out.append(("tensor_scale_clamps_and_full_significands",
                {"x": x, "t": tensor_scale_bits(t)}))
    amax = np.float32(6.0 * 448 * 2)        # amax / 6 / T far above 448: clamped
    x = _around(bf16_codes(np.full(4, amax)), rng)
    out.append(("block_scale_above_448", {"x": x, "t": tensor_scale_bits(np.ones(4))}))
    return out


register("hif4", encoder=EncoderHooks((-52, -38), -46, _hif4_boundaries, _hif4_ties))
register("mxfp4", encoder=EncoderHooks((-133, -118), -126, _mxfp4_boundaries, _e2m1_ties))
register("nvfp4", encoder=EncoderHooks((-133, -100), -120, _nvfp4_boundaries, _e2m1_ties,
                                       _nvfp4_groups, exact_groups=False))


def concat_groups(sets):
    """Concatenate group sets (their ``names`` shifted to match)."""
    sets = [s for s in sets if len(s["x"])]
    x = np.concatenate([s["x"] for s in sets])
    t = None if sets[0]["t"] is None else np.concatenate([s["t"] for s in sets])
    names, base = [], 0
    for s in sets:
        names += [(base + k, name) for k, name in s.get("names", [])]
        base += len(s["x"])
    return {"x": x, "t": t, "names": names}


def take_groups(s, n):
    """The first ``n`` groups of group set ``s``."""
    return {"x": s["x"][:n], "t": None if s["t"] is None else s["t"][:n],
            "names": [(k, name) for k, name in s.get("names", []) if k < n]}


def encoder_stream(unit, residual, vectors, seed, *, named=True):
    """Exactly ``vectors`` groups: the named cases first (when ``named``), then random
    groups (:func:`random_groups`)."""
    rng = np.random.default_rng(seed)
    parts = []
    if named:
        for name, s in named_groups(unit, residual, seed=seed):
            parts.append({**s, "names": [(0, name)]})
    have = sum(len(p["x"]) for p in parts)
    if vectors > have:
        parts.append(random_groups(unit, vectors - have, rng))
    return take_groups(concat_groups(parts), vectors)


def pack_beats(manifest, unit, s, lanes=None, *, seed=0):
    """``i__payload`` beats of group set ``s`` as uint8 (G * n, bytes), little-endian.

    Offsets from ``manifest["payload"]`` (or ``hif4spec.payload_fields`` without a
    manifest, then ``lanes`` is needed). Beat b of a group holds its elements
    ``[b lanes, (b + 1) lanes)``; ``t`` is the group's T on its last beat and random bits on
    the others (the unit takes T with the last beat only).
    """
    fmt = _fmt(unit)
    if manifest is not None:
        lanes = manifest["parameters"]["lanes"]
        fields = manifest["payload"]
    else:
        fields, offset = {}, 0
        for name, bits in payload_fields(unit, "none", lanes):
            fields[name] = {"offset": offset, "width": bits}
            offset += bits
    n = STEP_ELEMS // lanes
    x = np.ascontiguousarray(s["x"], dtype=np.uint16)
    g = len(x)
    width = max(f["offset"] + f["width"] for f in fields.values())
    if width % 8 or any(f["offset"] % 8 or f["width"] % 8 for f in fields.values()):
        raise ValueError("encoder payload fields must be whole bytes")
    out = np.zeros((g, n, width // 8), dtype=np.uint8)
    xo, xw = fields["x"]["offset"] // 8, fields["x"]["width"] // 8
    if xw != 2 * lanes:
        raise ValueError(f"payload field 'x' has {8 * xw} bits, not {16 * lanes}")
    out[:, :, xo:xo + xw] = x.astype("<u2").view(np.uint8).reshape(g, n, xw)
    if golden(fmt).has_tensor_scale:
        if s["t"] is None:
            raise ValueError(f"{golden(fmt).title} groups need a tensor scale t per group")
        to = fields["t"]["offset"] // 8
        rng = np.random.default_rng(seed)
        t = rng.integers(0, 1 << 32, (g, n), dtype=np.uint64).astype(np.uint32)
        t[:, -1] = s["t"]
        out[:, :, to:to + 4] = t.astype("<u4").view(np.uint8).reshape(g, n, 4)
    return out.reshape(g * n, width // 8)


def _step_ints(layout_name, fields, g):
    from sim import dot

    lay = step_layout(layout_name)
    shaped = {k: np.asarray(fields[k]).reshape((g,) + lay.shape(k)) for k in lay.fields}
    return dot.pack_steps(layout_name, shaped)


def _scaled_fields(fmt, x, t):
    """Operand step fields of groups ``x`` (G, 64) float32 in format ``fmt`` (one with a
    tensor scale), each group with its own T (``t`` floats)."""
    gf = golden(fmt)
    lay = operand_layout(fmt)
    g = len(x)
    per = STEP_ELEMS // gf.spec.block
    f = gf.quantize(x.reshape(-1, gf.spec.block),
                    np.repeat(np.asarray(t, dtype=np.float64), per))
    return {k: np.asarray(f[k]).astype(np.uint8).reshape((g,) + lay.shape(k))
            for k in lay.fields}


def expected_outputs(unit, residual, s):
    """The golden ``o__payload`` of every group of ``s``: a list of ints, ``q`` in the low
    bits and ``r`` (if any) above it (``hif4spec.output_fields``)."""
    from sim.formats import quantize
    from sim.formats.resq import resq

    fmt = _fmt(unit)
    x = _values(s["x"])
    g = len(x)
    if golden(fmt).has_tensor_scale:
        if residual != "none":
            raise ValueError(f"the {golden(fmt).title} encoder emits no residual")
        t = np.asarray(s["t"], dtype=np.uint32).view(np.float32)
        q = _step_ints(fmt, _scaled_fields(fmt, x.astype(np.float32), t), g)
        return q
    q = _step_ints(fmt, quantize(x, fmt, axis=1).fields, g)
    if residual == "none":
        return q
    res = resq(x, fmt, residual, axis=1).residual
    if residual == "dense":
        rf = res.fields
    else:
        rf = golden(fmt).need("pack_residual")(res)
    r = _step_ints(residual_layout(fmt, residual).name, rf, g)
    shift = dict(output_fields(unit, residual))["q"]
    return [qi | (ri << shift) for qi, ri in zip(q, r)]
