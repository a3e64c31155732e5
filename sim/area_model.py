"""Analytic area model of the dot-product units, calibrated on synthesized primitives.

The model needs no synthesis and answers instantly. A unit is described by a component
inventory (:func:`unit_inventory`): multipliers by operand bits, adder trees by operand
count and width, shifters by width and shift range, registers by bits, multiplexers by
inputs, comparators and leading-zero counters, grouped by the sub-block they belong to.
The inventory is derived from the format table (:mod:`sim.formats.table`), the unit's
parameters (``residual``, ``stages``, ``lanes``) and the documented architecture of the
generated unit (docstrings in ``hwgen/`` and the manifest next to the Verilog); it never
imports the generator.

Each component family has a linear cost formula in NAND2 equivalents whose coefficients are
fitted (``benchmarks/fit_area_model.py``) from the synthesized areas of the primitives in
:mod:`sim.cost.primitives`, with the same Yosys flow as the units
(:data:`sim.cost.synth.FLOW`). The coefficients live in ``sim/area_coeffs.json``.

Calibrations measured by synthesis sit on top of the primitive costs, kept in the same
file: the accumulator's align and round blocks carry the ratio of a hierarchical synthesis
of the accumulator to its primitive sum (``calibration``), and every unit carries two
factors (``units``), one for its front end and one for the rest (accumulator and pipeline
registers), fitted on that unit's stage-3 configurations only. They stand for what
primitives synthesized one by one do not see in the flattened unit: logic optimized across
component boundaries, and simpler cases of a primitive (an NVFP4 term enters the window at a
fixed position, so most of its window adder is an incrementer). A single-stage unit (no
register between front end and accumulator, :func:`is_comb_fed`) is one combinational cone
and synthesizes larger than its parts; its term shifters carry the unit's ``comb_align``
factor, fitted on the single-stage configurations with 16 and 32 lanes only. Every other
configuration is held out and checks the fit.
"""

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = [
    "FEATURES", "COEFFS_PATH", "Component", "AreaEstimate", "load_coeffs",
    "component_cost", "features", "unit_inventory", "estimate_unit", "estimate_manifest",
    "is_front_block", "is_comb_fed", "UNIT_BUILDERS",
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
    #: ``"comb_align"`` marks a term's alignment shifter fed combinationally by the front
    #: end (single-stage units); its cost is multiplied by the unit's ``comb_align`` factor.
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


#: unit name -> function(residual, stages, lanes, manifest) returning a list of Component.
UNIT_BUILDERS = {}


def unit_inventory(unit, residual="none", stages=None, lanes=64, manifest=None):
    """Component inventory of a unit configuration (see the module docstring)."""
    if unit not in UNIT_BUILDERS:
        raise ValueError(f"Unit must be one of {', '.join(sorted(UNIT_BUILDERS)) or '(none)'}"
                         f", not {unit!r}")
    return UNIT_BUILDERS[unit](residual=residual, stages=stages, lanes=lanes,
                               manifest=manifest)


def is_front_block(block):
    """True for the format's own datapath (front end and term forming); the other blocks are
    the shared accumulator and the pipeline registers."""
    return block.startswith("front") or block == "terms"


def _estimate(components, coeffs=None, unit=None):
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
    calib = coeffs.get("calibration", {})
    blocks = {k: v * calib.get(k, {}).get("factor", 1.0) for k, v in sorted(blocks.items())}
    if unit_calib:
        blocks = {k: v * unit_calib["front" if is_front_block(k) else "rest"]
                  for k, v in blocks.items()}
    return AreaEstimate(sum(blocks.values()), blocks, ffs, list(components))


def estimate_unit(unit, residual="none", stages=None, lanes=64, manifest=None, coeffs=None):
    """Model area (:class:`AreaEstimate`) of one unit configuration."""
    return _estimate(unit_inventory(unit, residual, stages, lanes, manifest), coeffs, unit)


def estimate_manifest(manifest, coeffs=None):
    """Model area of the unit a manifest (dict or path to ``<module>.json``) describes."""
    if not isinstance(manifest, dict):
        manifest = json.loads(Path(manifest).read_text())
    params = manifest.get("parameters", {})
    return estimate_unit(manifest["unit"], params.get("residual", "none"),
                         params.get("stages"), params.get("lanes", 64), manifest, coeffs)


# ----------------------------------------------------------------------------------------
# Unit inventories. Sub-block names follow the generated hierarchy (front end, pipeline
# registers, accumulator), and every count below restates the unit's documented datapath
# (module docstrings of hwgen/hif4.py, hwgen/mxfp4.py, hwgen/nvfp4.py, hwgen/accum.py and
# hwgen/stream.py) in terms of the format table. Nothing here imports hwgen.
# ----------------------------------------------------------------------------------------

def _stages_of(manifest):
    return list((manifest or {}).get("timing", {}).get("pipeline", []))


def _acc_stage(manifest):
    for st in _stages_of(manifest):
        if st.get("kind") == "accumulator":
            return st
    raise ValueError("the manifest's timing.pipeline has no accumulator stage")


def _term_bits(acc):
    return sum(t["sig_bits"] + t["exp_bits"] for t in acc["terms"]) + 3


def is_comb_fed(manifest):
    """True when no pipeline register separates the front end from the accumulator (the
    stage before it is not a register): the terms reach the alignment shifters through the
    products and adder trees of the same clock cycle (``stages=1``)."""
    kinds = [st.get("kind") for st in _stages_of(manifest)]
    i = kinds.index("accumulator") if "accumulator" in kinds else 0
    return i > 0 and kinds[i - 1] != "register"


def accumulator_inventory(acc, *, comb_fed=False):
    """The exact FP32 accumulator (``hwgen/accum.py``) from its manifest description.

    Align: the accumulator word's significand shifted into the window by its exponent, a
    conditional negation, every term shifted by its exponent field, one window-wide sum;
    Round: absolute value, leading-zero count and normalising shift, the RNE increment and the
    exponent/special-case logic; the 32-bit accumulator register and ``o.valid``.

    With ``comb_fed`` (a single-stage unit) the terms' alignment shifters are tagged
    ``"comb_align"`` and carry the unit's single-stage factor: synthesized flat with the
    front end in one combinational cone, such units come out larger than the sum of their
    parts by an amount that, for MXFP4, tracks the term alignment (terms x window x shift
    range). See ``calibrate_comb_align`` in ``benchmarks/fit_area_model.py``.
    """
    w = acc["window_bits"]
    terms = acc["terms"]
    comps = [
        Component("accum.align", "wshl", (24, 254, w)),
        Component("accum.align", "add", (8,)),
        Component("accum.align", "neg", (w,)),
        Component("accum.align", "addn", (len(terms) + 1, w)),
        Component("accum.round", "neg", (w,)),
        Component("accum.round", "norm", (w,)),
        Component("accum.round", "add", (25,)),
        Component("accum.round", "add", (12,), 2),
        Component("accum.round", "mux", (2, 32), 3),
        Component("accum.special", "cmp", (8,), 2),
        Component("accum.special", "mux", (2, 32), 2),
        Component("accum.reg", "reg", (33,)),
    ]
    for t in terms:
        if t["exp_max"] > 0:
            comps.append(Component("accum.align", "wshl", (t["sig_bits"], t["exp_max"] + 1, w),
                                   tag="comb_align" if comb_fed else ""))
    return comps


def _sequencer_inventory(block, slices, sum_widths):
    """Partial-sum registers, their adders and the slice counter of a Sequencer."""
    if slices <= 1:
        return []
    comps = [Component(block, "reg", (_clog2(slices),)),
             Component(block, "add", (_clog2(slices),))]
    for width in sum_widths:
        # ``partial + part`` feeds both the output and the register: one adder after
        # Yosys merges the identical expressions
        comps += [Component(block, "reg", (width,)), Component(block, "add", (width,))]
    return comps


def _pipeline_registers(manifest, widths):
    """Pipeline register stages: payload bits given by ``widths[stage name]`` + ``valid``."""
    comps = []
    widths = dict(widths)
    widths.setdefault("input_reg", _payload_bits(manifest) or 0)
    for st in _stages_of(manifest):
        if st.get("kind") == "register":
            name = st.get("stage", "pipe")
            bits = widths.get(name, widths.get("*"))
            comps.append(Component(f"pipe.{name}", "reg", (bits + 1,)))
    return comps


def _payload_bits(manifest):
    for port in (manifest or {}).get("ports", []):
        if port["name"] == "i__payload":
            return port["width"]
    return None


def _hif4_sum_bits(count, max_shift=4):
    return ((49 * count) << max_shift).bit_length() + 1


def _hif4(residual, stages, lanes, manifest):
    groups = lanes // 4
    slices = 64 // lanes
    fe = "front"
    comps = []
    # MicroGroupDot(4): four 3x3-bit products with sign, their sum, one 0..4 shift
    mg_main = [Component(fe, "smul", (3, 3), 4 * groups),
               Component(fe, "tree", (4, 7), groups),
               Component(fe, "shl", (9, 5), groups),
               Component(fe, "tree", (4, 1), groups)]      # b_a + c_a + b_w + c_w
    comps += mg_main
    main_bits = _hif4_sum_bits(64)
    comps.append(Component(fe, "tree", (groups, _hif4_sum_bits(4)))) if groups > 1 else None
    sums = [main_bits]
    if residual == "2:4":
        comps += [Component(fe, "mux", (4, 4), 2 * groups),
                  Component(fe, "smul", (3, 3), 2 * groups),
                  Component(fe, "tree", (2, 7), groups),
                  Component(fe, "shl", (8, 5), groups),
                  Component(fe, "tree", (4, 1), groups)]
        if groups > 1:
            comps.append(Component(fe, "tree", (groups, _hif4_sum_bits(2))))
        sums.append(_hif4_sum_bits(32))
    elif residual == "dense":
        comps += [Component(fe, "smul", (3, 3), 4 * groups),
                  Component(fe, "tree", (4, 7), groups),
                  Component(fe, "shl", (9, 5), groups),
                  Component(fe, "tree", (4, 1), groups)]
        if groups > 1:
            comps.append(Component(fe, "tree", (groups, _hif4_sum_bits(4))))
        sums.append(_hif4_sum_bits(64))
    npairs = 1 if residual == "none" else 2
    # ScalePair: 3x3-bit significand product, exponent add, NaN compares
    comps += [Component(fe, "mul", (3, 3), npairs), Component(fe, "add", (6,), npairs),
              Component(fe, "cmp", (8,), 2 * npairs)]
    if slices > 1:
        ops = 2 + (0 if residual == "none" else 1)
        comps.append(Component(fe, "mux", (slices, 16 * groups + groups + groups // 2), ops))
        if residual == "2:4":
            comps.append(Component(fe, "mux", (slices, 4 * groups), 1))
    comps += _sequencer_inventory(fe, slices, sums)
    # TermFormer: block sum x significand product
    comps.append(Component("terms", "smulx", (sums[0], 7)))
    if residual != "none":
        comps.append(Component("terms", "smulx", (sums[1], 7)))
    sums_bits = sum(s + 13 for s in sums) + 3
    acc = _acc_stage(manifest)
    widths = {"sums_reg": sums_bits, "terms_reg": _term_bits(acc)}
    return (comps + _pipeline_registers(manifest, widths)
            + accumulator_inventory(acc, comb_fed=is_comb_fed(manifest)))


def _mxfp4(residual, stages, lanes, manifest):
    slices = 64 // lanes
    fe = "front_end"
    per_tree = min(lanes, 32)
    comps = [Component(fe, "e2m1dot", (per_tree,), lanes // per_tree)]
    nblk = 2
    sum_regs = [14 for b in range(2) if (b * 32) // lanes != slices - 1]
    if residual == "2:4":
        kept = lanes // 2
        per_rtree = min(kept, 16)
        comps += [Component(fe, "mux", (4, 4), kept),
                  Component(fe, "e2m1dot", (per_rtree,), kept // per_rtree)]
        sum_regs += [13 for b in range(2) if (b * 16) // kept != slices - 1]
        nblk = 4
    elif residual == "dense":
        comps.append(Component(fe, "e2m1dot", (per_tree,), lanes // per_tree))
        sum_regs += [14 for b in range(2) if (b * 32) // lanes != slices - 1]
        nblk = 4
    comps += [Component(fe, "add", (8,), nblk), Component(fe, "cmp", (8,), nblk + 2)]
    if slices > 1:
        comps.append(Component(fe, "mux", (slices, 4 * lanes), 2))
        if residual == "2:4":
            comps.append(Component(fe, "mux", (slices, 3 * lanes), 1))
        elif residual == "dense":
            comps.append(Component(fe, "mux", (slices, 4 * lanes), 1))
    comps += _sequencer_inventory(fe, slices, sum_regs)
    acc = _acc_stage(manifest)
    return comps + _pipeline_registers(manifest, {"*": _term_bits(acc)}) + \
        accumulator_inventory(acc, comb_fed=is_comb_fed(manifest))


def _nvfp4(residual, stages, lanes, manifest):
    slices = 64 // lanes
    per_slice = lanes // 16
    fe = "front_end"
    acc = _acc_stage(manifest)
    term_bits = acc["terms"][0]["sig_bits"]
    comps = [Component(fe, "e2m1dot", (16,), per_slice),
             Component(fe, "mul", (4, 4), per_slice),
             Component(fe, "add", (5,), per_slice),
             Component(fe, "smulx", (13, 9), per_slice),
             Component(fe, "wshl", (21, 29, term_bits), per_slice),
             Component(fe, "cmp", (7,), 8)]
    if per_slice > 1:
        comps.append(Component(fe, "addn", (per_slice, term_bits)))
    if slices > 1:
        comps.append(Component(fe, "mux", (slices, 72), 2 * per_slice))
    comps += _sequencer_inventory(fe, slices, [term_bits])
    return comps + _pipeline_registers(manifest, {"*": _term_bits(acc)}) + \
        accumulator_inventory(acc, comb_fed=is_comb_fed(manifest))


UNIT_BUILDERS.update({"hif4": _hif4, "mxfp4": _mxfp4, "nvfp4": _nvfp4})
