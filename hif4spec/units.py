"""The unit registry: every unit, the parameters it accepts, its defaults and names.

A unit is registered once here with the ``"module:attribute"`` of its Amaranth generator
(imported only by ``hwgen``); the CLI's choices, the benches, the cycle simulator and the
estimators all read this table.
"""

from dataclasses import dataclass

from .steps import operand_layout, residual_layout

__all__ = ["RESIDUAL_MODES", "RESIDUAL_TAGS", "STAGES", "LANES", "DEFAULTS", "UnitSpec",
           "UNITS", "unit_spec", "check_params", "resolve", "module_name", "parse_module_name",
           "payload_fields", "all_configs", "standard_set", "residuals_of"]

#: Residual modes of a dot-product unit: no residual input, a packed 2:4 residual block,
#: a second dense operand (spec section 6).
RESIDUAL_MODES = ("none", "2:4", "dense")
#: Residual mode -> the tag in module names.
RESIDUAL_TAGS = {"none": "rnone", "2:4": "r24", "dense": "rdense"}
#: Pipeline register counts every unit accepts (``stages``).
STAGES = (1, 2, 3, 4)
#: Elements per cycle every unit accepts (``lanes``); a step is 64 elements.
LANES = (16, 32, 64)
#: Parameters a unit takes when they are not given.
DEFAULTS = {"residual": "none", "stages": 3, "lanes": 64}


@dataclass(frozen=True)
class UnitSpec:
    """One registered unit.

    ``name`` is the ``--unit`` value, ``fmt`` the operand format, ``builder`` the
    ``"module:attribute"`` of its generator, ``residuals`` the residual modes it accepts (in
    ``RESIDUAL_MODES`` order) and ``standard`` the residual modes of the standard set
    (``hif4 generate --all``, at the default stages and lanes).
    """

    name: str
    fmt: str
    builder: str
    residuals: tuple
    standard: tuple


UNITS = {u.name: u for u in (
    UnitSpec("hif4", "hif4", "hwgen.hif4:HiF4DotUnit", RESIDUAL_MODES, RESIDUAL_MODES[:2]),
    UnitSpec("mxfp4", "mxfp4", "hwgen.mxfp4:MXFP4DotUnit", RESIDUAL_MODES, RESIDUAL_MODES[:2]),
    UnitSpec("nvfp4", "nvfp4", "hwgen.nvfp4:NVFP4DotUnit", RESIDUAL_MODES[:1],
             RESIDUAL_MODES[:1]),
)}


def unit_spec(name):
    """The :class:`UnitSpec` of ``name``; ``ValueError`` naming the known units."""
    try:
        return UNITS[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unit must be one of {', '.join(UNITS)}, not {name!r}") from None


def residuals_of(name):
    """Residual modes unit ``name`` accepts."""
    return unit_spec(name).residuals


def check_params(unit, residual, stages, lanes):
    """Raise ``ValueError`` with a one-line message unless the parameters are valid."""
    spec = unit_spec(unit)
    if residual not in spec.residuals:
        raise ValueError(f"Residual mode of {unit} must be one of {', '.join(spec.residuals)}, "
                         f"not {residual!r}")
    if isinstance(stages, bool) or not isinstance(stages, int) or stages not in STAGES:
        raise ValueError(f"Stage count must be an integer from {STAGES[0]} to {STAGES[-1]}, "
                         f"not {stages!r}")
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes not in LANES:
        raise ValueError(f"Lane count must be one of {', '.join(map(str, LANES))}, "
                         f"not {lanes!r}")


def resolve(unit, residual=None, stages=None, lanes=None):
    """``{"residual", "stages", "lanes"}`` completed from ``DEFAULTS`` and checked."""
    given = {"residual": residual, "stages": stages, "lanes": lanes}
    full = {k: DEFAULTS[k] if v is None else v for k, v in given.items()}
    check_params(unit, **full)
    return full


def module_name(unit, residual, stages, lanes):
    """Verilog module name, e.g. ``hif4_dot_r24_s3_l64``."""
    return f"{unit}_dot_{RESIDUAL_TAGS[residual]}_s{stages}_l{lanes}"


def parse_module_name(name):
    """Inverse of :func:`module_name`: ``(unit, residual, stages, lanes)``, or None."""
    for cfg in all_configs():
        if module_name(*cfg) == name:
            return cfg
    return None


def payload_fields(unit, residual):
    """``[(field, bits), ...]`` of a unit's input payload, low bits first."""
    spec = unit_spec(unit)
    out = [("a", operand_layout(spec.fmt).bits), ("w", operand_layout(spec.fmt).bits)]
    res = residual_layout(spec.fmt, residual)
    if res is not None:
        out.append(("r", res.bits))
    return out + [("first", 1), ("last", 1)]


def all_configs():
    """Every configuration, ``[(unit, residual, stages, lanes), ...]``: units as registered,
    then their residual modes, stages and lanes ascending."""
    return [(u.name, r, s, n) for u in UNITS.values() for r in u.residuals
            for s in STAGES for n in LANES]


def standard_set():
    """``[(unit, {"residual", "stages", "lanes"}), ...]`` of ``hif4 generate --all``."""
    return [(u.name, resolve(u.name, residual=r)) for u in UNITS.values() for r in u.standard]
