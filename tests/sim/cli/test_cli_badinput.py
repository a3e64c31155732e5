"""The bad-use matrix of the ``hif4`` command line.

Every output option of every subcommand pointed at a missing folder, an existing folder
where a file is wanted (or an existing file where a folder is wanted), a read-only location
and a path through an existing file; and bad values of every parameter kind. Each case must:
exit with status 2, print exactly one line on stderr and no traceback, create no file or
folder, and fail before the work starts (the work functions are replaced by ones that fail
the test if called, and the case must finish in well under a second or two).

Cases run in process (``sim.cli.main``); a few run the real command in a subprocess.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

from pathlib import Path

import numpy as np
import pytest

from sim.cli import build_parser, main

REPO = Path(__file__).resolve().parents[3]

# The output options the toolkit ships, written here and not read from the parser under
# test, with the kind of path each names and a file name it accepts (--plot wants .png).
OUTPUTS = {
    ("quantize", "--output"): ("file", "out.npy"),
    ("quantize", "--packed"): ("file", "out.bin"),
    ("generate", "--out"): ("folder", "rtl"),
    ("verify", "--build-dir"): ("folder", "build"),
    ("soak", "--build-dir"): ("folder", "build"),
    ("soak", "--state-dir"): ("folder", "state"),
    ("estimate", "--plot"): ("file", "out.png"),
    ("estimate", "--energy-plot"): ("file", "energy.png"),
    ("rl", "--json"): ("file", "out.json"),
    ("rl", "--plot"): ("file", "out.png"),
    ("rl", "--run-dir"): ("folder", "runs"),
    ("numerics", "--json"): ("file", "out.json"),
    ("numerics", "--plot"): ("file", "out.png"),
    ("demo", "--out"): ("folder", "rtl"),
    ("sweep", "--table"): ("file", "table.json"),
    ("sweep", "--cache-dir"): ("folder", "cache"),
    ("sweep", "--build-dir"): ("folder", "build"),
    ("sweep", "--json"): ("file", "out.json"),
    ("sweep", "--plot"): ("file", "out.png"),
}

# The rest of a command line that is otherwise good (GOOD is the input .npy).
BASE = {
    "quantize": ["quantize", "--format", "hif4", "--input", "GOOD"],
    "generate": ["generate", "--unit", "hif4", "--lanes", "16"],
    "verify": ["verify", "--unit", "hif4", "--lanes", "16", "--vectors", "10"],
    "soak": ["soak", "--unit", "hif4", "--lanes", "16", "--steps", "10"],
    "estimate": ["estimate"],
    "rl": ["rl", "--quick", "--quiet"],
    "numerics": ["numerics", "--quiet"],
    "demo": ["demo", "--no-verify"],
    "sweep": ["sweep", "synth", "--unit", "nvfp4", "--residual", "none", "--stages", "3",
              "--lanes", "16"],
}
# Output options that belong to another form of their command than BASE's.
BASE_FOR = {
    ("sweep", "--build-dir"): ["sweep", "verify", "--unit", "nvfp4", "--residual", "none",
                               "--stages", "3", "--lanes", "16"],
    ("sweep", "--json"): ["sweep", "rl", "--quick", "--quiet"],
    ("rl", "--run-dir"): ["rl", "--model", "smollm2", "--quick", "--quiet"],
    ("sweep", "--plot"): ["sweep", "isofreq", "--unit", "nvfp4", "--lanes", "16"],
    ("estimate", "--energy-plot"): ["estimate", "--energy"],
}

# A read-only location for every user, root included: permission bits do not stop root,
# a read-only file system (sysfs) does.
READ_ONLY = "/sys"


def _read_only_ok():
    try:
        fd, name = tempfile.mkstemp(dir=READ_ONLY)
    except OSError:
        return True
    os.close(fd)
    os.unlink(name)
    return False


def _parser_outputs():
    """{(command, option): kind} of the actions the CLI marks as outputs, and the value
    options whose help starts by saying they write something (which must all be marked)."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    marked, writing = {}, set()
    for name, sub in commands.items():
        for action in sub._actions:
            flag = action.option_strings[0] if action.option_strings else action.dest
            if getattr(action, "output", None):
                marked[name, flag] = action.output
            if action.nargs != 0 and re.match(r"write|output folder|folder for",
                                              action.help or ""):
                writing.add((name, flag))
    return marked, writing


def test_every_output_option_is_covered():
    """The matrix covers exactly the CLI's output options: a new one fails here until it is
    added to OUTPUTS (and so to the matrix)."""
    marked, writing = _parser_outputs()
    assert marked == {key: kind for key, (kind, _) in OUTPUTS.items()}
    assert writing <= set(marked), f"options that write but are not marked: " \
                                   f"{sorted(writing - set(marked))}"


@pytest.fixture
def no_work(monkeypatch):
    """Replace every subcommand's work with a function that fails the test when called,
    and block the heavy imports (torch, transformers) that only the work needs."""
    import hwgen.units
    import sim.bench.runner
    import sim.cost.energy
    import sim.cost.estimate
    import sim.cyclesim
    import sim.formats
    import sim.formats.bench
    import sim.formats.resq
    import sim.rl
    import sim.sweep

    def work(*args, **kwargs):
        raise AssertionError("the work started before the bad input was refused")

    for module, name in [(hwgen.units, "build_unit"), (sim.bench.runner, "verify"),
                         (sim.bench.runner, "build"), (sim.bench.runner, "generate_cached"),
                         (sim.cost.estimate, "estimate_rows"), (sim.cyclesim, "simulate_gemm"),
                         (sim.sweep, "energy_rows"), (sim.cost.energy, "measure"),
                         (sim.formats, "quantize"), (sim.formats.resq, "resq"),
                         (sim.formats.bench, "throughput"), (sim.sweep, "soak")]:
        monkeypatch.setattr(module, name, work)
    for name in ("torch", "transformers", "sim.rl.grpo", "sim.rl.minilm", "sim.rl.smollm2"):
        monkeypatch.setitem(sys.modules, name, None)
    for name in ("grpo", "minilm", "smollm2"):
        monkeypatch.delattr(sim.rl, name, raising=False)


def _tree(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, dirs, files in os.walk(root) for f in dirs + files)


def _check(argv, tmp_path, capsys, monkeypatch, message=None):
    """Run ``hif4 argv`` in process in ``tmp_path``; assert the bad-use contract."""
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    capsys.readouterr()
    start = time.process_time()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:             # argparse's usage errors exit
        rc = exc.code
    elapsed = time.process_time() - start
    out, err = capsys.readouterr()
    assert rc == 2, (argv, out, err)
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert len(lines) == 1, (argv, err)
    assert lines[0].startswith("hif4"), lines[0]
    if message:
        assert message in lines[0], (message, lines[0])
    assert _tree(tmp_path) == before, f"{argv} left files behind"
    assert elapsed < 2.0, f"{argv} took {elapsed:.1f} s of CPU: it did work before refusing"
    return lines[0]


def _places(tmp_path, kind, name):
    """{place: path} of the four bad places of an output option of ``kind``."""
    stem, dot, suffix = name.partition(".")
    (tmp_path / "a_file").write_text("")
    places = {
        "missing folder": tmp_path / "missing" / name,
        "file in the way": tmp_path / "a_file" / name,
        "read-only": f"{READ_ONLY}/hif4-bad-use-test{dot}{suffix}",
    }
    if kind == "file":
        (tmp_path / f"a_folder{dot}{suffix}").mkdir()
        places["existing folder"] = tmp_path / f"a_folder{dot}{suffix}"
    else:
        places["existing file"] = tmp_path / "a_file"
    return places


PLACES = ["missing folder", "file in the way", "read-only", "existing folder or file"]
OUTPUT_CASES = [(cmd, opt, place) for (cmd, opt) in OUTPUTS for place in PLACES]


@pytest.mark.parametrize("command,option,place", OUTPUT_CASES,
                         ids=[f"{c} {o} {p}" for c, o, p in OUTPUT_CASES])
def test_bad_output_place(command, option, place, tmp_path, capsys, monkeypatch, no_work):
    kind, name = OUTPUTS[command, option]
    if place == "read-only" and not _read_only_ok():
        pytest.skip(f"{READ_ONLY} is writable here, so it is no read-only location")
    places = _places(tmp_path, kind, name)
    path = places.get(place) or places.get("existing folder") or places["existing file"]
    good = tmp_path / "good.npy"
    np.save(good, np.ones((4, 64), np.float32))
    base = BASE_FOR.get((command, option), BASE[command])
    argv = [good if a == "GOOD" else a for a in base] + [option, path]
    _check(argv, tmp_path, capsys, monkeypatch, message=option)


def _write_inputs(tmp_path):
    """The input files :func:`_bad_values` names."""
    good = tmp_path / "good.npy"
    np.save(good, np.ones((4, 64), np.float32))
    (tmp_path / "text.npy").write_text("not an array\n")
    (tmp_path / "truncated.npy").write_bytes(good.read_bytes()[:100])
    np.save(tmp_path / "strings.npy", np.array(["a", "b"]))
    module = "hif4_dot_none_s3_l16_bnd_i2"     # a manifest of an interleaved unit
    (tmp_path / f"{module}.v").write_text(f"module {module}; endmodule\n")
    (tmp_path / f"{module}.json").write_text(json.dumps({
        "unit": "hif4", "module": module, "parameters": {
            "residual": "none", "stages": 3, "lanes": 16, "accum": "bounded",
            "interleave": 2}}))


def _bad_values(tmp_path):
    """{case: (argv, words of the message)} of bad parameter values of every kind."""
    good, text = tmp_path / "good.npy", tmp_path / "text.npy"
    truncated, strings = tmp_path / "truncated.npy", tmp_path / "strings.npy"
    ring = tmp_path / "hif4_dot_none_s3_l16_bnd_i2.json"
    q = ["quantize", "--format", "hif4", "--input"]
    return {
        # quantize: inputs and formats
        "quantize unknown format": (["quantize", "--format", "fp8", "--input", good],
                                    "unknown format"),
        "quantize missing input": (q + [tmp_path / "nope.npy"], "does not exist"),
        "quantize input is a folder": (q + [tmp_path], "is not a file"),
        "quantize malformed npy": (q + [text], "not a readable .npy"),
        "quantize truncated npy": (q + [truncated], "not a readable .npy"),
        "quantize non-numeric npy": (q + [strings], "not a real number type"),
        "quantize axis": (q + [good, "--axis", "5"], "out of range"),
        "quantize axis not int": (q + [good, "--axis", "x"], "invalid int value"),
        "quantize unknown resq": (q + [good, "--resq", "4:8"], "unknown ResQ mode"),
        "quantize same outputs": (q + [good, "--output", "o.npy", "--packed", "o.npy"],
                                  "must differ"),
        # generate: the unit options
        "generate unknown unit": (["generate", "--unit", "fp8"], "Unit must be one of"),
        "generate unknown residual": (["generate", "--unit", "hif4", "--residual", "3:4"],
                                      "Residual mode"),
        "generate residual of another unit": (["generate", "--unit", "nvfp4", "--residual",
                                               "dense"], "Residual mode of nvfp4"),
        "generate stages 0": (["generate", "--unit", "hif4", "--stages", "0"], "Stage count"),
        "generate stages 7": (["generate", "--unit", "hif4", "--stages", "7"], "Stage count"),
        "generate stages x": (["generate", "--unit", "hif4", "--stages", "x"],
                              "invalid int value"),
        "generate lanes 8": (["generate", "--unit", "hif4", "--lanes", "8"], "Lane count"),
        "generate no unit": (["generate"], "--unit"),
        "generate all and unit": (["generate", "--all", "--unit", "hif4"], "--all"),
        "generate interleave 3": (["generate", "--unit", "hif4", "--interleave", "3"],
                                  "Interleave must be one of 1, 2, 4, 8"),
        "generate interleave x": (["generate", "--unit", "hif4", "--interleave", "x"],
                                  "invalid int value"),
        "generate interleave of an encoder": (["generate", "--unit", "hif4_quant",
                                               "--interleave", "2"],
                                              "no accumulator to interleave"),
        "generate all and interleave": (["generate", "--all", "--interleave", "2"], "--all"),
        # verify
        "verify vectors 0": (["verify", "--vectors", "0"], "--vectors"),
        "verify negative vectors": (["verify", "--vectors", "-5"], "--vectors"),
        "verify valid-prob 0": (["verify", "--valid-prob", "0"], "--valid-prob"),
        "verify ready-prob 1.5": (["verify", "--ready-prob", "1.5"], "--ready-prob"),
        "verify unknown simulator": (["verify", "--sim", "xcelium"], "invalid choice"),
        "verify waves with icarus": (["verify", "--sim", "icarus", "--waves"], "--waves"),
        "verify waves limit 0": (["verify", "--waves", "--waves-limit-mb", "0"],
                                 "--waves-limit-mb"),
        "verify stages 7": (["verify", "--stages", "7"], "Stage count"),
        "verify lanes 8": (["verify", "--lanes", "8"], "Lane count"),
        "verify unknown unit": (["verify", "--unit", "fp8"], "Unit must be one of"),
        "verify seed x": (["verify", "--seed", "x"], "invalid int value"),
        "verify missing manifest": (["verify", "--manifest", tmp_path / "no.json"],
                                    "cannot read manifest"),
        "verify manifest not json": (["verify", "--manifest", text], "cannot read manifest"),
        "verify rtl-dir missing": (["verify", "--rtl-dir", tmp_path / "none"],
                                   "is not a folder"),
        "verify interleave 3": (["verify", "--interleave", "3"], "Interleave must be one of"),
        "verify interleave of an encoder": (["verify", "--unit", "nvfp4_quant", "--interleave",
                                             "4"], "no accumulator to interleave"),
        "verify interleave not in rtl-dir": (["verify", "--interleave", "4", "--rtl-dir",
                                              tmp_path], "hif4 generate --unit hif4 "
                                                         "--interleave 4"),
        "verify interleave disagrees with manifest": (["verify", "--manifest", ring,
                                                       "--interleave", "4"],
                                                      "--interleave 4 disagrees"),
        "soak interleave 2": (["soak", "--unit", "hif4", "--steps", "10", "--interleave", "2"],
                              "one accumulator only"),
        "soak interleave 5": (["soak", "--steps", "10", "--interleave", "5"],
                              "Interleave must be one of"),
        "soak manifest of an interleaved unit": (["soak", "--steps", "10", "--manifest", ring],
                                                 "(interleave 2)"),
        # estimate
        "estimate gemm shape": (["estimate", "--gemm", "4x4"], "--gemm must be MxKxN"),
        "estimate gemm zero": (["estimate", "--gemm", "0x64x4"], "--gemm must be MxKxN"),
        "estimate gemm too large": (["estimate", "--gemm", "100000x100000x100000"],
                                    "array steps"),
        "estimate array": (["estimate", "--array", "0x4"], "--array must be RxC"),
        "estimate bandwidth": (["estimate", "--bandwidth", "-3"], "--bandwidth must be"),
        "estimate freq": (["estimate", "--freq-ghz", "0"], "--freq-ghz must be"),
        "estimate plot suffix": (["estimate", "--plot", "out.jpg"], "ending in .png"),
        "estimate unknown unit": (["estimate", "--unit", "hif4,fp8"], "unknown unit"),
        "estimate unknown residual": (["estimate", "--residual", "3:4"],
                                      "unknown residual mode"),
        "estimate lanes 8": (["estimate", "--lanes", "8"], "Lane count"),
        "estimate synth backend": (["estimate", "--synth-backend", "vivado"],
                                   "invalid choice"),
        "estimate unknown stimulus": (["estimate", "--energy", "--stimuli", "minilm,noise"],
                                      "unknown stimulus"),
        "estimate energy steps 0": (["estimate", "--energy", "--energy-steps", "0"],
                                    "--energy-steps must be"),
        "estimate energy plot suffix": (["estimate", "--energy", "--energy-plot", "e.jpg"],
                                        "ending in .png"),
        "estimate stimuli without energy": (["estimate", "--stimuli", "gaussian"],
                                            "applies with --energy only"),
        "estimate jobs without energy": (["estimate", "--jobs", "2"],
                                         "--jobs applies with --energy only"),
        "estimate energy jobs 0": (["estimate", "--energy", "--jobs", "0"],
                                   "--jobs must be 1 to 256"),
        "estimate energy of encoders": (["estimate", "--energy", "--unit", "hif4_quant"],
                                        "dot-product units"),
        "estimate clock": (["estimate", "--liberty", "--clock", "fast"], "--clock"),
        "estimate clock zero": (["estimate", "--liberty", "--clock", "0MHz"], "--clock"),
        "estimate clock without liberty": (["estimate", "--clock", "200MHz"],
                                           "applies with --liberty"),
        "estimate missing liberty": (["estimate", "--liberty", tmp_path / "no.lib"],
                                     "--liberty"),
        "estimate liberty not liberty": (["estimate", "--liberty", text], "--liberty"),
        "estimate interleave 2": (["estimate", "--interleave", "2"], "one accumulator only"),
        "estimate interleave 3": (["estimate", "--interleave", "3"],
                                  "Interleave must be one of"),
        "estimate manifest of an interleaved unit": (["estimate", "--manifest", ring],
                                                     "(interleave 2)"),
        "sweep isofreq clocks": (["sweep", "isofreq", "--clocks", "5ns,fast"], "--clocks"),
        "sweep isofreq vectors without energy": (["sweep", "isofreq", "--vectors", "48"],
                                                 "with --energy"),
        "sweep isofreq vectors": (["sweep", "isofreq", "--energy", "--vectors", "0"],
                                  "--vectors must be"),
        "sweep isofreq lanes": (["sweep", "isofreq", "--lanes", "16,64"], "one --lanes"),
        "sweep isofreq liberty": (["sweep", "isofreq", "--liberty", tmp_path / "no.lib"],
                                  "hif4 sweep"),
        "sweep clocks of synth": (["sweep", "synth", "--all", "--clocks", "5ns"],
                                  "applies to sweep isofreq"),
        "sweep interleave": (["sweep", "verify", "--unit", "hif4", "--interleave", "2"],
                             "--interleave applies to sweep isofreq, not verify"),
        "sweep isofreq interleave 3": (["sweep", "isofreq", "--interleave", "3"],
                                       "unknown interleave '3'"),
        # simulate
        "simulate no gemm": (["simulate", "--unit", "hif4"], "--gemm"),
        "simulate gemm shape": (["simulate", "--unit", "hif4", "--gemm", "4x64"],
                                "--gemm must be MxKxN"),
        "simulate buffer steps": (["simulate", "--unit", "hif4", "--gemm", "4x64x4",
                                   "--buffer-steps", "0"], "--buffer-steps"),
        "simulate rtl too large": (["simulate", "--unit", "hif4", "--gemm", "256x4096x256",
                                    "--rtl"], "unit steps"),
        "simulate unknown unit": (["simulate", "--unit", "fp8", "--gemm", "4x64x4"],
                                  "Unit must be one of"),
        "simulate missing module": (["simulate", "--unit", "hif4", "--residual", "dense",
                                     "--gemm", "4x64x4"], "hif4 generate --unit hif4"),
        "simulate rtl interleave 2": (["simulate", "--unit", "hif4", "--gemm", "4x64x4",
                                       "--interleave", "2", "--rtl"], "one accumulator only"),
        "simulate rtl manifest of an interleaved unit": (
            ["simulate", "--gemm", "4x64x4", "--manifest", ring, "--rtl"], "(interleave 2)"),
        # rl
        "rl unknown format": (["rl", "--quick", "--formats", "fp4"], "unknown format"),
        "rl seeds": (["rl", "--quick", "--seeds", "a"], "seeds must be"),
        "rl repeated seeds": (["rl", "--quick", "--seeds", "0,0"], "repeat"),
        "rl steps 0": (["rl", "--quick", "--steps", "0"], "--steps"),
        "rl warmup steps": (["rl", "--quick", "--warmup-steps", "-1"], "--warmup-steps"),
        "rl jobs 0": (["rl", "--quick", "--jobs", "0"], "--jobs"),
        "rl plot suffix": (["rl", "--quick", "--plot", "x.svg"], ".png"),
        "rl same outputs": (["rl", "--quick", "--json", "o.png", "--plot", "o.png"],
                            "same file"),
        # numerics
        "numerics unknown format": (["numerics", "--formats", "fp4"], "unknown format"),
        "numerics unknown resq": (["numerics", "--resq", "4:8"], "unknown ResQ mode"),
        "numerics unknown reference": (["numerics", "--references", "fp32"],
                                       "unknown reference format"),
        "numerics sentences 0": (["numerics", "--sentences", "0"], "--sentences"),
        "numerics threads 0": (["numerics", "--threads", "0"], "--threads"),
        "numerics unknown model": (["numerics", "--model", "bert"], "invalid choice"),
        # bench
        "bench no benchmark": (["bench"], "name a benchmark"),
        "bench values": (["bench", "quantize", "--values", "10"], "--values"),
        "bench repeats": (["bench", "quantize", "--repeats", "0"], "--repeats"),
        "bench unknown format": (["bench", "quantize", "--formats", "fp8"], "unknown format"),
        # demo and the top level
        "demo vectors 0": (["demo", "--vectors", "0"], "--vectors"),
        "demo negative vectors": (["demo", "--vectors", "-1"], "--vectors"),
        "unknown subcommand": (["frobnicate"], "invalid choice"),
        "unknown option": (["generate", "--unit", "hif4", "--colour"],
                           "unrecognized arguments"),
    }


VALUE_CASES = list(_bad_values(Path("unused")))


@pytest.mark.parametrize("case", VALUE_CASES)
def test_bad_value(case, tmp_path, capsys, monkeypatch, no_work):
    _write_inputs(tmp_path)
    argv, message = _bad_values(tmp_path)[case]
    _check(argv, tmp_path, capsys, monkeypatch, message=message)


@pytest.mark.parametrize("argv,words", [
    (["generate", "--unit", "hif4", "--out", "a_file"], "is a file, not a folder"),
    (["verify", "--stages", "x"], "invalid int value"),
    (["rl", "--quick", "--json", "missing/dir/r.json"], "does not exist"),
    (["estimate", "--plot", "a_folder.png"], "is a folder"),
])
def test_real_command_line(argv, words, tmp_path):
    """The installed entry point (``python -m sim.cli``): one line, status 2, no traceback,
    nothing created, and quickly (the rl case would otherwise run for minutes)."""
    (tmp_path / "a_file").write_text("")
    (tmp_path / "a_folder.png").mkdir()
    before = _tree(tmp_path)
    result = subprocess.run([sys.executable, "-m", "sim.cli", *argv], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    assert len(result.stderr.splitlines()) == 1 and words in result.stderr, result.stderr
    assert _tree(tmp_path) == before


def test_dense_hint_is_a_command_that_works(tmp_path, capsys):
    """The hint for a missing module names a `hif4 generate` command that makes it."""
    rtl = tmp_path / "rtl"
    rtl.mkdir()
    argv = ["estimate", "--unit", "hif4", "--residual", "dense", "--stages", "1", "--lanes",
            "16", "--rtl-dir", str(rtl)]
    assert main(argv) == 2
    hint = re.search(r"`hif4 (generate [^`]*)`", capsys.readouterr().err).group(1)
    assert main(hint.split()) == 0
    assert main(argv) == 0


def test_outputs_are_all_or_nothing(tmp_path, monkeypatch):
    """Two outputs: when moving the second into place fails, the first is removed too and no
    temporary is left; an output that is a folder is refused before anything is written."""
    from sim.cli import _util
    from sim.cli._util import CLIError, atomic_output, write_files

    first, second = tmp_path / "a.json", tmp_path / "b.png"
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(_util.os, "replace", replace)
    with pytest.raises(CLIError, match=r"b\.png.*No space left"):
        write_files([(first, b"1"), (second, b"2")])
    assert calls == [first, second] and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(_util.os, "replace", real_replace)

    (tmp_path / "folder").mkdir()
    with pytest.raises(CLIError, match="is a folder"):
        write_files([(first, b"1"), (tmp_path / "folder", b"2")])
    with pytest.raises(CLIError, match="is a folder"):
        with atomic_output(tmp_path / "folder") as handle:
            handle.write(b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]
    with atomic_output(first, "w") as handle:
        handle.write("done")
    assert first.read_text() == "done"


def test_waves_too_large_is_refused_before_the_build(tmp_path, capsys, monkeypatch):
    """``--waves`` estimates the waveform first: 10000 steps of a 16-lane NVFP4 unit (1.1 GB
    as VCD, measured) pass the default limit and are refused before any build; a larger
    --waves-limit-mb lets the run go on to the build."""
    from sim.bench import runner

    def build(*args, **kwargs):
        raise AssertionError("built")

    monkeypatch.setattr(runner, "build", build)
    argv = ["verify", "--unit", "nvfp4", "--lanes", "16", "--accum", "window", "--waves",
            "--build-dir", str(tmp_path / "build")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--waves would write about 1,09" in err
    assert "limit 300 MB" in err and "--waves-limit-mb" in err
    with pytest.raises(AssertionError, match="built"):
        main(argv + ["--waves-limit-mb", "2000"])
    err = capsys.readouterr().err
    assert "verify: writing waves to " in err and "_waves/dump." in err
