"""The default suite's Verilator coverage: every configuration class, simulated once.

For every configuration of ``CI_CONFIGS`` (every (unit, residual) pair of the registry,
every stage count, every accumulator back end) one stream goes through the unit on the fast
harness (:mod:`sim.bench.fast`), which records the cycle of every input and output
transfer: the named cases (the hand-checked ones with their hand-derived words among them),
random K-loops, then short K-loops (1-6 steps, so outputs and their ready stalls are
frequent). The stall pattern leaves the first :data:`STEADY` steps alone (``i.valid`` offered
back to back, ``o.ready`` high) and draws random valid gaps and ready stalls after them.
That one run is checked three ways, one module-scoped fixture per configuration:

- every output word is the golden model's, which must itself give the hand-derived words;
- the stall-free stretch pins the manifest's ``ii`` and ``latency`` (steps transfer every
  ``ii`` cycles, each output comes exactly ``latency`` cycles after its last step);
- the cycle-level model (:class:`sim.cyclesim.UnitTiming`, built from the manifest alone)
  gives the same cycle for every input and output transfer, stalls included.

Longer runs and the full grid are marked slow (``test_bench_hif4.py``,
``test_bench_mxnv.py``, ``test_cyclesim_rtl.py``); the cocotb bench runs a dot unit in
``test_bench_hif4.py`` and an encoder in ``test_encoder_unit.py``.
"""

import numpy as np
import pytest
from conftest import CI_CONFIGS, CI_IDS

from hif4spec import STAGES, accums_of, module_name, units_of_kind
from sim.bench.fast import build_harness, run_fast, stall_pattern
from sim.bench.runner import REPO, generate_cached, make_stream, unit_vectors
from sim.cyclesim import Stimulus, UnitTiming
from sim.stimulus import (concat, named_cases, payload_offsets, random_stream,
                          short_loops)

#: Random steps in K-loops of 1..64 steps, after the named cases.
RANDOM_STEPS = 600
#: Random steps in K-loops of 1..6 steps, at the end.
SHORT_STEPS = 150
#: Steps at the start with no stall on either side.
STEADY = 200


def test_configs_cover_every_pair_stage_count_and_back_end():
    pairs = [(u.name, r) for u in units_of_kind("dot") for r in u.residuals]
    assert {(u, r) for u, r, *_ in CI_CONFIGS} == set(pairs)
    assert {s for _, _, s, _, _ in CI_CONFIGS} == set(STAGES)
    backends = {(u.name, a) for u in units_of_kind("dot") for a in u.accums}
    assert {(u, a) for u, _, _, _, a in CI_CONFIGS} == backends
    assert all(a in accums_of(u, r) for u, r, _, _, a in CI_CONFIGS)


@pytest.fixture(scope="module", params=CI_CONFIGS, ids=CI_IDS)
def run(request):
    """One recorded run of a configuration: the harness's result with ``in_cycles``,
    ``out_cycles`` and ``words``, plus the manifest, stream, golden words, the step each
    follows (``out_steps``) and the stall pattern (``gaps``, ``ready``)."""
    unit, residual, stages, lanes, accum = request.param
    params = {"residual": residual, "stages": stages, "lanes": lanes, "accum": accum}
    module = module_name(unit, **params)
    verilog, manifest = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    binary = build_harness(verilog, manifest)

    seed = 7 * stages + lanes
    named = sum(len(s["first"]) for _, s in named_cases(unit, residual))
    rng = np.random.default_rng(seed + 1)
    short = random_stream(unit, residual, SHORT_STEPS, rng)
    short["first"], short["last"] = short_loops(SHORT_STEPS, rng)
    stream = concat([make_stream(unit, residual, named + RANDOM_STEPS, seed), short])
    payload, expected, out_steps = unit_vectors(unit, residual, manifest, stream)

    ii, latency = manifest["ii"], manifest["latency"]
    gaps, ready = stall_pattern(len(payload), seed, 0.8, 0.7, ii=ii)
    gaps[:STEADY] = 0
    ready[:STEADY * ii + latency + 64] = True       # past the last stall-free output
    result = run_fast(binary, manifest, payload, expected, out_steps, gaps, ready,
                      stop_on_mismatch=False, record=True)
    result.update(unit=unit, residual=residual, manifest=manifest, stream=stream,
                  expected=np.asarray(expected), out_steps=np.asarray(out_steps),
                  gaps=gaps, ready=ready)
    return result


def test_every_word_is_the_golden_models(run):
    manifest = run["manifest"]
    steps = len(run["stream"]["first"])
    assert not run["timeout"], run
    assert run["mismatches"] == 0, run["first_mismatch"]
    assert run["transferred"] == run["steps"] == steps
    assert run["checked"] == run["outputs"] == len(run["expected"]) > steps // 10
    words = [int.from_bytes(w.tobytes(), "little") for w in run["words"]]
    assert words == [int(w) for w in run["expected"]]
    assert manifest["payload"] == payload_offsets(run["unit"], run["residual"])
    assert run["early_output"] is None
    assert run["latency_min"] >= manifest["latency"]


def test_stall_free_stretch_pins_ii_and_latency(run):
    ii, latency = run["manifest"]["ii"], run["manifest"]["latency"]
    ins, outs, out_steps = run["in_cycles"], run["out_cycles"], run["out_steps"]
    assert np.all(np.diff(ins[:STEADY]) == ii)
    steady = out_steps < STEADY
    assert steady.sum() > STEADY // 10
    assert np.all(outs[steady] - ins[out_steps[steady]] == latency)
    # so n back-to-back steps end within (n - 1) * ii + latency cycles of the first
    last = np.flatnonzero(steady)[-1]
    assert outs[last] - ins[0] == out_steps[last] * ii + latency


def test_cycle_model_gives_every_transfer_cycle(run):
    manifest = run["manifest"]
    timing = UnitTiming.from_manifest(manifest)
    assert (timing.ii, timing.latency) == (manifest["ii"], manifest["latency"])
    model = timing.run([bool(x) for x in run["stream"]["last"]],
                       Stimulus(gaps=run["gaps"], ready=run["ready"]))
    assert np.array_equal(np.asarray(model.in_cycles), run["in_cycles"])
    assert np.array_equal(np.asarray(model.out_cycles), run["out_cycles"])
    # the pattern did stall both sides: a valid gap, and an output held by o.ready
    ins, outs, out_steps = run["in_cycles"], run["out_cycles"], run["out_steps"]
    assert np.diff(ins).max() > manifest["ii"]
    assert (outs - ins[out_steps]).max() > manifest["latency"]
