"""Cycle-exactness over the grid: the cycle-level model against the Verilated unit (slow).

For one random step stream and one random stall pattern (valid gaps on the input, ready gaps
on the output) the cycle of every input transfer and of every output transfer must be the
same in the model (built from the manifest alone) and in the RTL, and the RTL's words must be
the golden model's (``sim.bench.rtlcheck.check_unit``), for every dot unit and residual mode
at every lane count and stage counts 1-3. The default suite checks the model on every
``CI_CONFIGS`` configuration from the same run that checks its words
(``test_bench_coverage.py``).
"""

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("unit,residual", [("hif4", "none"), ("hif4", "2:4"),
                                           ("mxfp4", "none"), ("mxfp4", "2:4"),
                                           ("nvfp4", "none")])
@pytest.mark.parametrize("lanes", [16, 32, 64])
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_model_cycle_exact_sweep(unit, residual, lanes, stages):
    from sim.bench.rtlcheck import check_unit

    res = check_unit(unit, residual=residual, stages=stages, lanes=lanes, steps=200,
                     seed=lanes + stages, p_gap=0.3, p_stall=0.5)
    assert res["cycles_agree"] and res["values_agree"]


#: One interleaved configuration per dot unit in the default suite (the ring, issue 45).
RING_CONFIGS = [("hif4", "2:4", 3, 64, 4), ("mxfp4", "none", 2, 32, 2),
                ("nvfp4", "none", 1, 16, 8)]


@pytest.mark.parametrize("unit,residual,stages,lanes,interleave", RING_CONFIGS)
def test_model_cycle_exact_with_a_ring(unit, residual, stages, lanes, interleave):
    """An interleaved unit: the steps wait for their accumulator's turn and the ring stands
    still while an output waits for o.ready; the model gives every transfer's cycle."""
    from sim.bench.rtlcheck import check_unit

    res = check_unit(unit, residual=residual, stages=stages, lanes=lanes, steps=300, seed=5,
                     p_gap=0.3, p_stall=0.5, interleave=interleave)
    assert res["latency"] == res["manifest_latency"]
    assert res["cycles_agree"] and res["values_agree"]


@pytest.mark.slow
@pytest.mark.parametrize("unit,residual", [("hif4", "none"), ("hif4", "2:4"),
                                           ("mxfp4", "none"), ("mxfp4", "2:4"),
                                           ("nvfp4", "none")])
@pytest.mark.parametrize("interleave", [2, 4, 8])
@pytest.mark.parametrize("stages,lanes", [(1, 64), (3, 16), (4, 32)])
def test_model_cycle_exact_ring_sweep(unit, residual, interleave, stages, lanes):
    from sim.bench.rtlcheck import check_unit

    res = check_unit(unit, residual=residual, stages=stages, lanes=lanes, steps=300,
                     seed=interleave + stages, p_gap=0.3, p_stall=0.5, interleave=interleave)
    assert res["cycles_agree"] and res["values_agree"]
