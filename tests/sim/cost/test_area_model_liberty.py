"""The area model's per-library calibration (µm² of a Liberty library from the NAND2-eq
model) against the checked-in liberty table (``sim/cost/liberty_table.json``, filled by
``benchmarks/liberty_grid.py``): the table covers the bounded grid, the calibration is the
one its fit gives, every held-out configuration is within 10% of its liberty synthesis,
and a library the model was not fitted on is refused."""

import copy

import pytest

from sim import area_model
from sim.cost import table

#: Configurations of the bounded grid the liberty table may still lack (none).
MISSING_ALLOWED = 0


@pytest.fixture(scope="module")
def liberty_table():
    return table.load_table(area_model.LIBERTY_TABLE_PATH)


@pytest.fixture(scope="module")
def calib():
    libs = area_model.load_liberty_coeffs()["libraries"]
    assert len(libs) >= 1
    # the default library's calibration (FreePDK45 / Nangate)
    (calib,) = [c for c in libs.values() if c["library"] == "NangateOpenCellLibrary"]
    return calib


def _grid_modules():
    from hif4spec import module_name, resolve

    return {module_name(u, **resolve(u, r, s, n, None)) for u, r, s, n in table.sweep_configs()}


def test_table_covers_the_bounded_grid(liberty_table, calib):
    """Every configuration of the bounded grid (the dot units' full grid, one module name
    each) has an ``area`` run of the default
    library, keyed by the SHA-256 of the same Verilog the cmos2 table synthesized; each run
    names its library, the library file's SHA-256 and its script."""
    from hif4spec import all_configs

    grid = _grid_modules()
    assert len(grid) == len(all_configs("dot"))
    key = area_model.run_key(calib["liberty_sha256"], "area")
    have = {e["manifest"]["module"] for e in liberty_table.values() if key in e["runs"]}
    assert have <= grid
    assert len(grid - have) <= MISSING_ALLOWED, sorted(grid - have)
    cmos2 = table.load_table()
    for sha, entry in liberty_table.items():
        assert sha in cmos2, entry["manifest"]["module"]
        assert cmos2[sha]["manifest"]["module"] == entry["manifest"]["module"]
        for run_key, run in entry["runs"].items():
            assert run_key == area_model.run_key(run["liberty_sha256"], run["script"])
            assert run["library"] and len(run["liberty_sha256"]) == 64
            assert run["area_um2"] > run["seq_area_um2"] > 0
            assert run["seconds"] > 0 and run["timing"]["critical_ps"] > 0


def test_held_out_configurations_within_ten_percent(liberty_table, calib):
    """The calibration is fitted on the stage-3 configurations (front/rest factors) and
    the single-stage ones with 16 and 32 lanes (single-stage factor) only; every other
    configuration of the table (two and four stages, single-stage with 64 lanes) is held
    out and within 10% of its liberty synthesis."""
    rows = area_model.liberty_model_vs_synth(liberty_table, calib["library"],
                                             calib["liberty_sha256"])
    held_out = [r for r in rows if not r[5]]
    fitted = [r for r in rows if r[5]]
    assert held_out and fitted
    def fit_class(name):
        return "_s3_" in name or ("_s1_" in name and "_l64" not in name)

    assert all(fit_class(r[0]) for r in fitted)
    assert not any(fit_class(r[0]) for r in held_out)
    assert sum("_s1_" in r[0] for r in held_out) == sum("_s1_" in r[0] for r in rows) // 3
    bad = [(r[0], f"{r[4]:+.1%}") for r in held_out if abs(r[4]) > 0.10]
    assert not bad, bad


def test_calibration_is_what_the_fit_gives(liberty_table, calib):
    """The committed factors are the fit of the committed table (nothing stale), from the
    register primitives' synthesis it records; the fitted price of a pipeline register
    bit lies between the bare flip-flop's and the register primitive's."""
    measured = {fam: {"um2_per_bit": info["primitive_um2_per_bit"], "bits": info["bits"],
                      "synth_um2": info["synth_um2"]}
                for fam, info in calib["registers"].items()}
    for info in measured.values():
        assert info["um2_per_bit"] == pytest.approx(info["synth_um2"] / info["bits"],
                                                    abs=1e-3)
    again = area_model.fit_liberty(liberty_table, calib["library"], calib["liberty_sha256"],
                                   registers=measured)
    assert again["registers"] == calib["registers"]
    reg = calib["registers"][area_model.FITTED_REGISTER]
    assert measured["regp"]["um2_per_bit"] <= reg["um2_per_bit"] <= \
        measured["reg"]["um2_per_bit"]
    assert again["fitted_on"] == calib["fitted_on"]
    for unit, accums in calib["units"].items():
        for accum, factors in accums.items():
            for side in ("front", "rest", "comb"):
                assert again["units"][unit][accum][side] == pytest.approx(
                    factors[side], rel=1e-3), (unit, accum, side)


def test_estimate_um2_from_a_manifest(liberty_table, calib):
    """µm² = front factor x front logic NAND2-eq + rest factor x rest logic NAND2-eq + the
    register bits at the library's price per bit (measured on the register primitives),
    the logic times the single-stage factor for a single-stage unit; the register bits are
    the model's flip-flops, which the liberty synthesis keeps."""
    entry = next(e for e in liberty_table.values()
                 if e["manifest"]["parameters"]["stages"] == 1)
    man = entry["manifest"]
    factors = calib["units"][man["unit"]][man["parameters"]["accum"]]
    front, rest, bits = area_model.liberty_features(man)
    est = area_model.estimate_manifest(man)
    assert sum(bits.values()) == est.flip_flops
    assert 0 < front + rest < est.nand2
    um2 = area_model.estimate_um2(man, calib["library"], calib["liberty_sha256"])
    regs = sum(n * calib["registers"][fam]["um2_per_bit"] for fam, n in bits.items())
    logic = (factors["front"] * front + factors["rest"] * rest) * factors["comb"]
    assert um2 == pytest.approx(logic + regs)
    for sha, entry in liberty_table.items():
        man = entry["manifest"]
        ffs = area_model.estimate_manifest(man).flip_flops
        for run in entry["runs"].values():
            assert abs(run["flip_flops"] - ffs) <= 0.02 * ffs, man["module"]


def test_another_library_is_uncalibrated(liberty_table, calib):
    """A calibration belongs to one library file: another SHA-256, or the same SHA-256
    under another name, is refused with a message saying how to fit it; so is a back end
    the fit never saw."""
    man = next(iter(liberty_table.values()))["manifest"]
    with pytest.raises(area_model.UncalibratedLibrary, match="not calibrated for library "
                       "sky130_fd_sc_hd"):
        area_model.estimate_um2(man, "sky130_fd_sc_hd", "0" * 64)
    with pytest.raises(area_model.UncalibratedLibrary, match="liberty_grid.py"):
        area_model.estimate_um2(man, "OtherName", calib["liberty_sha256"])
    other = copy.deepcopy(man)
    other["parameters"]["accum"] = "trunc"
    with pytest.raises(area_model.UncalibratedLibrary, match="back end trunc"):
        area_model.estimate_um2(other, calib["library"], calib["liberty_sha256"])


def test_library_object_accepted(calib):
    """A :class:`sim.cost.liberty.Library` stands for its name and SHA-256."""

    class Lib:
        name = calib["library"]
        sha256 = calib["liberty_sha256"]

    assert area_model.liberty_calibration(Lib()) is area_model.liberty_calibration(
        calib["library"], calib["liberty_sha256"])



def test_grid_driver_resumes_from_the_table(tmp_path, monkeypatch, liberty_table, calib):
    """``benchmarks/liberty_grid.py`` skips a configuration whose run of the library and
    script the table holds, and merges a new run beside the ones there."""
    import importlib.util

    from sim.cost import synth

    path = area_model.LIBERTY_TABLE_PATH.parents[2] / "benchmarks" / "liberty_grid.py"
    spec = importlib.util.spec_from_file_location("liberty_grid", path)
    grid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grid)
    sha, entry = next(iter(liberty_table.items()))
    table_path = tmp_path / "liberty_table.json"
    table.save_table({sha: entry}, table_path)

    class Lib:
        name = calib["library"]
        sha256 = calib["liberty_sha256"]
        path = None

    text = "module m; endmodule\n"
    assert synth.verilog_sha256(text) != sha
    # the entry's own Verilog is not at hand: an item with its hash stands for it
    items = [(entry["manifest"]["module"], None, text, entry["manifest"])]
    monkeypatch.setattr(grid.synth, "verilog_sha256", lambda t: sha)
    report = grid.sweep(items, Lib(), ["area"], path=table_path, progress=False)
    monkeypatch.undo()
    assert report.skipped == [f"{entry['manifest']['module']}/area"] and not report.done
    run = dict(next(iter(entry["runs"].values())), script="delay")
    grid.merge_run(table_path, sha, entry["manifest"], run)
    held = table.load_table(table_path)
    assert set(held[sha]["runs"]) >= {area_model.run_key(Lib.sha256, "area"),
                                      area_model.run_key(Lib.sha256, "delay")}
