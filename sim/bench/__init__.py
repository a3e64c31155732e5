"""Verification of generated units, dot-product units and encoders, against the golden
model: a compiled Verilator harness (the fast engine) and a cocotb 2.x bench, both
format-generic, long soaks on the harness, and the cycle-model check.

Both engines read only the generated Verilog and its JSON manifest (``hwgen.manifest``):
the payload fields and their offsets, the output fields, ``ii`` and ``latency``; a dot
unit's steps are placed at the bit positions of their ``hif4spec`` step layouts, an
encoder's BF16 groups in its input beats, and the expected words come from the golden model
(all in :mod:`sim.stimulus`). A new unit needs no bench code, only a manifest.

Modules:

* :mod:`sim.bench.runner` — :func:`sim.bench.runner.verify` on either engine; the cocotb
  builds (``build/<sim>/<module>/``) and jobs.
* :mod:`sim.bench.fast` — the harness (``harness.cpp``): its builds (``build/fast/``), its
  vector files and runs.
* :mod:`sim.bench.soak` — soak chunks, shrinking a failure, replay files.
* :mod:`sim.bench.rtlcheck` — the cycle of every transfer of the Verilated unit (on the
  harness, with stalls) against :class:`sim.cyclesim.UnitTiming` from its manifest, and
  its words against the golden model.
* :mod:`sim.bench.components` — ``StreamDriver``, ``StreamMonitor``, ``Scoreboard``.
* :mod:`sim.bench.tb` — the cocotb test module (run inside the simulator).
* :mod:`sim.bench.common` — what the engines share.
"""
