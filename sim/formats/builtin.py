"""Registers the numerics of the built-in formats (HiF4, MXFP4, NVFP4, HiF8, BF16) with
:mod:`sim.formats.registry`; :mod:`sim.stimulus` adds their stimulus hooks."""

from functools import lru_cache

import numpy as np

from hif4spec.formats import FORMATS

from . import bf16, hif4, hif8, mxfp4, nvfp4
from .registry import register
from .resq import pack_24, residual24_to_bytes
from .resq_mxfp4 import pack_24_mxfp4, residual24_mxfp4_to_bytes

__all__ = ["hif4_shifted_ints"]


@lru_cache(maxsize=None)
def hif4_shifted_ints():
    """HiF4 element ints with their micro-exponents: ``table[code * shifts + b + c]`` is
    ``4 * value(code) * 2**(b + c)`` as float32 (``shifts`` = every value of b + c).

    An element's L3 bit (its micro-group's) and L2 bit (its sub-group's) shift it up by
    b + c; products of two such values (<= 784) and their sums over 64 elements (< 2**16)
    are exact in float32, which makes the block sums fast and still exact."""
    from .codecs import int_grid

    lay = FORMATS["hif4"].fields
    shifts = (1 << lay["l3"].width) + (1 << lay["l2"].width) - 1
    ints = int_grid(FORMATS["hif4"].elem_type)[0]
    return (np.array([[int(v) << sh for sh in range(shifts)] for v in ints],
                     dtype=np.float32).reshape(-1), shifts)


def _hif4_decode(f, spec, ints):
    """HiF4 fields -> 4 * value * 2**(b + c); item i of ``elem`` is in micro-group
    i // (n / n3) and sub-group i // (n / n2)."""
    table, shifts = hif4_shifted_ints()
    fields = spec.fields
    elem = np.asarray(f["elem"]).astype(np.uint8) & (len(ints) - 1)
    n, n3, n2 = fields["elem"].count, fields["l3"].count, fields["l2"].count
    l3 = np.asarray(f["l3"]).astype(np.uint8)
    l2 = np.repeat(np.asarray(f["l2"]).astype(np.uint8), n3 // n2, axis=-1)
    sh = np.repeat(l3 + l2, n // n3, axis=-1)
    return table[elem * np.uint8(shifts) + sh]


register(FORMATS["hif4"], quantize=hif4.quantize_groups, dequantize=hif4.dequantize_groups,
         fake_quantize=hif4.fake_quantize_groups, elem_decode=_hif4_decode,
         pack_residual=pack_24, residual_bytes=residual24_to_bytes)
register(FORMATS["mxfp4"], quantize=mxfp4.quantize_groups, dequantize=mxfp4.dequantize_groups,
         fake_quantize=mxfp4.fake_quantize_groups, pack_residual=pack_24_mxfp4,
         residual_bytes=residual24_mxfp4_to_bytes)
register(FORMATS["nvfp4"], quantize=nvfp4.quantize_groups, dequantize=nvfp4.dequantize_groups,
         fake_quantize=nvfp4.fake_quantize_groups, tensor_scale=nvfp4.tensor_scale)
register(FORMATS["hif8"], quantize=hif8.quantize_elements, dequantize=hif8.dequantize_elements,
         fake_quantize=hif8.fake_quantize_elements)
register(FORMATS["bf16"], quantize=bf16.quantize_elements, dequantize=bf16.dequantize_elements,
         fake_quantize=bf16.fake_quantize_elements)
