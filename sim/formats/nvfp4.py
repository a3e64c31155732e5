"""NVFP4, spec section 4: 16 E2M1 elements, one UE4M3 scale, one FP32 scale T per tensor.

The kernel works on a chunk transposed to (16, G). The block scale is
RNE_E4M3(min(amax / 6 / T, 448)) with the two float64 divisions as written; elements are
``a / (T * s)`` (one float64 division; a zero scale divides by +Inf, giving 0) rounded by
:func:`~sim.formats.codecs.e2m1_round_fast`; dequantized values ``e * (s * T)`` are exact in
float64 and rounded once to the output dtype.
"""

import numpy as np

from .codecs import (E2M1_VALUES, UE4M3_VALUES, e2m1_code_of_magnitude, e2m1_round_fast,
                     e4m3_code_of_magnitude, e4m3_round_fast, round_to_dtype)
from ._scratch import scratch
from hif4spec.formats import FORMATS, NVFP4_TENSOR_SCALE_DIVISOR

SPEC = FORMATS["nvfp4"]
NAN_SCALE = SPEC.nan_scale_code


def tensor_scale(x, enabled=True):
    """T = float32(amax / 2688) over the finite values of ``x``, clamped to [2^-126, 2^127];
    1.0 when disabled or when that amax is 0 (or there are no finite values).

    Returns a 0-d float32 array.
    """
    if not enabled or x.size == 0:
        return np.array(1.0, dtype=np.float32)
    x = np.asarray(x)
    amax = float(np.max(np.abs(x), where=np.isfinite(x), initial=0.0))
    if amax == 0.0:
        return np.array(1.0, dtype=np.float32)
    with np.errstate(over="ignore"):
        t = np.float32(amax / NVFP4_TENSOR_SCALE_DIVISOR)
    t = min(max(float(t), 2.0 ** -126), 2.0 ** 127)
    return np.array(t, dtype=np.float32)


def _kernel(x, t):
    """Returns ``(xt, q, s, bad)``: ``xt`` (16, G) input with -0.0 -> +0.0, ``q`` (16, G)
    E2M1 magnitudes, ``s`` (G,) block scale values (float64), ``bad`` (G,). ``xt`` and
    ``q`` are scratch buffers, valid until the next call in this thread."""
    g = x.shape[0]
    xt = scratch("nv.xt", (16, g), x.dtype)
    np.add(x.T, x.dtype.type(0), out=xt)
    a = np.abs(xt, out=scratch("nv.a", (16, g), x.dtype))
    amax = np.maximum.reduce(a, axis=0).astype(np.float64)
    bad = ~np.isfinite(amax)
    amax[bad] = 0.0
    s = e4m3_round_fast(np.minimum(amax / 6.0 / t, 448.0))
    d = s * t                                                  # exact
    d[d == 0] = np.inf                                         # zero scale -> zero elements
    q = np.divide(a, d, out=scratch("nv.q", (16, g), np.float64))
    e2m1_round_fast(q, out=q, tmp=scratch("nv.c", (16, g), np.float64))
    return xt, q, s, bad


def fake_quantize_groups(x, out, t):
    """Write dequantized NVFP4 values of blocks ``x`` (G, 16) into ``out`` (G, 16)."""
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        xt, q, s, bad = _kernel(x, t)
        v = np.multiply(q, s * t, out=q)                       # exact in float64
        np.copysign(v, xt, out=v)
    if bad.any():
        v[:, bad] = np.nan
    if out.dtype.name == "bfloat16":
        v = round_to_dtype(v, out.dtype)
    np.copyto(out.T, v, casting="unsafe")


def quantize_groups(x, t):
    """Quantize blocks ``x`` (G, 16) with tensor scale ``t`` (a float, or one per block:
    (G,)); returns the fields."""
    t = float(t) if np.ndim(t) == 0 else np.asarray(t, dtype=np.float64)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        xt, q, s, bad = _kernel(x, t)
        q[:, bad] = 0.0
    code = e2m1_code_of_magnitude(q) | ((xt < 0).view(np.uint8) << 3)
    elem = np.ascontiguousarray(code.T)
    elem[bad] = 0
    scale = e4m3_code_of_magnitude(s)
    scale[bad] = NAN_SCALE
    return {"elem": elem, "scale": scale}


def dequantize_groups(fields, t):
    """Exact float64 values (G, 16) of NVFP4 fields: e * s * T."""
    return E2M1_VALUES[fields["elem"]] * UE4M3_VALUES[fields["scale"]][:, None] * float(t)
