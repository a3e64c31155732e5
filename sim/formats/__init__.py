"""Bit-exact NumPy golden model of HiF4, MXFP4, NVFP4, HiF8 and BF16 (``docs/formats.md``).

>>> from sim.formats import quantize, fake_quantize
>>> qt = quantize(x, "hif4", axis=-1)        # doctest: +SKIP
>>> y = qt.dequantize()                      # == fake_quantize(x, "hif4")   # doctest: +SKIP
"""

from hif4spec.formats import FORMATS, STEP_ELEMS
from .tensor import QuantizedTensor, dequantize, fake_quantize, from_bytes, quantize

__all__ = [
    "FORMATS",
    "STEP_ELEMS",
    "QuantizedTensor",
    "quantize",
    "fake_quantize",
    "dequantize",
    "from_bytes",
]
