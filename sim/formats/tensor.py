"""Packed tensors: :class:`QuantizedTensor`, :func:`quantize`, :func:`fake_quantize`,
byte serialization (spec section 1, "Packed tensors as bytes")."""

from math import ceil, prod

import numpy as np

from . import packing
from .codecs import round_to_dtype
from .registry import golden
from hif4spec.formats import FORMATS

__all__ = [
    "QuantizedTensor",
    "quantize",
    "fake_quantize",
    "dequantize",
    "from_bytes",
    "SUPPORTED_DTYPES",
]

#: Elements processed per chunk by the block quantizers (keeps temporaries in cache).
CHUNK_ELEMS = 1 << 16


def _dtype_ok(dtype):
    return dtype in (np.float16, np.float32, np.float64) or dtype.name == "bfloat16"


SUPPORTED_DTYPES = "float16, bfloat16 (ml_dtypes), float32 or float64"


def _check_fmt(fmt):
    golden(fmt)
    return fmt


def _check_options(fmt, options):
    allowed = golden(fmt).default_options
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        names = ", ".join(allowed) or "none"
        raise ValueError(f"Unknown option(s) {', '.join(unknown)} for format {fmt!r} "
                         f"(accepted: {names})")
    merged = dict(allowed)
    merged.update(options)
    if "tensor_scale" in merged:
        merged["tensor_scale"] = bool(merged["tensor_scale"])
    return merged


def _check_dtype(dtype):
    dtype = np.dtype(dtype)
    if not _dtype_ok(dtype):
        raise ValueError(f"Input dtype must be {SUPPORTED_DTYPES}, not {dtype}")
    return dtype


def _check_axis(axis, ndim, fmt):
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise ValueError(f"Axis must be an integer, not {axis!r}")
    axis = int(axis)
    if ndim == 0:
        if FORMATS[fmt].block > 1:
            raise ValueError(f"Format {fmt!r} needs an array with at least one axis, "
                             "not a 0-d array")
        return 0
    if not -ndim <= axis < ndim:
        raise ValueError(f"Axis {axis} is out of range for an array with {ndim} dimensions")
    return axis % ndim


def _as_input(x):
    x = np.asarray(x)
    _check_dtype(x.dtype)
    return x


def _block_view(x, axis, block):
    """x with ``axis`` moved last, padded with +0.0 to whole blocks, as (G, block)."""
    xm = np.moveaxis(x, axis, -1)
    lead, n = xm.shape[:-1], xm.shape[-1]
    nb = ceil(n / block)
    if n % block:
        xp = np.zeros(lead + (nb * block,), dtype=x.dtype)
        xp[..., :n] = xm
        xm = xp
    return xm.reshape(-1, block), lead, nb


def _unblock(v, shape, axis, block):
    """Inverse of :func:`_block_view` for values (G, block): drop padding, restore axis."""
    shape = tuple(shape)
    moved = shape[:axis] + shape[axis + 1:] + (shape[axis],)
    n = shape[axis]
    nb = ceil(n / block)
    v = v.reshape(moved[:-1] + (nb * block,))[..., :n]
    return np.moveaxis(v, -1, axis)


def _chunks(g, block):
    step = max(1, CHUNK_ELEMS // block)
    for lo in range(0, g, step):
        yield slice(lo, min(g, lo + step))


def _run_groups(fn, xg, block, *args):
    """Apply the group quantizer ``fn`` chunk by chunk; concatenate field arrays."""
    g = xg.shape[0]
    parts = [fn(xg[sl], *args) for sl in _chunks(g, block)]
    if not parts:
        parts = [fn(np.zeros((0, block), dtype=xg.dtype), *args)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _elementwise(fn, x):
    """Apply an element-wise quantizer chunk by chunk over the C-order flattening of x.

    ``fn`` returns an array or a dict of arrays shaped like its input."""
    if x.ndim == 0 or x.size <= CHUNK_ELEMS:
        y = fn(x)
    else:
        flat = x.reshape(-1)
        parts = [fn(flat[lo:lo + CHUNK_ELEMS]) for lo in range(0, flat.size, CHUNK_ELEMS)]
        if isinstance(parts[0], dict):
            y = {k: np.concatenate([p[k] for p in parts]).reshape(x.shape) for k in parts[0]}
        else:
            y = np.concatenate(parts).reshape(x.shape)
    if isinstance(y, dict):
        return {k: v if v.flags.c_contiguous else v.copy(order="C") for k, v in y.items()}
    return y if y.flags.c_contiguous else y.copy(order="C")


class QuantizedTensor:
    """A tensor in one of the formats: integer codes and scales plus shape and axis.

    Attributes
    ----------
    fmt : str
        A registered format (``sim.formats.registry``): "hif4", "mxfp4", "nvfp4", "hif8",
        "bf16".
    shape : tuple
        Original shape.
    axis : int
        Non-negative quantization axis.
    dtype : numpy.dtype
        Input dtype; :meth:`dequantize` returns it.
    fields : dict of numpy arrays
        Block formats: leading shape ``lead + (nb,)`` where ``lead`` is the shape with the
        axis removed and ``nb`` the number of blocks along the padded axis. hif4: ``elem``
        (.., 64) uint8, ``l3`` (.., 16), ``l2`` (.., 8), ``scale`` (..) E6M2; mxfp4:
        ``elem`` (.., 32), ``scale`` E8M0; nvfp4: ``elem`` (.., 16), ``scale`` UE4M3,
        ``tensor_scale`` 0-d float32 (every format with that option). hif8: ``code``
        uint8, bf16: ``code`` uint16, both of
        the original shape.
    options : dict
        Format options (``FormatSpec.options``; nvfp4: ``tensor_scale``).
    """

    def __init__(self, fmt, shape, axis, dtype, fields, options=None):
        self.fmt = _check_fmt(fmt)
        self.shape = tuple(int(s) for s in shape)
        self.axis = _check_axis(axis, len(self.shape), fmt)
        self.dtype = _check_dtype(dtype)
        self.fields = dict(fields)
        self.options = _check_options(fmt, dict(options or {}))

    @property
    def spec(self):
        """The :class:`~hif4spec.formats.FormatSpec` of the format."""
        return FORMATS[self.fmt]

    @property
    def lead(self):
        """Shape of the non-quantized axes (axis removed, C order)."""
        return self.shape[:self.axis] + self.shape[self.axis + 1:]

    def decoded(self):
        """Exact float64 values in the original shape (no rounding to ``dtype``)."""
        fmt = golden(self.fmt)
        if fmt.elementwise:
            return fmt.dequantize(self.fields)
        block = self.spec.block
        flat = {k: v.reshape((-1,) + v.shape[len(self.lead) + 1:])
                for k, v in self.fields.items() if k != "tensor_scale"}
        t = (self.fields["tensor_scale"],) if fmt.has_tensor_scale else ()
        v = fmt.dequantize(flat, *t)
        return _unblock(v, self.shape, self.axis, block)

    def dequantize(self):
        """Dequantized tensor in the input dtype (exact value rounded once, RNE)."""
        out = round_to_dtype(self.decoded(), self.dtype)
        return out if out.flags.c_contiguous else out.copy(order="C")

    def to_bytes(self):
        """Serialize in the spec's packed layout (section 1, "Packed tensors as bytes")."""
        spec = self.spec
        if golden(self.fmt).elementwise:        # one block per element, in C order
            flat = {k: np.reshape(v, (-1,)) for k, v in self.fields.items()}
        else:
            flat = {k: v.reshape((-1,) + v.shape[len(self.lead) + 1:])
                    for k, v in self.fields.items() if k != "tensor_scale"}
        body = packing.pack(spec, flat).tobytes()
        if golden(self.fmt).has_tensor_scale:
            t = np.asarray(self.fields["tensor_scale"], dtype="<f4").reshape(())
            return t.tobytes() + body
        return body

    @classmethod
    def from_bytes(cls, data, fmt, shape, axis=-1, dtype=np.float32, **options):
        """Inverse of :meth:`to_bytes`; shape and axis are arguments, not stored."""
        return from_bytes(data, fmt, shape, axis=axis, dtype=dtype, **options)

    def __eq__(self, other):
        if not isinstance(other, QuantizedTensor):
            return NotImplemented
        return (self.fmt == other.fmt and self.shape == other.shape
                and self.axis == other.axis and self.fields.keys() == other.fields.keys()
                and all(np.array_equal(self.fields[k], other.fields[k]) for k in self.fields))

    def __repr__(self):
        opts = f", options={self.options}" if self.options else ""
        return (f"QuantizedTensor(fmt={self.fmt!r}, shape={self.shape}, axis={self.axis}, "
                f"dtype={self.dtype.name}{opts})")


def quantize(x, fmt, axis=-1, **options):
    """Quantize ``x`` along ``axis`` into ``fmt``; returns a :class:`QuantizedTensor`.

    Parameters
    ----------
    x : array_like
        float16, bfloat16 (ml_dtypes), float32 or float64, any shape.
    fmt : str
        A registered format: "hif4", "mxfp4", "nvfp4", "hif8", "bf16".
    axis : int
        Quantization (reduction) axis for the block formats.
    tensor_scale : bool, optional
        Formats with that option (nvfp4): use the per-tensor FP32 scale T (default True).
    """
    fmt = _check_fmt(fmt)
    options = _check_options(fmt, options)
    x = _as_input(x)
    axis = _check_axis(axis, x.ndim, fmt)
    g = golden(fmt)
    if g.elementwise:
        fields = _elementwise(g.quantize, x)
        return QuantizedTensor(fmt, x.shape, axis, x.dtype, fields, options)
    spec = FORMATS[fmt]
    xg, lead, nb = _block_view(x, axis, spec.block)
    if g.has_tensor_scale:
        t = g.tensor_scale(x, options["tensor_scale"])
        fields = _run_groups(g.quantize, xg, spec.block, float(t))
    else:
        fields = _run_groups(g.quantize, xg, spec.block)
    fields = {k: v.reshape(lead + (nb,) + v.shape[1:]) for k, v in fields.items()}
    if g.has_tensor_scale:
        fields["tensor_scale"] = t
    return QuantizedTensor(fmt, x.shape, axis, x.dtype, fields, options)


def dequantize(qt):
    """``qt.dequantize()``."""
    return qt.dequantize()


def fake_quantize(x, fmt, axis=-1, **options):
    """``quantize(x, fmt, axis, **options).dequantize()``: same shape and dtype as ``x``.

    Block formats with a fused kernel (``fake_quantize_groups``) skip building the codes;
    the tests check both paths against the spec reference bit for bit.
    """
    fmt = _check_fmt(fmt)
    options = _check_options(fmt, options)
    x = _as_input(x)
    axis = _check_axis(axis, x.ndim, fmt)
    g = golden(fmt)
    if g.fake_quantize is None:
        return quantize(x, fmt, axis, **options).dequantize()
    if g.elementwise:
        return _elementwise(g.fake_quantize, x)
    block = FORMATS[fmt].block
    xg, lead, nb = _block_view(x, axis, block)
    out = np.empty(xg.shape, dtype=x.dtype)
    args = g.scale_args(x, options)
    for sl in _chunks(xg.shape[0], block):
        g.fake_quantize(xg[sl], out[sl], *args)
    y = _unblock(out, x.shape, axis, block)
    return y if y.flags.c_contiguous else y.copy(order="C")


def from_bytes(data, fmt, shape, axis=-1, dtype=np.float32, **options):
    """Rebuild a :class:`QuantizedTensor` from :meth:`QuantizedTensor.to_bytes` output.

    Raises ValueError when ``data`` has the wrong length for ``fmt`` and ``shape``.
    """
    fmt = _check_fmt(fmt)
    options = _check_options(fmt, options)
    dtype = _check_dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    axis = _check_axis(axis, len(shape), fmt)
    data = bytes(data) if not isinstance(data, (bytes, bytearray, memoryview)) else data
    data = np.frombuffer(data, dtype=np.uint8)
    spec = FORMATS[fmt]
    count = prod(shape)
    gf = golden(fmt)
    if gf.elementwise:
        size = spec.block_bytes * count
        if data.size != size:
            raise ValueError(f"{fmt} bytes for shape {shape} must be {size} bytes long, "
                             f"not {data.size}")
        fields = packing.unpack(spec, data.reshape(count, spec.block_bytes))
        fields = {k: v.reshape(shape) for k, v in fields.items()}
        return QuantizedTensor(fmt, shape, axis, dtype, fields, options)
    lead = shape[:axis] + shape[axis + 1:]
    nb = ceil(shape[axis] / spec.block)
    g = prod(lead) * nb
    header = 4 if gf.has_tensor_scale else 0
    size = header + g * spec.block_bytes
    if data.size != size:
        raise ValueError(f"{fmt} bytes for shape {shape} along axis {axis} must be {size} "
                         f"bytes long ({g} blocks of {spec.block_bytes}"
                         f"{' after a 4-byte T' if header else ''}), not {data.size}")
    fields = packing.unpack(spec, data[header:].reshape(g, spec.block_bytes))
    fields = {k: v.reshape(lead + (nb,) + v.shape[1:]) for k, v in fields.items()}
    if gf.has_tensor_scale:
        fields["tensor_scale"] = data[:4].view("<f4").astype(np.float32).reshape(())
    return QuantizedTensor(fmt, shape, axis, dtype, fields, options)
