"""Dynamic energy per MAC of the generated units from switching activity on a step stream.

The proxy (``docs/energy.md``): the unit's gate-level netlist (:mod:`sim.cost.netlist`, the
synthesis flow's mapped cells) is simulated cycle by cycle on a recorded step stream
(:mod:`sim.cost.activity`: the NumPy gate evaluation, or Verilator's toggle coverage),
every output word checked against the golden model (:func:`sim.stimulus.expected_words`),
and

* **data energy** = sum over nets of toggles x load, the load of a net being the data gate
  inputs it drives plus one for its driver (a module input has no driver inside the unit),
  in units of one NAND2 input (:func:`sim.cost.netlist.load_table`);
* **clock energy** = :data:`FF_CLOCK_LOAD` NAND2-input toggles per flip-flop per cycle,
  whatever the data;

both divided by the MACs of the window (64 per step). The unit is "NAND2-input toggle
equivalents" (one NAND2 input charged or discharged once).

Stimuli (:data:`STIMULI`): ``minilm``, the Linear-layer inputs and weights of
all-MiniLM-L6-v2 (:func:`minilm_tensors`), W4A4 in the unit's format; ``gaussian``, standard
normal activations and weights; ``zero-heavy``, the same with three activations in four set
to zero. Each is cut into the K-loops of one output at a time (``first``/``last``),
quantized per tensor along K, the residual (units with one) from Rollout-ResQ of the same
activations (:func:`sim.formats.resq.resq`).
"""

import math
from pathlib import Path

import numpy as np

from hif4spec import STEP_ELEMS, unit_spec

__all__ = ["FF_CLOCK_LOAD", "STIMULI", "DEFAULT_STEPS", "RESET_CYCLES", "EnergyError",
           "minilm_tensors", "stimulus_tensors", "gemm_stream", "stimulus_stream",
           "ENGINES", "stream_vectors", "payload_vectors", "run_streams", "run_stream", "gate_sim",
           "energy_from_toggles", "measure", "energy_selection", "comparison_rows",
           "format_table", "plot_rows"]

#: NAND2-input toggles of clock load per flip-flop per cycle: a static master-slave
#: flip-flop's clock and local inverted clock each load about 3 NAND2 inputs (the gates of
#: its four clocked transmission-gate / tristate pairs, the local inverter's input or its
#: driver) and each toggles twice a cycle: 2 x 3 + 2 x 3 = 12 (``docs/energy.md``).
FF_CLOCK_LOAD = 12
#: The stimuli of :func:`stimulus_tensors`.
STIMULI = ("minilm", "gaussian", "zero-heavy")
#: Steps per (unit, stimulus) of ``hif4 estimate --energy`` by default.
DEFAULT_STEPS = 2000
#: Cycles with ``rst`` high before a stream.
RESET_CYCLES = 4
#: MiniLM sentences whose Linear inputs are recorded.
MINILM_SENTENCES = 8
#: Activations zeroed in the zero-heavy stimulus.
ZERO_SHARE = 0.75


class EnergyError(RuntimeError):
    """The netlist's outputs disagree with the golden model, or its handshake with the
    manifest's timing."""


# ---------------------------------------------------------------------------------------
# Stimuli


def minilm_tensors(sentences=MINILM_SENTENCES):
    """``[(name, X, W)]`` for every Linear of all-MiniLM-L6-v2's encoder: X the layer's
    float32 inputs over the tokens of the first ``sentences`` sentences, W its float32
    weight (N, K) (:func:`sim.stimulus.minilm.linear_tensors`)."""
    from sim.stimulus.minilm import linear_tensors

    return linear_tensors(sentences)


def stimulus_tensors(stimulus, seed=0):
    """``[(name, X (M, K), W (N, K))]`` float32 tensors of a stimulus (:data:`STIMULI`)."""
    if stimulus == "minilm":
        return minilm_tensors()
    if stimulus not in STIMULI:
        raise ValueError(f"unknown stimulus {stimulus!r}; choose from {', '.join(STIMULI)}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    w = rng.standard_normal((64, 1024)).astype(np.float32)
    if stimulus == "zero-heavy":
        x[rng.random(x.shape) < ZERO_SHARE] = 0
    return [(stimulus, x, w)]


def gemm_stream(unit, residual, tensors, steps, seed=0):
    """A stream of about ``steps`` steps: (row of X, row of W) pairs drawn at random, each
    one K-loop (``first`` on its first step, ``last`` on its last), the tensors taking equal
    shares of pairs in turn until ``steps`` is reached.

    Returns ``(stream, info)``; ``info["zero_share"]`` is the share of activation elements
    (main operand) that are zero codes after quantization.
    """
    from sim.formats import quantize
    from sim.formats.resq import resq
    from sim.stimulus import concat
    from sim.stimulus.gemm import operand_steps, pair_stream, residual_steps

    fmt = unit_spec(unit).fmt
    rng = np.random.default_rng(seed)
    prepared = []
    for name, x, w in tensors:
        k = x.shape[1]
        if k % STEP_ELEMS or w.shape[1] != k:
            raise ValueError(f"{name}: K = {k} must be a multiple of {STEP_ELEMS} and W's")
        ks = k // STEP_ELEMS
        if residual == "none":
            a, r = quantize(x, fmt, axis=1), None
        else:
            rq = resq(x, fmt, residual, axis=1)
            a, r = rq.main, rq
        wq = quantize(w, fmt, axis=1)
        a_steps = operand_steps(a, unit, ks)
        w_steps = operand_steps(wq, unit, ks)
        r_steps = None if r is None else residual_steps(r, unit, residual, a, ks)
        prepared.append((x.shape[0], w.shape[0], ks, a_steps, w_steps, r_steps))
    parts, total, i = [], 0, 0
    while total < steps:
        m, n, ks, a_steps, w_steps, r_steps = prepared[i % len(prepared)]
        sel_a = [int(rng.integers(m))]
        sel_w = [int(rng.integers(n))]
        parts.append(pair_stream(a_steps, w_steps, r_steps, sel_a, sel_w, ks))
        total += ks
        i += 1
    stream = concat(parts)
    elem = stream["a"]["elem"]
    mag = elem & 0x7                                   # E2M1 / S1P2 magnitude bits
    return stream, {"steps": len(stream["first"]), "zero_share": float((mag == 0).mean())}


def stimulus_stream(stimulus, unit, residual, steps=DEFAULT_STEPS, seed=0, fmt=None):
    """:func:`gemm_stream` of :func:`stimulus_tensors`. A multi-format unit
    (``hif4spec.UnitSpec.formats``) runs one format's steps at a time: ``fmt``, one of its
    formats, whose own unit's stream (the residual where ``fmt`` takes the unit's) it takes
    with that format's code (:func:`sim.stimulus.multi.wrap`); a single-format unit takes
    None or its own format."""
    spec = unit_spec(unit)
    tensors = stimulus_tensors(stimulus, seed)
    if not spec.formats:
        if fmt not in (None, spec.fmt):
            raise ValueError(f"{unit} runs {spec.fmt} steps, not {fmt}")
        return gemm_stream(unit, residual, tensors, steps, seed)
    if fmt not in spec.formats:
        raise ValueError(f"{unit} runs one format's steps at a time: give fmt, one of "
                         f"{', '.join(spec.formats)}")
    from sim.stimulus import multi

    stream, info = gemm_stream(multi.single_unit(fmt), multi.part_residual(fmt, residual),
                               tensors, steps, seed)
    return multi.wrap(unit, fmt, stream), info


# ---------------------------------------------------------------------------------------
# Driving the netlist


def stream_vectors(manifest, stream, *, reset=RESET_CYCLES, drain=None):
    """Per-cycle input vectors of a stream and the cycles it should take.

    The steps follow the manifest's timing with ``valid`` always high and ``o.ready`` always
    high (:class:`sim.cyclesim.UnitTiming`): step i is presented from the cycle after step
    i-1's transfer until its own. Returns ``(values, cycles, plan)``: ``values`` for
    :func:`sim.cost.activity.pack_vectors`, ``plan`` with ``start`` (first stream cycle),
    ``in_cycles`` / ``out_cycles`` (harness cycles at whose end the unit transfers).
    """
    from sim.stimulus import interleave

    unit, residual = manifest["unit"], manifest["parameters"]["residual"]
    payload = interleave.stream_module(unit, stream).pack_payloads(manifest, unit, residual,
                                                                   stream)
    acc_id = stream["acc_id"] if interleave.is_interleaved(stream) else None
    return payload_vectors(manifest, payload, stream["last"], reset=reset, drain=drain,
                           acc_id=acc_id)


def payload_vectors(manifest, payload, last, *, reset=RESET_CYCLES, drain=None, acc_id=None):
    """:func:`stream_vectors` of an already packed payload (``payload[i]`` the bytes of step
    or beat i, ``last[i]`` its ``last`` flag, ``acc_id[i]`` its accumulator in a unit with
    a ring)."""
    from sim.cyclesim import UnitTiming

    timing = UnitTiming.from_manifest(manifest)
    run = timing.run([bool(x) for x in last],
                     acc_id=None if acc_id is None else [int(j) for j in acc_id])
    ins = np.asarray(run.in_cycles, dtype=np.int64)
    outs = np.asarray(run.out_cycles, dtype=np.int64)
    n = len(ins)
    span = int(ins[-1]) + 1 if n else 0
    drain = drain if drain is not None else int(outs[-1]) - span + 4 if len(outs) else 4
    cycles = reset + span + drain
    present = np.searchsorted(ins, np.arange(span), side="left")      # step held per cycle
    pay = np.zeros((cycles, payload.shape[1]), dtype=np.uint8)
    pay[reset:reset + span] = payload[present]
    if n:
        pay[reset + span:] = payload[-1]
    valid = np.zeros(cycles, dtype=np.uint8)
    valid[reset:reset + span] = 1
    rst = np.zeros(cycles, dtype=np.uint8)
    rst[:reset] = 1
    values = {"rst": rst, "i__valid": valid, "i__payload": pay,
              "o__ready": np.ones(cycles, dtype=np.uint8)}
    return values, cycles, {"start": reset, "span": span, "in_cycles": reset + ins,
                            "out_cycles": reset + outs}


#: How the toggles are counted: "numpy" (:class:`sim.cost.activity.GateSim`, the default)
#: or "verilator" (toggle coverage of the Verilated netlist; exact on netlists without a
#: combinational loop, see ``docs/energy.md``).
ENGINES = ("numpy", "verilator")


def run_streams(netlist, manifest, streams, *, skips=None, engine="numpy", build_root=None):
    """Simulate each stream on the netlist, check it, and return its toggles.

    Each window counts the rising edges from the cycle step ``skip`` (default 0) is
    presented to the cycle of the last step's input transfer. The output words must equal
    the golden model's, at the cycles the manifest's timing gives, and the unit must accept
    every step when the timing says (:class:`EnergyError` otherwise). The numpy engine runs
    the streams side by side.

    Returns ``[(activity, plan)]`` (:class:`sim.cost.activity.Activity`, the plan of
    :func:`stream_vectors`).
    """
    from sim.stimulus import manifest_accum
    from sim.stimulus.interleave import stream_module

    from . import activity as act

    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    unit, residual = manifest["unit"], manifest["parameters"]["residual"]
    skips = skips or [0] * len(streams)
    runs, checks = [], []
    for stream, skip in zip(streams, skips):
        expected, _ = stream_module(unit, stream).expected_words(unit, residual, stream,
                                                                 **manifest_accum(manifest))
        values, cycles, plan = stream_vectors(manifest, stream)
        ins = plan["in_cycles"]
        first = int(ins[skip - 1]) + 1 if skip else plan["start"]
        runs.append((values, cycles, (first, plan["start"] + plan["span"])))
        checks.append((expected, plan))
    ports = act.module_ports(netlist.verilog.read_text(), netlist.top)
    if engine == "numpy":
        activities = act.simulate_gates(gate_sim(netlist), ports, runs)
    else:
        kwargs = {} if build_root is None else {"build_root": build_root}
        folder, ports = act.build(netlist.verilog, netlist.top, **kwargs)
        activities = [act.simulate(folder, ports, *run) for run in runs]
    for activity, (expected, plan) in zip(activities, checks):
        _check(manifest, activity, expected, plan)
    return [(a, plan) for a, (_, plan) in zip(activities, checks)]


def run_stream(netlist, manifest, stream, *, skip=0, engine="numpy", build_root=None):
    """:func:`run_streams` of one stream."""
    return run_streams(netlist, manifest, [stream], skips=[skip], engine=engine,
                       build_root=build_root)[0]


_GATE_SIMS = {}


def gate_sim(netlist):
    """The :class:`sim.cost.activity.GateSim` of a netlist (kept for the process)."""
    from .activity import GateSim

    key = str(netlist.verilog)
    if key not in _GATE_SIMS:
        _GATE_SIMS[key] = GateSim(netlist.json(), netlist.top)
    return _GATE_SIMS[key]


def _check(manifest, activity, expected, plan):
    o = activity.outputs
    valid = o["o__valid"][:, 0].astype(bool)
    words = o["o__payload"][valid, 0]
    out_at = np.flatnonzero(valid)
    module = manifest["module"]
    if len(words) != len(expected) or not np.array_equal(words, expected):
        bad = next((i for i in range(min(len(words), len(expected)))
                    if words[i] != expected[i]), min(len(words), len(expected)))
        raise EnergyError(f"{module} netlist: output {bad} is "
                          f"{'missing' if bad >= len(words) else hex(int(words[bad]))}, the "
                          f"golden model gives "
                          f"{'none' if bad >= len(expected) else hex(int(expected[bad]))}")
    if not np.array_equal(out_at, plan["out_cycles"]):
        raise EnergyError(f"{module} netlist: outputs at cycles {out_at[:5].tolist()}..., the "
                          f"manifest's timing gives {plan['out_cycles'][:5].tolist()}...")
    ready = o["i__ready"][:, 0].astype(bool)
    lo, hi = plan["start"], plan["start"] + plan["span"]
    accepted = np.flatnonzero(ready[lo:hi]) + lo
    if not np.array_equal(accepted, plan["in_cycles"]):
        raise EnergyError(f"{module} netlist: accepts steps at cycles "
                          f"{accepted[:5].tolist()}..., the manifest's timing gives "
                          f"{plan['in_cycles'][:5].tolist()}...")


def energy_from_toggles(loads, toggles, cycles, macs):
    """The energy figures of a window from the netlist's loads and the toggles counted.

    Every net of ``loads`` must have a count (all its aliases the same one). Returns a dict
    of per-MAC figures in NAND2-input toggles: ``data``, ``inputs`` (the share of ``data``
    on the unit's input port nets), ``clock``, ``total``, ``ff_share`` (clock / total), and
    the raw ``toggles`` (data nets, unweighted) and ``cycles``.
    """
    data = inputs = raw = 0
    in_ports = set(loads["inputs"])
    for name, (load, aliases) in loads["nets"].items():
        counts = {toggles.get(a) for a in aliases}
        if None in counts:
            missing = next(a for a in aliases if a not in toggles)
            raise EnergyError(f"no toggle count for net {missing}")
        if len(counts) != 1:
            raise EnergyError(f"aliases of net {name} toggled differently: {sorted(counts)}")
        t = counts.pop()
        raw += t
        data += t * load
        if any(a in in_ports for a in aliases):
            inputs += t * load
    clock = FF_CLOCK_LOAD * loads["flip_flops"] * cycles
    total = data + clock
    return {"data": data / macs, "inputs": inputs / macs, "clock": clock / macs,
            "total": total / macs, "ff_share": clock / total if total else 0.0,
            "toggles": raw, "cycles": cycles, "macs": macs}


# ---------------------------------------------------------------------------------------
# The comparison


def measure(verilog, manifest, stimuli=STIMULI, *, steps=DEFAULT_STEPS, seed=0,
            synth_backend=None, progress=None, build_root=None, engine="numpy"):
    """``{stimulus: figures}`` of one module: its netlist (:func:`sim.cost.netlist.
    export_netlist`, cached) simulated on each stimulus stream, the words checked. The
    figures carry the netlist's transistor count and, where the synthesis table holds the
    module, the table's (``table_transistors``; the netlist flow differs from the table's in
    where flip-flops are legalized, :mod:`sim.cost.netlist`).

    ``progress(stimulus)`` is called as each stimulus stream is made (the streams are then
    simulated together, by ``engine``, see :data:`ENGINES`). ``build_root`` (default the
    repository's ``build/``) holds the netlist cache (``netlist/``) and, for
    ``engine="verilator"``, the Verilator builds
    (``energy/``).
    """
    from .netlist import export_netlist
    from .table import lookup

    extra = {}
    if build_root is not None:
        extra["cache_dir"] = Path(build_root) / "netlist"
    net = export_netlist(verilog, manifest["module"], backend=synth_backend, **extra)
    entry = lookup(Path(verilog).read_text())
    energy_root = None if build_root is None else Path(build_root) / "energy"
    unit, residual = manifest["unit"], manifest["parameters"]["residual"]
    made = []
    for stim in stimuli:
        if progress:
            progress(stim)
        made.append(stimulus_stream(stim, unit, residual, steps, seed))
    results = run_streams(net, manifest, [s for s, _ in made], engine=engine,
                          build_root=energy_root)
    out = {}
    for stim, (stream, info), (activity, _) in zip(stimuli, made, results):
        n = len(stream["first"])
        e = energy_from_toggles(net.loads, activity.toggles, activity.cycles, n * STEP_ELEMS)
        out[stim] = {
            "steps": n, "checked_words": int(np.count_nonzero(stream["last"])),
            "zero_share": info["zero_share"],
            "energy_per_mac": e["total"], "data_per_mac": e["data"],
            "inputs_per_mac": e["inputs"], "clock_per_mac": e["clock"],
            "ff_share": e["ff_share"], "toggles_per_step": e["toggles"] / n,
            "cycles": e["cycles"], "flip_flops": net.loads["flip_flops"],
            "gates": sum(c for k, c in net.loads["cells"].items() if k != "$_DFF_P_"),
            "transistors": net.synth.transistors,
            "table_transistors": entry["transistors"] if entry else None,
        }
    return out


def energy_selection(units, residuals, *, stages=None, lanes=None, accum=None, rtl_dir=None,
                     manifests=None):
    """The modules ``hif4 estimate --energy`` measures: ``(chosen, bases, todo)``.

    ``chosen`` is the ``(verilog_path, manifest)`` of each (unit, residual) pair of the
    dot-product units among ``units`` (encoders are left out), picked as ``hif4 estimate``
    picks them (:func:`sim.cost.estimate.select_manifest`, with ``accum`` as
    :func:`sim.cost.estimate.estimate_rows` takes it) from ``manifests`` (default: those
    of ``rtl_dir``, default ``rtl_out/``); ``bases`` maps ``(fmt, stages, lanes)``, ``fmt``
    one of :data:`sim.cost.estimate.RATIO_FORMATS`, to the module of that format's dot unit
    (:func:`sim.cost.estimate.ratio_unit`) without residual at the same stages and lanes,
    for the ratio columns (None when that module is not there); ``todo`` is every module to measure,
    once each. Raises ``LookupError`` when nothing is left to measure."""
    from hif4spec import residuals_of

    from . import estimate as est

    rtl_dir = Path(rtl_dir) if rtl_dir is not None else est.RTL_DIR
    if manifests is None:
        manifests = est.find_manifests(rtl_dir)
    units = [u for u in units if unit_spec(u).kind == "dot"]
    if not units:
        raise LookupError("energy is measured on dot-product units; the selection has none")
    wanted = [(u, r) for u in units for r in residuals if r in residuals_of(u)]
    if not wanted:
        raise LookupError("no configuration left: no unit given accepts the residual modes "
                          "given")
    chosen = [est.select_manifest(manifests, u, r, stages, lanes, est.accum_for(u, accum, r),
                                  where=rtl_dir) for u, r in wanted]
    todo = {m["module"]: (v, m) for v, m in chosen}
    bases = {}
    for _, man in chosen:
        par = man["parameters"]
        for fmt in est.RATIO_FORMATS:
            key = (fmt, par["stages"], par["lanes"])
            name = est.ratio_unit(man["unit"], fmt)
            if key not in bases:
                try:
                    bases[key] = None if name is None else est.select_manifest(
                        manifests, name, "none", *key[1:], est.accum_for(name, accum, "none"))
                except LookupError:
                    bases[key] = None
            if bases[key] is not None:
                todo.setdefault(bases[key][1]["module"], bases[key])
    return chosen, bases, list(todo.values())


def comparison_rows(chosen, bases, measured, stimuli=STIMULI):
    """One dict per chosen module (:func:`energy_selection`) and stimulus: the figures of
    :func:`measure` (``measured``: ``{module: {stimulus: figures}}``) and the ratio
    columns ``vs_mxfp4`` / ``vs_nvfp4`` (total energy per MAC on the same stimulus, None
    where that module is not there)."""
    from .estimate import RATIO_FORMATS

    rows = []
    for _, manifest in chosen:
        par = manifest["parameters"]
        for stim in stimuli:
            r = {"unit": manifest["unit"], "residual": par["residual"],
                 "module": manifest["module"], "stages": par["stages"], "lanes": par["lanes"],
                 "stimulus": stim, **measured[manifest["module"]][stim]}
            for fmt in RATIO_FORMATS:
                sel = bases[fmt, par["stages"], par["lanes"]]
                b = measured[sel[1]["module"]][stim] if sel else None
                r[f"vs_{fmt}"] = r["energy_per_mac"] / b["energy_per_mac"] if b else None
            rows.append(r)
    return rows


def format_table(rows):
    """A plain-text table of :func:`comparison_rows`."""
    head = ["unit", "residual", "stimulus", "zeros", "energy/MAC", "data/MAC", "clock/MAC",
            "FF share", "vs MXFP4", "vs NVFP4"]

    def f(x, spec):
        return "-" if x is None else format(x, spec)

    lines = [[r["unit"], r["residual"], r["stimulus"], f(r["zero_share"], ".1%"),
              f(r["energy_per_mac"], ".1f"), f(r["data_per_mac"], ".1f"),
              f(r["clock_per_mac"], ".1f"), f(r["ff_share"], ".1%"),
              f(r["vs_mxfp4"], ".2f"), f(r["vs_nvfp4"], ".2f")] for r in rows]
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in lines]
    out.append("energy = NAND2-input toggle equivalents per MAC (gate-level netlist, zero "
               "delay); zeros = activation codes that are zero; vs = energy per MAC ratio")
    return "\n".join(out)


def plot_rows(rows, path=None):
    """PNG bytes: energy per MAC (data and clock stacked) per configuration, one group of
    bars per stimulus."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stimuli = list(dict.fromkeys(r["stimulus"] for r in rows))
    configs = list(dict.fromkeys((r["unit"], r["residual"]) for r in rows))
    by = {(r["unit"], r["residual"], r["stimulus"]): r for r in rows}
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(configs) * len(stimuli) / 2), 4))
    width = 0.8 / len(stimuli)
    for j, stim in enumerate(stimuli):
        xs = [i + (j - (len(stimuli) - 1) / 2) * width for i in range(len(configs))]
        data = [by[u, r, stim]["data_per_mac"] if (u, r, stim) in by else math.nan
                for u, r in configs]
        clock = [by[u, r, stim]["clock_per_mac"] if (u, r, stim) in by else math.nan
                 for u, r in configs]
        bars = ax.bar(xs, data, width=width, label=f"{stim}: data")
        ax.bar(xs, clock, width=width, bottom=data, color=bars.patches[0].get_facecolor(),
               alpha=0.45, hatch="//", label=f"{stim}: flip-flop clock")
    ax.set_xticks(range(len(configs)), [f"{u}\n{r}" for u, r in configs])
    ax.set_ylabel("NAND2-input toggles per MAC")
    ax.set_title("Dynamic energy per MAC (gate-level toggles x load)")
    ax.legend(fontsize=7, ncol=len(stimuli))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
