"""NVFP4, spec section 4: 16 E2M1 elements, one UE4M3 scale, one FP32 scale T per tensor."""

import numpy as np

from .codecs import E2M1_VALUES, UE4M3_VALUES, encode_e2m1, encode_ue4m3
from .table import FORMATS, NVFP4_TENSOR_SCALE_DIVISOR

SPEC = FORMATS["nvfp4"]
NAN_SCALE = SPEC.nan_scale_code


def tensor_scale(x, enabled=True):
    """T = float32(amax / 2688) over the finite values of ``x``, clamped to [2^-126, 2^127];
    1.0 when disabled or when that amax is 0 (or there are no finite values).

    Returns a 0-d float32 array.
    """
    if not enabled or x.size == 0:
        return np.array(1.0, dtype=np.float32)
    a = np.abs(np.asarray(x))
    finite = np.isfinite(a)
    amax = float(np.max(a, where=finite, initial=0.0))
    if amax == 0.0:
        return np.array(1.0, dtype=np.float32)
    with np.errstate(over="ignore"):
        t = np.float32(amax / NVFP4_TENSOR_SCALE_DIVISOR)
    t = min(max(float(t), 2.0 ** -126), 2.0 ** 127)
    return np.array(t, dtype=np.float32)


def quantize_groups(x, t):
    """Quantize blocks ``x`` (G, 16) with tensor scale ``t`` (float); returns the fields."""
    t = float(t)
    x = x.astype(np.float64)
    a = np.abs(x)
    amax = a.max(axis=-1)
    bad = ~np.isfinite(amax)
    amax = np.where(bad, 0.0, amax)
    with np.errstate(over="ignore"):
        scale = encode_ue4m3(np.minimum(amax / 6.0 / t, 448.0))
    d = UE4M3_VALUES[scale] * t                                   # T * s, exact
    zero = d == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        v = np.where((bad | zero)[:, None], 0.0, a) / np.where(zero, 1.0, d)[:, None]
    # A zero block scale gives zero magnitudes; the sign rule (x < 0) still applies.
    elem = encode_e2m1(v) | ((x < 0).astype(np.uint8) << 3)
    elem[bad] = 0
    scale[bad] = NAN_SCALE
    return {"elem": elem.astype(np.uint8), "scale": scale}


def dequantize_groups(fields, t):
    """Exact float64 values (G, 16) of NVFP4 fields: e * s * T."""
    return E2M1_VALUES[fields["elem"]] * UE4M3_VALUES[fields["scale"]][:, None] * float(t)
