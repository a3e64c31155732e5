"""Cycle-exactness: the cycle-level model against the Verilated unit (cocotb), every unit type.

For one random step stream and one random stall pattern (valid gaps on the input, ready gaps
on the output) the cycle of every input transfer and of every output transfer must be the
same in the model (built from the manifest alone) and in the RTL, and the RTL's words must be
the golden model's. The configurations are the default suite's (``CI_CONFIGS``, built by
tests/sim/bench/test_bench_coverage.py too, so the Verilator builds are shared): every unit and
residual mode, every stage count, every accumulator back end, sequencers (lanes < 64).
"""

import numpy as np
import pytest
from conftest import CI_CONFIGS, CI_IDS


@pytest.mark.parametrize("unit, residual, stages, lanes, accum", CI_CONFIGS, ids=CI_IDS)
def test_model_cycle_exact_against_rtl(unit, residual, stages, lanes, accum):
    from sim.bench.rtlcheck import check_unit

    res = check_unit(unit, residual=residual, stages=stages, lanes=lanes, accum=accum,
                     steps=90, seed=11,
                     p_gap=0.35, p_stall=0.45)
    assert res["ii"] == res["manifest_ii"]
    assert res["latency"] == res["manifest_latency"]
    assert len(res["rtl_out"]) == len(res["expected"]) > 10
    assert res["rtl_in"] == res["model_in"]
    assert res["rtl_out"] == res["model_out"]
    assert res["words"] == res["expected"]
    # the pattern did stall both sides
    assert np.diff(res["rtl_in"]).max() > res["ii"]


@pytest.mark.slow
@pytest.mark.parametrize("unit,residual", [("hif4", "none"), ("hif4", "2:4"),
                                           ("mxfp4", "none"), ("mxfp4", "2:4"),
                                           ("nvfp4", "none")])
@pytest.mark.parametrize("lanes", [16, 32, 64])
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_model_cycle_exact_sweep(unit, residual, lanes, stages):
    from sim.cost.rtlcheck import check_unit

    res = check_unit(unit, residual=residual, stages=stages, lanes=lanes, steps=200,
                     seed=lanes + stages, p_gap=0.3, p_stall=0.5)
    assert res["cycles_agree"] and res["values_agree"]
