"""`hif4 quantize`: statistics, written files, --compare, and bad input (one line on stderr,
exit status 2, no output file left behind)."""

import subprocess
import sys

import numpy as np
import pytest

from sim.cli import main
from sim.cli.quantize import error_stats
from sim.formats import fake_quantize, quantize
from sim.formats.resq import pack_24, residual24_to_bytes, resq


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 100)) * 3).astype(np.float32)
    path = tmp_path / "x.npy"
    np.save(path, x)
    return x, path


def run(argv, capsys):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def stat_line(out, name):
    line = next(ln for ln in out.splitlines() if ln.strip().startswith(name))
    return float(line.split()[-1 if name != "SNR" and name != "zeroed" else 1])


def test_statistics_and_output(data, tmp_path, capsys):
    x, path = data
    y_path, b_path = tmp_path / "y.npy", tmp_path / "y.bin"
    rc, out, err = run(["quantize", "--format", "hif4", "--input", path, "--output", y_path,
                        "--packed", b_path], capsys)
    assert rc == 0, err
    q = fake_quantize(x, "hif4")
    e = q.astype(np.float64) - x
    assert stat_line(out, "MSE") == pytest.approx(np.mean(e * e), rel=1e-6)
    snr = 10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum(e * e))
    assert stat_line(out, "SNR") == pytest.approx(snr, abs=1e-3)
    assert stat_line(out, "zeroed") == pytest.approx(100 * np.mean(q[x != 0] == 0), abs=1e-4)
    assert "max |err|" in out
    y = np.load(y_path)
    assert y.dtype == np.float32 and np.array_equal(y, q)
    assert b_path.read_bytes() == quantize(x, "hif4").to_bytes()


def test_resq_output_and_packed_residual(data, tmp_path, capsys):
    x, path = data
    for fmt, mode in [("hif4", "2:4"), ("nvfp4", "dense"), ("mxfp4", "channel50")]:
        y_path, b_path = tmp_path / f"{fmt}.npy", tmp_path / f"{fmt}.bin"
        rc, out, err = run(["quantize", "-f", fmt, "-i", path, "--resq", mode, "-o", y_path,
                            "--packed", b_path, "--axis", "1"], capsys)
        assert rc == 0, err
        ref = resq(x, fmt, mode, axis=1)
        assert np.array_equal(np.load(y_path), ref.corrected())
        assert b_path.read_bytes() == ref.main.to_bytes()
        res = (tmp_path / f"{fmt}.residual.bin").read_bytes()
        if fmt == "hif4":
            assert res == residual24_to_bytes(pack_24(ref.residual))
            assert len(res) == 8 * 2 * 28
        else:
            assert res == ref.residual.to_bytes()
        assert f"ResQ {mode}" in out


def test_float16_and_integer_inputs(tmp_path, capsys):
    x = np.arange(-50, 50, dtype=np.float16).reshape(4, 25) / 7
    p = tmp_path / "h.npy"
    np.save(p, x)
    rc, out, err = run(["quantize", "-f", "mxfp4", "-i", p, "-o", tmp_path / "o.npy",
                        "--axis", "0"], capsys)
    assert rc == 0, err
    y = np.load(tmp_path / "o.npy")
    assert y.dtype == np.float16 and np.array_equal(y, fake_quantize(x, "mxfp4", axis=0))
    np.save(p, np.arange(12).reshape(3, 4))
    rc, out, err = run(["quantize", "-f", "hif8", "-i", p], capsys)
    assert rc == 0 and "float64" in out


def test_compare_rows(data, capsys):
    x, path = data
    rc, out, err = run(["quantize", "--compare", "--input", path], capsys)
    assert rc == 0, err
    rows = [ln.split() for ln in out.splitlines() if ln.split() and ln.split()[0] in
            ("hif4", "mxfp4", "nvfp4", "hif8", "bf16")]
    assert len(rows) == 5 * 5
    assert [r[1] for r in rows[:5]] == ["none", "2:4", "dense", "channel50", "block32x64"]
    mse = {(r[0], r[1]): float(r[3]) for r in rows}
    q = fake_quantize(x, "nvfp4").astype(np.float64)
    assert mse[("nvfp4", "none")] == pytest.approx(np.mean((q - x) ** 2), rel=1e-6)
    for fmt in ("hif4", "mxfp4", "nvfp4"):
        assert mse[(fmt, "dense")] < mse[(fmt, "2:4")] < mse[(fmt, "none")]
    rc, out, err = run(["quantize", "--compare", "--input", path, "--resq", "2:4"], capsys)
    assert rc == 0
    assert len([ln for ln in out.splitlines() if ln.startswith("hif4 ")]) == 2


def test_stats_exclude_nan_inf():
    x = np.array([1.0, np.nan, np.inf, 2.0, 0.0, 3.0])
    q = np.array([1.0, np.nan, np.inf, 2.5, 0.0, np.nan])
    st = error_stats(x, q)
    assert st["count"] == 3 and st["excluded_in"] == 2 and st["excluded_out"] == 1
    assert st["mse"] == pytest.approx(0.25 / 3)
    assert st["max_abs_err"] == 0.5 and st["zeroed"] == 0.0
    st = error_stats(np.array([1.0, 2.0]), np.array([0.0, 2.0]))
    assert st["zeroed"] == 0.5


def _bad_cases(tmp_path, good):
    text = tmp_path / "text.npy"
    text.write_text("not an array\n")
    strings = tmp_path / "strings.npy"
    np.save(strings, np.array(["a", "b"]))
    scalar = tmp_path / "scalar.npy"
    np.save(scalar, np.float32(1.0))
    return {
        "unknown format": (["--format", "fp8", "--input", good], "unknown format 'fp8'"),
        "missing file": (["--format", "hif4", "--input", tmp_path / "nope.npy"],
                         "does not exist"),
        "not npy": (["--format", "hif4", "--input", text], "not a readable .npy"),
        "non-numeric": (["--format", "hif4", "--input", strings], "not a real number type"),
        "axis out of range": (["--format", "hif4", "--input", good, "--axis", "2"],
                              "axis 2 is out of range"),
        "negative axis": (["--format", "hif4", "--input", good, "--axis", "-3"],
                          "axis -3 is out of range"),
        "unknown mode": (["--format", "hif4", "--input", good, "--resq", "4:8"],
                         "unknown ResQ mode"),
        "scalar": (["--format", "hif4", "--input", scalar], "0-d array"),
        "no format": (["--input", good], "--format is required"),
        "tensor scale": (["--format", "hif4", "--input", good, "--no-tensor-scale"],
                         "nvfp4 only"),
    }


@pytest.mark.parametrize("case", ["unknown format", "missing file", "not npy", "non-numeric",
                                  "axis out of range", "negative axis", "unknown mode",
                                  "scalar", "no format", "tensor scale"])
def test_bad_input_one_line_exit_2_no_file(case, tmp_path, capsys):
    good = tmp_path / "good.npy"
    np.save(good, np.ones((4, 64), np.float32))
    argv, msg = _bad_cases(tmp_path, good)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    out_npy, out_bin = tmp_path / "out.npy", tmp_path / "out.bin"
    rc, out, err = run(["quantize", *argv, "--output", out_npy, "--packed", out_bin], capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hif4 quantize: error: ") and msg in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before      # nothing left behind


def test_compare_rejects_file_outputs(data, tmp_path, capsys):
    x, path = data
    rc, out, err = run(["quantize", "--compare", "-i", path, "-o", tmp_path / "o.npy"], capsys)
    assert rc == 2 and "--output cannot be used with --compare" in err
    rc, out, err = run(["quantize", "--compare", "-i", path, "--resq", "2:4,x"], capsys)
    assert rc == 2 and "unknown ResQ mode 'x'" in err
    assert not (tmp_path / "o.npy").exists()


def test_real_command_line(data, tmp_path):
    x, path = data
    cmd = [sys.executable, "-m", "sim.cli", "quantize"]
    r = subprocess.run(cmd + ["--format", "nvfp4", "--input", str(path), "--axis", "9",
                              "--output", str(tmp_path / "z.npy")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "out of range" in r.stderr
    assert not (tmp_path / "z.npy").exists()
    r = subprocess.run(cmd + ["--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for opt in ("--format", "--input", "--axis", "--resq", "--output", "--packed",
                "--compare", "--no-tensor-scale", "NaN and +-Inf inputs are excluded"):
        assert opt in r.stdout
