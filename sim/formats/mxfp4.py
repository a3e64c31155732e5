"""MXFP4 (OCP Microscaling v1.0), spec section 3: 32 E2M1 elements and one E8M0 scale."""

import numpy as np

from .codecs import E2M1_VALUES, E8M0_VALUES, encode_e2m1, exp2floor
from .table import FORMATS

SPEC = FORMATS["mxfp4"]
NAN_SCALE = SPEC.nan_scale_code


def quantize_groups(x):
    """Quantize blocks ``x`` (G, 32) of any float dtype; returns the MXFP4 fields."""
    x = x.astype(np.float64)
    a = np.abs(x)
    amax = a.max(axis=-1)
    bad = ~np.isfinite(amax)
    amax = np.where(bad, 0.0, amax)
    e = np.clip(exp2floor(amax) - 2, -127, 127)
    e = np.where(amax == 0, -127, e)
    scale_x = np.ldexp(1.0, e)
    with np.errstate(invalid="ignore"):
        elem = encode_e2m1(np.where(bad[:, None], 0.0, a) / scale_x[:, None])
    elem |= (x < 0).astype(np.uint8) << 3
    elem[bad] = 0
    scale = np.where(bad, NAN_SCALE, e + 127).astype(np.uint8)
    return {"elem": elem, "scale": scale}


def dequantize_groups(fields):
    """Exact float64 values (G, 32) of MXFP4 fields."""
    return E2M1_VALUES[fields["elem"]] * E8M0_VALUES[fields["scale"]][:, None]

