"""One golden-model object per format, keyed by its ``hif4spec.FORMATS`` name.

A :class:`GoldenFormat` holds everything the golden model, the stimulus library and the
adapters above them need to know about one format, so that none of them compares a format
name: the group (or element) quantizer and its inverse, the per-tensor scale where the
format's ``FormatSpec.options`` has ``"tensor_scale"``, the integer operand decode of the dot
model (built on first use and cached), the packing of its 2:4 residual, and the stimulus the
benches run (named edge cases, hand-checked streams, encoder group hooks).

Adding a format is one call::

    register(FormatSpec(...), quantize=..., dequantize=..., edge_cases=..., ...)

which also enters the ``FormatSpec`` into ``hif4spec.FORMATS`` if it is not there yet. The
built-in formats are registered by :mod:`sim.formats` (numerics) and :mod:`sim.stimulus`
(their stimulus hooks, added with a second ``register`` call on the name).
"""

from dataclasses import dataclass, field, fields as _dc_fields
from functools import cached_property
from typing import Callable

import numpy as np

from hif4spec.formats import ELEMENT_TYPES, FORMATS, FormatSpec

__all__ = ["GoldenFormat", "EncoderHooks", "register", "golden", "registered"]


@dataclass
class EncoderHooks:
    """What the encoder stimulus (:mod:`sim.stimulus.encoder`) draws for one format.

    ``underflow_exps``: ``(lo, hi)`` of the Gaussian scale exponents of random groups whose
    residual falls below the least scale; ``residual_underflow_exp``: the exponent of the
    named ``residual_underflow`` groups; ``boundaries()``: BF16 codes of group maxima on and
    around every scale boundary; ``ties(rng)``: groups on element rounding midpoints;
    ``extra_groups(rng)``: further named ``[(name, {"x", "t"}), ...]`` after the common ones;
    ``exact_groups``: whether the ``exact`` kind quantizes its groups to representable values
    (False: the Gaussian groups are used as drawn).
    """

    underflow_exps: tuple
    residual_underflow_exp: int
    boundaries: Callable
    ties: Callable
    extra_groups: Callable | None = None
    exact_groups: bool = True


@dataclass(eq=False)
class GoldenFormat:
    """The golden-model side of one format (see the module docstring).

    Block formats (``spec.block > 1``): ``quantize(x, *t)`` takes groups ``x`` (G, block)
    and returns the field arrays, ``dequantize(fields, *t)`` their exact float64 values
    (G, block), ``fake_quantize(x, out, *t)`` writes dequantized values into ``out``
    (optional: ``quantize`` + ``dequantize`` otherwise); ``*t`` is ``(T,)`` where the format
    has a tensor scale and empty otherwise. Element-wise formats: ``quantize(x)`` -> fields
    of x's shape, ``dequantize(fields)`` -> float64, ``fake_quantize(x)`` -> values in x's
    dtype. ``tensor_scale(x, enabled)`` -> 0-d float32 T. ``elem_decode(fields, layout,
    ints)``: the float32 integer element values of a step layout's fields (default: the
    element type's integer grid ``ints[elem]``). ``pack_residual(residual)``: packed 2:4
    residual fields of a sparsified residual tensor, ``residual_bytes(packed)`` their
    serialized bytes. ``edge_cases(residual)`` and
    ``checked_cases(residual)``: the named streams of the format's dot unit; ``encoder``: an
    :class:`EncoderHooks`.
    """

    spec: FormatSpec
    quantize: Callable
    dequantize: Callable
    fake_quantize: Callable | None = None
    tensor_scale: Callable | None = None
    elem_decode: Callable | None = None
    pack_residual: Callable | None = None
    residual_bytes: Callable | None = None
    edge_cases: Callable | None = None
    checked_cases: Callable | None = None
    encoder: EncoderHooks | None = None
    extra: dict = field(default_factory=dict)

    @property
    def name(self):
        return self.spec.name

    @property
    def title(self):
        """The display name (``FormatSpec.title``, else the name in capitals)."""
        return self.spec.title or self.spec.name.upper()

    @property
    def elementwise(self):
        return self.spec.block == 1

    @property
    def has_tensor_scale(self):
        return "tensor_scale" in self.spec.options

    @property
    def default_options(self):
        """Options the quantizers take and their defaults (every option is on by default)."""
        return {o: True for o in self.spec.options}

    def scale_args(self, x, options):
        """``(T,)`` (a float) for a format with a tensor scale, from ``x`` and the
        ``tensor_scale`` option; ``()`` otherwise."""
        if not self.has_tensor_scale:
            return ()
        return (float(self.tensor_scale(x, options.get("tensor_scale", True))),)

    def need(self, hook):
        """The hook ``hook``, or ``ValueError`` saying this format registers none."""
        fn = getattr(self, hook)
        if fn is None:
            raise ValueError(f"format {self.name!r} registers no {hook} "
                             f"(sim.formats.registry.register({self.name!r}, {hook}=...))")
        return fn

    @cached_property
    def dot_tables(self):
        """``(ints, lsb, sig, exp, nan)``: the element type's integer grid as float32 and its
        lsb exponent, and the scale type's ``int_decode`` table; built on first use."""
        from .codecs import int_decode, int_grid

        spec = self.spec
        if spec.scale_type is None:
            raise ValueError(f"format {self.name!r} is element-wise: it has no dot-unit "
                             "operand decode")
        ints, lsb = int_grid(spec.elem_type)
        return (ints.astype(np.float32), lsb) + int_decode(spec.scale_type)

    def decode_elements(self, f, layout_spec):
        """Float32 integer element values of the fields ``f`` of a block of ``layout_spec``
        (a FormatSpec or ResidualBlockSpec of this format), shape of ``f["elem"]``."""
        ints = self.dot_tables[0]
        if self.elem_decode is not None:
            return self.elem_decode(f, layout_spec, ints)
        elem = np.asarray(f["elem"]).astype(np.uint8) & (len(ints) - 1)
        return ints[elem]


_REGISTRY = {}
_HOOKS = tuple(f.name for f in _dc_fields(GoldenFormat) if f.name != "spec")


def register(spec, **hooks):
    """Register format ``spec`` (a ``FormatSpec``, entered into ``hif4spec.FORMATS`` when
    new) with its hooks (the fields of :class:`GoldenFormat`), or add hooks to a registered
    format (``spec`` its name). Returns the :class:`GoldenFormat`."""
    unknown = sorted(set(hooks) - set(_HOOKS))
    if unknown:
        raise TypeError(f"unknown format hook(s) {', '.join(unknown)} (known: "
                        f"{', '.join(_HOOKS)})")
    if isinstance(spec, str):
        try:
            obj = _REGISTRY[spec]
        except KeyError:
            raise ValueError(f"format {spec!r} is not registered: register its FormatSpec "
                             "first") from None
        for k, v in hooks.items():
            setattr(obj, k, v)
        return obj
    if not isinstance(spec, FormatSpec):
        raise TypeError(f"register takes a FormatSpec or a registered name, not {spec!r}")
    if FORMATS.setdefault(spec.name, spec) != spec:
        raise ValueError(f"hif4spec.FORMATS already has a different {spec.name!r}")
    for t in (spec.elem_type, spec.scale_type):
        if t is not None and t not in ELEMENT_TYPES:
            raise ValueError(f"format {spec.name!r} names element type {t!r}, which "
                             "hif4spec.ELEMENT_TYPES does not have")
    obj = GoldenFormat(spec, **hooks)
    if obj.has_tensor_scale != (obj.tensor_scale is not None):
        raise ValueError(f"format {spec.name!r}: a tensor_scale hook goes with the "
                         "'tensor_scale' option of its FormatSpec, and only with it")
    _REGISTRY[spec.name] = obj
    return obj


def golden(name):
    """The :class:`GoldenFormat` of ``name``; ``ValueError`` naming the known formats."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"Format must be one of {', '.join(_REGISTRY)}, not {name!r}") \
            from None


def registered():
    """Names of the registered formats, in registration order."""
    return list(_REGISTRY)
