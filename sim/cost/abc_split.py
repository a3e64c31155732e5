"""Run one ABC job of Yosys' ``abc`` pass as two ABC processes, keeping the network after
SAT sweeping (``&fraig -x``) on disk in between.

Yosys runs every ``abc`` job as ``yosys-abc -s -f DIR/abc.script``. For a gate-library
flow such as :data:`sim.cost.synth.FLOW` (``abc -g cmos2``) the script is ``read_blif;
read_library; strash; &get -n; &fraig -x; &put; scorr; dc2; dretime; strash; &get -n;
&dch -f; &nf; &put; write_blif``, and for the largest
single-stage units ``&fraig -x`` alone runs for hours. With this program standing in for
``yosys-abc`` (``scratchpad -set abc.exe``, see :func:`wrapper`), the script up to and
including ``&fraig -x`` runs first and writes its AIG (``&w``) under a key made of the
commands and the contents of the files they read; the rest runs from that AIG (``&r``). A
run stopped after the sweep restarts from the file. The two halves write the output BLIF of
the one script, byte for byte but for ABC's timestamp comment (``tests/sim/cost/test_synth.py``).

Run as ``python abc_split.py CHECKPOINT_DIR REAL_ABC -s -f SCRIPT``. A script
without ``&fraig -x`` goes to the real ABC unchanged.
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

#: The command after which the network is kept.
CUT = "&fraig -x"
_READS = ("read_blif", "read_library")


def commands(script):
    """The commands of a Yosys-written ABC script (``echo`` lines dropped), in order."""
    out = []
    for line in script.splitlines():
        line = line.strip()
        if line and not line.startswith("echo "):
            out.append(line.rstrip(";").strip())
    return out


def _sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def checkpoint_key(cmds, abc):
    """Key of the network after ``CUT``: the ABC binary, the commands up to the cut, and the
    contents (not the names) of the files they read."""
    h = hashlib.sha256(_sha_file(abc).encode())
    for cmd in cmds[:cmds.index(CUT) + 1]:
        word, _, arg = cmd.partition(" ")
        if word in _READS:
            arg = _sha_file(arg.strip().strip('"'))
        h.update(f"{word} {arg}\n".encode())
    return h.hexdigest()


def _script_text(cmds):
    return "".join(f"echo + {c};\n{c};\n" for c in cmds)


def _run(abc, cmds, path, cwd=None):
    Path(path).write_text(_script_text(cmds))
    return subprocess.run([abc, "-s", "-f", str(Path(path).resolve())], cwd=cwd).returncode


def _first_half(cmds, script_path, abc, checkpoint_dir):
    """Run ``cmds`` up to and including ``CUT`` and keep the network in ``checkpoint_dir``,
    unless it is there already. Returns ``(status, AIG path)``; the path is None for a
    script without ``CUT`` or when ABC failed."""
    if CUT not in cmds:
        return 0, None
    # read back as `netlist.aig` from its folder, so that the output's `.model` is `netlist`
    # as in the one-script run
    ckpt = Path(checkpoint_dir) / checkpoint_key(cmds, abc) / "netlist.aig"
    if not ckpt.is_file():
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        partial = ckpt.with_name("netlist.aig.tmp")
        cut = cmds.index(CUT)
        rc = _run(abc, cmds[:cut + 1] + [f"&w {partial}"], script_path.with_name("first.script"))
        if rc != 0 or not partial.is_file():
            return rc or 1, None
        os.replace(partial, ckpt)                           # whole or not at all
    return 0, ckpt


def run_split(script_path, abc, checkpoint_dir):
    """Run the ABC script at ``script_path`` in two halves around ``CUT``; returns ABC's exit
    status. The first half is skipped when its AIG is already in ``checkpoint_dir``."""
    script_path = Path(script_path)
    cmds = commands(script_path.read_text())
    rc, ckpt = _first_half(cmds, script_path, abc, checkpoint_dir)
    if rc != 0:
        return rc
    if ckpt is None:                                        # nothing to cut
        return subprocess.run([abc, "-s", "-f", str(script_path.resolve())]).returncode
    cut = cmds.index(CUT)
    libs = [c for c in cmds[:cut] if c.startswith("read_library")]
    return _run(abc, libs + [f"&r {ckpt.name}"] + cmds[cut + 1:],
                script_path.with_name("second.script"), cwd=ckpt.parent)


def native_abc():
    """The ``yosys-abc`` of the ``pyosys`` package, which its Yosys runs by default."""
    import importlib.util

    spec = importlib.util.find_spec("pyosys")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the pyosys package is not installed")
    return str(Path(next(iter(spec.submodule_search_locations)), "yosys-abc"))


def wrapper(path, checkpoint_dir, abc):
    """Write an executable at ``path`` that Yosys can run as ABC (``abc.exe``): it calls
    :func:`run_split` with this interpreter. Returns ``path``."""
    Path(path).write_text(
        "#!/bin/sh\n"
        f"exec '{sys.executable}' '{Path(__file__).resolve()}' "
        f"'{Path(checkpoint_dir).resolve()}' '{abc}' \"$@\"\n")
    os.chmod(path, 0o755)
    return Path(path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 5 or argv[2:4] != ["-s", "-f"]:
        print("usage: python abc_split.py CHECKPOINT_DIR REAL_ABC -s -f SCRIPT",
              file=sys.stderr)
        return 2
    checkpoint_dir, abc, _, _, script = argv
    return run_split(script, abc, checkpoint_dir)


if __name__ == "__main__":
    sys.exit(main())
