"""cocotb test module run inside the simulator by :mod:`sim.bench.runner`.

The job (``HIF4_BENCH_JOB``, an ``.npz`` written by the runner) holds the packed payloads,
the expected words (little-endian bytes, any width: a dot unit's FP32 word, an encoder's
packed steps) and the stall probabilities; the result (``HIF4_BENCH_RESULT``) is a
JSON file with the counts, the first mismatch and the measured cycles. With
``HIF4_BENCH_PROGRESS`` set, the count of checked outputs is written to that file every
1000 cycles and at the end, for the runner's progress bar.
"""

import json
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from sim.bench.components import Scoreboard, StreamDriver, StreamMonitor


@cocotb.test()
async def run_job(dut):
    """Drive every step of the job, check every output word, write the result file."""
    job = np.load(os.environ["HIF4_BENCH_JOB"])
    result_path = os.environ["HIF4_BENCH_RESULT"]
    width = int(job["payload"].shape[1])
    raw = job["payload"].tobytes()
    payloads = [int.from_bytes(raw[k:k + width], "little") for k in range(0, len(raw), width)]
    expected = [int.from_bytes(row.tobytes(), "little") for row in job["expected"]]
    out_steps = [int(x) for x in job["out_steps"]]
    valid_prob, ready_prob = float(job["valid_prob"]), float(job["ready_prob"])
    stop = bool(job["stop_on_mismatch"])
    rng = random.Random(int(job["seed"]))
    progress = os.environ.get("HIF4_BENCH_PROGRESS")

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    edge = RisingEdge(dut.clk)
    await edge
    await edge
    dut.rst.value = 0

    driver = StreamDriver(dut, payloads, rng, valid_prob)
    monitor = StreamMonitor(dut, rng, ready_prob)
    scoreboard = Scoreboard(expected, out_steps)
    max_cycles = int(job["max_cycles"])
    cycle = 0
    timeout = False
    while not scoreboard.done:
        if cycle >= max_cycles:
            timeout = True
            break
        driver.drive(cycle)
        monitor.drive(cycle)
        await ReadOnly()
        driver.sample(cycle)
        word = monitor.sample(cycle)
        if word is not None and not scoreboard.check(word) and stop:
            break
        await edge
        cycle += 1
        if progress and cycle % 1000 == 0:
            with open(progress, "w") as handle:     # the runner's progress bar reads it
                handle.write(str(scoreboard.checked))

    if progress:
        with open(progress, "w") as handle:
            handle.write(str(scoreboard.checked))
    latencies = [monitor.cycles[k] - driver.transfer_cycles[s]
                 for k, s in enumerate(out_steps[:len(monitor.cycles)])
                 if s < len(driver.transfer_cycles)]
    result = {
        "steps": len(payloads),
        "transferred": driver.index,
        "outputs": len(expected),
        "checked": scoreboard.checked,
        "mismatches": scoreboard.mismatches,
        "first_mismatch": scoreboard.first_mismatch,
        "timeout": timeout,
        "cycles": cycle,
        "first_transfer_cycle": driver.transfer_cycles[0] if driver.transfer_cycles else None,
        "last_output_cycle": monitor.cycles[-1] if monitor.cycles else None,
        "latency_min": min(latencies) if latencies else None,
        "latency_max": max(latencies) if latencies else None,
        "transfer_gaps_max": max(np.diff(driver.transfer_cycles).tolist(), default=None),
    }
    with open(result_path, "w") as handle:
        json.dump(result, handle)
    assert not timeout, f"timeout after {cycle} cycles"
    assert scoreboard.mismatches == 0, f"mismatch: {scoreboard.first_mismatch}"
