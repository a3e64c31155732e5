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
