"""The default suite's Verilator coverage: every configuration class, a short run each.

For every configuration of ``CI_CONFIGS`` (every (unit, residual) pair of the registry,
every stage count, every accumulator back end) the bench runs the named cases, the
hand-checked ones with their hand-derived words among them, then random K-loops, with
random stalls on ``i.valid`` and ``o.ready``; every output word is checked against the
golden model, which must itself give the hand-derived words. A second run without stalls pins the manifest's ``ii`` and
``latency``. Longer runs and the full grid are marked slow (``test_bench_hif4.py``,
``test_bench_mxnv.py``).
"""

import numpy as np
import pytest
from conftest import CI_CONFIGS, CI_IDS

from hif4spec import STAGES, accums_of, units_of_kind
from sim.bench.runner import verify
from sim.stimulus import named_cases, payload_offsets, random_stream

RANDOM_STEPS = 600


def test_configs_cover_every_pair_stage_count_and_back_end():
    pairs = [(u.name, r) for u in units_of_kind("dot") for r in u.residuals]
    assert {(u, r) for u, r, *_ in CI_CONFIGS} == set(pairs)
    assert {s for _, _, s, _, _ in CI_CONFIGS} == set(STAGES)
    backends = {(u.name, a) for u in units_of_kind("dot") for a in u.accums}
    assert {(u, a) for u, _, _, _, a in CI_CONFIGS} == backends
    assert all(a in accums_of(u, r) for u, r, _, _, a in CI_CONFIGS)


@pytest.mark.parametrize("unit, residual, stages, lanes, accum", CI_CONFIGS, ids=CI_IDS)
def test_short_run(unit, residual, stages, lanes, accum):
    named = named_cases(unit, residual)
    vectors = sum(len(s["first"]) for _, s in named) + RANDOM_STEPS
    seed = 7 * stages + lanes
    result = verify(unit, residual=residual, stages=stages, lanes=lanes, accum=accum,
                    vectors=vectors,
                    seed=seed, valid_prob=0.8, ready_prob=0.7)
    assert not result["timeout"], result
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["transferred"] == result["steps"] == vectors
    assert result["checked"] == result["outputs"] > RANDOM_STEPS // 20
    manifest = result["manifest"]
    assert manifest["payload"] == payload_offsets(unit, residual)
    assert result["latency_min"] >= manifest["latency"]

    n = 200
    steady = random_stream(unit, residual, n, np.random.default_rng(seed + 1))
    timed = verify(unit, residual=residual, stages=stages, lanes=lanes, accum=accum,
                   stream=steady,
                   seed=seed, valid_prob=1.0, ready_prob=1.0)
    assert timed["mismatches"] == 0, timed["first_mismatch"]
    assert timed["transfer_gaps_max"] == manifest["ii"]
    assert timed["latency_min"] == timed["latency_max"] == manifest["latency"]
    span = timed["last_output_cycle"] - timed["first_transfer_cycle"]
    assert span == (n - 1) * manifest["ii"] + manifest["latency"]
