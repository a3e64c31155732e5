"""HiF8 (HiFloat8), spec section 5: an element-wise 8-bit tapered float."""

import numpy as np

from .codecs import HIF8_VALUES, encode_hif8, hif8_round, round_to_dtype
from hif4spec.formats import FORMATS

SPEC = FORMATS["hif8"]


def quantize_elements(x):
    """HiF8 codes (uint8, shape of ``x``) of any float array."""
    return {"code": encode_hif8(np.asarray(x, dtype=np.float64))}


def dequantize_elements(fields):
    """float64 values of HiF8 codes (0x80 NaN, 0x6F/0xEF +-Inf)."""
    return HIF8_VALUES[fields["code"]]


def fake_quantize_elements(x):
    """Dequantized HiF8 values in x's dtype (no -0: a zero result is +0.0)."""
    x = np.asarray(x)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        q = hif8_round(np.abs(x64))
        np.copysign(q, x64, out=q)
        q += 0.0                                         # -0.0 -> +0.0
    return round_to_dtype(q, x.dtype)
