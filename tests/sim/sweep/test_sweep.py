"""``hif4 sweep`` in a local process pool: results merged into the tables as they arrive,
skipped on a re-run, a failing task retried and named while the others still land.

Synthesis here runs on primitives (seconds); the sweep of real units, locally and on Ray,
is ``tests/sim/sweep/test_sweep_ray.py``. Ctrl-C is sent to ``hif4 sweep synth`` run by
``tests/sim/sweep/sweep_driver.py`` (the command on primitives) in a subprocess.
"""

import dataclasses
import json

import pytest
import sweep_driver

from hif4spec import units
from hwgen import primitives
from sim import sweep
from sim.cli import main
from sim.cost import synth, table


def _primitive_item(family, params):
    top, text = primitives.primitive_verilog(family, params)
    manifest = {"module": top, "unit": family, "parameters": {"params": list(params)}}
    return top, text, manifest


def _items():
    return [_primitive_item("add", (4,)), _primitive_item("add", (6,))]


def test_synth_sweep_merges_like_record_verilog_and_skips_on_rerun(tmp_path):
    items = _items()
    path = tmp_path / "table.json"
    report = sweep.synth_sweep(items, path=path, jobs=2, progress=False,
                               cache_dir=tmp_path / "cache")
    assert sorted(report.done) == sorted(name for name, _, _ in items)
    assert not report.failed and not report.skipped
    held = table.load_table(path)
    for name, text, manifest in items:
        sha = synth.verilog_sha256(text)
        expect = synth.synthesize_text(text, name, cache_dir=tmp_path / "cache")
        assert held[sha]["transistors"] == expect.transistors
        assert held[sha]["manifest"]["module"] == name
        assert held[sha]["source"] == "generated: " + name
    before = path.read_bytes()
    again = sweep.synth_sweep(items, path=path, jobs=2, progress=False,
                              cache_dir=tmp_path / "cache")
    assert again.done == [] and sorted(again.skipped) == sorted(n for n, _, _ in items)
    assert path.read_bytes() == before
    # a generator that now reports another manifest for the same Verilog: no synthesis,
    # the entry takes the new manifest
    name, text, manifest = items[0]
    relabelled = {**manifest, "structure": [{"block": "x", "family": "add",
                                             "params": [4], "count": 1}]}
    third = sweep.synth_sweep([(name, text, relabelled)], path=path, progress=False,
                              cache_dir=tmp_path / "cache")
    assert third.done == [] and third.skipped == [name]
    sha = synth.verilog_sha256(text)
    now = table.load_table(path)[sha]
    assert now == {**held[sha], "manifest": relabelled}


def test_failing_task_is_retried_named_and_the_others_land(tmp_path, capsys):
    good = _items()
    bad = ("broken", "module broken(input a, output b);\n  assign b = ;\nendmodule\n",
           {"module": "broken", "unit": "add", "parameters": {}})
    path = tmp_path / "table.json"
    report = sweep.synth_sweep([good[0], bad, good[1]], path=path, jobs=2, retries=2,
                               cache_dir=tmp_path / "cache")
    err = capsys.readouterr().err
    assert list(report.failed) == ["broken"]
    assert "yosys failed" in report.failed["broken"]
    assert err.count("broken failed") == 2          # the two retries, announced
    assert "retry 2 of 2" in err
    assert sorted(report.done) == sorted(n for n, _, _ in good)
    held = table.load_table(path)
    assert {e["manifest"]["module"] for e in held.values()} == {n for n, _, _ in good}
    # a line per finished task, with the ETA
    assert err.count("sweep synth:") >= 3 and "<" in err


def test_synthesize_sweep_resumes_checkpointed_units_first(monkeypatch):
    """With checkpoint=True the grid sweep starts with the units a stopped run left after
    `synth`, then goes smallest first by the area model; without it, smallest first only;
    ``rtl_out/``'s modules come along with their paths as the table's source."""
    seen = {}

    def record(items, **kw):
        seen[kw["checkpoint"]] = [i[0] for i in items if len(i) == 3]
        assert all(i[3] == f"rtl_out/{i[0]}.v" for i in items if len(i) == 4)
        return sweep.Report()
    monkeypatch.setattr(sweep, "synth_sweep", record)
    monkeypatch.setattr(synth, "has_checkpoint",
                        lambda text, top, cache_dir=None: top == "mxfp4_dot_rnone_s4_l64")
    configs = [("mxfp4", "none", 4, 64), ("nvfp4", "none", 4, 16)]
    sweep.synthesize_sweep(configs, checkpoint=True, accum="window")
    sweep.synthesize_sweep(configs, checkpoint=False, accum="window")
    assert seen[True] == ["mxfp4_dot_rnone_s4_l64", "nvfp4_dot_rnone_s4_l16"]
    assert seen[False] == ["nvfp4_dot_rnone_s4_l16", "mxfp4_dot_rnone_s4_l64"]


def test_run_tasks_names_failures_and_counts_attempts(tmp_path):
    seen = []
    tasks = [sweep.Task("ok", "synth", len, ("abc",)), sweep.Task("bad", "synth", int, ("x",))]
    report = sweep.run_tasks(tasks, lambda t, v: seen.append((t.name, v)), jobs=1, retries=1,
                             progress=False)
    assert seen == [("ok", 3)]
    assert report.done == ["ok"]
    assert "invalid literal" in report.failed["bad"]


def test_a_long_task_is_not_silent(monkeypatch, capsys):
    """While no task finishes, a line every HEARTBEAT_S seconds says how many run (a log
    gets plain lines, each with the elapsed time)."""
    import time

    monkeypatch.setattr(sweep, "HEARTBEAT_S", 0.2)
    tasks = [sweep.Task("slow", "synth", time.sleep, (3.0,))]
    report = sweep.run_tasks(tasks, lambda t, v: None, jobs=1, desc="sweep test")
    assert report.done == ["slow"]
    lines = capsys.readouterr().err.splitlines()
    running = [line for line in lines if "1 running" in line]
    assert len(running) >= 2 and len(set(running)) == len(running), lines
    assert "slow done" in lines[-1]


def test_the_heartbeat_tells_running_from_queued():
    """With fewer workers than unfinished tasks the heartbeat says how many wait; on a
    cluster, whose free workers the driver does not know, it says both at once."""
    assert sweep._in_flight(12, 1) == "1 running, 11 queued"
    assert sweep._in_flight(2, 4) == "2 running"
    assert sweep._in_flight(12, None) == "12 running or queued"


@pytest.mark.parametrize("argv,words", [
    (["sweep", "energy"], "give a selection"),
    (["sweep", "energy", "--unit", "hif4", "--stimuli", "noise"], "unknown stimulus"),
    (["sweep", "verify", "--unit", "hif4", "--stimuli", "gaussian"], "applies to sweep energy"),
])
def test_energy_bad_input_is_one_line(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and words in err, err


@pytest.mark.parametrize("argv,words", [
    (["sweep", "synth"], "give a selection"),
    (["sweep", "synth", "--all", "--unit", "hif4"], "--all takes no"),
    (["sweep", "synth", "--unit", "nvfp4", "--residual", "2:4"], "no configuration"),
    (["sweep", "synth", "--lanes", "8"], "unknown lane count"),
    (["sweep", "verify", "--unit", "hif4", "--checkpoint"], "applies to sweep synth"),
    (["sweep", "synth", "--unit", "hif4", "--cluster", "nowhere"], "ray://HOST:PORT"),
    (["sweep", "synth", "--unit", "hif4", "--retries", "-1"], "--retries"),
    (["sweep", "rl", "--quick"], "--json FILE"),
    (["sweep", "rl", "--accum", "trunc"], "--accum applies to sweep synth/verify/energy"),
])
def test_bad_selection_is_one_line(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and words in err, err


def _mxfp4_without_bounded(monkeypatch):
    """Every registered dot unit has every back end, so an MXFP4 registry entry without
    ``bounded`` stands in for a unit that lacks one."""
    monkeypatch.setitem(units.UNITS, "mxfp4", dataclasses.replace(
        units.UNITS["mxfp4"], accums=tuple(a for a in units.UNITS["mxfp4"].accums
                                           if a != "bounded")))


def test_a_selection_without_the_back_end_is_one_line(monkeypatch, capsys):
    """A selection none of whose pairs has the asked-for back end says which pairs do (the
    registry narrowed by :func:`_mxfp4_without_bounded`)."""
    _mxfp4_without_bounded(monkeypatch)
    argv = ["sweep", "verify", "--unit", "mxfp4", "--residual", "2:4", "--accum", "bounded"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert "back end bounded with hif4 none/2:4/dense, nvfp4 none)" in err, err


def test_verify_sweep_of_another_back_end(tmp_path, capsys):
    """``--accum`` sweeps that back end's units, each checked against its own golden model
    (the build is the default suite's truncating NVFP4 one, ``CI_CONFIGS``)."""
    path = tmp_path / "verify.json"
    argv = ["sweep", "verify", "--unit", "nvfp4", "--stages", "1", "--lanes", "32",
            "--accum", "trunc", "--vectors", "200", "--quiet", "--table", str(path)]
    assert main(argv) == 0
    (entry,) = json.loads(path.read_text()).values()
    assert entry["module"] == "nvfp4_dot_rnone_s1_l32_trc" and entry["passed"], entry
    assert entry["parameters"]["accum"] == "trunc" and entry["checked"] > 0
    capsys.readouterr()
    assert main(argv) == 0                              # held with the same settings: skipped
    assert "0 configurations done, 1 already in the table" in capsys.readouterr().out


def test_a_sweep_without_accum_takes_each_configurations_default(tmp_path, monkeypatch):
    """No ``--accum``: every configuration of the selection, each with its default back end
    (bounded where the pair has it, else the full window: the registry narrowed by
    :func:`_mxfp4_without_bounded`); with
    ``--accum bounded`` the pairs without it are left out. The tasks are captured, not
    run."""
    ran = []

    def fake_run_tasks(tasks, on_result, *, report=None, **kwargs):
        ran.append(sorted((t.name, t.args[1].get("accum")) for t in tasks))
        return report or sweep.Report()

    monkeypatch.setattr(sweep, "run_tasks", fake_run_tasks)
    common = ["sweep", "verify", "--unit", "hif4,mxfp4", "--residual", "2:4", "--stages", "3",
              "--lanes", "64", "--quiet", "--table", str(tmp_path / "v.json"),
              "--build-dir", str(tmp_path / "build")]
    assert main(common) == 0
    assert ran.pop() == [("hif4_dot_r24_s3_l64_bnd", "bounded"),
                         ("mxfp4_dot_r24_s3_l64_bnd", "bounded")]
    _mxfp4_without_bounded(monkeypatch)
    assert main(common) == 0
    assert main(common + ["--accum", "bounded"]) == 0
    assert main(common + ["--accum", "window"]) == 0
    assert ran == [[("hif4_dot_r24_s3_l64_bnd", "bounded"), ("mxfp4_dot_r24_s3_l64", "window")],
                   [("hif4_dot_r24_s3_l64_bnd", "bounded")],
                   [("hif4_dot_r24_s3_l64", "window"), ("mxfp4_dot_r24_s3_l64", "window")]]


def test_verify_table_merge_replaces_the_old_verilog_of_a_module(tmp_path):
    path = tmp_path / "v.json"
    sweep.merge_verify(path, "a" * 64, {"module": "m", "mismatches": 0})
    sweep.merge_verify(path, "b" * 64, {"module": "n", "mismatches": 0})
    sweep.merge_verify(path, "c" * 64, {"module": "m", "mismatches": 1})
    assert json.loads(path.read_text()) == {"b" * 64: {"module": "n", "mismatches": 0},
                                            "c" * 64: {"module": "m", "mismatches": 1}}


def test_ctrl_c_cancels_the_rest_keeps_what_finished_and_leaves_no_process(tmp_path):
    table = tmp_path / "table.json"
    sizes = "32,31,30,29,28,27"
    code, out, err, seen = sweep_driver.interrupt_after_first_result(
        [sizes, "--jobs", "2", "--table", str(table), "--cache-dir", str(tmp_path / "cache")],
        table)
    sweep_driver.check_interrupted(code, out, err, table, total=6)
    # the driver saw its two workers and their Yosys processes; none outlives it
    assert len(seen) >= 3, seen
    assert sweep_driver.survivors(seen) == []


def test_ctrl_c_while_a_result_is_merged_merges_it_then_cancels_the_rest():
    import os
    import signal
    import time

    merged = []

    def on_result(task, value):
        os.kill(os.getpid(), signal.SIGINT)         # Ctrl-C in the middle of the merge
        time.sleep(0.2)
        merged.append((task.name, value))

    tasks = [sweep.Task("quick", "synth", len, ("abc",)),
             sweep.Task("slow", "synth", time.sleep, (60,))]
    before = signal.getsignal(signal.SIGINT)    # SIG_IGN under nohup or a background job
    start = time.monotonic()
    with pytest.raises(sweep.Interrupted) as stop:
        sweep.run_tasks(tasks, on_result, jobs=1, progress=False)
    assert merged == [("quick", 3)]
    report = stop.value.report
    assert report.done == ["quick"] and report.cancelled == ["slow"] and report.interrupted
    assert time.monotonic() - start < 30                # the sleeping worker was stopped
    assert signal.getsignal(signal.SIGINT) is before    # the caller's handler is back


def test_interrupted_rl_matrix_keeps_its_finished_runs(monkeypatch):
    """A Ctrl-C during the GRPO runs hands the finished runs back (``stop.partial``), in the
    form a rerun's ``previous`` keeps; the sweep CLI writes them to --json."""
    pytest.importorskip("torch")
    from sim.cli.rl import sweep_runner
    from sim.rl import grpo

    def fake_run_tasks(tasks, on_result, **kw):
        for n, task in enumerate(tasks):
            if task.name.startswith("warm-up"):
                on_result(task, {"seed": task.args[1]})
            elif n < 2:
                on_result(task, {"seed": task.args[3], "config": task.args[2].name})
            else:
                raise sweep.Interrupted(sweep.Report())
        return sweep.Report()

    monkeypatch.setattr(sweep, "run_tasks", fake_run_tasks)
    configs = grpo.build_configs(formats=("hif4",))
    with pytest.raises(KeyboardInterrupt) as stop:
        grpo.run_experiment(grpo.QUICK, configs, [0], progress=False,
                            run_tasks=sweep_runner(2))
    partial = stop.value.partial
    assert partial["partial"] and partial["seeds"] == [0]
    assert [r["config"] for r in partial["runs"]] == [c.name for c in configs[:2]]
