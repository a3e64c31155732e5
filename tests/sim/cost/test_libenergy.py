"""Energy in pJ on liberty-mapped netlists (sim/cost/libenergy.py).

The method is checked against an independent hand computation on a registered 16-bit
adder: its own evaluation of the mapped cells (the Liberty functions through sympy), its
own toggle counts and its own table interpolation, straight from the library's numbers.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from sim.cost import libenergy
from sim.cost.liberty import load_library
from sim.cost.libsynth import load_netlist, synthesize_liberty

REPO = Path(__file__).resolve().parents[3]

ADDER = """
module add16(input clk, input [15:0] a, input [15:0] b, output reg [16:0] s);
  reg [15:0] ra, rb;
  always @(posedge clk) begin
    ra <= a;
    rb <= b;
    s <= ra + rb;
  end
endmodule
"""

VECTORS = [(0, 0), (0xFFFF, 1), (0x1234, 0x4321), (0x8000, 0x8000), (0xFFFF, 0xFFFF),
           (0, 0), (0x00FF, 0xFF01), (0xAAAA, 0x5555), (0x5555, 0x5555), (0x0001, 0x7FFF),
           (0xFFFF, 0), (0, 0)]
CLOCK_PS = 1000.0


@pytest.fixture(scope="module")
def lib():
    return load_library()


@pytest.fixture(scope="module")
def adder(lib):
    res = synthesize_liberty(ADDER, "add16", lib=lib)
    return res, load_netlist(res)


def _interp(axis, x):
    if len(axis) < 2:
        return 0, 0, 0.0
    i = 0
    while i < len(axis) - 2 and x > axis[i + 1]:
        i += 1
    return i, i + 1, (x - axis[i]) / (axis[i + 1] - axis[i])


def _table(tab, slew, load):
    """Bilinear interpolation (linear extrapolation) of an NLDM table, written anew."""
    if tab is None:
        return 0.0
    vals = tab["values"]
    i0, i1, a = _interp(tab["slew"], slew)
    j0, j1, b = _interp(tab["load"], load)
    if len(tab["slew"]) < 2:
        i1 = i0
    if len(tab["load"]) < 2:
        j1 = j0
    return ((1 - a) * ((1 - b) * vals[i0][j0] + b * vals[i0][j1])
            + a * ((1 - b) * vals[i1][j0] + b * vals[i1][j1]))


def _hand(netlist, lib, vectors, trace=None):
    """Simulate and weigh the adder's netlist independently of sim.cost.libenergy: returns
    (sums seen at the output after each edge, data fJ of edges 1.., clock fJ per cycle,
    leakage nW)."""
    from liberty.boolean_functions import parse_boolean_function
    from sympy import Symbol

    mod = netlist["modules"]["add16"]
    cells = {n: c for n, c in mod["cells"].items() if c["type"] != "$scopeinfo"}
    ports = mod["ports"]
    val = {}

    def get(bit):
        if bit in ("0", "x", "z"):
            return 0
        if bit == "1":
            return 1
        return val.get(bit, 0)

    funcs = {}

    def evaluate(kind, pin, ins):
        key = (kind, pin, tuple(sorted(ins.items())))
        if key not in funcs:
            expr = parse_boolean_function(lib.cells[kind].outputs[pin]["function"])
            r = expr.subs({Symbol(p): bool(v) for p, v in ins.items()})
            funcs[key] = 1 if bool(r) else 0
        return funcs[key]

    ffs = {n: c for n, c in cells.items() if lib.cells[c["type"]].ff}
    comb = {n: c for n, c in cells.items() if n not in ffs}
    state = {n: 0 for n in ffs}

    def settle():
        for n, c in ffs.items():                  # flip-flop outputs from their state
            ff = lib.cells[c["type"]].ff
            for pin, inv in ff["outputs"].items():
                if c["connections"].get(pin):
                    val[c["connections"][pin][0]] = state[n] ^ int(inv)
        for _ in range(len(comb) + 1):           # iterate to the fixed point
            changed = False
            for c in comb.values():
                lc = lib.cells[c["type"]]
                ins = {p: get(c["connections"][p][0]) for p in lc.inputs}
                for pin in lc.outputs:
                    bit = c["connections"][pin][0]
                    y = evaluate(c["type"], pin, ins)
                    if val.get(bit, 0) != y:
                        val[bit] = y
                        changed = True
            if not changed:
                return
        raise AssertionError("no fixed point")

    # loads and energies per bit, straight from the library
    v2 = lib.voltage ** 2
    sinks = {}
    for c in cells.values():
        lc = lib.cells[c["type"]]
        for pin, bits in c["connections"].items():
            if pin in lc.inputs and not isinstance(bits[0], str):
                sinks.setdefault(bits[0], []).append((c["type"], pin))
    for name, p in ports.items():
        if p["direction"] == "output":
            for b in p["bits"]:
                sinks.setdefault(b, []).append((None, None))
    inv = lib.cells[lib.inverter]
    inv_cin = list(inv.inputs.values())[0]
    wl = lib.wire_load

    def wire(n):
        tab = wl["fanout_length"]
        if str(n) in tab:
            return tab[str(n)] * wl["capacitance"]
        last = max(int(k) for k in tab)
        return (tab[str(last)] + wl["slope"] * (n - last)) * wl["capacitance"]

    clk_bit = ports["clk"]["bits"][0]
    load = {}
    for bit, ss in sinks.items():
        if bit == clk_bit:
            continue
        cap = sum(4 * inv_cin if t is None else lib.cells[t].inputs[p] for t, p in ss)
        load[bit] = cap + wire(len(ss))
    slew = lib.default_slew
    e_rise, e_fall = {}, {}
    for bit, cap in load.items():
        e_rise[bit] = e_fall[bit] = 0.5 * cap * v2
        for t, p in sinks[bit]:
            if t is not None and p in lib.cells[t].input_power and lib.cells[t].ff["clock"] != p:
                e_rise[bit] += _table(lib.cells[t].input_power[p]["rise"], slew, 0)
                e_fall[bit] += _table(lib.cells[t].input_power[p]["fall"], slew, 0)
    open_pins = []                                 # (cell type, pin): outputs left open
    for c in cells.values():
        lc = lib.cells[c["type"]]
        for pin, out in lc.outputs.items():
            bits = c["connections"].get(pin)
            ld = load.get(bits[0], 0.0) if bits else 0.0
            r = np.mean([_table(pw["rise"], slew, ld) for pw in out["power"]])
            f = np.mean([_table(pw["fall"], slew, ld) for pw in out["power"]])
            if bits:
                e_rise[bits[0]] = e_rise.get(bits[0], 0.0) + r
                e_fall[bits[0]] = e_fall.get(bits[0], 0.0) + f
            else:
                open_pins.append((c, pin, r, f))
    clock = 0.0
    for c in ffs.values():
        lc = lib.cells[c["type"]]
        ck = lc.ff["clock"]
        clock += (_table(lc.input_power[ck]["rise"], slew, 0)
                  + _table(lc.input_power[ck]["fall"], slew, 0) + lc.inputs[ck] * v2)
    leakage = sum(lib.cells[c["type"]].leakage for c in cells.values())

    def open_value(c, pin):
        lc = lib.cells[c["type"]]
        if lc.ff:
            n = next(k for k, x in cells.items() if x is c)
            return state[n] ^ int(lc.ff["outputs"][pin])
        return evaluate(c["type"], pin, {p: get(c["connections"][p][0]) for p in lc.inputs})

    # the cycles: input registers (outside the netlist) and the flip-flops update at the
    # edge, then the logic settles
    settle()
    sums, data = [], 0.0
    reg_in = {"a": 0, "b": 0}
    for cyc, (a, b) in enumerate(vectors):
        before = dict(val)
        open_before = [open_value(c, pin) for c, pin, _, _ in open_pins]
        for n, c in ffs.items():
            state[n] = get(c["connections"][lib.cells[c["type"]].ff["data"]][0])
        reg_in = {"a": a, "b": b}
        for name in ("a", "b"):
            for i, bit in enumerate(ports[name]["bits"]):
                val[bit] = (reg_in[name] >> i) & 1
        settle()
        s = sum(get(bit) << i for i, bit in enumerate(ports["s"]["bits"]))
        sums.append(s)
        for bit in e_rise:                         # every net with a driver or a load
            old, new = before.get(bit, 0), val.get(bit, 0)
            if trace is not None and old != new:
                trace.setdefault(bit, [0, 0])[new] += 1
            if old == 0 and new == 1:
                data += e_rise[bit]
            elif old == 1 and new == 0:
                data += e_fall[bit]
        for (c, pin, r, f), old in zip(open_pins, open_before):
            new = open_value(c, pin)
            data += r if new > old else f if new < old else 0.0
    if trace is not None:
        trace["energies"] = (e_rise, e_fall, open_pins)
    return sums, data, clock, leakage


def test_adder_hand_computation(lib, adder):
    res, netlist = adder
    sim = libenergy.LibSim(netlist, lib, "add16")
    cycles = len(VECTORS)
    a = np.array([v[0] for v in VECTORS], dtype=np.uint64)
    b = np.array([v[1] for v in VECTORS], dtype=np.uint64)
    bits = {name: ((x[:, None] >> np.arange(16, dtype=np.uint64)) & np.uint64(1))
            .astype(np.uint8)[None] for name, x in (("a", a), ("b", b))}
    rises, falls, out = sim.run(bits, cycles, [(0, cycles)], outputs=["s"])
    got = (out["s"][0].astype(np.int64) << np.arange(17)).sum(axis=1)
    # s shows a + b two edges after the vector is taken
    want = [0, 0] + [(x + y) for x, y in VECTORS[:-2]]
    assert got.tolist() == want

    sums, data_fj, clock_fj, leak_nw = _hand(netlist, lib, VECTORS)
    assert sums == want
    en = libenergy.net_energies(sim)
    assert en["flip_flops"] == 49 == res.flip_flops
    assert en["leakage_nw"] == pytest.approx(leak_nw, rel=1e-12)
    assert en["leakage_nw"] == pytest.approx(res.leakage_nw, rel=1e-9)
    assert en["clock_per_cycle"] == pytest.approx(clock_fj, rel=1e-12)
    macs = 7                                                 # any count: the same division
    e = libenergy.energy_from_counts(en, rises[:, 0], falls[:, 0], cycles, macs, CLOCK_PS)
    assert data_fj > 0
    assert e["data"] == pytest.approx(data_fj * 1e-3 / macs, rel=1e-9)
    assert e["clock"] == pytest.approx(clock_fj * cycles * 1e-3 / macs, rel=1e-12)
    assert e["leakage"] == pytest.approx(leak_nw * CLOCK_PS * cycles * 1e-9 / macs, rel=1e-12)
    assert e["total"] == pytest.approx(e["data"] + e["clock"] + e["leakage"], rel=1e-12)
    # a window without input changes switches nothing once the pipeline has drained
    still = {k: np.repeat(v[:, :1], 6, axis=1) for k, v in bits.items()}
    r2, f2, _ = sim.run(still, 6, [(3, 6)])
    assert r2.sum() == f2.sum() == 0


def test_standard_unit_short_stream(lib):
    # the unit test_liberty maps with the same script and no target: one synthesis for both
    path = REPO / "rtl_out" / "hif4_dot_rnone_s3_l64_bnd.v"
    manifest = json.loads(path.with_suffix(".json").read_text())
    (r,) = libenergy.measure_liberty(path.read_text(), manifest, ("gaussian",), lib=lib,
                                     clock_ps=1000, steps=48).values()
    assert r["mismatches"] == 0 and r["checked_words"] > 0
    assert r["steps"] >= 48 and r["macs"] == 64 * r["steps"]
    for k in ("data_pj_per_mac", "clock_pj_per_mac", "leakage_pj_per_mac"):
        assert r[k] > 0, k
    assert r["pj_per_mac"] == pytest.approx(r["data_pj_per_mac"] + r["clock_pj_per_mac"]
                                            + r["leakage_pj_per_mac"])
    assert r["voltage"] == lib.voltage and r["clock_ps"] == 1000
    # several stimuli side by side give each one's figures; no clock: the critical path
    both = libenergy.measure_liberty(path.read_text(), manifest, ("zero-heavy", "gaussian"),
                                     lib=lib, clock_ps=1000, steps=48)
    assert both["gaussian"] == r
    assert both["zero-heavy"]["mismatches"] == 0
    free = libenergy.measure_liberty(path.read_text(), manifest, lib=lib, clock_ps=None,
                                     steps=48)["gaussian"]
    assert free["clock_ps"] >= free["critical_ps"] > free["clock_ps"] - 100
    assert free["data_pj_per_mac"] == r["data_pj_per_mac"]


def test_wrong_netlist_output_raises(lib, monkeypatch):
    """A corrupted golden word makes the run fail, as in the cmos2 flow."""
    from sim.cost.energy import EnergyError
    import sim.stimulus.payload as stim

    # the unit test_liberty maps with the same script and no target: one synthesis for both
    path = REPO / "rtl_out" / "hif4_dot_rnone_s3_l64_bnd.v"
    manifest = json.loads(path.with_suffix(".json").read_text())
    real = stim.expected_words

    def bad(*args, **kwargs):
        words, extra = real(*args, **kwargs)
        words = np.array(words).copy()
        words[0] ^= 1
        return words, extra

    monkeypatch.setattr(stim, "expected_words", bad)
    with pytest.raises(EnergyError):
        libenergy.measure_liberty(path.read_text(), manifest, lib=lib, clock_ps=1000,
                                  steps=16)
