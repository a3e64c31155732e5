"""Analytic area model of the dot-product units, calibrated on synthesized primitives.

The model needs no synthesis and answers instantly. It reads one thing: the ``structure``
section of a unit's manifest (:mod:`hwgen.manifest`), which the generator writes from its
own blocks (:mod:`hwgen.parts`): ``count`` copies of a primitive ``family(params)`` per
sub-block (multipliers by operand bits, adder trees by operand count and width, shifters
by width and shift range, registers by bits, multiplexers by inputs and width, comparators,
E2M1 block dots, ...). :func:`unit_inventory` turns it into :class:`Component` objects; the
manifest's ``timing.pipeline`` only decides the single-stage tag below. Nothing here
restates a unit's datapath: a change to a generator reaches the model through the manifest.

Each component family has a linear cost formula in NAND2 equivalents whose coefficients are
fitted (``benchmarks/fit_area_model.py``) from the synthesized areas of the primitives in
:mod:`sim.cost.primitives`, with the same Yosys flow as the units
(:data:`sim.cost.synth.FLOW`). The coefficients live in ``sim/area_coeffs.json``.

Calibrations measured by synthesis sit on top of the primitive costs, kept in the same
file: the accumulator's align and round blocks carry the ratio of a hierarchical synthesis
of the accumulator to its primitive sum (``calibration``; for the bounded back end, whose
blocks are narrower and differently shaped, ``calibration_bounded``, measured the same way
on one reference bounded adder of each kind, :func:`bounded_reference`), and every unit
carries two factors (``units``), one for its front end and one for the rest (accumulator
and pipeline registers), fitted on that unit's stage-3 configurations with the full window
only. They stand for what primitives synthesized one by one do not see in the flattened
unit: logic optimized across component boundaries, and simpler cases of a primitive (an
NVFP4 term enters the window at a fixed position, so most of its window adder is an
incrementer). A single-stage unit (no register between front end and accumulator,
:func:`is_comb_fed`) is one combinational cone and synthesizes larger than its parts; the
accumulator logic its step feeds ahead of the loop carries the unit's factor for its back
end (:data:`COMB_TAGS`), fitted on the single-stage configurations with 16 and 32 lanes
only. Every other configuration is held out and checks the fit.
"""

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hif4spec import REFERENCE_ACCUM

__all__ = [
    "FEATURES", "COEFFS_PATH", "Component", "AreaEstimate", "load_coeffs",
    "component_cost", "features", "unit_inventory", "estimate_unit", "estimate_manifest",
    "is_front_block", "is_comb_fed", "bounded_reference", "COMB_TAGS",
]

COEFFS_PATH = Path(__file__).with_name("area_coeffs.json")


def _clog2(n):
    return max(1, (int(n) - 1).bit_length())


def _log2(n):
    return math.log2(max(n, 1))


#: Feature vector of each primitive family; cost = coeffs . features(params).
FEATURES = {
    "mul": (("a*b", lambda a, b: a * b), ("a+b", lambda a, b: a + b), ("1", lambda a, b: 1)),
    "smul": (("a*b", lambda a, b: a * b), ("a+b", lambda a, b: a + b),
             ("1", lambda a, b: 1)),
    "smulx": (("a*b", lambda a, b: a * b), ("a+b", lambda a, b: a + b),
              ("1", lambda a, b: 1)),
    "add": (("w", lambda w: w), ("1", lambda w: 1)),
    "tree": (("(n-1)*w", lambda n, w: (n - 1) * w),
             ("(n-1)*log2(n)", lambda n, w: (n - 1) * _log2(n)), ("1", lambda n, w: 1)),
    "shl": (("w*clog2(r)", lambda w, r: w * _clog2(r)),
            ("r*clog2(r)", lambda w, r: r * _clog2(r)), ("1", lambda w, r: 1)),
    "shr": (("w*clog2(r)", lambda w, r: w * _clog2(r)), ("w", lambda w, r: w),
            ("1", lambda w, r: 1)),
    "e2m1": (("n", lambda n: n),),
    "e2m1dot": (("n", lambda n: n), ("(n-1)*log2(n)", lambda n: (n - 1) * _log2(n))),
    "wshl": (("w*clog2(r)", lambda s, r, w: w * _clog2(r)),
             ("s*clog2(r)", lambda s, r, w: s * _clog2(r)), ("w", lambda s, r, w: w),
             ("1", lambda s, r, w: 1)),
    "addn": (("(n-1)*w", lambda n, w: (n - 1) * w), ("1", lambda n, w: 1)),
    "neg": (("w", lambda w: w), ("1", lambda w: 1)),
    "norm": (("w*clog2(w)", lambda w: w * _clog2(w)), ("w", lambda w: w), ("1", lambda w: 1)),
    "mux": (("(n-1)*w", lambda n, w: (n - 1) * w), ("1", lambda n, w: 1)),
    "reg": (("w", lambda w: w),),
    "regp": (("w", lambda w: w),),
    "rege": (("w", lambda w: w),),
    "lzc": (("w", lambda w: w), ("1", lambda w: 1)),
    "cmp": (("w", lambda w: w), ("1", lambda w: 1)),
    "maxtree": (("(n-1)*w", lambda n, w: (n - 1) * w), ("n-1", lambda n, w: n - 1),
                ("1", lambda n, w: 1)),
    "e2m1rnd": (("w", lambda w: w), ("1", lambda w: 1)),
    "hif4rnd": (("g", lambda f, g: g), ("g*frac", lambda f, g: g * f), ("1", lambda f, g: 1)),
    "nvscale": (("b", lambda b: b), ("1", lambda b: 1)),
    "nvbounds": (("b", lambda b: b), ("1", lambda b: 1)),
}


def features(family, params):
    """Feature vector (list of floats) of one primitive."""
    if family not in FEATURES:
        raise ValueError(f"Component family must be one of {', '.join(FEATURES)}, "
                         f"not {family!r}")
    return [float(f(*params)) for _, f in FEATURES[family]]


@lru_cache(maxsize=4)
def _load(path):
    return json.loads(Path(path).read_text())


def load_coeffs(path=COEFFS_PATH):
    """The fitted coefficients: ``{"families": {family: {"coeffs": [...], ...}}, ...}``."""
    return _load(str(path))


def component_cost(family, params, coeffs=None):
    """Area of one primitive in NAND2 equivalents from the fitted formula."""
    coeffs = coeffs or load_coeffs()
    c = coeffs["families"][family]["coeffs"]
    return max(0.0, sum(ci * fi for ci, fi in zip(c, features(family, params))))


@dataclass(frozen=True)
class Component:
    """``count`` copies of primitive ``family(params)`` inside sub-block ``block``."""

    block: str
    family: str
    params: tuple
    count: float = 1
    #: A :data:`COMB_TAGS` value marks accumulator logic fed combinationally by the front
    #: end (single-stage units); its cost is multiplied by the unit's factor of that name.
    tag: str = ""

    def cost(self, coeffs=None):
        return self.count * component_cost(self.family, self.params, coeffs)


@dataclass
class AreaEstimate:
    """Model area of one unit configuration.

    Attributes
    ----------
    nand2 : float
        Total area in NAND2 equivalents.
    blocks : dict
        NAND2 equivalents per sub-block.
    flip_flops : int
        Register bits in the inventory.
    components : list
        The inventory the estimate was computed from.
    """

    nand2: float
    blocks: dict
    flip_flops: int
    components: list


#: Accumulator back end -> the unit factor (in ``units``) of its term logic when a
#: single-stage unit feeds it combinationally: the full window's term alignment shifters,
#: the bounded back end's pre-add, pair, split and term decode. The truncating back end has
#: none.
COMB_TAGS = {"window": "comb_align", "bounded": "comb_step"}


def unit_inventory(manifest):
    """Component inventory (list of :class:`Component`) of the unit a manifest describes:
    its ``structure`` section, one component per entry; with :func:`is_comb_fed`, the
    accumulator logic the step feeds ahead of the loop (entries with a ``"term"``) is
    tagged with its back end's :data:`COMB_TAGS` factor."""
    structure = manifest.get("structure")
    if not structure:
        raise ValueError(f"the manifest of {manifest.get('module', '?')} has no structure "
                         "section; regenerate it with `hif4 generate`")
    accum = manifest.get("parameters", {}).get("accum", REFERENCE_ACCUM)
    tag = COMB_TAGS.get(accum, "") if is_comb_fed(manifest) else ""
    return [Component(e["block"], e["family"], tuple(e["params"]), e["count"],
                      tag if e.get("term") else "") for e in structure]


def is_front_block(block):
    """True for the format's own datapath (front end and term forming): every block but the
    pipeline registers (``pipe.*``) and the shared accumulator (``accum.*``)."""
    return not block.startswith(("pipe.", "accum."))


#: Accumulator back end -> the calibration of its blocks in the coefficients file.
_CALIBRATION = {"window": "calibration", "bounded": "calibration_bounded"}


def bounded_reference(blocks, calibration):
    """The reference adder of ``calibration_bounded`` (``{reference: {block: info}}``) whose
    blocks a bounded unit's accumulator calibrates on: the one with the most sub-blocks,
    all of them among the unit's ``blocks`` (a pre-added, paired or split step has its
    reference's own sub-block; a one-term step only the shared ones)."""
    fits = [ref for ref, calib in calibration.items() if set(calib) <= set(blocks)]
    if not fits:
        raise ValueError(f"no reference bounded adder has only blocks of {sorted(blocks)}")
    return max(fits, key=lambda ref: len(calibration[ref]))


def _estimate(components, coeffs=None, unit=None, accum=REFERENCE_ACCUM):
    coeffs = coeffs or load_coeffs()
    unit_calib = coeffs.get("units", {}).get(unit) or {}
    blocks = {}
    ffs = 0
    for comp in components:
        cost = comp.cost(coeffs)
        if comp.tag:
            cost *= unit_calib.get(comp.tag, 1.0)
        blocks[comp.block] = blocks.get(comp.block, 0.0) + cost
        if comp.family in ("reg", "regp", "rege"):
            ffs += int(comp.count * comp.params[0])
    # The truncating back end has no calibration of its own: its blocks count at 1.0.
    calib = coeffs.get(_CALIBRATION.get(accum, ""), {})
    if accum == "bounded":
        calib = calib[bounded_reference(blocks, calib)]
    blocks = {k: v * calib.get(k, {}).get("factor", 1.0) for k, v in sorted(blocks.items())}
    if unit_calib:
        blocks = {k: v * unit_calib["front" if is_front_block(k) else "rest"]
                  for k, v in blocks.items()}
    return AreaEstimate(sum(blocks.values()), blocks, ffs, list(components))


def estimate_manifest(manifest, coeffs=None):
    """Model area (:class:`AreaEstimate`) of the unit a manifest (dict or path to
    ``<module>.json``) describes."""
    if not isinstance(manifest, dict):
        manifest = json.loads(Path(manifest).read_text())
    return _estimate(unit_inventory(manifest), coeffs, manifest["unit"],
                     manifest.get("parameters", {}).get("accum", REFERENCE_ACCUM))


def estimate_unit(unit, residual=None, stages=None, lanes=None, coeffs=None, accum=None):
    """Model area of one unit configuration (defaults from :mod:`hif4spec`; ``accum`` is a
    dot unit's back end), from the manifest the generator writes for it
    (:func:`hwgen.manifest.manifest`; nothing is elaborated)."""
    from hwgen.manifest import manifest
    from hwgen.parts import probe
    from hwgen.units import build_unit

    built = probe(build_unit(unit, residual=residual, stages=stages, lanes=lanes,
                             accum=accum))
    return estimate_manifest(manifest(built), coeffs)


# ----------------------------------------------------------------------------------------
# Calibration tags read from the manifest's timing.pipeline
# ----------------------------------------------------------------------------------------

def _stages_of(manifest):
    return list((manifest or {}).get("timing", {}).get("pipeline", []))


def is_comb_fed(manifest):
    """True when no pipeline register separates the front end from the accumulator (the
    stage before it is not a register): the terms reach the alignment shifters through the
    products and adder trees of the same clock cycle (``stages=1``)."""
    kinds = [st.get("kind") for st in _stages_of(manifest)]
    i = kinds.index("accumulator") if "accumulator" in kinds else 0
    return i > 0 and kinds[i - 1] != "register"
