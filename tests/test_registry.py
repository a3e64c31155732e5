"""A new format and unit need their registry entries and their datapath, nothing else.

``tests/dummy_unit.py`` registers format and unit ``dmx4`` in a process of its own (the MXFP4
datapath and numerics under a name no other file knows) and runs generation, a verification
on the compiled harness, the area model and the cycle simulator against the RTL through the
toolkit's own entry points. The unit must come out as the MXFP4 unit it copies: the same
area, the same GEMM cycles and words, every step matching the golden model.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hif4spec import FORMATS, UNITS, UnitSpec, register_unit

SCRIPT = Path(__file__).with_name("dummy_unit.py")


def test_dummy_unit_runs_end_to_end(tmp_path):
    proc = subprocess.run([sys.executable, "-P", str(SCRIPT), str(tmp_path)], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["module"] == "dmx4_dot_rnone_s2_l16_bnd"
    assert out["manifest_unit"] == "dmx4" and out["verilog_lines"] > 100
    assert out["verify"]["engine"] == "fast"
    assert out["verify"]["steps"] >= 3000 and out["verify"]["mismatches"] == 0
    assert out["area"] == out["area_mxfp4"] > 0
    assert out["gemm_cycles"] == out["gemm_cycles_mxfp4"] and out["gemm_output_equal"]
    check = out["cycle_check"]
    assert check["cycles_agree"] and check["values_agree"], check
    # nothing leaked into this process's registries
    assert "dmx4" not in FORMATS and "dmx4" not in UNITS


def test_register_unit_refuses_what_it_cannot_check():
    with pytest.raises(ValueError, match="format"):
        register_unit(UnitSpec("nope", "nofmt", "x:y", ("none",), ("none",)))
    with pytest.raises(ValueError, match="residual mode or back end"):
        register_unit(UnitSpec("nope", "hif4", "x:y", ("sparse",), ("none",)))
    with pytest.raises(ValueError, match="another unit"):
        register_unit(UnitSpec("hif4", "hif4", "x:y", ("none",), ("none",)))
    assert "nope" not in UNITS
