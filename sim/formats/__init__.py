"""Bit-exact NumPy golden model of HiF4, MXFP4, NVFP4, HiF8 and BF16 (``docs/formats.md``).

>>> from sim.formats import quantize, fake_quantize
>>> qt = quantize(x, "hif4", axis=-1)        # doctest: +SKIP
>>> y = qt.dequantize()                      # == fake_quantize(x, "hif4")   # doctest: +SKIP

Every format is one :class:`~sim.formats.registry.GoldenFormat` (:func:`golden`), registered
with :func:`register`.
"""

from hif4spec.formats import FORMATS, STEP_ELEMS
from .tensor import QuantizedTensor, dequantize, fake_quantize, from_bytes, quantize
from . import builtin  # noqa: F401  (registers the built-in formats)
from .registry import golden, register, registered

__all__ = [
    "FORMATS",
    "STEP_ELEMS",
    "QuantizedTensor",
    "quantize",
    "fake_quantize",
    "dequantize",
    "from_bytes",
    "golden",
    "register",
    "registered",
]
