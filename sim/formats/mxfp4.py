"""MXFP4 (OCP Microscaling v1.0), spec section 3: 32 E2M1 elements and one E8M0 scale.

The kernel works on a chunk transposed to (32, G) so that block reductions and per-block
scales are contiguous rows. X = 2^e is built from the exponent bits of amax (exp2floor
without logarithms); ``a / X`` is computed as ``a * 2^-e``, the same correctly rounded
real quotient. E2M1 rounding uses :func:`~sim.formats.codecs.e2m1_round_fast`.
"""

import numpy as np

from .codecs import E2M1_VALUES, E8M0_VALUES, e2m1_code_of_magnitude, e2m1_round_fast
from ._scratch import scratch
from hif4spec.formats import FORMATS

SPEC = FORMATS["mxfp4"]
NAN_SCALE = SPEC.nan_scale_code


def _kernel(x):
    """Returns ``(xt, q, e, bad)``: ``xt`` (32, G) the input with -0.0 -> +0.0, ``q``
    (32, G) float64 E2M1 magnitudes, ``e`` (G,) int64 scale exponents, ``bad`` (G,).
    ``xt`` and ``q`` are scratch buffers, valid until the next call in this thread."""
    g = x.shape[0]
    xt = scratch("mx.xt", (32, g), x.dtype)
    np.add(x.T, x.dtype.type(0), out=xt)
    a = np.abs(xt, out=scratch("mx.a", (32, g), x.dtype))
    amax = np.maximum.reduce(a, axis=0).astype(np.float64)
    bad = ~np.isfinite(amax)
    # exp2floor(amax) from the float64 exponent field; zero and subnormal amax (below
    # 2^-1022) clamp to e = -127 like every amax below 2^-125 does.
    field = (amax.view(np.uint64) >> np.uint64(52)).astype(np.int64)
    e = np.clip(field - 1023 - 2, -127, 127)
    inv_x = ((1023 - e) << 52).view(np.float64)                           # 2^-e
    q = np.multiply(a, inv_x, out=scratch("mx.q", (32, g), np.float64))
    e2m1_round_fast(q, out=q, tmp=scratch("mx.c", (32, g), np.float64))
    return xt, q, e, bad


def fake_quantize_groups(x, out):
    """Write dequantized MXFP4 values of blocks ``x`` (G, 32) into ``out`` (G, 32)."""
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float32)
    g = x.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        xt, q, e, bad = _kernel(x)
        scale = ((e + 1023) << 52).view(np.float64)                        # 2^e
        v = np.multiply(q, scale, out=scratch("mx.v", (32, g), x.dtype),
                        casting="same_kind")   # exact in float32 (2^-128 .. 6 * 2^127)
        np.copysign(v, xt, out=v)
    if bad.any():
        v[:, bad] = np.nan
    if out.dtype.name == "bfloat16":
        v = v.astype(out.dtype)
    np.copyto(out.T, v, casting="unsafe")


def quantize_groups(x):
    """Quantize blocks ``x`` (G, 32) of any float dtype; returns the MXFP4 fields."""
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        xt, q, e, bad = _kernel(x)
        q[:, bad] = 0.0
    code = e2m1_code_of_magnitude(q) | ((xt < 0).view(np.uint8) << 3)
    elem = np.ascontiguousarray(code.T)
    elem[bad] = 0
    scale = np.where(bad, NAN_SCALE, e + 127).astype(np.uint8)
    return {"elem": elem, "scale": scale}


def dequantize_groups(fields):
    """Exact float64 values (G, 32) of MXFP4 fields."""
    return E2M1_VALUES[fields["elem"]] * E8M0_VALUES[fields["scale"]][:, None]
