"""``hif4 sweep synth`` (``sim.cli.main``) run on primitive cells instead of units, and the
checks of a Ctrl-C'd sweep, for ``tests/sim/sweep/test_sweep.py`` and
``tests/sim/sweep/test_sweep_ray.py``.

``python tests/sim/sweep/sweep_driver.py SIZES [hif4 sweep options]``: the sweep synthesizes one
``e2m1dot`` primitive per comma-separated size (about 2-4 s of Yosys each, where a unit
takes a minute), through the command's own code from argument parsing to exit status;
only :func:`sim.sweep.synth_items` is replaced here, in this process.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from sim import sweep
from sim.cli import main
from hwgen import primitives

#: A selection the command accepts; its configurations are replaced by the primitives.
SELECTION = ["--unit", "hif4", "--residual", "none", "--stages", "3", "--lanes", "16"]


def items(sizes):
    """``[(module, verilog_text, manifest)]`` of one ``e2m1dot`` primitive per size."""
    out = []
    for n in sizes:
        top, text = primitives.primitive_verilog("e2m1dot", (n,))
        out.append((top, text, {"module": top, "unit": "e2m1dot", "parameters": {}}))
    return out


REPO = Path(__file__).resolve().parents[3]


def _processes():
    """``{pid: (parent pid, start time, state)}`` of every process, from ``/proc``."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out[int(stat.parent.name)] = (int(fields[1]), fields[19], fields[0])
    return out


def descendants(pid):
    """``{pid: start time}`` of every process below ``pid``."""
    table = _processes()
    found, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, started, _) in table.items():
            if ppid == parent and child not in found:
                found[child] = started
                todo.append(child)
    return found


def survivors(seen, grace=5.0):
    """The processes of ``seen`` (``{pid: start time}``) still running (not zombies) after
    up to ``grace`` seconds, as ``[(pid, command line)]``."""
    deadline = time.monotonic() + grace
    while True:
        table = _processes()
        alive = [pid for pid, started in seen.items()
                 if pid in table and table[pid][1] == started and table[pid][2] != "Z"]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    out = []
    for pid in alive:
        try:
            out.append((pid, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                        .decode(errors="replace").strip()))
        except OSError:
            pass
    return out


def interrupt_after_first_result(argv, table, timeout=180):
    """Run ``tests/sim/sweep/sweep_driver.py argv`` in a session of its own, send SIGINT to its
    process group (as a terminal's Ctrl-C does) once ``table`` holds a result, and return
    ``(returncode, stdout, stderr, seen)``, ``seen`` being every process seen below the
    driver until then (:func:`descendants`)."""
    proc = subprocess.Popen([sys.executable, __file__, *argv], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    seen = {}
    deadline = time.monotonic() + timeout
    try:
        while not (table.exists() and json.loads(table.read_text())):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no result came"
            seen.update(descendants(proc.pid))
            time.sleep(0.05)
        seen.update(descendants(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err, seen


def check_interrupted(returncode, out, err, table, total):
    """The properties of a Ctrl-C'd ``hif4 sweep synth`` of ``total`` tasks: exit 130, one
    line with the counts and no traceback on stderr, nothing on stdout, and a table holding
    exactly the tasks the progress lines call done. Returns the number finished."""
    assert returncode == 130, err
    assert "Traceback" not in err and out == "", out + err
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1, err
    m = re.fullmatch(r"hif4 sweep synth: interrupted: (\d+) finished, (\d+) cancelled; "
                     r"the finished results are in (.+)", lines[0])
    assert m, lines[0]
    finished, cancelled = int(m[1]), int(m[2])
    assert finished >= 1 and cancelled >= 1 and finished + cancelled == total, lines[0]
    held = json.loads(table.read_text())            # valid JSON
    modules = sorted(e["manifest"]["module"] for e in held.values())
    assert modules == sorted(set(re.findall(r"(prim_\w+) done", err))), err
    assert len(modules) == finished
    return finished


if __name__ == "__main__":
    picked = items(int(n) for n in sys.argv[1].split(","))
    sweep.synth_items = lambda configs, build=None, accum=None: picked
    sys.exit(main(["sweep", "synth", *SELECTION, *sys.argv[2:]]))
