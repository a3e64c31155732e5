"""BF16 as an element-wise format: IEEE bfloat16 RNE of the float64 value, with the spec's
sign rule (sign bit iff the input is < 0, so -0.0 gives +0) and NaN -> 0x7FC0."""

import numpy as np

from .codecs import decode_bf16, encode_bf16
from .table import FORMATS

SPEC = FORMATS["bf16"]


def quantize_elements(x):
    """BF16 codes (uint16, shape of ``x``) of any float array."""
    x = np.asarray(x)
    if x.ndim == 0:
        return {"code": quantize_elements(x.reshape(1))["code"].reshape(())}
    if x.dtype in (np.float16, np.float32) or x.dtype.name == "bfloat16":
        y = fake_quantize_elements(x)
        if y.dtype != np.float32:
            y = y.astype(np.float32)                     # exact
        code = (y.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        code[np.isnan(y)] = 0x7FC0
        return {"code": code}
    x = np.asarray(x, dtype=np.float64)
    code = encode_bf16(np.abs(x)) | ((x < 0).astype(np.uint16) << 15)
    return {"code": np.where(np.isnan(x), np.uint16(0x7FC0), code).astype(np.uint16)}


def dequantize_elements(fields):
    """float64 values of BF16 codes."""
    return decode_bf16(fields["code"])


def fake_quantize_elements(x):
    """Dequantized BF16 values in x's dtype (float32 by bit rounding, others via float64)."""
    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        return x + x.dtype.type(0)                      # identity, -0.0 -> +0.0
    if x.ndim == 0:
        return fake_quantize_elements(x.reshape(1)).reshape(())
    if x.dtype in (np.float16, np.float32):
        # float16 -> float32 is exact; RNE to the top 16 bits of the float32 word (the
        # float32 and bfloat16 exponent ranges agree, subnormals included).
        xf = np.add(x, np.float32(0), dtype=np.float32)  # -0.0 -> +0.0
        bits = xf.view(np.uint32)
        r = (bits >> np.uint32(16)) & np.uint32(1)
        r += np.uint32(0x7FFF)
        r += bits
        r &= np.uint32(0xFFFF0000)
        y = r.view(np.float32)
        nan = np.isnan(xf)
        if nan.any():
            y[nan] = np.nan
        return y if x.dtype == np.float32 else y.astype(np.float16)
    x = np.asarray(x, dtype=np.float64)
    from .codecs import bf16_round
    return bf16_round(x + 0.0)
