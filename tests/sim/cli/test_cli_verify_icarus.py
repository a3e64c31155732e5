"""``hif4 verify --sim icarus``: Icarus Verilog as a second simulator, one unit of each
format, and a failed simulator build as one line naming its log.

Skipped, saying so, where Icarus is not installed (``apt-get install iverilog``; ``.ci/run``
installs it where the machine allows).
"""

import shutil

import pytest

from hif4spec import module_name, resolve
from sim.bench.runner import REPO
from sim.cli import main

pytestmark = pytest.mark.skipif(
    not (shutil.which("iverilog") and shutil.which("vvp")),
    reason="Icarus Verilog (iverilog, vvp) is not installed, so `hif4 verify --sim icarus` "
           "cannot be tested here; install it with the system package manager "
           "(apt-get install iverilog)")

MODULE = "nvfp4_dot_rnone_s3_l64"


@pytest.mark.parametrize("unit", ["hif4", "mxfp4", "nvfp4"])
def test_verify_with_icarus(unit, capsys):
    """16 lanes (the cheapest): every output word checked, no mismatch. The bench clock's
    10 ns period needs the time precision the runner gives Icarus (the generated Verilog has
    no `timescale and Icarus' default is 1 s)."""
    argv = ["verify", "--sim", "icarus", "--unit", unit, "--lanes", "16", "--vectors", "300"]
    assert main(argv) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{module_name(unit, **resolve(unit, lanes=16))} (cocotb): "), line
    assert "300 steps checked" in line and " 0 mismatches" in line, line


def test_failed_build_is_one_line_naming_the_log(tmp_path, capsys):
    """A module Icarus cannot compile: exit status 1, the error is one line naming the build
    log (which exists and holds the compiler's syntax error), no traceback."""
    shutil.copy(REPO / "rtl_out" / f"{MODULE}.json", tmp_path)
    text = (REPO / "rtl_out" / f"{MODULE}.v").read_text()
    (tmp_path / f"{MODULE}.v").write_text(text.replace("endmodule", "endmodul", 1))
    rc = main(["verify", "--sim", "icarus", "--manifest", str(tmp_path / f"{MODULE}.json"),
               "--vectors", "10", "--build-dir", str(tmp_path / "build")])
    captured = capsys.readouterr()
    assert rc == 1
    assert "Traceback" not in captured.out + captured.err
    error = [line for line in captured.err.splitlines() if "error" in line]
    assert len(error) == 1 and error[0].startswith("hif4 verify: error: building " + MODULE)
    log = tmp_path / error[0].rsplit("see ", 1)[1]
    assert log.name == "build.log" and "syntax error" in log.read_text()
