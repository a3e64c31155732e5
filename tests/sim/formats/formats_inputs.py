"""Adversarial input generators for the format tests (magnitudes 2^-60..2^25, zeros, exact
rounding ties, values one ulp below powers of two, the float64 ``y + 0.5`` step)."""

import numpy as np

from sim.formats import codecs, nvfp4, quantize


def bits_equal(a, b):
    """True when a and b have the same dtype, shape and bits (all NaNs count as equal)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    na, nb = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
    if not np.array_equal(na, nb):
        return False
    ui = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return np.array_equal(a.view(ui)[~na], b.view(ui)[~nb])


def values_equal(a, b):
    """Same dtype and shape, equal values, NaN where the other is NaN; the sign of a zero is
    not compared (re-quantizing -0.0 gives +0.0 by the spec's sign rule)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.astype(np.float64), b.astype(np.float64)
    na, nb = np.isnan(a), np.isnan(b)
    return bool(np.array_equal(na, nb) and np.array_equal(a[~na], b[~nb]))


def first_difference(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    ui = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    same = (a.view(ui) == b.view(ui)) | (np.isnan(a.astype(float)) & np.isnan(b.astype(float)))
    i = int(np.argmin(same))
    return i, a[i], b[i]


def wide_groups(rng, groups, block, lo=-60, hi=25, zero_share=0.1):
    """(groups, block) float64 values: per group a random top binade in [lo, hi] and a random
    spread below it, random signs, a share of +0.0/-0.0, some all-zero groups, half the
    groups rounded to float32 values."""
    top = rng.uniform(lo, hi, size=(groups, 1))
    spread = rng.uniform(0, 14, size=(groups, 1))
    e = top - spread * rng.random((groups, block))
    x = np.exp2(e) * rng.choice([-1.0, 1.0], size=(groups, block))
    x[rng.random((groups, block)) < zero_share] = 0.0
    x[rng.random((groups, block)) < zero_share / 2] = -0.0
    x[rng.random(groups) < 0.02] = 0.0
    f32 = rng.random(groups) < 0.5
    with np.errstate(over="ignore"):
        x[f32] = x[f32].astype(np.float32).astype(np.float64)
    return np.clip(x, -2.0 ** 25, 2.0 ** 25)


def _nudge(v, steps):
    """Move v by ``steps`` ulps (vectorized, steps in -3..3)."""
    out = v.copy()
    for s in range(1, 4):
        up = steps >= s
        dn = steps <= -s
        out[up] = np.nextafter(out[up], np.inf)
        out[dn] = np.nextafter(out[dn], 0.0)
    return out


def hif4_tie_groups(rng, groups):
    """HiF4 groups whose non-maximal elements sit on or within 3 ulps of the rounding
    midpoints (m + 0.5) * 2^(b+c-2) / REC of their micro-group, or on the float64 double
    rounding point y = 0.5 - 2^-54 of step 7."""
    x = wide_groups(rng, groups, 64, zero_share=0.0)
    # Make a third of the groups have a power-of-two S, where exact ties are reachable.
    p2 = rng.random(groups) < 0.33
    k = rng.integers(-40, 14, size=groups)
    x[p2, 0] = np.ldexp(7.0, k[p2])
    x[p2, 1:] = np.clip(x[p2, 1:], -np.ldexp(6.9, k[p2])[:, None], np.ldexp(6.9, k[p2])[:, None])
    qt = quantize(x, "hif4")
    rec = codecs.HIF4_REC[qt.fields["scale"].reshape(groups)]
    l2 = qt.fields["l2"].reshape(groups, 8)
    shift = np.repeat(l2, 2, axis=-1).astype(np.int64) + qt.fields["l3"].reshape(groups, 16)
    unit = np.ldexp(1.0, np.repeat(shift, 4, axis=-1) - 2) / rec[:, None]     # (G, 64)
    m = rng.integers(0, 8, size=(groups, 64)).astype(np.float64)
    target = np.where(rng.random((groups, 64)) < 0.2, 0.5 - 2.0 ** -54, m + 0.5)
    cand = _nudge(target * unit, rng.integers(-3, 4, size=(groups, 64)))
    a = np.abs(x).reshape(groups, 16, 4)
    v16 = a.max(axis=-1, keepdims=True)
    is_max = np.zeros_like(a, dtype=bool)
    np.put_along_axis(is_max, a.argmax(axis=-1)[..., None], True, axis=-1)
    ok = (cand.reshape(groups, 16, 4) < v16) & ~is_max
    ok = ok.reshape(groups, 64) & np.isfinite(cand)
    x = np.where(ok, np.copysign(cand, x + 0.0), x)
    return x


def block_tie_groups(rng, groups, fmt, tensor_scale=True):
    """MXFP4 / NVFP4 blocks with elements on E2M1 midpoints (and neighbours) of their block
    scale and block maxima one ulp below / at / above powers of two."""
    block = 32 if fmt == "mxfp4" else 16
    x = wide_groups(rng, groups, block, zero_share=0.05)
    amax = np.abs(x).max(axis=-1)
    # Block maxima around powers of two (one ulp below, exact, one ulp above).
    pow2 = np.ldexp(1.0, rng.integers(-60, 25, size=groups))
    which = rng.integers(-1, 2, size=groups)
    mx = np.where(which < 0, np.nextafter(pow2, 0), np.where(which > 0,
                  np.nextafter(pow2, np.inf), pow2))
    sel = rng.random(groups) < 0.5
    amax = np.where(sel, mx, amax)
    x[sel, 0] = mx[sel]
    x[sel] = np.clip(x[sel], -mx[sel][:, None], mx[sel][:, None])
    if fmt == "mxfp4":
        e = np.clip(codecs.exp2floor(np.where(amax > 0, amax, 1.0)) - 2, -127, 127)
        d = np.ldexp(1.0, e)
    else:
        t = float(nvfp4.tensor_scale(x, tensor_scale))
        with np.errstate(over="ignore", under="ignore"):
            s = codecs.UE4M3_VALUES[codecs.encode_ue4m3(np.minimum(amax / 6.0 / t, 448.0))]
        d = s * t
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0])
    cand = mids[rng.integers(0, len(mids), size=(groups, block))] * d[:, None]
    cand = _nudge(cand, rng.integers(-1, 2, size=(groups, block)))
    ok = (cand < amax[:, None]) & (rng.random((groups, block)) < 0.7)
    ok[:, 0] = False
    x = np.where(ok, np.copysign(cand, x + 0.0), x)
    return x
