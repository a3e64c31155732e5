"""A format and its dot unit registered in-process, from this file alone.

``python -P tests/dummy_unit.py BUILD_ROOT`` (``-P``: ``tests/sim`` must not shadow
``sim``) registers format ``dmx4`` (MXFP4's block layout and
numerics under a name no other file knows: one ``FormatSpec`` and one golden-model entry)
and unit ``dmx4`` (one ``UnitSpec`` and its generator, a subclass of the MXFP4 datapath).
It then runs what a user of a new unit runs, each through the toolkit's own entry points:
generation (Verilog and manifest), a verification of random and named steps on the
compiled harness, the area model on the manifest, and the cycle simulator against the RTL.
It prints one JSON object (``tests/test_registry.py`` checks it); registering touches the
registries of this process only.
"""

import json
import sys
from dataclasses import replace
from pathlib import Path

from hif4spec import ACCUMS, FORMATS, UnitSpec, register_unit
from hwgen.mxfp4 import MXFP4DotUnit
from sim.formats.registry import golden, register
import sim.stimulus  # noqa: F401  (attaches the built-in formats' stimulus hooks)

NAME = "dmx4"
PARAMS = {"residual": "none", "stages": 2, "lanes": 16, "accum": "bounded"}


class DummyDotUnit(MXFP4DotUnit):
    """The MXFP4 datapath, registered as unit ``dmx4``."""

    unit = NAME


def register_dummy():
    """Register format and unit ``dmx4`` in this process."""
    mx = golden("mxfp4")
    register(replace(FORMATS["mxfp4"], name=NAME, title="DMX4"),
             quantize=mx.quantize, dequantize=mx.dequantize,
             fake_quantize=mx.fake_quantize, edge_cases=mx.edge_cases,
             checked_cases=lambda residual: [])
    register_unit(UnitSpec(NAME, NAME, f"{__name__}:DummyDotUnit", ("none",), ("none",),
                           accums=ACCUMS))


def main(build_root):
    from hif4spec import module_name
    from sim.area_model import estimate_manifest, load_coeffs
    from sim.bench.rtlcheck import check_unit
    from sim.bench.runner import generate_cached, verify
    from sim.cyclesim import UnitTiming, simulate_gemm

    register_dummy()
    build_root = Path(build_root)
    module = module_name(NAME, **PARAMS)
    verilog, manifest = generate_cached(NAME, PARAMS, build_root / "rtl" / module)
    _, reference = generate_cached("mxfp4", PARAMS, build_root / "rtl" / "mxfp4")
    res = verify(NAME, **PARAMS, vectors=3000, seed=5, engine="fast", build_root=build_root)
    timing = UnitTiming.from_manifest(manifest)
    gemm = simulate_gemm(NAME, 4, 192, 3, timing=timing, seed=2)
    gemm_ref = simulate_gemm("mxfp4", 4, 192, 3, timing=timing, seed=2)
    cycles = check_unit(NAME, **PARAMS, steps=200, seed=3)
    out = {
        "module": module,
        "verilog_lines": len(verilog.read_text().splitlines()),
        "manifest_unit": manifest["unit"],
        "verify": {k: res[k] for k in ("steps", "mismatches", "engine")},
        "area": estimate_manifest(manifest).nand2,
        # the per-unit factors fitted to synthesis are the MXFP4 unit's own: a new unit is
        # estimated from its structure alone, as the MXFP4 unit is without them
        "area_mxfp4": estimate_manifest(reference, {**load_coeffs(), "units": {}}).nand2,
        "gemm_cycles": gemm.cycles,
        "gemm_cycles_mxfp4": gemm_ref.cycles,
        "gemm_output_equal": bool((gemm.output == gemm_ref.output).all()),
        "cycle_check": cycles,
    }
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
