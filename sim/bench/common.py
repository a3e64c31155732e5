"""What both engines share (:mod:`sim.bench.runner`'s cocotb bench and
:mod:`sim.bench.fast`'s harness): the simulator error, the build lock and the byte form of
output words."""

import contextlib
import fcntl

import numpy as np

__all__ = ["SimulatorError", "locked", "output_bytes"]


class SimulatorError(RuntimeError):
    """A simulator build or run that failed; the message names its log file."""


@contextlib.contextmanager
def locked(path):
    """An exclusive lock file (parallel test workers share build folders)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def output_bytes(words):
    """Expected output words (ints of any width) as uint8 (n, bytes), little-endian, as the
    bench job carries them; at least 4 bytes a word."""
    words = [int(w) for w in words]
    size = max([4] + [-(-w.bit_length() // 8) for w in words])
    raw = b"".join(w.to_bytes(size, "little") for w in words)
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(words), size)
