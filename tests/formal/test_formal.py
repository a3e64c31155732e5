"""Formal proofs of the datapath blocks (``docs/formal.md``), run with SymbiYosys from pip.

Every proof is BMC depth 1 of a combinational block, so a pass covers every input. Each runs
in its own temporary folder (the yowasp tools see only the folder they run in). The mutant
of each proof (a deliberately wrong reference, ``formal_props``) must be rejected with a
counterexample, so no proof passes vacuously. Times are in ``docs/formal.md``; proofs over
two minutes on two shared cores are marked ``slow``.
"""

import pytest

import formal_props as fp
from hwgen.hif4 import HiF4DotUnit
from hwgen.nvfp4 import term_specs as nvfp4_terms
from hwgen.parts import probe
from sim.formal import prove


def hif4_terms(residual):
    """The accumulator terms of a HiF4 unit with ``residual``."""
    return probe(HiF4DotUnit(residual=residual)).terms


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
    "hif4_block_sum_r24": (lambda mu: fp.HiF4BlockSumProof("2:4", mu), "boolector", False),
    "hif4_block_sum_dense": (lambda mu: fp.HiF4BlockSumProof("dense", mu), "boolector",
                             False),
    "round_hif4": (lambda mu: fp.RoundProof(hif4_terms("none"), mu), "boolector", False),
    "round_hif4_r": (lambda mu: fp.RoundProof(hif4_terms("2:4"), mu), "boolector", False),
    "round_nvfp4": (lambda mu: fp.RoundProof(nvfp4_terms(), mu), "boolector", False),
}

#: Proofs whose mutant runs in the default suite (the others' mutants are ``slow``).
MUTANTS_DEFAULT = {"microgroup4", "residual_select", "e2m1_product", "e2m1_dot32",
                   "hif4_block_sum", "round_hif4", "round_nvfp4"}


def _params(mutant):
    out = []
    for name, (_, _, slow) in PROOFS.items():
        if mutant:
            slow = name not in MUTANTS_DEFAULT
        out.append(pytest.param(name, id=name, marks=[pytest.mark.slow] if slow else []))
    return out


def _run(name, mutant, tmp_path):
    factory, solver, _ = PROOFS[name]
    return prove(factory(mutant), name, tmp_path, solver=solver, timeout=1800)


@pytest.mark.parametrize("name", _params(mutant=False))
def test_proof_passes(name, tmp_path):
    result = _run(name, False, tmp_path)
    assert result.status == "PASS", result.log[-3000:]


@pytest.mark.parametrize("name", _params(mutant=True))
def test_mutant_is_rejected(name, tmp_path):
    result = _run(name, True, tmp_path)
    assert result.status == "FAIL", result.log[-3000:]
