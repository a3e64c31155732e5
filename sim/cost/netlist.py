"""Gate-level netlists of generated modules: the synthesis flow's mapped cells as Verilog.

:data:`NETLIST_FLOW` is the flow of :mod:`sim.cost.synth` (:data:`~sim.cost.synth.FLOW`)
with two changes, that its flip-flops are legalized to plain ``$_DFF_P_`` before the first
ABC run rather than after it, and that both ABC runs use :data:`ABC_SCRIPT` (Yosys' default
script without the ``&fraig -x`` SAT sweeping that took up to an hour on the bounded
MXFP4 + 2:4 unit; its netlist now takes about two minutes), followed by::

    scc; rename -enumerate -pattern n%; splitnets; write_verilog -noattr netlist.v;
    write_json netlist.json

Why the change: the first ABC run (inside ``synth``) cuts the logic into one ABC job per
flip-flop domain (clock, enable, reset), and Yosys 0.70 re-integrates the jobs' results
side by side. Each job's result is acyclic, but one job can come to read, structurally, a
net that another job's result derives from its outputs: a combinational loop that no input
sensitizes. The NVFP4 dot unit of the standard set gets one (286 nets through its
accumulator aligner) in :data:`~sim.cost.synth.FLOW`. With every flip-flop a plain
``$_DFF_P_`` (enables and resets as gates) there is one domain and one ABC job, so the
netlist is loop-free; ``scc`` checks it, and :func:`export_netlist` refuses a netlist with a
loop. The netlists' areas differ from the synthesis table's by ABC's choices only (within
2% on the standard set, ``docs/energy.md``); the table keeps :data:`~sim.cost.synth.FLOW`.

``rename -enumerate`` gives every private net (``$abc$...``, which ``write_verilog`` would
write as ``_123_``) a public name ``n<k>``: Verilator's toggle coverage skips signals whose
names start with ``_``, so without it the internal nets of the netlist would not be counted.
``splitnets`` makes every multi-bit wire inside the module single-bit nets (``name[3]``):
bits of one vector that feed each other through gates are a false combinational loop to
Verilator (its UNOPTFLAT warning), which it would settle by iterating.
The JSON netlist is read into the per-bit load table that :mod:`sim.cost.energy` weighs
toggles with (:func:`load_table`).

Results are cached under ``build/netlist/<key>/`` of the repository, keyed by the SHA-256
of the Verilog text, the top module and the flow, like the synthesis results:
``netlist.v``, ``netlist.json.gz`` (Yosys' JSON netlist, which the gate evaluation of
:mod:`sim.cost.activity` and the tests read), ``loads.json`` (:func:`load_table`) and
``stat.json`` (the :class:`~sim.cost.synth.SynthResult` of the run).
"""

import gzip
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import synth

__all__ = ["ABC_SCRIPT", "NETLIST_FLOW", "FLOW_VERSION", "DEFAULT_CACHE", "CELL_INPUTS",
           "Netlist", "bit_name", "export_netlist", "export_netlist_text", "load_table"]

#: ABC script of both ABC runs of :data:`NETLIST_FLOW`: Yosys' default script without its
#: ``&fraig -x`` SAT sweeping (up to an hour on the bounded MXFP4 + 2:4 unit) and without
#: ``scorr; dretime`` (no-ops on a netlist whose flip-flops stay outside ABC): structural
#: hashing, ``dc2`` rewriting, choices (``&dch -f``) and ``&nf`` mapping onto the gate set.
#: Commas stand for spaces (Yosys' inline ``+`` script syntax).
ABC_SCRIPT = "+strash;dc2;strash;&get,-n;&dch,-f;&nf;&put"
NETLIST_FLOW = ("read_verilog {src}; synth -flatten -top {top} -noabc; "
                f"dfflegalize -cell $_DFF_P_ 01; abc -script {ABC_SCRIPT}; opt -fast; "
                f"abc -g cmos2 -script {ABC_SCRIPT}; opt_clean; "
                "stat -tech cmos; ltp -noff; tee -q -o scc.txt scc; "
                "rename -enumerate -pattern n%; splitnets; "
                "write_verilog -noattr netlist.v; write_json netlist.json")
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "build" / "netlist"
_CACHE_VERSION = 3
#: Version of :func:`load_table`'s output; a cached ``loads.json`` of another is recomputed.
LOADS_VERSION = 2
#: What energy figures made from these netlists depend on (the flow and the load table),
#: as a short hash; ``hif4 sweep energy`` records it with its figures.
FLOW_VERSION = synth.verilog_sha256(f"{NETLIST_FLOW}|loads v{LOADS_VERSION}")[:12]

#: Input pins of each cell type ``abc -g cmos2`` and ``dfflegalize`` leave, and whether the
#: pin is a data input (counted as one NAND2 input of load) or the clock.
CELL_INPUTS = {
    "$_NOT_": {"A": "data"},
    "$_NAND_": {"A": "data", "B": "data"},
    "$_NOR_": {"A": "data", "B": "data"},
    "$_DFF_P_": {"D": "data", "C": "clock"},
}
_OUTPUTS = {"$_NOT_": "Y", "$_NAND_": "Y", "$_NOR_": "Y", "$_DFF_P_": "Q"}


@dataclass
class Netlist:
    """A cached gate-level netlist.

    Attributes
    ----------
    top : str
        Module name (the top of ``verilog``).
    verilog : Path
        The mapped netlist (``write_verilog -noattr``), every net with a public name.
    loads : dict
        :func:`load_table` of the netlist.
    synth : SynthResult
        Figures of the synthesis run that made it (transistors, flip-flops, path).
    """

    top: str
    verilog: Path
    loads: dict
    synth: synth.SynthResult

    def json(self):
        """Yosys' JSON netlist (the dict ``write_json`` wrote)."""
        with gzip.open(self.verilog.with_name("netlist.json.gz"), "rt") as handle:
            return json.load(handle)


def bit_name(name, index, width, offset, upto):
    """The Verilog name of bit ``index`` (0 = LSB position in Yosys' list) of a wire, as
    Verilator's coverage and :class:`sim.cost.activity.GateSim` name it.

    A one-bit wire is written without a range whatever its offset (``splitnets`` leaves the
    bit's offset on the wire ``x[3]`` it splits off), so it is its bare name."""
    if width == 1:
        return name
    pos = offset + (width - 1 - index if upto else index)
    return f"{name}[{pos}]"


def load_table(netlist_json, top):
    """Per-bit loads of a Yosys JSON netlist, in units of one NAND2 input.

    Each net bit (a Yosys bit id: all the names that alias it are listed, with one of them
    chosen as its ``name``) gets ``load = data gate inputs it drives + 1 for its driver`` when
    a cell drives it, ``+ 0`` when a module input does (the driver sits outside the unit). A
    bit that drives flip-flop clock pins is a clock net, listed apart. Constant bits are left
    out, and so are named bits nothing drives or reads (``undriven`` counts them). Raises
    ``ValueError`` for a cell type outside :data:`CELL_INPUTS` or an undriven bit that
    drives gates.

    Returns ``{"version": LOADS_VERSION, "nets": {name: [load, [aliases...]]}, "clock":
    [names], "flip_flops": n, "cells": {type: n}, "inputs": [names], "outputs": [names],
    "undriven": n}``.
    """
    mod = netlist_json["modules"][top]
    fanout, driven, clock = {}, set(), set()
    cells = {}
    for cell in mod["cells"].values():
        kind = cell["type"]
        if kind == "$scopeinfo":                   # hierarchy notes of flatten, no pins
            continue
        if kind not in CELL_INPUTS:
            raise ValueError(f"cell type {kind} in {top} is not one of "
                             f"{', '.join(CELL_INPUTS)} (the flow's gate set)")
        cells[kind] = cells.get(kind, 0) + 1
        for pin, bits in cell["connections"].items():
            for bit in bits:
                if isinstance(bit, str):           # constant "0", "1", "x"
                    continue
                if pin == _OUTPUTS[kind]:
                    driven.add(bit)
                elif CELL_INPUTS[kind][pin] == "clock":
                    clock.add(bit)
                else:
                    fanout[bit] = fanout.get(bit, 0) + 1
    names = {}
    ports = {"input": [], "output": []}
    port_bits = {}
    for pname, port in mod["ports"].items():
        port_bits[pname] = port
    for name, net in sorted(mod["netnames"].items()):
        if name.startswith("$"):
            raise ValueError(f"net {name} of {top} has a private name; the flow's rename "
                             "did not run")
        width = len(net["bits"])
        for i, bit in enumerate(net["bits"]):
            if isinstance(bit, str):
                continue
            bname = bit_name(name, i, width, net.get("offset", 0), net.get("upto", 0))
            names.setdefault(bit, []).append(bname)
    inputs = {b for p in port_bits.values() if p["direction"] == "input"
              for b in p["bits"] if not isinstance(b, str)}
    nets, clocks, undriven = {}, [], 0
    for bit, aliases in names.items():
        aliases = sorted(aliases, key=lambda n: (n.startswith("n") and n[1:2].isdigit(), n))
        if bit in clock:
            if fanout.get(bit):
                raise ValueError(f"clock net {aliases[0]} of {top} also drives data inputs")
            clocks.append(aliases[0])
            continue
        if bit not in driven and bit not in inputs:
            if fanout.get(bit):
                raise ValueError(f"net {aliases[0]} of {top} drives gates but has no driver")
            undriven += 1                       # a named bit left dangling: never switches
            continue
        nets[aliases[0]] = [fanout.get(bit, 0) + (1 if bit in driven else 0), aliases]
    for pname, port in port_bits.items():
        width = len(port["bits"])
        for i, bit in enumerate(port["bits"]):
            if not isinstance(bit, str):
                ports[port["direction"]].append(bit_name(pname, i, width, port.get("offset", 0),
                                                          port.get("upto", 0)))
    return {"version": LOADS_VERSION, "nets": dict(sorted(nets.items())),
            "clock": sorted(clocks),
            "flip_flops": cells.get("$_DFF_P_", 0), "cells": dict(sorted(cells.items())),
            "inputs": ports["input"], "outputs": ports["output"], "undriven": undriven}


def _key(text, top):
    return synth.verilog_sha256(f"v{_CACHE_VERSION}|{synth.verilog_sha256(text)}|{top}|"
                                f"{NETLIST_FLOW}")


def _read(folder, top):
    """The cached netlist in ``folder``, its load table recomputed from the JSON netlist
    when it was made by another version of :func:`load_table`; None if incomplete."""
    verilog = folder / "netlist.v"
    if not (verilog.is_file() and (folder / "netlist.json.gz").is_file()):
        return None
    try:
        res = synth.SynthResult.from_json(json.loads((folder / "stat.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    net = Netlist(top=top, verilog=verilog, loads={}, synth=res)
    try:
        loads = json.loads((folder / "loads.json").read_text())
    except (OSError, ValueError):
        loads = {}
    if loads.get("version") != LOADS_VERSION:
        loads = load_table(net.json(), top)
        _write_atomic(folder / "loads.json", json.dumps(loads, sort_keys=True))
    net.loads = loads
    return net


def _scc_count(report):
    """The number of loops Yosys' ``scc`` reports (its ``Found N SCCs.`` line)."""
    found = re.findall(r"^Found (\d+) SCCs\.$", report, re.M)
    if not found:
        raise synth.SynthError("Yosys' scc report has no 'Found N SCCs.' line")
    return int(found[-1])


def _write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def export_netlist_text(text, top=None, *, cache_dir=DEFAULT_CACHE, timeout=3600, backend=None):
    """The gate-level netlist of a Verilog text (cached); see :func:`export_netlist`."""
    backend = backend or synth.default_backend()
    if top is None:
        top = synth.top_module_name(text)
    if not re.fullmatch(r"[A-Za-z_][\w$]*", top):
        raise synth.SynthError(f"top module name {top!r} is not a plain Verilog identifier")
    folder = Path(cache_dir) / _key(text, top)
    cached = _read(folder, top)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix="hif4-netlist-") as work:
        Path(work, "M.v").write_text(text)
        steps = [s.strip() for s in NETLIST_FLOW.format(src="M.v", top=top).split("; ")]
        Path(work, "flow.ys").write_text(synth._script(steps))
        synth._run_yosys("flow.ys", work, timeout, backend)
        stat = synth.parse_stat(Path(work, "stat.txt").read_text())
        ltp = synth.parse_ltp(Path(work, "ltp.txt").read_text())
        loops = _scc_count(Path(work, "scc.txt").read_text())
        if loops:
            raise synth.SynthError(f"the netlist of {top} has {loops} combinational "
                                   "loop(s) after synthesis (Yosys scc)")
        result = synth._result_from_stat(stat, top, synth.verilog_sha256(text), ltp, False)
        loads = load_table(json.loads(Path(work, "netlist.json").read_text()), top)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
        shutil.copyfile(Path(work, "netlist.v"), tmp / "netlist.v")
        with open(Path(work, "netlist.json"), "rb") as src, \
                gzip.open(tmp / "netlist.json.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        (tmp / "loads.json").write_text(json.dumps(loads, sort_keys=True))
        (tmp / "stat.json").write_text(json.dumps(result.to_json(), sort_keys=True, indent=1))
        try:
            os.replace(tmp, folder)             # whole or not at all
        except OSError:                         # another process finished it first
            shutil.rmtree(tmp, ignore_errors=True)
    return _read(folder, top)


def export_netlist(path, top=None, **kwargs):
    """The gate-level netlist of the Verilog file ``path`` through :data:`NETLIST_FLOW`.

    ``top`` defaults to the manifest's ``module`` next to the file, else the module no other
    module instantiates. Keyword arguments: ``cache_dir`` (``build/netlist``), ``timeout``
    (seconds, 0 = none), ``backend`` (``"yowasp"`` or ``"native"``, as for
    :func:`sim.cost.synth.synthesize_text`). Raises
    :class:`~sim.cost.synth.SynthError` when Yosys fails.
    """
    path = Path(path)
    if top is None:
        manifest = path.with_suffix(".json")
        if manifest.is_file():
            try:
                top = json.loads(manifest.read_text()).get("module")
            except ValueError:
                top = None
    return export_netlist_text(path.read_text(), top, **kwargs)
