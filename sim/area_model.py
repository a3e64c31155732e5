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
:mod:`hwgen.primitives` (by family name), with the same Yosys flow as the units
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
only. Every other configuration is held out and checks the fit. A multi-format unit has no
fit of its own: it takes the mean of its formats' two factors (:func:`unit_factors`).
"""

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hif4spec import REFERENCE_ACCUM

__all__ = [
    "FEATURES", "COEFFS_PATH", "Component", "AreaEstimate", "load_coeffs",
    "component_cost", "features", "unit_inventory", "estimate_manifest",
    "is_front_block", "is_comb_fed", "bounded_reference", "COMB_TAGS", "unit_factors",
    "LIBERTY_TABLE_PATH", "LIBERTY_COEFFS_PATH", "LIBERTY_SCRIPT", "LIBERTY_FIT_ON",
    "UncalibratedLibrary", "run_key", "is_liberty_fit", "is_liberty_comb_fit",
    "liberty_features",
    "REGISTER_FAMILIES", "register_um2", "FITTED_REGISTER", "REGISTER_PRICE_STEP",
    "load_liberty_coeffs", "liberty_calibration", "estimate_um2", "fit_liberty",
    "save_liberty_calibration", "liberty_model_vs_synth",
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


def unit_factors(coeffs, unit, formats=()):
    """The unit's calibration factors (``coeffs["units"][unit]``); a unit without its own
    that combines ``formats`` (a multi-format unit: the manifest's ``formats``) takes the
    mean of its formats' ``front`` and ``rest`` factors, as it is built from their blocks;
    ``{}`` when there are none."""
    units = coeffs.get("units", {})
    if units.get(unit):
        return units[unit]
    own = [units[f] for f in formats if units.get(f)]
    if not own or len(own) < len(formats):
        return {}
    return {k: sum(f[k] for f in own) / len(own) for k in ("front", "rest")}


def _estimate(components, coeffs=None, unit=None, accum=REFERENCE_ACCUM, formats=()):
    coeffs = coeffs or load_coeffs()
    unit_calib = unit_factors(coeffs, unit, formats)
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
                     manifest.get("parameters", {}).get("accum", REFERENCE_ACCUM),
                     manifest.get("formats", ()))


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


# ----------------------------------------------------------------------------------------
# Per-library calibration: µm² of a Liberty library from the NAND2-eq model
# ----------------------------------------------------------------------------------------
#
# The liberty flow (:mod:`sim.cost.libsynth`) maps a unit to a real library's cells and
# reports µm². The model above predicts NAND2 equivalents of the technology-independent
# flow; a library turns them into µm² in two parts. Register bits (pipeline registers,
# accumulator) are priced per bit: a flip-flop is about six NAND2 cells of a real library
# where the cmos2 flow counts four, so a per-NAND2-eq factor fitted on one pipeline depth
# misprices another. The price is bracketed by the library's synthesis of the register
# primitives (:mod:`hwgen.primitives`, 100 bits: the bare flip-flop, and the
# pipeline register with enable and reset synthesized alone) and fitted within the
# bracket with the rest (:func:`fit_liberty`). The logic gets two factors per
# unit and back end, µm² per model NAND2-eq of the front end's and of the rest's
# (accumulator), fitted by relative least squares on the unit's stage-3 configurations of
# the liberty table's ``area`` runs (``benchmarks/liberty_grid.py --fit``), and a
# single-stage factor on the logic of a single-stage unit (one combinational cone, which
# a library maps larger or smaller relative to its parts than the cmos2 flow, whose own
# single-stage factor the NAND2-eq model carries), fitted on the single-stage
# configurations with 16 and 32 lanes (:data:`LIBERTY_FIT_ON`). Every other configuration
# is held out. A calibration belongs to one library, named and identified by its file's
# SHA-256 (``sim/area_coeffs_liberty.json``: ``{"libraries": {sha256: {...}}}``); another library
# is uncalibrated (:class:`UncalibratedLibrary`) until it is fitted on its own synthesis.

LIBERTY_TABLE_PATH = Path(__file__).parent / "cost" / "liberty_table.json"
LIBERTY_COEFFS_PATH = Path(__file__).with_name("area_coeffs_liberty.json")
#: The script whose runs the calibration is fitted on and checked against.
LIBERTY_SCRIPT = "area"


class UncalibratedLibrary(KeyError):
    """No calibration of the area model for this library (name and SHA-256)."""

    def __str__(self):
        return self.args[0] if self.args else "uncalibrated library"


def run_key(liberty_sha256, script):
    """The key of one run in a liberty table entry's ``runs``."""
    return f"{liberty_sha256}/{script}"


def is_liberty_fit(manifest):
    """Whether a configuration is in the subset the per-library front/rest factors are
    fitted on: the stage-3 configurations (every lane count), as the NAND2-eq model's
    unit factors (``fitted_on``)."""
    return manifest.get("parameters", {}).get("stages") == 3


def is_liberty_comb_fit(manifest):
    """Whether a configuration is in the subset the per-library single-stage factor is
    fitted on: single-stage (:func:`is_comb_fed`) with fewer than 64 lanes, as the
    NAND2-eq model's single-stage factors (:data:`COMB_TAGS`). Every configuration in
    neither subset is held out, the single-stage 64-lane units among them."""
    return is_comb_fed(manifest) and manifest.get("parameters", {}).get("lanes", 64) < 64


#: The fitting subsets, in words (recorded with each calibration).
LIBERTY_FIT_ON = ("front/rest factors: the stage-3 configurations (all residual modes and "
                  "lane counts) of each unit and back end; single-stage factor: its "
                  "single-stage configurations with 16 and 32 lanes")


#: The register families: a library's calibration prices their bits directly.
REGISTER_FAMILIES = ("reg", "regp", "rege")


def liberty_features(manifest, coeffs=None):
    """``(front, rest, bits)``: the NAND2-eq model's area of a configuration's logic in the
    front end and in the rest (accumulator and pipeline registers' blocks,
    :func:`is_front_block`), registers left out, and its register bits per family
    (``{"reg": n, ...}``, :data:`REGISTER_FAMILIES`)."""
    import dataclasses

    comps = unit_inventory(manifest)
    bits = {}
    logic = []
    for comp in comps:
        if comp.family in REGISTER_FAMILIES:
            bits[comp.family] = bits.get(comp.family, 0) + comp.count * comp.params[0]
            comp = dataclasses.replace(comp, count=0)   # its block stays (calibrations)
        logic.append(comp)
    est = _estimate(logic, coeffs, manifest["unit"], _accum_of(manifest),
                    manifest.get("formats", ()))
    front = sum(v for k, v in est.blocks.items() if is_front_block(k))
    return front, est.nand2 - front, bits


def register_um2(bits, calib):
    """µm² of register ``bits`` (``{family: n}``) at the calibration's price per bit."""
    regs = calib["registers"]
    return sum(n * regs[fam]["um2_per_bit"] for fam, n in bits.items())


def _accum_of(manifest):
    return manifest.get("parameters", {}).get("accum", REFERENCE_ACCUM)


def load_liberty_coeffs(path=LIBERTY_COEFFS_PATH):
    """The per-library calibrations: ``{"libraries": {sha256: calibration}}`` (empty
    when the file is missing)."""
    path = Path(path)
    if not path.exists():
        return {"libraries": {}}
    return _load(str(path))


def _lib_id(library, sha256=None):
    """``(name, sha256)`` of a :class:`sim.cost.liberty.Library` or of the two given."""
    if sha256 is None and hasattr(library, "sha256"):
        return library.name, library.sha256
    return library, sha256


def liberty_calibration(library, sha256=None, coeffs=None):
    """The calibration of ``library`` (a :class:`sim.cost.liberty.Library`, or its name
    with ``sha256``); raises :class:`UncalibratedLibrary` when there is none for that
    exact file (another library, or the same name with other content)."""
    name, sha = _lib_id(library, sha256)
    libs = (coeffs or load_liberty_coeffs()).get("libraries", {})
    calib = libs.get(sha)
    if calib is None or calib.get("library") != name:
        known = ", ".join(f"{c['library']} ({s[:12]})" for s, c in libs.items()) or "none"
        raise UncalibratedLibrary(
            f"the area model is not calibrated for library {name} ({str(sha)[:12]}); "
            f"calibrated: {known}. Synthesize the grid with it and fit: python "
            f"benchmarks/liberty_grid.py --liberty FILE, then --fit")
    return calib


def estimate_um2(manifest, library, sha256=None, *, coeffs=None, liberty_coeffs=None):
    """Model area in µm² of the library (see :func:`liberty_calibration`) of the unit a
    manifest describes: the unit's µm² per NAND2-eq of its front end's logic and of the
    rest's, for its back end, applied to the NAND2-eq model (times the unit's single-stage
    factor ``comb`` for a single-stage configuration, :func:`is_comb_fed`), plus its
    register bits at the library's price per bit. Raises :class:`UncalibratedLibrary` for a
    library, unit or back end without a calibration."""
    if not isinstance(manifest, dict):
        manifest = json.loads(Path(manifest).read_text())
    calib = liberty_calibration(library, sha256, liberty_coeffs)
    unit, accum = manifest["unit"], _accum_of(manifest)
    factors = calib.get("units", {}).get(unit, {}).get(accum)
    if factors is None:
        raise UncalibratedLibrary(f"the area model's calibration for {calib['library']} "
                                  f"has no factors for unit {unit} with back end {accum}")
    front, rest, bits = liberty_features(manifest, coeffs)
    logic = factors["front"] * front + factors["rest"] * rest
    if is_comb_fed(manifest):
        logic *= factors.get("comb", 1.0)
    return logic + register_um2(bits, calib)


def _liberty_rows(liberty_table, sha256, script):
    """``[(manifest, run), ...]`` of the table's runs of one library and script."""
    key = run_key(sha256, script)
    return [(e["manifest"], e["runs"][key]) for e in liberty_table.values()
            if key in e.get("runs", {})]


#: The register family whose price per bit the fit sets (the units' pipeline and
#: accumulator registers are all of it), and the step of its search, µm².
FITTED_REGISTER = "reg"
REGISTER_PRICE_STEP = 0.01


def _fit_unit(subsets, prices):
    """Factors of one unit and back end at register ``prices`` (``{family: µm²/bit}``):
    ``(info, squared relative errors)``; see :func:`fit_liberty`."""
    import numpy as np

    def arrays(rows):
        X = np.array([[r[1], r[2]] for r in rows])
        k = np.array([sum(n * prices[f] for f, n in r[3].items()) for r in rows])
        return X, k, np.array([r[4] for r in rows])

    X, k, y = arrays(subsets["base"])
    coef, *_ = np.linalg.lstsq(X / y[:, None], (y - k) / y, rcond=None)
    coef = np.round(coef, 5)
    errs = list((X @ coef + k - y) / y)
    info = {"front": float(coef[0]), "rest": float(coef[1]),
            "fitted_on": sorted(r[0] for r in subsets["base"])}
    if subsets.get("comb"):
        X, k, y = arrays(subsets["comb"])
        logic = X @ coef
        comb = round(float(np.sum((logic / y) * ((y - k) / y)) / np.sum((logic / y) ** 2)), 5)
        errs += list((comb * logic + k - y) / y)
        info.update(comb=comb, comb_fitted_on=sorted(r[0] for r in subsets["comb"]))
    info["max_rel_error"] = round(float(np.max(np.abs(errs))), 4)
    return info, float(np.sum(np.square(errs)))


def fit_liberty(liberty_table, library, sha256=None, *, registers, coeffs=None,
                script=LIBERTY_SCRIPT):
    """Fit a library's calibration on the liberty table's ``script`` runs.

    ``registers`` is what the library's synthesis of the register primitives gives
    (``{family: {"um2_per_bit": x, "bits": n, "synth_um2": a}}``, measured by
    ``benchmarks/liberty_grid.py``): ``regp`` (the flip-flop alone) and ``reg`` (with the
    enable and synchronous reset, synthesized alone, its control nets buffered to every
    bit). A unit's ``reg`` bits cost somewhere between the two (their enable and reset
    logic merges with the surrounding cells), so their price is fitted within that
    bracket, one figure for the library, in steps of :data:`REGISTER_PRICE_STEP`; the other
    families keep the primitive's price. At each price, per unit and back end, the two
    factors (µm² per NAND2-eq of the front end's logic and of the rest's) are fitted on
    the configurations of :func:`is_liberty_fit`, then the single-stage factor ``comb``
    (on the logic of a single-stage configuration) on those of :func:`is_liberty_comb_fit`,
    each by relative least squares (every configuration counts by its relative error); the
    price kept is the one with the least sum of squared relative errors over the fitting
    subsets. Returns the calibration (see :func:`save_liberty_calibration`).
    """
    name, sha = _lib_id(library, sha256)
    groups = {}
    for manifest, run in _liberty_rows(liberty_table, sha, script):
        subset = ("base" if is_liberty_fit(manifest)
                  else "comb" if is_liberty_comb_fit(manifest) else None)
        if subset:
            front, rest, bits = liberty_features(manifest, coeffs)
            groups.setdefault((manifest["unit"], _accum_of(manifest)), {}).setdefault(
                subset, []).append((manifest["module"], front, rest, bits, run["area_um2"]))
    groups = {key: g for key, g in sorted(groups.items()) if g.get("base")}
    if not groups:
        raise ValueError(f"no {script} runs of library {name} ({str(sha)[:12]}) in the "
                         "fitting subset of the table")
    prices = {fam: info["um2_per_bit"] for fam, info in registers.items()}
    lo, hi = sorted((registers["regp"]["um2_per_bit"],
                     registers[FITTED_REGISTER]["um2_per_bit"]))
    best = None
    for i in range(int(round((hi - lo) / REGISTER_PRICE_STEP)) + 1):
        price = round(lo + i * REGISTER_PRICE_STEP, 4)
        fits = {key: _fit_unit(g, {**prices, FITTED_REGISTER: price})
                for key, g in groups.items()}
        sse = sum(f[1] for f in fits.values())
        if best is None or sse < best[0]:
            best = (sse, price, fits)
    _, price, fits = best
    units, fitted_on = {}, []
    for (unit, accum), (info, _) in fits.items():
        units.setdefault(unit, {})[accum] = info
        fitted_on += info["fitted_on"] + info.get("comb_fitted_on", [])
    regs = {fam: {**info, "primitive_um2_per_bit": info["um2_per_bit"]}
            for fam, info in registers.items()}
    regs[FITTED_REGISTER].update(um2_per_bit=price, fitted_within=[lo, hi])
    return {"library": name, "liberty_sha256": sha, "script": script,
            "fit_rule": LIBERTY_FIT_ON, "fitted_on": sorted(fitted_on), "units": units,
            "registers": regs}


def save_liberty_calibration(calib, path=LIBERTY_COEFFS_PATH):
    """Write ``calib`` (:func:`fit_liberty`) into the calibration file under its library's
    SHA-256, keeping the other libraries'; returns the whole file's content."""
    path = Path(path)
    data = json.loads(path.read_text()) if path.exists() else {"libraries": {}}
    data.setdefault("libraries", {})[calib["liberty_sha256"]] = calib
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    _load.cache_clear()
    return data


def liberty_model_vs_synth(liberty_table, library, sha256=None, *, coeffs=None,
                           liberty_coeffs=None, script=LIBERTY_SCRIPT):
    """One row per configuration with a ``script`` run of the library, by module name:
    ``(module, unit, synth_um2, model_um2, relative error, fitted)``."""
    name, sha = _lib_id(library, sha256)
    calib = liberty_calibration(name, sha, liberty_coeffs)
    fitted = set(calib.get("fitted_on", ()))
    rows = []
    for manifest, run in sorted(_liberty_rows(liberty_table, sha, script),
                                key=lambda r: r[0]["module"]):
        model = estimate_um2(manifest, name, sha, coeffs=coeffs, liberty_coeffs=liberty_coeffs)
        syn = run["area_um2"]
        rows.append((manifest["module"], manifest["unit"], syn, model, (model - syn) / syn,
                     manifest["module"] in fitted))
    return rows
