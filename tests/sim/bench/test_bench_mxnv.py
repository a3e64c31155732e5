"""cocotb regression of the generated MXFP4 and NVFP4 units (Verilator, shared bench).

Every configuration runs the registered named cases followed by random K-loops with random
stalls on ``i.valid`` and ``o.ready``, each output word checked against
``sim.dot.run_steps``; a second short run with no stalls pins the throughput (one step
every ``64 // lanes`` cycles) and the latency to the manifest's numbers. All of it is marked
slow: the default suite's short runs of every configuration class are in
``test_bench_coverage.py``.
"""

import numpy as np
import pytest

from sim.bench.runner import verify
from sim.stimulus import concat, element_pair_stream, random_stream, scale_pair_stream


def _check(result, *, stalls=True):
    assert not result["timeout"], result
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["checked"] == result["outputs"] > 0
    assert result["transferred"] == result["steps"]
    man = result["manifest"]
    if not stalls:
        # back-to-back input and an always-ready output: exact throughput and latency
        assert result["transfer_gaps_max"] == man["ii"]
        assert result["latency_min"] == result["latency_max"] == man["latency"]
    else:
        assert result["latency_min"] >= man["latency"]


def _run(unit, residual, stages, lanes, vectors, seed):
    result = verify(unit, residual=residual, stages=stages, lanes=lanes, vectors=vectors,
                    seed=seed, valid_prob=0.8, ready_prob=0.75)
    _check(result)
    steady = random_stream(unit, residual, 200, np.random.default_rng(seed + 1))
    result = verify(unit, residual=residual, stages=stages, lanes=lanes, stream=steady,
                    seed=seed, valid_prob=1.0, ready_prob=1.0)
    _check(result, stalls=False)


# The default suite's short runs of every configuration are in test_bench_coverage.py.
@pytest.mark.slow
@pytest.mark.parametrize("unit, residual, stages, lanes", [
    ("mxfp4", "2:4", 3, 32),
    ("nvfp4", "none", 3, 16),
])
def test_bench_regression(unit, residual, stages, lanes):
    _run(unit, residual, stages, lanes, 2500, seed=11)


@pytest.mark.slow
@pytest.mark.parametrize("unit, residual, stages, lanes", [
    (u, r, s, lanes) for u, rs in (("mxfp4", ("none", "2:4", "dense")), ("nvfp4", ("none",)))
    for r in rs for s, lanes in ((1, 64), (2, 16), (3, 64), (4, 32))])
def test_bench_regression_grid(unit, residual, stages, lanes):
    _run(unit, residual, stages, lanes, 4000, seed=5 + stages + lanes)


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["mxfp4", "nvfp4"])
def test_bench_all_scale_and_element_pairs(unit):
    """Every scale-code pair (65536 steps) and every E2M1 pair in every position, through
    the whole unit at the default parameters."""
    stream = concat([scale_pair_stream(unit), element_pair_stream(unit)])
    result = verify(unit, stream=stream, seed=3, valid_prob=1.0, ready_prob=1.0)
    _check(result, stalls=False)


@pytest.mark.slow
@pytest.mark.parametrize("unit, residual", [("mxfp4", "none"), ("mxfp4", "2:4"),
                                            ("nvfp4", "none")])
def test_bench_100k(unit, residual):
    _check(verify(unit, residual=residual, vectors=100000, seed=1))
