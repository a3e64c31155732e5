"""``hif4 bench quantize``: runs end to end on a small array and rejects bad options."""

import subprocess
import sys

from sim.cli import main


def test_bench_quantize_small_run(capsys):
    assert main(["bench", "quantize", "--values", "8192", "--repeats", "1", "--no-mse",
                 "--formats", "hif4,nvfp4", "--all-cores"]) == 0
    out = capsys.readouterr().out
    for name in ("numpy.copy", "ml_dtypes float4_e2m1fn cast", "hif4 fake_quantize",
                 "hif4 quantize (codes)", "nvfp4 fake_quantize"):
        assert name in out
    assert "mxfp4 fake_quantize" not in out


def test_bench_quantize_bad_input_exits_2():
    for args in (["--formats", "fp4"], ["--values", "3"], ["--repeats", "0"]):
        r = subprocess.run([sys.executable, "-m", "sim.cli", "bench", "quantize", *args],
                           capture_output=True, text=True)
        assert r.returncode == 2
        assert r.stderr.strip().count("\n") == 0 and "error" in r.stderr
    r = subprocess.run([sys.executable, "-m", "sim.cli", "bench"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "hif4 bench quantize" in r.stderr
