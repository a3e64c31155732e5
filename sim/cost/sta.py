"""Static timing of a netlist mapped to a Liberty library (NLDM delay tables).

The netlist is Yosys' JSON (``write_json``) of one flat module whose cells are library cells
(:mod:`sim.cost.libsynth`); the library is a :class:`~sim.cost.liberty.Library`. Delays are
the tables' values at each arc's input slew and output load, rise and fall apart and by the
arc's unateness; a net's slew is the worst its driver produces; a net's load is the input
capacitance of the pins it drives, plus the library's wire-load model for its fanout
(:meth:`~sim.cost.liberty.Library.wire_cap`), plus four of the smallest inverter's inputs for
an output port. A flip-flop launches at its clock-to-Q delay and captures with its setup
time (both from the library, the clock an ideal edge); a module input is taken to come from
a register like the unit's own (arrival: the library flip-flop's clock-to-Q), a module output
to go into one (its setup). So every figure is a register-to-register path: the clock period
it allows, clock skew and jitter left out.

The paths are split like :mod:`sim.cost.depth`'s columns, by the register that launches
them and the one that captures them:

* ``loop``: paths from a loop register to a loop register (the accumulator: a step's sum
  needs the previous step's word, so this path cannot be pipelined away);
* ``feed_forward``: every other path (into the loop from outside it, between pipeline
  registers, from inputs and out of the loop to outputs).

The loop registers are given (``loop_ffs``: :mod:`sim.cost.libsynth` takes them from the
manifest's accumulator stage); without them they are the flip-flops on a feedback cycle of
the netlist (which, in a unit with stalls, also counts enable-held pipeline registers).
Both come from one pass in topological order that carries two arrival times per net: from
loop launches and from all others.
"""

import math
from dataclasses import dataclass

from .liberty import lookup

__all__ = ["TimingError", "Timing", "analyze", "netlist_graph"]

NEG = -math.inf


class TimingError(RuntimeError):
    """A netlist the analysis cannot time (a cell missing from the library, a
    combinational loop)."""


@dataclass
class Timing:
    """Register-to-register timing of a mapped netlist (ps; FO4 = ps / the library's FO4).

    ``critical`` is the longest path (the least clock period), ``loop`` and
    ``feed_forward`` its split (0 when there is no such path), ``path`` the cell types along
    the critical path from launch to capture, ``fo4`` the library's FO4 delay.
    """

    critical: float
    loop: float
    feed_forward: float
    fo4: float
    path: list
    endpoints: dict = None

    def to_json(self):
        return {"critical_ps": self.critical, "loop_ps": self.loop,
                "feed_forward_ps": self.feed_forward, "fo4_ps": self.fo4,
                "critical_fo4": self.critical / self.fo4, "loop_fo4": self.loop / self.fo4,
                "feed_forward_fo4": self.feed_forward / self.fo4,
                "path_cells": len(self.path), "path": self.path}


def netlist_graph(netlist, top=None, lib=None):
    """``(module, cells, drivers, sinks, ports)`` of Yosys' JSON netlist: ``cells`` maps a
    cell name to ``(type, {pin: [bits]}, {pin: direction})``; ``drivers`` a net bit to
    ``(cell, pin)`` (``None`` cell for a module input); ``sinks`` a net bit to
    ``[(cell, pin)]`` (``None`` cell for a module output); ``ports`` the module's ports as
    ``{name: (direction, [bits])}``. Constant bits (``"0"``, ``"1"``, ``"x"``) are left out.
    A cell's pin directions come from the library ``lib`` where it has the cell type (Yosys
    writes none for library cells), else from the netlist; Yosys' ``$scopeinfo`` cells are
    skipped."""
    mods = netlist["modules"]
    if top is None:
        tops = [n for n, m in mods.items() if m.get("attributes", {}).get("top")]
        top = tops[0] if tops else next(iter(mods))
    mod = mods[top]
    cells, drivers, sinks = {}, {}, {}
    ports = {n: (p["direction"], p["bits"]) for n, p in mod["ports"].items()}
    for name, (direction, bits) in ports.items():
        for b in bits:
            if isinstance(b, str):
                continue
            if direction == "input":
                drivers[b] = (None, name)
            else:
                sinks.setdefault(b, []).append((None, name))
    for name, c in mod["cells"].items():
        if c["type"] == "$scopeinfo":
            continue
        dirs = c.get("port_directions", {})
        if lib is not None and c["type"] in lib.cells:
            lc = lib.cells[c["type"]]
            dirs = {p: ("output" if p in lc.outputs else "input") for p in c["connections"]}
        cells[name] = (c["type"], c["connections"], dirs)
        for pin, bits in c["connections"].items():
            for b in bits:
                if isinstance(b, str):
                    continue
                if dirs.get(pin) == "output":
                    drivers[b] = (name, pin)
                else:
                    sinks.setdefault(b, []).append((name, pin))
    return mod, cells, drivers, sinks, ports


def _sccs(nodes, succ):
    """Strongly connected components (iterative Tarjan): ``{node: component id}`` and the
    set of component ids that hold a cycle (more than one node, or a self-loop)."""
    index, low, comp = {}, {}, {}
    on, stack, counter, cid = set(), [], 0, 0
    cyclic = set()
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(succ.get(nxt, ()))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp[w] = cid
                    members.append(w)
                    if w == node:
                        break
                if len(members) > 1 or node in succ.get(node, ()):
                    cyclic.add(cid)
                cid += 1
    return comp, cyclic


def analyze(netlist, lib, top=None, *, wire_load=True, loop_ffs=None, endpoints=False):
    """The :class:`Timing` of Yosys' JSON ``netlist`` (a dict) mapped to ``lib``;
    ``wire_load=False`` leaves the wire-load model out (as ABC's ``stime`` does);
    ``loop_ffs`` names the loop's flip-flop cells (see the module docstring). With
    ``endpoints``, :attr:`Timing.endpoints` maps every flip-flop cell to ``(loop, other,
    launch, path)``: the latest arrival at its data pin, setup included, of paths from
    loop registers and from all others (0 where none), the flip-flop cell (None: a module
    input) that launches its latest path, and that path's cell types."""
    mod, cells, drivers, sinks, ports = netlist_graph(netlist, top, lib)
    libcells = lib.cells
    for name, (ctype, _, _) in cells.items():
        if ctype not in libcells:
            raise TimingError(f"cell {name} is of type {ctype}, which the library "
                              f"{lib.name} does not have")
    po_load = 4 * lib.inverter_cin
    ext_clkq = lib.clk_to_q()
    ext_setup = lib.setup()

    def load_of(bit):
        total, fanout = 0.0, 0
        for cell, pin in sinks.get(bit, ()):
            if cell is None:
                total += po_load
            else:
                total += libcells[cells[cell][0]].inputs.get(pin, 0.0)
            fanout += 1
        if wire_load:
            total += lib.wire_cap(fanout)
        return total

    is_ff = {n: libcells[t].ff is not None for n, (t, _, _) in cells.items()}
    for n, (t, _, _) in cells.items():
        if libcells[t].sequential and not is_ff[n]:
            raise TimingError(f"cell {n} ({t}) has state the analysis does not model")

    if loop_ffs is None:
        succ = {n: set() for n in cells}
        for bit, (dcell, _) in drivers.items():
            if dcell is None:
                continue
            for scell, _ in sinks.get(bit, ()):
                if scell is not None:
                    succ[dcell].add(scell)
        comp, cyclic = _sccs(list(cells), succ)
        loop_ffs = {n for n in cells if is_ff[n] and comp[n] in cyclic}
    else:
        loop_ffs = set(loop_ffs)

    # arrival per net: [rise, fall] from loop launches (L) and from all others (O)
    arr_l, arr_o, slew = {}, {}, {}
    pred = {}                            # net -> (cell, input net) of the worst arrival

    for name, (direction, bits) in ports.items():
        if direction != "input":
            continue
        for b in bits:
            if isinstance(b, str):
                continue
            arr_o[b] = [ext_clkq, ext_clkq]
            arr_l[b] = [NEG, NEG]
            slew[b] = [lib.default_slew, lib.default_slew]
            pred[b] = None

    for name, (ctype, conns, dirs) in cells.items():
        if not is_ff[name]:
            continue
        c = libcells[ctype]
        for pin, arc in c.ff["clk_to_q"].items():
            for b in conns.get(pin, ()):
                if isinstance(b, str):
                    continue
                ld = load_of(b)
                r = lookup(arc["rise"], lib.default_slew, ld) if arc["rise"] else 0.0
                f = lookup(arc["fall"], lib.default_slew, ld) if arc["fall"] else 0.0
                if name in loop_ffs:
                    arr_l[b], arr_o[b] = [r, f], [NEG, NEG]
                else:
                    arr_l[b], arr_o[b] = [NEG, NEG], [r, f]
                slew[b] = [lookup(arc["rise_tr"], lib.default_slew, ld) if arc["rise_tr"] else
                           lib.default_slew,
                           lookup(arc["fall_tr"], lib.default_slew, ld) if arc["fall_tr"] else
                           lib.default_slew]
                pred[b] = None

    # topological order of the combinational cells
    comb = [n for n in cells if not is_ff[n]]
    indeg = {n: 0 for n in comb}
    out_nets = {}
    for n in comb:
        _, conns, dirs = cells[n]
        out_nets[n] = [b for p, bits in conns.items() if dirs.get(p) == "output"
                       for b in bits if not isinstance(b, str)]
        for p, bits in conns.items():
            if dirs.get(p) == "output":
                continue
            for b in bits:
                if isinstance(b, str):
                    continue
                d = drivers.get(b)
                if d is not None and d[0] is not None and not is_ff[d[0]]:
                    indeg[n] += 1
    ready = [n for n in comb if indeg[n] == 0]
    order = []
    while ready:
        n = ready.pop()
        order.append(n)
        for b in out_nets[n]:
            for s, _ in sinks.get(b, ()):
                if s is not None and not is_ff[s]:
                    indeg[s] -= 1
                    if indeg[s] == 0:
                        ready.append(s)
    if len(order) != len(comb):
        raise TimingError(f"the netlist has a combinational loop through "
                          f"{len(comb) - len(order)} cells")

    undriven = [NEG, NEG]
    for n in order:
        ctype, conns, dirs = cells[n]
        c = libcells[ctype]
        for opin, out in c.outputs.items():
            for ob in conns.get(opin, ()):
                if isinstance(ob, str):
                    continue
                ld = load_of(ob)
                a_l, a_o = [NEG, NEG], [NEG, NEG]
                s_out = [0.0, 0.0]
                best, best_t = None, NEG
                for arc in out["arcs"]:
                    bits = conns.get(arc["related"])
                    if not bits or isinstance(bits[0], str):
                        continue                 # a constant input: no transition
                    ib = bits[0]
                    l_in = arr_l.get(ib, undriven)
                    o_in = arr_o.get(ib, undriven)
                    s_in = slew.get(ib, [lib.default_slew, lib.default_slew])
                    sense = arc["sense"]
                    for k, (tab, trtab) in enumerate(((arc["rise"], arc["rise_tr"]),
                                                      (arc["fall"], arc["fall_tr"]))):
                        if tab is None:
                            continue
                        if sense == "positive_unate":
                            srcs = (k,)
                        elif sense == "negative_unate":
                            srcs = (1 - k,)
                        else:
                            srcs = (0, 1)
                        for j in srcs:
                            d = lookup(tab, s_in[j], ld)
                            a_l[k] = max(a_l[k], l_in[j] + d)
                            a_o[k] = max(a_o[k], o_in[j] + d)
                            t = max(l_in[j], o_in[j]) + d
                            if t > best_t:
                                best, best_t = ib, t
                            if trtab is not None:
                                s_out[k] = max(s_out[k], lookup(trtab, s_in[j], ld))
                arr_l[ob], arr_o[ob] = a_l, a_o
                slew[ob] = s_out
                pred[ob] = (n, best)

    def trace(b):
        """The cells of the latest path into net ``b``, launch first (its flip-flop, if
        any, included), and the launching flip-flop cell (None: a module input)."""
        path = []
        while b is not None and pred.get(b) is not None:
            cell, b = pred[b]
            path.append(cell)
        d = drivers.get(b) if b is not None else None
        if d is not None and d[0] is not None:
            path.append(d[0])
        path.reverse()
        return path, (d[0] if d is not None else None)

    critical, crit_end = 0.0, None
    t_loop, t_ff = 0.0, 0.0
    ends = {} if endpoints else None
    for name, (ctype, conns, dirs) in cells.items():
        if not is_ff[name]:
            continue
        c = libcells[ctype]
        for b in conns.get(c.ff["data"], ()):
            if isinstance(b, str) or b not in arr_o:
                continue
            setup = max(lookup(t, slew[b][0], lib.default_slew) for t in c.ff["setup"])
            lo, oo = max(arr_l[b]) + setup, max(arr_o[b]) + setup
            if ends is not None:
                old = ends.get(name, (0.0, 0.0, None, []))
                if max(lo, oo) > max(old[0], old[1]):
                    path, first = trace(b)
                    old = (old[0], old[1], first, [cells[c][0] for c in path])
                ends[name] = (max(old[0], lo), max(old[1], oo), old[2], old[3])
            if max(lo, oo) > critical:
                critical, crit_end = max(lo, oo), b
            if name in loop_ffs:
                t_loop, t_ff = max(t_loop, lo), max(t_ff, oo)
            else:
                t_ff = max(t_ff, lo, oo)
    for name, (direction, bits) in ports.items():
        if direction != "output":
            continue
        for b in bits:
            if isinstance(b, str) or b not in arr_o:
                continue
            f = max(max(arr_l[b]), max(arr_o[b])) + ext_setup
            t_ff = max(t_ff, f)
            if f > critical:
                critical, crit_end = f, b
    path = [cells[c][0] for c in trace(crit_end)[0]] if crit_end is not None else []
    t_loop = max(t_loop, 0.0)
    return Timing(critical, t_loop, t_ff, lib.fo4(), path, ends)
