"""Benchmark: where a soak worker's time goes, phase by phase, and its end-to-end rate.

Usage::

    python benchmarks/bench_soak.py [--steps 262144] [--runs 3] [--only MODULE ...]
                                    [--no-e2e]

For each module (by default the four below, 3 stages, 64 lanes) one soak chunk (seed 1,
chunk 0, the default mix and stall probabilities) is taken apart into the phases of
:func:`sim.bench.soak.soak_chunk`: draw (``chunk_steps``), golden (``expected_words``, an
encoder's ``expected_outputs``), pack (``pack_payloads``, ``pack_beats``), stall pattern,
write (``write_job``) and harness (the compiled harness on the written files). Each phase
is the median of ``--runs`` runs, in wall seconds and in CPU seconds (this process and
the harness process; on a machine shared with other work the CPU figures are the steadier
ones). Then ``soak_chunk`` itself is timed end to end (median of ``--runs``): steps (an
encoder: groups) per second of one worker.

A SHA-256 of the chunk's stream, golden words and payload bytes is printed per module:
the same seed and chunk must give the same digest before and after any speed-up (the
soak's state keys on the stream). The machine and its load are printed first: runs
elsewhere or beside other work differ.
"""

import argparse
import hashlib
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.tools import machine  # noqa: E402

#: (unit, residual, accum) of the modules measured by default.
MODULES = (("hif4", "2:4", "bounded"), ("mxfp4", "none", "window"), ("nvfp4", "none", None),
           ("nvfp4_quant", "none", None))


def _digest(stream, expected, payload):
    h = hashlib.sha256()

    def add(v):
        if isinstance(v, dict):
            for k in sorted(v):
                h.update(str(k).encode())
                add(v[k])
        elif v is not None:
            a = np.ascontiguousarray(np.asarray(v))
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(a.tobytes())

    add({k: v for k, v in stream.items() if k != "expect"})
    add(np.asarray([int(x) for x in expected], dtype=object).astype(str)
        if not isinstance(expected, np.ndarray) else expected)
    add(payload)
    return h.hexdigest()[:16]


def _cpu_s():
    """CPU seconds of this process and its finished children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _median(fn, runs, cpu):
    """``(median wall seconds, fn())`` of ``runs`` calls; the median CPU seconds (this
    process and the subprocesses it waited for) go to ``cpu``."""
    times, cpus, out = [], [], None
    for _ in range(runs):
        c0, t0 = _cpu_s(), time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpus.append(_cpu_s() - c0)
    cpu.append(statistics.median(cpus))
    return statistics.median(times), out


def measure(unit, residual, accum, steps, runs, e2e):
    from hif4spec import module_name, resolve, unit_spec
    from sim.bench.fast import build_harness, stall_pattern, write_job
    from sim.bench.runner import REPO, generate_cached
    from sim.bench.soak import DEFAULT_MIX, chunk_steps, soak_chunk
    import subprocess

    kw = {} if accum is None else {"accum": accum}
    params = resolve(unit, residual, 3, 64, **kw)
    module = module_name(unit, **params)
    verilog, manifest = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    binary = build_harness(verilog, manifest, quiet=False)        # not timed
    encoder = unit_spec(unit).kind == "encoder"
    seed, index, vp, rp = 1, 0, 0.9, 0.9
    res = params["residual"]
    t, c = {}, []
    t["draw"], stream = _median(lambda: chunk_steps(unit, res, steps, seed, index), runs, c)
    if encoder:
        from sim.stimulus.encoder import expected_outputs, pack_beats
        t["golden"], expected = _median(lambda: expected_outputs(unit, res, stream), runs, c)
        t["pack"], payload = _median(lambda: pack_beats(manifest, unit, stream, seed=seed),
                                     runs, c)
        ii = manifest["ii"]
        out_steps = [g * ii + ii - 1 for g in range(len(expected))]
    else:
        from sim.stimulus import expected_words, manifest_accum, pack_payloads
        acc = manifest_accum(manifest)
        t["golden"], (expected, out_steps) = _median(
            lambda: expected_words(unit, res, stream, **acc), runs, c)
        t["pack"], payload = _median(lambda: pack_payloads(manifest, unit, res, stream), runs,
                                     c)
    t["stalls"], (gaps, ready) = _median(
        lambda: stall_pattern(len(payload), [seed, index, 1], vp, rp), runs, c)
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as work:
        t["write"], job = _median(lambda: write_job(work, manifest, payload, expected,
                                                    out_steps, gaps, ready), runs, c)
        t["harness"], proc = _median(lambda: subprocess.run([str(binary), str(job)],
                                                            capture_output=True), runs, c)
        assert proc.returncode == 0 and '"mismatches": 0' in (Path(work) / "result.json") \
            .read_text(), "the harness found a mismatch"
    digest = _digest(stream, expected, payload)
    print(f"{module}: {steps:,} {'groups' if encoder else 'steps'}, digest {digest}")
    total, ctotal = sum(t.values()), sum(c)
    print(f"   {'phase':8s} {'wall s':>8s} {'share':>6s} {'CPU s':>8s}")
    for (k, v), cv in zip(t.items(), c):
        print(f"   {k:8s} {v:8.3f} {100 * v / total:5.1f}% {cv:8.3f}")
    print(f"   {'sum':8s} {total:8.3f} {'':6s} {ctotal:8.3f}   -> {steps / total:10,.0f} /s wall, "
          f"{steps / ctotal:10,.0f} /s CPU")
    if e2e:
        text = Path(verilog).read_text()
        secs, cpus = [], []
        for _ in range(runs):
            c0 = _cpu_s()
            r = soak_chunk(unit, res, text, manifest, module, None, seed, index, steps,
                           dict(DEFAULT_MIX), vp, rp)
            cpus.append(_cpu_s() - c0)
            assert r["mismatches"] == 0 and not r["timeout"], r
            secs.append(r["seconds"])
        what = "groups" if encoder else "steps"
        wall, cpu = statistics.median(secs), statistics.median(cpus)
        print(f"   soak_chunk end to end: median {wall:.3f} s wall, {cpu:.3f} s CPU -> "
              f"{steps / wall:10,.0f} {what}/s per worker ({steps / cpu:,.0f} {what} per "
              "CPU second)")
    return digest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1 << 18)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None, help="units to measure")
    ap.add_argument("--no-e2e", action="store_true", help="skip the end-to-end timing")
    args = ap.parse_args(argv)
    print(f"machine: {machine()}")
    for unit, residual, accum in MODULES:
        if args.only and unit not in args.only:
            continue
        measure(unit, residual, accum, args.steps, args.runs, not args.no_e2e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
