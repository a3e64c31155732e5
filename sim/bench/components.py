"""Driver, monitor and scoreboard for a valid/ready unit (cocotb 2.x, no simulator import).

They are plain objects called once per clock cycle by the bench loop in :mod:`sim.bench.tb`
(one coroutine drives and samples everything: cheaper than one coroutine per component).
Each cycle: ``drive()`` sets inputs after the rising edge, ``sample()`` reads the settled
handshake in the ReadOnly phase before the next edge (a transfer happens at that edge).
"""

__all__ = ["StreamDriver", "StreamMonitor", "Scoreboard"]


class StreamDriver:
    """Presents payloads on ``i__valid``/``i__payload`` with random gaps.

    Follows ``lib.stream``'s source rules: once ``valid`` is high it stays high with the
    payload unchanged until the transfer. Between transfers ``valid`` is raised with
    probability ``valid_prob`` per cycle.
    """

    def __init__(self, dut, payloads, rng, valid_prob=1.0):
        self.dut = dut
        self.payloads = payloads
        self.rng = rng
        self.valid_prob = valid_prob
        self.index = 0                 # next payload to transfer
        self.valid = False
        self._driven = False
        self.transfer_cycles = []

    @property
    def done(self):
        return self.index >= len(self.payloads)

    def drive(self, cycle):
        if self.valid:
            return
        if self.done:
            if self._driven:
                self.dut.i__valid.value = 0
                self._driven = False
            return
        if self.valid_prob >= 1.0 or self.rng.random() < self.valid_prob:
            self.valid = True
            self.dut.i__payload.value = self.payloads[self.index]
            self.dut.i__valid.value = 1
        elif self._driven:
            self.dut.i__valid.value = 0
        self._driven = self.valid

    def sample(self, cycle):
        """Record a transfer if ``valid & ready`` are high now (settled, before the edge)."""
        if self.valid and int(self.dut.i__ready.value):
            self.transfer_cycles.append(cycle)
            self.index += 1
            self.valid = False
            return True
        return False


class StreamMonitor:
    """Drives ``o__ready`` (high with probability ``ready_prob``) and collects output words."""

    def __init__(self, dut, rng, ready_prob=1.0):
        self.dut = dut
        self.rng = rng
        self.ready_prob = ready_prob
        self.ready = False
        self.words = []
        self.cycles = []

    def drive(self, cycle):
        ready = self.ready_prob >= 1.0 or self.rng.random() < self.ready_prob
        if ready != self.ready:
            self.ready = ready
            self.dut.o__ready.value = int(ready)

    def sample(self, cycle):
        if self.ready and int(self.dut.o__valid.value):
            self.words.append(int(self.dut.o__payload.value))
            self.cycles.append(cycle)
            return self.words[-1]
        return None


class Scoreboard:
    """Compares each output word with the golden model's word for the next ``last`` step.

    Parameters
    ----------
    expected : sequence of int
        Expected words, one per ``last`` step, in order.
    steps : sequence of int
        The step index of each expected word (for mismatch reports).
    """

    def __init__(self, expected, steps):
        self.expected = list(expected)
        self.steps = list(steps)
        self.checked = 0
        self.mismatches = 0
        self.first_mismatch = None

    @property
    def done(self):
        return self.checked >= len(self.expected)

    def check(self, word):
        """Record one output word; return False on a mismatch (or an unexpected word)."""
        k = self.checked
        self.checked += 1
        if k >= len(self.expected):
            self.mismatches += 1
            self.first_mismatch = self.first_mismatch or {"output": k, "step": None,
                                                          "expected": None, "actual": word}
            return False
        if word != self.expected[k]:
            self.mismatches += 1
            if self.first_mismatch is None:
                self.first_mismatch = {"output": k, "step": self.steps[k],
                                       "expected": self.expected[k], "actual": word}
            return False
        return True
