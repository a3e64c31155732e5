"""BF16 as an element-wise format: IEEE bfloat16 RNE of the float64 value, with the spec's
sign rule (sign bit iff the input is < 0, so -0.0 gives +0) and NaN -> 0x7FC0."""

import numpy as np

from .codecs import bf16_round, decode_bf16, encode_bf16
from hif4spec.formats import FORMATS

SPEC = FORMATS["bf16"]


def _round_narrow(x):
    """BF16 values, as float32, of a float16 / bfloat16 / float32 array of >= 1 dimension.

    float16 -> float32 is exact; the float32 word is rounded RNE to its top 16 bits (float32
    and bfloat16 share the exponent range, subnormals included). -0.0 becomes +0.0 first."""
    with np.errstate(invalid="ignore"):                 # signalling NaN bit patterns
        xf = np.add(x, np.float32(0), dtype=np.float32)
    bits = xf.view(np.uint32)
    r = (bits >> np.uint32(16)) & np.uint32(1)
    r += np.uint32(0x7FFF)
    r += bits
    r &= np.uint32(0xFFFF0000)
    y = r.view(np.float32)
    nan = np.isnan(xf)
    if nan.any():
        y[nan] = np.nan
    return y


def quantize_elements(x):
    """BF16 codes (uint16, shape of ``x``) of any float array."""
    x = np.asarray(x)
    if x.ndim == 0:
        return {"code": quantize_elements(x.reshape(1))["code"].reshape(())}
    if x.dtype in (np.float16, np.float32) or x.dtype.name == "bfloat16":
        y = _round_narrow(x)
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
    """Dequantized BF16 values in x's dtype, each rounded once from the exact BF16 value."""
    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        return x + x.dtype.type(0)                      # identity, -0.0 -> +0.0
    if x.ndim == 0:
        return fake_quantize_elements(x.reshape(1)).reshape(())
    if x.dtype == np.float32:
        return _round_narrow(x)
    if x.dtype == np.float16:
        with np.errstate(over="ignore"):
            return _round_narrow(x).astype(np.float16)  # exact value -> one RNE
    return bf16_round(np.asarray(x, dtype=np.float64) + 0.0)
