"""The unit registry: every unit, the parameters it accepts, its defaults and names.

Two kinds of unit exist (``KINDS``): ``"dot"``, the dot-product units (quantized steps in,
FP32 words out), and ``"encoder"``, the quantizers (BF16 groups in, the packed operand step
and residual step a dot unit takes out). A consumer that handles one kind asks for it
(:func:`units_of_kind`, the ``kind`` argument of :func:`all_configs` / :func:`standard_set`).
A unit is registered once here with the ``"module:attribute"`` of its Amaranth generator
(imported only by ``hwgen``); the CLI's choices, the benches, the cycle simulator and the
estimators all read this table.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from .formats import FORMATS
from .steps import operand_layout, residual_layout

__all__ = ["RESIDUAL_MODES", "RESIDUAL_TAGS", "ACCUMS", "EXACT_ACCUMS", "REFERENCE_ACCUM",
           "ACCUM_TAGS", "default_accum",
           "TRUNC_BITS", "TRUNC_BITS_RANGE", "TRUNC_PRESUM", "GEMMS", "STAGES", "LANES",
           "DEFAULTS", "KINDS",
           "UnitSpec", "UNITS", "register_unit", "UnitView", "unit_spec", "units_of_kind",
           "check_residual", "check_params", "resolve",
           "module_name", "parse_module_name", "payload_fields", "output_fields",
           "all_configs", "standard_set", "residuals_of", "accums_of", "BF16_BITS",
           "TENSOR_SCALE_BITS", "MULTI_FORMATS", "FORMAT_FIELD", "format_residuals",
           "format_code_bits", "INTERLEAVES", "ACC_FIELD", "acc_id_bits"]

#: Residual modes of a dot-product unit: no residual input, a packed 2:4 residual block,
#: a second dense operand (spec section 6).
RESIDUAL_MODES = ("none", "2:4", "dense")
#: Residual mode -> the tag in module names.
RESIDUAL_TAGS = {"none": "rnone", "2:4": "r24", "dense": "rdense"}
#: Accumulator back ends of a dot-product unit (spec section 7 either way, bit for bit):
#: ``"window"`` adds every step into a fixed-point window holding every bit of every term
#: (:mod:`hwgen.accum`, the reference); ``"bounded"`` adds in a window a little wider than
#: one term, after pre-adding terms that share a scale, pairing two independent ones or
#: splitting four (:mod:`hwgen.accum_bounded`, :mod:`hwgen.accum_split`); ``"trunc"`` is
#: *not* exact: it aligns every operand to the largest one, truncates below ``TRUNC_BITS``
#: extra bits and truncates the sum to FP32, the way published measurements describe tensor
#: cores (:mod:`hwgen.accum_trunc`, ``docs/accumulator.md``), for comparison.
ACCUMS = ("window", "bounded", "trunc")
#: The back ends that keep spec section 7 bit for bit (the standard set has these).
EXACT_ACCUMS = ACCUMS[:2]
#: The reference back end: every dot unit has it, the others are checked against it, its
#: module names carry no tag and a manifest written before back ends could be chosen (no
#: ``accum`` parameter) means it.
REFERENCE_ACCUM = ACCUMS[0]
#: Back end -> the suffix it adds to module names.
ACCUM_TAGS = {"window": "", "bounded": "_bnd", "trunc": "_trc"}
#: Bits the truncating back end keeps below an FP32 significand's 24, counted from the
#: largest operand's leading one, and the values that parameter may take (the golden
#: model's sum is one int64).
TRUNC_BITS = 3
TRUNC_BITS_RANGE = range(0, 31)
#: Formats whose dot units add a step's block terms exactly into one term before the
#: accumulator (NVFP4: its UE4M3 scales span few binades), so the truncating back end sees
#: one operand per step there.
TRUNC_PRESUM = ("nvfp4",)
#: Forward GEMMs of the torch adapters (``sim.rl.qlinear``, ``hif4 numerics --gemm``):
#: ``"fake"`` (a torch matmul of fake-quantized operands), ``"bit-true"`` (the words of the
#: exact units) and one per inexact back end, named after it (the words of its units).
GEMMS = ("fake", "bit-true", *(a for a in ACCUMS if a not in EXACT_ACCUMS))
#: Pipeline depths every unit accepts (``stages``), the one knob of both kinds: a dot unit
#: has ``stages`` registers on its path from ``i`` to ``o`` (the accumulator's among them),
#: an encoder ``stages - 1`` (at 1 its output is combinational in a group's last beat).
#: Where they sit and the latency that follows: ``hwgen.unit.DotUnit``,
#: ``hwgen.encoder.EncoderUnit``.
STAGES = (1, 2, 3, 4)
#: Elements per cycle every unit accepts (``lanes``); a step is 64 elements.
LANES = (16, 32, 64)
#: Accumulators a dot unit interleaves (``interleave``, L): L independent accumulations
#: (each its own first..last chain) share the unit, each step naming its accumulator in
#: :data:`ACC_FIELD`, so the accumulation loop can take L cycles (``hwgen.ring``). L = 1 is
#: the unit with one accumulator and a one-cycle loop; an encoder takes only 1.
INTERLEAVES = (1, 2, 4, 8)
#: The payload field of an interleaved dot unit (L > 1) naming a step's accumulator.
ACC_FIELD = "acc_id"
#: Unit kinds: dot-product units and encoders (quantizers).
KINDS = ("dot", "encoder")
#: Bits of one encoder input element (a BF16 code).
BF16_BITS = 16
#: Bits of the per-tensor FP32 scale T an NVFP4 encoder takes with a group.
TENSOR_SCALE_BITS = 32
#: Parameters a unit takes when they are not given; a dot unit takes back end ``"accum"``
#: where its residual mode has it and the reference one elsewhere (:func:`default_accum`).
DEFAULTS = {"residual": "none", "stages": 3, "lanes": 64, "accum": "bounded"}


@dataclass(frozen=True)
class UnitSpec:
    """One registered unit.

    ``name`` is the ``--unit`` value, ``fmt`` the operand format, ``builder`` the
    ``"module:attribute"`` of its generator, ``residuals`` the residual modes it accepts (in
    ``RESIDUAL_MODES`` order), ``standard`` the residual modes of the standard set
    (``hif4 generate --all``, at the default stages and lanes), ``kind`` one of ``KINDS``
    and ``accums`` the accumulator back ends of a dot unit (``ACCUMS``; none for an
    encoder; every residual mode of the unit takes each of them). An encoder's residual mode
    is the residual step it emits beside the operand step (the one the dot unit of its
    format takes).

    ``formats`` (two or more, in ``MULTI_FORMATS`` order) makes a multi-format dot unit:
    each step carries a format-select field (:data:`FORMAT_FIELD`, the index of the step's
    format in ``formats``), and ``fmt`` is the first of them. ``grid`` False keeps a unit
    out of the grids that :func:`units_of_kind`, :func:`all_configs` and
    :func:`standard_set` list (the synthesized tables, the sweeps and the default suite's
    walk over the registry); it is still reached by name.
    """

    name: str
    fmt: str
    builder: str
    residuals: tuple
    standard: tuple
    kind: str = "dot"
    accums: tuple = ACCUMS[:1]
    formats: tuple = ()
    grid: bool = True


UNITS = {u.name: u for u in (
    UnitSpec("hif4", "hif4", "hwgen.hif4:HiF4DotUnit", RESIDUAL_MODES, RESIDUAL_MODES[:2],
             accums=ACCUMS),
    UnitSpec("mxfp4", "mxfp4", "hwgen.mxfp4:MXFP4DotUnit", RESIDUAL_MODES, RESIDUAL_MODES[:2],
             accums=ACCUMS),
    UnitSpec("nvfp4", "nvfp4", "hwgen.nvfp4:NVFP4DotUnit", RESIDUAL_MODES[:1],
             RESIDUAL_MODES[:1], accums=ACCUMS),
    UnitSpec("hif4_quant", "hif4", "hwgen.encoder:HiF4QuantUnit", RESIDUAL_MODES,
             RESIDUAL_MODES[:2], "encoder", ()),
    UnitSpec("mxfp4_quant", "mxfp4", "hwgen.encoder:MXFP4QuantUnit", RESIDUAL_MODES,
             RESIDUAL_MODES[:2], "encoder", ()),
    UnitSpec("nvfp4_quant", "nvfp4", "hwgen.encoder:NVFP4QuantUnit", RESIDUAL_MODES[:1],
             RESIDUAL_MODES[:1], "encoder", ()),
)}

#: Formats a multi-format dot unit combines (any two or more), in the order of their codes.
MULTI_FORMATS = ("hif4", "mxfp4", "nvfp4")
#: The payload field of a multi-format unit that selects a step's format.
FORMAT_FIELD = "fmt"


def format_residuals(fmt):
    """Residual modes the single-format dot unit of ``fmt`` accepts."""
    return next(u.residuals for u in UNITS.values()
                if u.kind == "dot" and u.fmt == fmt and not u.formats)


def format_code_bits(formats):
    """Bits of the format-select field of a unit combining ``formats``."""
    return max(1, (len(formats) - 1).bit_length())


def _multi_units(name, module):
    """The multi-format dot units ``<name>_<format>_<format>...``: one per set of two or
    more of ``MULTI_FORMATS``, each with the residual modes one of its formats takes (a
    step of a format without that residual ignores ``r``), every lane count and the exact
    back ends, built by ``<module>:<unit name>``; outside the grids (``grid`` False) and
    the standard set until their grids are synthesized."""
    from itertools import combinations

    out = []
    for k in range(len(MULTI_FORMATS), 1, -1):
        for formats in combinations(MULTI_FORMATS, k):
            residuals = tuple(r for r in RESIDUAL_MODES[:2]
                              if any(r in format_residuals(f) for f in formats))
            unit = "_".join((name, *formats))
            out.append(UnitSpec(unit, formats[0], f"{module}:{unit}", residuals, (),
                                accums=EXACT_ACCUMS, formats=formats, grid=False))
    return out


UNITS.update((u.name, u) for u in _multi_units("tc4", "hwgen.multi"))


def register_unit(spec):
    """Enter unit ``spec`` (a :class:`UnitSpec`) into :data:`UNITS`: every consumer (the
    CLI's choices, the generators, the benches, the cost models) reads it from there.
    ``ValueError`` if its kind, format, residual modes or back ends are unknown, or another
    unit has its name."""
    if spec.kind not in KINDS:
        raise ValueError(f"Unit kind must be one of {', '.join(KINDS)}, not {spec.kind!r}")
    for fmt in (spec.fmt, *spec.formats):
        if fmt not in FORMATS:
            raise ValueError(f"unit {spec.name!r} names format {fmt!r}, which "
                             "hif4spec.FORMATS does not have")
    bad = [r for r in (*spec.residuals, *spec.standard) if r not in RESIDUAL_MODES]
    bad += [a for a in spec.accums if a not in ACCUMS]
    if bad:
        raise ValueError(f"unit {spec.name!r}: unknown residual mode or back end {bad[0]!r}")
    if UNITS.setdefault(spec.name, spec) != spec:
        raise ValueError(f"another unit is registered as {spec.name!r}")
    return spec


class UnitView(Mapping):
    """A read-only view of :data:`UNITS` read at each access, so that a unit registered
    after import is in it: the units of ``kind``, keyed by ``key`` (``"name"`` or
    ``"fmt"``), each mapped to ``value(UnitSpec)``."""

    def __init__(self, kind, value, key="name"):
        self._kind, self._value, self._key = kind, value, key

    def _map(self):
        return {getattr(u, self._key): self._value(u) for u in units_of_kind(self._kind)}

    def __getitem__(self, name):
        return self._map()[name]

    def __iter__(self):
        return iter(self._map())

    def __len__(self):
        return len(self._map())


def units_of_kind(kind, grid=True):
    """``[UnitSpec, ...]`` of the units of ``kind`` (one of ``KINDS``), as registered: those
    of the grids (``UnitSpec.grid``), or every one with ``grid`` False."""
    if kind not in KINDS:
        raise ValueError(f"Unit kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return [u for u in UNITS.values() if u.kind == kind and (u.grid or not grid)]


def _units(kind, grid=True):
    if kind is None:
        return [u for u in UNITS.values() if u.grid or not grid]
    return units_of_kind(kind, grid)


def unit_spec(name):
    """The :class:`UnitSpec` of ``name``; ``ValueError`` naming the known units."""
    try:
        return UNITS[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unit must be one of {', '.join(UNITS)}, not {name!r}") from None


def residuals_of(name):
    """Residual modes unit ``name`` accepts."""
    return unit_spec(name).residuals


def accums_of(name, residual=None):
    """Accumulator back ends unit ``name`` can be built with (none for an encoder), with
    ``residual`` when given: all of them with a residual mode the unit accepts, none
    with another."""
    spec = unit_spec(name)
    return spec.accums if residual is None or residual in spec.residuals else ()


def default_accum(name, residual=DEFAULTS["residual"]):
    """The back end unit ``name`` with ``residual`` is built with when none is given:
    ``DEFAULTS["accum"]`` where the pair has it, else :data:`REFERENCE_ACCUM` (None for an
    encoder)."""
    have = accums_of(name, residual)
    if not have:
        return None
    return DEFAULTS["accum"] if DEFAULTS["accum"] in have else REFERENCE_ACCUM


def check_residual(unit, residual):
    """Raise ``ValueError`` with a one-line message unless unit ``unit`` accepts residual mode
    ``residual`` (the one check and message of it, :func:`check_params` included)."""
    spec = unit_spec(unit)
    if residual not in spec.residuals:
        raise ValueError(f"Residual mode of {unit} must be one of {', '.join(spec.residuals)}, "
                         f"not {residual!r}")


def acc_id_bits(interleave):
    """Bits of the accumulator field of a unit interleaving ``interleave`` accumulators."""
    return max(interleave - 1, 0).bit_length()


def check_params(unit, residual, stages, lanes, accum=None, interleave=1):
    """Raise ``ValueError`` with a one-line message unless the parameters are valid
    (``accum`` None: not checked; an encoder takes none, and ``interleave`` 1 only)."""
    spec = unit_spec(unit)
    check_residual(unit, residual)
    if isinstance(stages, bool) or not isinstance(stages, int) or stages not in STAGES:
        raise ValueError(f"Stage count must be an integer from {STAGES[0]} to {STAGES[-1]}, "
                         f"not {stages!r}")
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes not in LANES:
        raise ValueError(f"Lane count must be one of {', '.join(map(str, LANES))}, "
                         f"not {lanes!r}")
    if accum is not None and accum not in spec.accums:
        if not spec.accums:
            raise ValueError(f"{unit} is an encoder and has no accumulator: drop the "
                             f"accumulator back end ({accum!r})")
        raise ValueError(f"Accumulator back end of {unit} must be one of "
                         f"{', '.join(spec.accums)}, not {accum!r}")
    if (isinstance(interleave, bool) or not isinstance(interleave, int)
            or interleave not in INTERLEAVES):
        raise ValueError(f"Interleave must be one of {', '.join(map(str, INTERLEAVES))}, "
                         f"not {interleave!r}")
    if interleave != 1 and spec.kind != "dot":
        raise ValueError(f"{unit} is an encoder and has no accumulator to interleave: drop "
                         f"the interleave ({interleave})")
    if interleave != 1 and accum is not None and accum not in EXACT_ACCUMS:
        raise ValueError(f"Interleave {interleave} needs an exact accumulator back end "
                         f"({', '.join(EXACT_ACCUMS)}), not {accum!r}")


def resolve(unit, residual=None, stages=None, lanes=None, accum=None, interleave=None):
    """``{"residual", "stages", "lanes"}`` and, for a dot unit, ``"accum"``, completed from
    ``DEFAULTS`` (the back end: :func:`default_accum`) and checked; ``"interleave"`` only
    where it is not 1 (so a unit with one accumulator keeps the parameters, names and
    caches it had before units could interleave)."""
    given = {"residual": residual, "stages": stages, "lanes": lanes}
    full = {k: DEFAULTS[k] if v is None else v for k, v in given.items()}
    if unit_spec(unit).kind == "dot" or accum is not None:
        full["accum"] = accum or default_accum(unit, full["residual"])
    if interleave is not None and interleave != 1:
        full["interleave"] = interleave
    check_params(unit, **full)
    return full


def module_name(unit, residual, stages, lanes, accum=None, interleave=1):
    """Verilog module name, e.g. ``hif4_dot_r24_s3_l64`` (a dot unit with the reference
    back end), ``hif4_dot_r24_s3_l64_bnd`` (with the bounded one, ``ACCUM_TAGS``),
    ``hif4_dot_r24_s3_l64_bnd_i4`` (interleaving four accumulators) or
    ``hif4_quant_r24_s3_l64`` (an encoder); a dot unit's ``accum`` left None is its default
    one (:func:`default_accum`)."""
    if unit_spec(unit).kind != "dot":
        return f"{unit}_{RESIDUAL_TAGS[residual]}_s{stages}_l{lanes}"
    tag = ACCUM_TAGS[accum or default_accum(unit, residual)]
    way = f"_i{interleave}" if interleave != 1 else ""
    return f"{unit}_dot_{RESIDUAL_TAGS[residual]}_s{stages}_l{lanes}{tag}{way}"


def parse_module_name(name):
    """Inverse of :func:`module_name`: ``(unit, residual, stages, lanes, accum,
    interleave)`` (an encoder's ``accum`` is None, its ``interleave`` 1), or None."""
    for cfg in all_configs(grid=False):
        for accum in accums_of(cfg[0], cfg[1]) or (None,):
            base = module_name(*cfg, accum)
            if name == base:
                return (*cfg, accum, 1)
            if accum is not None and name.startswith(base + "_i"):
                way = name[len(base) + 2:]
                if way.isdigit() and int(way) in INTERLEAVES[1:] and way == str(int(way)):
                    return (*cfg, accum, int(way))
    return None


def payload_fields(unit, residual, lanes=None, interleave=1):
    """``[(field, bits), ...]`` of a unit's input payload (one transfer on ``i``), low bits
    first.

    A dot unit's is one step: ``a``, ``w``, ``r`` (with a residual), ``first``, ``last``
    (``lanes`` is not used); a multi-format unit's ``a``, ``w`` and ``r`` are as wide as
    its widest format's step (a narrower step in the low bits) and :data:`FORMAT_FIELD`
    comes before ``first``; an interleaved unit's (``interleave`` > 1) has
    :data:`ACC_FIELD` (:func:`acc_id_bits` bits) right before ``first``. An encoder's is
    one beat of ``lanes`` BF16 codes, ``x`` (element j of the beat at bits
    ``[16 j, 16 j + 16)``; beat b of a group carries group elements
    ``[b * lanes, (b + 1) * lanes)``), and for NVFP4 ``t``, the FP32 tensor scale (raw
    bits), taken with the group's last beat; ``lanes`` is required.
    """
    spec = unit_spec(unit)
    if spec.kind == "encoder":
        if lanes not in LANES:
            raise ValueError(f"Lane count must be one of {', '.join(map(str, LANES))}, "
                             f"not {lanes!r}")
        out = [("x", lanes * BF16_BITS)]
        if "tensor_scale" in FORMATS[spec.fmt].options:
            out.append(("t", TENSOR_SCALE_BITS))
        return out
    if spec.formats:
        step = max(operand_layout(f).bits for f in spec.formats)
        out = [("a", step), ("w", step)]
        if residual != "none":
            out.append(("r", max(residual_layout(f, residual).bits for f in spec.formats
                                 if residual in format_residuals(f))))
        out.append((FORMAT_FIELD, format_code_bits(spec.formats)))
    else:
        out = [("a", operand_layout(spec.fmt).bits), ("w", operand_layout(spec.fmt).bits)]
        res = residual_layout(spec.fmt, residual)
        if res is not None:
            out.append(("r", res.bits))
    if interleave != 1:
        out.append((ACC_FIELD, acc_id_bits(interleave)))
    return out + [("first", 1), ("last", 1)]


def output_fields(unit, residual):
    """``[(field, bits), ...]`` of a unit's output payload (``o``), low bits first: a dot
    unit's FP32 word ``acc``; an encoder's operand step ``q`` and, with a residual, the
    residual step ``r`` (exactly the ``a`` and ``r`` fields of its format's dot-unit step)."""
    spec = unit_spec(unit)
    if spec.kind == "dot":
        return [("acc", 32)]
    out = [("q", operand_layout(spec.fmt).bits)]
    res = residual_layout(spec.fmt, residual)
    if res is not None:
        out.append(("r", res.bits))
    return out


def all_configs(kind=None, grid=True):
    """Every configuration, ``[(unit, residual, stages, lanes), ...]``, of every unit of the
    grids (``grid`` False: every registered unit) or of those of ``kind``: units as
    registered, then their residual modes, stages and lanes ascending."""
    return [(u.name, r, s, n) for u in _units(kind, grid) for r in u.residuals
            for s in STAGES for n in LANES]


def standard_set(kind=None):
    """``[(unit, {"residual", "stages", "lanes"[, "accum"]}), ...]`` of ``hif4 generate
    --all`` (every kind), or of the units of ``kind``: each unit's standard residual modes
    at the default stages and lanes, a dot unit's with each of its exact accumulator back
    ends (``EXACT_ACCUMS``)."""
    return [(u.name, resolve(u.name, residual=r, accum=a)) for u in _units(kind)
            for r in u.standard
            for a in ([a for a in accums_of(u.name, r) if a in EXACT_ACCUMS] or (None,))]
