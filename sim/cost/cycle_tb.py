"""cocotb test module: one unit run with an explicit stall pattern, every transfer recorded.

Run by :func:`sim.cost.rtlcheck.run_rtl_cycles` (never imported outside the simulator). It
reuses the shared bench's driver and monitor (:mod:`sim.bench.components`) with their random
decisions replaced by explicit patterns, so the cycle-level model can be given exactly the
same stimulus:

* step i is presented ``gaps[i]`` cycles after the cycle that follows step i-1's transfer
  (cycle 0 for step 0) and held until its transfer;
* ``o__ready`` is ``ready[c]`` in cycle c (high after the pattern ends).

Cycle 0 is the first cycle after reset. The job (``HIF4_CYCLES_JOB``, ``.npz``) holds the
payloads and patterns, optionally cut into segments (``segments``: steps per segment) that run
one after another with a reset in between and the same stall pattern each; the result
(``HIF4_CYCLES_RESULT``, JSON) lists per segment the input transfer cycles, the output
transfer cycles and the output words.
"""

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from sim.bench.components import StreamDriver, StreamMonitor


class PatternDriver(StreamDriver):
    """:class:`StreamDriver` whose valid gaps come from a list instead of random draws."""

    def __init__(self, dut, payloads, gaps):
        super().__init__(dut, payloads, rng=None, valid_prob=1.0)
        self.gaps = gaps
        self.ready_at = gaps[0] if gaps else 0

    def drive(self, cycle):
        if self.valid or self.done:
            return
        if cycle >= self.ready_at:
            self.valid = True
            self.dut.i__payload.value = self.payloads[self.index]
            self.dut.i__valid.value = 1
        elif self._driven:
            self.dut.i__valid.value = 0
        self._driven = self.valid

    def sample(self, cycle):
        moved = super().sample(cycle)
        if moved and not self.done:
            self.ready_at = cycle + 1 + self.gaps[self.index]
        return moved


class PatternMonitor(StreamMonitor):
    """:class:`StreamMonitor` whose ``o__ready`` follows a list (high after its end)."""

    def __init__(self, dut, ready):
        super().__init__(dut, rng=None, ready_prob=1.0)
        self.pattern = ready

    def drive(self, cycle):
        ready = bool(self.pattern[cycle]) if cycle < len(self.pattern) else True
        if ready != self.ready:
            self.ready = ready
            self.dut.o__ready.value = int(ready)


@cocotb.test()
async def run_cycles(dut):
    """Drive the job's steps with its stall pattern and record every transfer."""
    job = np.load(os.environ["HIF4_CYCLES_JOB"])
    width = int(job["payload"].shape[1])
    raw = job["payload"].tobytes()
    payloads = [int.from_bytes(raw[k:k + width], "little") for k in range(0, len(raw), width)]
    gaps = [int(x) for x in job["gaps"]]
    ready = [bool(x) for x in job["ready"]]
    seg_steps = [int(x) for x in job["segments"]]
    seg_outputs = [int(x) for x in job["outputs"]]
    max_cycles = int(job["max_cycles"])

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    edge = RisingEdge(dut.clk)
    results = []
    start = 0
    for steps, outputs in zip(seg_steps, seg_outputs):
        dut.rst.value = 1
        dut.i__valid.value = 0
        dut.o__ready.value = 0
        await edge
        await edge
        dut.rst.value = 0
        driver = PatternDriver(dut, payloads[start:start + steps], gaps)
        monitor = PatternMonitor(dut, ready)
        start += steps
        cycle = 0
        while len(monitor.words) < outputs and cycle < max_cycles:
            driver.drive(cycle)
            monitor.drive(cycle)
            await ReadOnly()
            driver.sample(cycle)
            monitor.sample(cycle)
            await edge
            cycle += 1
        results.append({"in_cycles": driver.transfer_cycles, "out_cycles": monitor.cycles,
                        "words": monitor.words, "cycles": cycle})
    with open(os.environ["HIF4_CYCLES_RESULT"], "w") as handle:
        json.dump(results, handle)
