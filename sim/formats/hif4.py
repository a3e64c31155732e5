"""HiF4 (HiFloat4), spec section 2: 64 elements, E6M2 + 8 L2 bits + 16 L3 bits + S1P2.

Group-level functions take a 2-D array ``(G, 64)`` of groups and return fields with a leading
``G``; :mod:`sim.formats.tensor` does the reshaping, padding and chunking.
"""

import numpy as np

from .codecs import E6M2_VALUES, HIF4_REC, S1P2_VALUES, bf16_round, encode_e6m2
from .table import FORMATS, HIF4_BF16_ONE_SEVENTH

SPEC = FORMATS["hif4"]
NAN_SCALE = SPEC.nan_scale_code


def _scales(a):
    """Steps 1-6 on a = |x| as float64 (G, 64): returns V16, scale codes, REC, b, c."""
    g = a.shape[0]
    v16 = a.reshape(g, 16, 4).max(axis=-1)
    v8 = v16.reshape(g, 8, 2).max(axis=-1)
    vmax = v8.max(axis=-1)
    bad = ~np.isfinite(vmax)
    vmax = np.where(bad, 0.0, vmax)
    sf = bf16_round(vmax * HIF4_BF16_ONE_SEVENTH)             # step 2
    scale = encode_e6m2(sf)                                   # step 3
    rec = HIF4_REC[scale]                                     # step 4
    b = (np.where(bad[:, None], 0.0, v8) * rec[:, None] >= 4).astype(np.uint8)    # step 5
    v16r = np.where(bad[:, None], 0.0, v16) * rec[:, None]
    c = (np.ldexp(v16r, -np.repeat(b, 2, axis=1).astype(np.int32)) >= 2).astype(np.uint8)
    scale[bad] = NAN_SCALE
    b[bad] = 0
    c[bad] = 0
    return scale, rec, b, c, bad


def quantize_groups(x):
    """Quantize groups ``x`` (G, 64) of any float dtype; returns the HiF4 fields."""
    g = x.shape[0]
    x = x.astype(np.float64)
    a = np.abs(x)
    with np.errstate(invalid="ignore", over="ignore"):
        scale, rec, b, c, bad = _scales(a)
        shift = 2 - (np.repeat(b, 2, axis=1) + c).astype(np.int32)       # (G, 16)
        y = np.ldexp((a * rec[:, None]).reshape(g, 16, 4), shift[:, :, None])   # step 7
        t = y + 0.5
        k = np.minimum(np.floor(t), 7.0).reshape(g, 64)
    k = np.where(bad[:, None] | ~np.isfinite(k), 0.0, k).astype(np.uint8)
    s = (x < 0) & ~bad[:, None]                                            # step 8
    elem = k | (s.astype(np.uint8) << 3)
    return {"elem": elem, "l3": c, "l2": b, "scale": scale}


def dequantize_groups(fields):
    """Exact float64 values (G, 64) of HiF4 fields (NaN for a NaN scale)."""
    elem, l3, l2, scale = fields["elem"], fields["l3"], fields["l2"], fields["scale"]
    g = elem.shape[0]
    s = E6M2_VALUES[scale]
    e = (np.repeat(l2, 2, axis=-1).astype(np.int32) + l3)                  # (G, 16)
    mg = np.ldexp(s[:, None], e)                                           # S * 2^(b+c)
    v = S1P2_VALUES[elem].reshape(g, 16, 4) * mg[:, :, None]
    return v.reshape(g, 64)
