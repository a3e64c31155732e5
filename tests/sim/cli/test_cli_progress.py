"""Long work is never silent and logs stay clean: the shared tqdm progress (``sim.progress``)
writes plain lines, no carriage returns, where stderr is not a terminal; ``hif4 rl --quick``
marks its table as a smoke run and still writes its files."""

import io

import pytest

from sim import progress as progress_module


def test_progress_in_a_log_is_plain_lines(monkeypatch):
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "LOG_INTERVAL_S", 0.0)
    log = io.StringIO()
    with progress_module.progress(5, "work", stream=log) as bar:
        for k in range(5):
            bar.set_postfix_str(f"item {k}", refresh=False)
            bar.update()
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert "work" in lines[0] and "0/5" in lines[0]
    assert "5/5" in lines[-1] and "item 4" in lines[-1]
    assert len(lines) == len(set(lines))            # the final state is not repeated


def test_quick_work_shows_nothing():
    log = io.StringIO()
    with progress_module.progress(3, "work", stream=log) as bar:
        bar.update(3)
    assert log.getvalue() == ""


def test_rl_quick_marks_its_table_as_a_smoke_run(tmp_path, capsys):
    pytest.importorskip("torch")
    from sim.cli import main

    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    assert main(["rl", "--quick", "--formats", "nvfp4", "--steps", "1", "--warmup-steps", "1",
                 "--json", str(out_json), "--plot", str(out_png)]) == 0
    captured = capsys.readouterr()
    notice, *table = captured.out.splitlines()
    assert notice.startswith("SMOKE RUN") and "--quick" in notice and table
    assert "\r" not in captured.err
    assert out_json.stat().st_size and out_png.read_bytes()[:4] == b"\x89PNG"
