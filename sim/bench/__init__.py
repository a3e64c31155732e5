"""Verification of generated units against the golden model: a compiled Verilator harness
and a cocotb 2.x bench, both format-generic.

Both read only the generated Verilog and its JSON manifest (``hwgen.manifest``): the
payload fields and their offsets, the output fields, ``ii`` and ``latency``; the steps are
placed at the bit positions of their ``hif4spec`` step layouts and the expected words come
from the golden model (all in :mod:`sim.stimulus`). A new unit needs no bench code, only a
manifest.

Modules:

* :mod:`sim.bench.runner` — :func:`sim.bench.runner.verify` on either engine; the cocotb
  builds (``build/<sim>/<module>/``) and jobs.
* :mod:`sim.bench.fast` — the harness (``harness.cpp``): its builds (``build/fast/``), its
  vector files and runs.
* :mod:`sim.bench.soak` — soak chunks, shrinking a failure, replay files.
* :mod:`sim.bench.components` — ``StreamDriver``, ``StreamMonitor``, ``Scoreboard``.
* :mod:`sim.bench.tb` — the cocotb test module (run inside the simulator).
* :mod:`sim.bench.common` — what the engines share.
"""
