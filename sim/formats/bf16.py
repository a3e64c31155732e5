"""BF16 as an element-wise format: IEEE bfloat16 RNE of the float64 value, with the spec's
sign rule (sign bit iff the input is < 0, so -0.0 gives +0) and NaN -> 0x7FC0."""

import numpy as np

from .codecs import decode_bf16, encode_bf16
from .table import FORMATS

SPEC = FORMATS["bf16"]


def quantize_elements(x):
    """BF16 codes (uint16, shape of ``x``) of any float array."""
    x = np.asarray(x, dtype=np.float64)
    code = encode_bf16(np.abs(x)) | ((x < 0).astype(np.uint16) << 15)
    return {"code": np.where(np.isnan(x), np.uint16(0x7FC0), code).astype(np.uint16)}


def dequantize_elements(fields):
    """float64 values of BF16 codes."""
    return decode_bf16(fields["code"])
