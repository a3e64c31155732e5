"""Cycle-level simulator of the units (dot products, encoders) and of an R x C array of
dot-product units running a GEMM.

Unit model
----------
A generated unit is a chain of stream stages (``hwgen/stream.py``, ``hwgen/accum.py``)
listed, in order, in its manifest's ``timing.pipeline``. Their cycle behaviour is exact:

``comb``
    ``o.valid = i.valid``, ``i.ready = o.ready``; no cycle.
``register``
    ``i.ready = ~o.valid | o.ready``; loads on ``i.valid & i.ready``, ``o.valid`` is a flop.
``sequencer`` (``slices`` = n)
    Holds its input for n cycles: a counter advances on every edge where ``i.valid`` and it
    is below n - 1; at n - 1, ``o.valid = i.valid`` and ``i.ready = o.ready``.
``deserializer`` (``beats`` = n)
    Takes beats 0..n-2 of a group whenever they are valid (``i.ready`` high), registering
    them; at the group's last beat, ``o.valid = i.valid`` and ``i.ready = o.ready``, as in a
    ``comb`` stage. An encoder's steps are its beats: every n-th is a group's last.
``accumulator``
    A register whose ``o.valid`` becomes the step's ``last`` flag: a step without ``last``
    leaves no output and frees the stage at the next cycle.
``ring`` (``interleave`` = L, ``prep`` = P, :mod:`hwgen.ring`)
    L accumulators in a ring that moves on every cycle except those where ``o.valid`` is
    high and ``o.ready`` low. The m-th move (counting from 0 after reset) has turn
    ``(m + P) mod L``; a step naming accumulator ``j`` is taken at the first moving cycle,
    from the cycle it reaches the ring, whose turn is ``j``; a ``last`` step taken at move
    m raises ``o.valid`` in the cycle after move m + P + L - 1, and ``o.valid`` holds (the
    ring still) until ``o.ready``.

The model never steps cycle by cycle. It computes, step by step, the cycle at which each
step crosses every register boundary (a max-plus recurrence): the chain is cut at its
registers into segments; a segment moves step i at the first cycle X where

* step i is valid at the segment's input (the previous register loaded it at X' < X, or the
  driver presents it), plus ``n - 1`` cycles for every sequencer in the segment, and
* the register at the segment's end can take it: it has passed step i - 1 on (at a cycle
  <= X, the same cycle allowed because ``i.ready`` sees ``o.ready`` combinationally), and
* for the last segment, the output port's ``o.ready`` is high at X.

A beat that is not a group's last stops at the deserializer: it is taken at the first cycle
it is valid there, and leaves no output.

Cycle numbers count rising clock edges: a transfer "at cycle t" is sampled on edge t.

Input and output behaviour (the stall pattern) is given by a :class:`Stimulus`: a gap
before each step's ``valid`` (relative to the previous input transfer, or absolute
earliest cycles) and an ``o.ready`` pattern per cycle, exactly what the cocotb bench
drives.

Array model
-----------
:func:`simulate_gemm` runs an M x K x N GEMM on an R x C array of identical units in
lockstep (output stationary: unit (r, c) of tile (mt, nt) computes C[mt*R + r, nt*C + c]
over the K/64 steps). Every array step needs the step operands of the rows and columns in
use (and the residual blocks of the rows), fetched in order through a memory interface of
``bandwidth`` bytes per cycle into an operand buffer of ``buffer_steps`` array steps.
Results (4 bytes per output) leave through an output buffer of ``out_tiles`` tiles that
drains at the same bandwidth on the write channel (read and write channels are separate,
as in AXI). The outputs' values are the golden model's bit-true GEMM (:func:`sim.dot.gemm`).
"""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hif4spec import (FORMATS, RESIDUAL_MODES, STEP_ELEMS, UnitView, operand_layout,
                      residual_layout, unit_spec)

__all__ = [
    "UnitTiming", "Stimulus", "UnitRun", "GemmReport", "simulate_gemm", "step_bytes",
    "STEP_BYTES", "RESIDUAL_STEP_BYTES", "load_manifest",
]

#: Bytes of one 64-element step of one operand, per unit (``hif4spec.operand_layout``).
STEP_BYTES = UnitView("dot", lambda u: operand_layout(u.fmt).bytes)
#: Bytes of one step of the activation residual, per unit and residual mode it accepts
#: (``hif4spec.residual_layout``: a packed 2:4 residual step, or a second operand for
#: "dense"; 0 for "none").
RESIDUAL_STEP_BYTES = UnitView("dot", lambda u: {r: getattr(residual_layout(u.fmt, r),
                                                             "bytes", 0)
                                                  for r in u.residuals})
#: Bytes of the tensor scale per tensor, per unit: 4 (one FP32 word) where the format keeps
#: one (``"tensor_scale"`` in its options), else 0.
TENSOR_SCALE_BYTES = UnitView("dot", lambda u: 4 * ("tensor_scale" in FORMATS[u.fmt].options))


def step_bytes(fmt, residual="none"):
    """``(activation, weight, residual)`` bytes per step of one row/column of unit ``fmt``."""
    if fmt not in STEP_BYTES:
        raise ValueError(f"Format must be one of {', '.join(STEP_BYTES)}, not {fmt!r}")
    if residual not in RESIDUAL_MODES:
        raise ValueError(f"Residual must be one of {', '.join(RESIDUAL_MODES)}, "
                         f"not {residual!r}")
    if residual not in RESIDUAL_STEP_BYTES[fmt]:
        raise ValueError(f"{fmt} has no {residual} residual path")
    return STEP_BYTES[fmt], STEP_BYTES[fmt], RESIDUAL_STEP_BYTES[fmt][residual]


def load_manifest(path):
    """Read a unit manifest (``<module>.json``)."""
    return json.loads(Path(path).read_text())


_KINDS = ("comb", "register", "sequencer", "deserializer", "accumulator", "ring")


class UnitTiming:
    """Exact timing of one unit, built from its stage list.

    Parameters
    ----------
    pipeline : list of dict
        The manifest's ``timing.pipeline``: ``{"kind": "comb" | "register" | "sequencer" |
        "deserializer" | "accumulator" | "ring", "slices": n (sequencers), "beats": n
        (deserializers), "interleave": L (a ring)}``, input side first. At most one
        accumulator or ring, or one deserializer (with no sequencer before it between two
        registers); stages after an accumulator feed the output port, and none follow a
        ring.
    """

    def __init__(self, pipeline):
        pipeline = list(pipeline)
        if not pipeline:
            raise ValueError("A unit pipeline needs at least one stage")
        segments = []           # per register: (seq_offset, is_accumulator)
        offset = 0
        seen_acc = False
        self.beats, self.deser_seg = 1, None
        self.interleave, self.prep = 1, 0
        for stage in pipeline:
            kind = stage.get("kind")
            if seen_acc and self.interleave > 1:
                raise ValueError("No stage may follow a ring")
            if kind == "ring":
                ways = stage.get("interleave")
                if not isinstance(ways, int) or ways < 2:
                    raise ValueError(f"A ring interleaves 2 or more accumulators, not "
                                     f"{ways!r}")
                self.interleave = ways
                self.prep = int(stage.get("prep", 0))
                kind = "accumulator"
            if kind not in _KINDS:
                raise ValueError(f"Stage kind must be one of {', '.join(_KINDS)}, "
                                 f"not {kind!r}")
            if kind == "sequencer":
                slices = int(stage.get("slices", 1))
                if slices < 1:
                    raise ValueError(f"Sequencer slices must be >= 1, not {slices!r}")
                offset += slices - 1
            elif kind == "deserializer":
                beats = int(stage.get("beats", 1))
                if beats < 1:
                    raise ValueError(f"Deserializer beats must be >= 1, not {beats!r}")
                if self.deser_seg is not None or seen_acc:
                    raise ValueError("A unit pipeline has at most one deserializer, and none "
                                     "with an accumulator")
                if offset:
                    raise ValueError("A deserializer after a sequencer between two registers "
                                     "is not supported")
                if beats > 1:
                    self.beats, self.deser_seg = beats, len(segments)
            elif kind in ("register", "accumulator"):
                if kind == "accumulator" and self.deser_seg is not None:
                    raise ValueError("A unit pipeline has at most one deserializer, and none "
                                     "with an accumulator")
                if seen_acc and kind == "accumulator":
                    raise ValueError("A unit pipeline has at most one accumulator")
                if seen_acc:
                    raise ValueError("Registers after the accumulator are not supported")
                segments.append(offset)
                seen_acc = seen_acc or kind == "accumulator"
                offset = 0
        self.pipeline = pipeline
        self.has_accumulator = seen_acc
        self.seg_offsets = tuple(segments)
        self.out_offset = offset
        if self.out_offset and not seen_acc and not segments:
            pass

    @classmethod
    def from_manifest(cls, manifest):
        """Timing of the unit a manifest (dict or path) describes."""
        if not isinstance(manifest, dict):
            manifest = load_manifest(manifest)
        timing = manifest.get("timing") or {}
        pipeline = timing.get("pipeline")
        if not pipeline:
            raise ValueError(f"manifest of {manifest.get('module', '?')} has no "
                             "timing.pipeline list")
        return cls(pipeline)

    @property
    def ii(self):
        """Initiation interval with no stalls: cycles between input transfers (with a
        deserializer: cycles per group of ``beats`` transfers; with a ring: steps naming
        the accumulators in turn)."""
        offs = list(self.seg_offsets)
        if not offs:
            return self.beats * (1 + self.out_offset)
        return self.beats * max(o + 1 for o in offs)

    @property
    def latency(self):
        """Cycles from the input transfer of a ``last`` step (a group's last beat) to
        ``o.valid`` (output ready)."""
        offs = self.seg_offsets
        if not offs:
            return 0
        return (sum(1 + o for o in offs[1:]) + 1 + self.out_offset
                + (self.interleave - 1 + self.prep if self.interleave > 1 else 0))

    def run(self, last, stimulus=None, *, fast=True, acc_id=None):
        """Input and output transfer cycles for a step stream.

        Parameters
        ----------
        last : sequence of bool
            The ``last`` flag of each step (an output follows each such step when the chain
            ends in an accumulator; with a deserializer of n beats, the steps are beats and
            ``last`` must be set on every n-th, a group's last; every step gives one
            otherwise).
        stimulus : Stimulus, optional
            Valid gaps and the ready pattern; default: always valid, always ready.
        acc_id : sequence of int, optional
            With a ring, each step's accumulator (required there, refused elsewhere).

        Returns
        -------
        UnitRun
        """
        stim = stimulus or Stimulus()
        if (acc_id is None) != (self.interleave == 1):
            raise ValueError("a ring's steps need acc_id, and only a ring's take it"
                             if acc_id is None else "acc_id is for a unit with a ring")
        if self.interleave > 1:
            return _ring_run(self, last, stim, acc_id)
        if self.deser_seg is not None:
            beats = self.beats
            wrong = [i for i, flag in enumerate(last) if bool(flag) != (i % beats == beats - 1)]
            if wrong:
                raise ValueError(f"step {wrong[0]}: with a deserializer of {beats} beats, last "
                                 "is set exactly on every beat that ends a group")
        if fast and type(stim) is Stimulus and self.seg_offsets:
            res = _fast_run(self, last, stim)
            if res is not None:
                return res
        n = len(last)
        offs = self.seg_offsets
        nseg = len(offs)
        acc = self.has_accumulator
        out_off = self.out_offset
        dseg = self.deser_seg
        # leave[s]: cycle at which register s passed its previous step on (-1: empty).
        leave = [-1] * nseg
        in_cycles = [0] * n
        valid_cycles = [0] * n
        out_cycles = []
        prev_in = -1
        next_ready = stim.next_ready
        valid_from = stim.valid_from
        k = 0
        for i in range(n):
            v = valid_from(i, prev_in)
            valid_cycles[i] = v
            t = v
            xs = []
            if dseg is not None and not last[i]:
                # a beat that does not end a group stops at the deserializer, taken as soon
                # as it is valid there
                for s in range(dseg):
                    t = max(t + offs[s], leave[s])
                    xs.append(t)
                    t = t + 1
                for s in range(len(xs) - 1):
                    leave[s] = xs[s + 1]
                if xs:
                    leave[dseg - 1] = t
                in_cycles[i] = xs[0] if xs else t
                prev_in = in_cycles[i]
                continue
            for s in range(nseg):
                t = t + offs[s]
                if leave[s] > t:
                    t = leave[s]
                xs.append(t)
                t = t + 1
            if nseg == 0:
                t = t + out_off
                t = next_ready(k, t)
                xs_out = t
                out_cycles.append(t)
                k += 1
                in_cycles[i] = t
                prev_in = t
                continue
            in_cycles[i] = xs[0]
            prev_in = xs[0]
            # registers 0..nseg-2 are left when the next segment moves the step on
            for s in range(nseg - 1):
                leave[s] = xs[s + 1]
            x_last = xs[-1]
            if acc and not last[i]:
                leave[-1] = x_last + 1
            else:
                o = next_ready(k, x_last + 1 + out_off)
                out_cycles.append(o)
                leave[-1] = o
                k += 1
        return UnitRun(in_cycles, valid_cycles, out_cycles)


def _ring_run(timing, last, stim, acc_id):
    """:meth:`UnitTiming.run` of a unit ending in a ring (module docstring, ``ring``)."""
    from bisect import bisect_right

    L, P = timing.interleave, timing.prep
    if len(acc_id) != len(last) or any(not 0 <= int(j) < L for j in acc_id):
        raise ValueError(f"acc_id needs one accumulator of 0..{L - 1} per step")
    offs = timing.seg_offsets
    nseg = len(offs)
    leave = [-1] * nseg
    n = len(last)
    in_cycles, valid_cycles, out_cycles = [0] * n, [0] * n, []
    # The ring stands still in the cycles [start, end) of each output that is valid and not
    # yet taken; they come in order. held[i]: still cycles before starts[i].
    starts, ends, held = [], [], [0]

    def still_before(t):
        """``(still cycles before cycle t, the end of a still spell holding t or None)``."""
        i = bisect_right(starts, t) - 1
        if i < 0:
            return 0, None
        if t < ends[i]:
            return held[i] + t - starts[i], ends[i]
        return held[i + 1], None

    def moves_before(t):
        return t - still_before(t)[0]

    def cycle_of_move(m):
        """The cycle of move m (0-based): the moving cycle with m moves before it."""
        t = m
        while True:
            count, end = still_before(t)
            if end is not None:
                t = end
            elif t - count == m:
                return t
            else:
                t = m + count
    prev_in = -1
    k = 0
    for i in range(n):
        v = stim.valid_from(i, prev_in)
        valid_cycles[i] = v
        t = v
        xs = []
        for s in range(nseg):
            t = t + offs[s]
            if leave[s] > t:
                t = leave[s]
            if s == nseg - 1:       # the first moving cycle from t of the step's turn
                end = still_before(t)[1]
                if end is not None:
                    t = end
                m = moves_before(t)
                t = cycle_of_move(m + (int(acc_id[i]) - m - P) % L)
            xs.append(t)
            t = t + 1
        in_cycles[i] = prev_in = xs[0]
        for s in range(nseg - 1):
            leave[s] = xs[s + 1]
        x = xs[-1]
        leave[-1] = x + 1
        if last[i]:
            vo = cycle_of_move(moves_before(x) + P + L - 1) + 1 + timing.out_offset
            o = stim.next_ready(k, vo)
            out_cycles.append(o)
            if o > vo:
                starts.append(vo)
                ends.append(o)
                held.append(held[-1] + o - vo)
            k += 1
    return UnitRun(in_cycles, valid_cycles, out_cycles)


_C_SOURCE = r"""
/* The step recurrence of UnitTiming.run for a plain Stimulus (gaps, arrivals, ready). */
long run(long nseg, const long *offs, long acc, long out_off, long n,
         const unsigned char *last, const long *gaps, const long *arrivals, long start,
         const long *nxt, long nnext, long *in_c, long *valid_c, long *out_c, long *leave,
         long dseg)
{
    long prev_in = -1, k = 0;
    for (long s = 0; s < nseg; s++) leave[s] = -1;
    for (long i = 0; i < n; i++) {
        long v = prev_in + 1 > start ? prev_in + 1 : start;
        if (gaps) v += gaps[i];
        if (arrivals && arrivals[i] > v) v = arrivals[i];
        valid_c[i] = v;
        long t = v, x0 = 0, xprev = 0;
        if (dseg >= 0 && !last[i]) {   /* a beat that does not end a group */
            x0 = v;
            for (long s = 0; s < dseg; s++) {
                t += offs[s];
                if (leave[s] > t) t = leave[s];
                if (s == 0) x0 = t; else leave[s - 1] = t;
                t += 1;
            }
            if (dseg > 0) leave[dseg - 1] = t;
            in_c[i] = x0;
            prev_in = x0;
            continue;
        }
        for (long s = 0; s < nseg; s++) {
            t += offs[s];
            if (leave[s] > t) t = leave[s];
            if (s == 0) x0 = t; else leave[s - 1] = t;
            xprev = t;
            t += 1;
        }
        in_c[i] = x0;
        prev_in = x0;
        if (acc && !last[i]) {
            leave[nseg - 1] = xprev + 1;
        } else {
            long o = xprev + 1 + out_off;
            if (o < nnext) o = nxt[o];
            out_c[k++] = o;
            leave[nseg - 1] = o;
        }
    }
    return k;
}
"""
_C_LIB = []


def _load_c():
    """Compile (once, cached under build/cyclesim) and load the C recurrence; None if no C
    compiler is available (the pure-Python loop is used then)."""
    if _C_LIB:
        return _C_LIB[0]
    import ctypes
    import hashlib
    import shutil
    import subprocess
    import sysconfig

    lib = None
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc:
        key = hashlib.sha256(_C_SOURCE.encode()).hexdigest()[:16]
        folder = Path(__file__).resolve().parents[1] / "build" / "cyclesim"
        ext = sysconfig.get_config_var("SHLIB_SUFFIX") or ".so"
        so = folder / f"recurrence_{key}{ext}"
        try:
            if not so.exists():
                folder.mkdir(parents=True, exist_ok=True)
                src = folder / f"recurrence_{key}.c"
                src.write_text(_C_SOURCE)
                tmp = folder / f".{so.name}.{__import__('os').getpid()}"
                subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(src)],
                               check=True, capture_output=True, timeout=120)
                __import__("os").replace(tmp, so)
            lib = ctypes.CDLL(str(so))
            lib.run.restype = ctypes.c_long
        except (OSError, subprocess.SubprocessError):
            lib = None
    _C_LIB.append(lib)
    return lib


def _fast_run(timing, last, stim):
    lib = _load_c()
    if lib is None:
        return None
    import ctypes

    import numpy as np

    n = len(last)
    lng = ctypes.c_long
    i64 = np.int64 if ctypes.sizeof(lng) == 8 else np.int32

    def arr(x):
        return np.ascontiguousarray(x, dtype=i64)

    def ptr(a):
        return a.ctypes.data_as(ctypes.POINTER(lng))

    offs = arr(timing.seg_offsets)
    lastv = np.ascontiguousarray(np.asarray(last, dtype=bool), dtype=np.uint8)
    gaps = None
    if stim.gaps is not None:
        gaps = arr(stim.gaps)
        if len(gaps) < n:
            gaps = np.concatenate([gaps, np.zeros(n - len(gaps), dtype=i64)])
    arrivals = None
    if stim.arrivals is not None:
        arrivals = arr(stim.arrivals)
        if len(arrivals) < n:
            arrivals = np.concatenate([arrivals, np.full(n - len(arrivals), -1, dtype=i64)])
    nxt = arr(stim._next if stim._next is not None else [])
    nnext = max(len(nxt) - 1, 0)
    in_c = np.empty(n, dtype=i64)
    valid_c = np.empty(n, dtype=i64)
    out_c = np.empty(n, dtype=i64)
    leave = np.empty(len(offs), dtype=i64)
    k = lib.run(lng(len(offs)), ptr(offs), lng(int(timing.has_accumulator)),
                lng(timing.out_offset), lng(n),
                lastv.ctypes.data_as(ctypes.POINTER(ctypes.c_ubyte)),
                ptr(gaps) if gaps is not None else None,
                ptr(arrivals) if arrivals is not None else None, lng(stim.start),
                ptr(nxt) if nnext else None, lng(nnext), ptr(in_c), ptr(valid_c), ptr(out_c),
                ptr(leave), lng(-1 if timing.deser_seg is None else timing.deser_seg))
    return UnitRun(in_c, valid_c, out_c[:k])


class Stimulus:
    """Input valid gaps and output ready pattern, as the cocotb bench drives them.

    Parameters
    ----------
    gaps : sequence of int, optional
        ``gaps[i]`` cycles with ``valid`` low before step i is presented, counted from the
        cycle after step i-1's transfer (from cycle ``start`` for step 0). The driver then
        holds ``valid`` high until the transfer.
    arrivals : sequence of int, optional
        Absolute earliest cycle at which step i may be presented (operand availability);
        combined with ``gaps`` by taking the later cycle.
    ready : sequence of bool, optional
        ``o.ready`` at cycle t (high after the end of the sequence).
    start : int
        First cycle at which the driver may present a step.
    """

    def __init__(self, gaps=None, arrivals=None, ready=None, start=0):
        import numpy as np

        self.gaps = None if gaps is None else np.asarray(gaps, dtype=np.int64)
        self.arrivals = None if arrivals is None else np.asarray(arrivals, dtype=np.int64)
        self.start = start
        if ready is None:
            self._next = None
        else:
            ready = np.asarray(ready, dtype=bool)
            n = len(ready)
            idx = np.where(ready, np.arange(n, dtype=np.int64), n)
            nxt = np.minimum.accumulate(idx[::-1])[::-1] if n else idx
            self._next = np.append(nxt, n).astype(np.int64)
        self.ready = ready
        self._py = None

    def _lists(self):
        if self._py is None:
            self._py = (None if self.gaps is None else self.gaps.tolist(),
                        None if self.arrivals is None else self.arrivals.tolist(),
                        None if self._next is None else self._next.tolist())
        return self._py

    def valid_from(self, i, prev_in):
        gaps, arrivals, _ = self._lists()
        t = max(self.start, prev_in + 1)
        if gaps is not None and i < len(gaps):
            t += gaps[i]
        if arrivals is not None and i < len(arrivals):
            t = max(t, arrivals[i])
        return t

    def next_ready(self, k, t):
        nxt = self._lists()[2]
        if nxt is None or t >= len(nxt) - 1:
            return t
        return nxt[t]


@dataclass
class UnitRun:
    """Transfer cycles of one unit run: inputs (``in_cycles``), the first cycle each input
    was valid (``valid_cycles``) and outputs (``out_cycles``): lists of int, or int64 NumPy
    arrays from the compiled recurrence; compare with :meth:`same_cycles`."""

    in_cycles: list
    valid_cycles: list
    out_cycles: list

    def same_cycles(self, in_cycles, out_cycles):
        """Whether the input and output transfer cycles equal the given sequences."""
        import numpy as np

        return (np.array_equal(np.asarray(self.in_cycles), np.asarray(in_cycles))
                and np.array_equal(np.asarray(self.out_cycles), np.asarray(out_cycles)))


@dataclass
class GemmReport:
    """Result of :func:`simulate_gemm` (see :meth:`to_json` for the keys)."""

    unit: str
    residual: str
    gemm: tuple
    array: tuple
    bandwidth: float
    ii: int
    latency: int
    cycles: int
    array_steps: int
    unit_steps: int
    macs: int
    utilization: float
    bytes_read: dict
    bytes_written: int
    stall_cycles: dict
    output: object = field(default=None, repr=False)
    out_cycles: list = field(default=None, repr=False)
    run: object = field(default=None, repr=False)
    ready_gaps: list = field(default=None, repr=False)

    @property
    def bytes_moved(self):
        return sum(self.bytes_read.values()) + self.bytes_written

    def to_json(self):
        return {
            "unit": self.unit, "residual": self.residual, "gemm": list(self.gemm),
            "array": list(self.array), "bandwidth_bytes_per_cycle": self.bandwidth,
            "ii": self.ii, "latency": self.latency, "cycles": self.cycles,
            "array_steps": self.array_steps, "unit_steps": self.unit_steps,
            "macs": self.macs, "utilization": self.utilization,
            "bytes_read": dict(self.bytes_read), "bytes_written": self.bytes_written,
            "bytes_moved": self.bytes_moved,
            "bits_per_mac": 8 * self.bytes_moved / self.macs if self.macs else None,
            "stall_cycles": dict(self.stall_cycles),
        }


class _ArrayStimulus(Stimulus):
    """Operand fetch and result writeback of the array, computed as the run advances."""

    def __init__(self, need, bandwidth, buffer_steps, out_bytes, out_tiles):
        super().__init__()
        self.need = need                    # bytes per array step
        self.bw = float(bandwidth)
        self.depth = buffer_steps
        self.out_bytes = out_bytes          # bytes per output (tile) event
        self.out_tiles = out_tiles
        self.fetch_end = 0.0                # continuous time the fetch of step i-1 ended
        self.in_hist = []                   # input transfer cycle of each step
        self.arrivals_at = []
        self.wb_end = []                    # writeback end cycle of each output event
        self.ready_gaps = []                # [t0, t1): o.ready held low for an output

    def valid_from(self, i, prev_in):
        if prev_in >= 0:
            self.in_hist.append(prev_in)
        start = self.fetch_end
        if i >= self.depth:
            start = max(start, self.in_hist[i - self.depth] + 1)
        if math.isinf(self.bw):
            end = start
        else:
            end = start + self.need[i] / self.bw
        self.fetch_end = end
        arrive = math.ceil(end - 1e-9)
        self.arrivals_at.append(arrive)
        return max(prev_in + 1, arrive, 0)

    def next_ready(self, k, t):
        if k >= self.out_tiles and self.wb_end[k - self.out_tiles] > t:
            self.ready_gaps.append((t, self.wb_end[k - self.out_tiles]))
            t = self.wb_end[k - self.out_tiles]
        start = max(t + 1, self.wb_end[-1] if self.wb_end else 0)
        dur = 0 if math.isinf(self.bw) else math.ceil(self.out_bytes[k] / self.bw - 1e-9)
        self.wb_end.append(start + dur)
        return t


def simulate_gemm(unit, m, k, n, *, residual="none", array=(1, 1), bandwidth=math.inf,
                  timing=None, a=None, w=None, r=None, buffer_steps=2, out_tiles=2,
                  compute=True, seed=0):
    """Run an M x K x N GEMM on an R x C array of units.

    Parameters
    ----------
    unit : {"hif4", "mxfp4", "nvfp4"}
    m, k, n : int
        GEMM sizes: A is (M, K), W is (N, K); K is padded to whole 64-element steps.
    residual : {"none", "2:4", "dense"}
        Activation residual path (adds its blocks to the traffic and to the arithmetic).
    array : (int, int)
        R x C units.
    bandwidth : float
        Memory interface bytes per cycle (per direction); ``inf`` for no limit.
    timing : UnitTiming
        The unit's timing (from its manifest); default: a one-register front end and an
        accumulator (``ii`` 1, ``latency`` 1). A unit with a ring of L accumulators
        computes L tiles at a time: each unit holds L output elements, one per tile, and
        the array steps of the L tiles take turns (tile j's steps in accumulator j, as
        :func:`sim.stimulus.interleave.in_turn` orders them).
    a, w, r : QuantizedTensor / residual, optional
        Operands for the bit-true output; random Gaussian data when omitted (``seed``).
    buffer_steps : int
        Operand buffer depth in array steps.
    out_tiles : int
        Output buffer depth in tiles of results.
    compute : bool
        Compute the output values with :func:`sim.dot.gemm`.

    Returns
    -------
    GemmReport
    """
    for name, v in (("M", m), ("K", k), ("N", n)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"GEMM size {name} must be a positive integer, not {v!r}")
    rows, cols = array
    if rows < 1 or cols < 1:
        raise ValueError(f"Array size must be positive, not {rows} x {cols}")
    if not bandwidth > 0:
        raise ValueError(f"Bandwidth must be > 0 bytes per cycle, not {bandwidth!r}")
    accepted = RESIDUAL_STEP_BYTES.get(unit, {})
    if accepted and residual not in accepted:
        raise ValueError(f"{unit.upper()} units have no residual input {residual!r}; use "
                         f"residual {', '.join(map(repr, accepted))}")
    a_b, w_b, r_b = step_bytes(unit, residual)
    timing = timing or UnitTiming([{"kind": "register"}, {"kind": "accumulator"}])
    ksteps = -(-k // STEP_ELEMS)
    mt, nt = -(-m // rows), -(-n // cols)
    need, lasts, out_bytes, acc_id = [], [], [], []
    reads = {"a": 0, "w": 0, "r": 0, "tensor_scale": 0}
    tiles = [(min(rows, m - ti * rows), min(cols, n - tj * cols))
             for ti in range(mt) for tj in range(nt)]
    ways = timing.interleave
    for g in range(0, len(tiles), ways):
        group = tiles[g:g + ways]
        for ks in range(ksteps):
            for j, (ru, cu) in enumerate(group):
                need.append(ru * (a_b + r_b) + cu * w_b)
                lasts.append(ks == ksteps - 1)
                acc_id.append(j)
        for ru, cu in group:
            reads["a"] += ru * a_b * ksteps
            reads["w"] += cu * w_b * ksteps
            reads["r"] += ru * r_b * ksteps
            out_bytes.append(4 * ru * cu)
    if TENSOR_SCALE_BYTES[unit]:
        reads["tensor_scale"] = 2 * TENSOR_SCALE_BYTES[unit]
        need[0] += reads["tensor_scale"]
    if not reads["tensor_scale"]:
        del reads["tensor_scale"]
    if residual == "none":
        del reads["r"]
    stim = _ArrayStimulus(need, bandwidth, buffer_steps, out_bytes, out_tiles)
    run = timing.run(lasts, stim, acc_id=acc_id if ways > 1 else None)
    cycles = run.out_cycles[-1] + 1
    ii = timing.ii
    stalls = {"memory": 0, "backpressure": 0, "drain": 0}
    busy = 0
    prev = -1
    for i, x in enumerate(run.in_cycles):
        span = x - prev
        mem = max(0, run.valid_cycles[i] - (prev + 1))
        b = min(ii, span - mem)
        stalls["memory"] += mem
        busy += b
        stalls["backpressure"] += span - mem - b
        prev = x
    stalls["drain"] = cycles - 1 - prev
    unit_steps = sum(min(rows, m - ti * rows) * min(cols, n - tj * cols)
                     for ti in range(mt) for tj in range(nt)) * ksteps
    macs = m * n * k
    util = (m * n * ksteps) / (cycles * rows * cols / ii) if cycles else 0.0
    output = None
    if compute:
        output = _bit_true(unit, residual, m, k, n, a, w, r, seed)
    return GemmReport(
        unit=unit, residual=residual, gemm=(m, k, n), array=(rows, cols),
        bandwidth=bandwidth, ii=ii, latency=timing.latency, cycles=cycles,
        array_steps=len(lasts), unit_steps=unit_steps, macs=macs, utilization=util,
        bytes_read=reads, bytes_written=4 * m * n, stall_cycles=stalls, output=output,
        out_cycles=run.out_cycles, run=run, ready_gaps=stim.ready_gaps)


def _bit_true(unit, residual, m, k, n, a, w, r, seed):
    import numpy as np

    from sim import dot
    from sim.formats import quantize

    from sim.stimulus.gemm import residual_of

    fmt = unit_spec(unit).fmt
    rng = np.random.default_rng(seed)
    if a is None:
        x = rng.standard_normal((m, k)).astype(np.float32)
        a = quantize(x, fmt, axis=1)
        if residual != "none" and r is None:
            r = residual_of(x, unit, residual)
    if w is None:
        w = quantize(rng.standard_normal((n, k)).astype(np.float32), fmt, axis=1)
    return dot.gemm(a, w, r if residual != "none" else None)
