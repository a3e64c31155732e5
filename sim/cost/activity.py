"""Switching activity of a gate-level netlist: toggle counts per net over a window of cycles.

Two engines with the same semantics (they agree net for net where both apply, see
``tests/sim/cost/test_energy.py``):

* :class:`GateSim` evaluates the gates of Yosys' JSON netlist in NumPy, several streams at
  once (the one :mod:`sim.cost.energy` uses by default);
* :func:`build` / :func:`simulate`: Verilator. The netlist (:mod:`sim.cost.netlist`) is
  wrapped in a generated top module and driven by a generated C++ harness that replays a
  list of input vectors, one per cycle, and records every output port after every clock
  edge. No waveform is written: ``--coverage-toggle`` counts, for every bit of every net,
  its 0->1 and 1->0 changes, and the harness writes the counts of one window of cycles
  (``coverage.dat``). Its counts are exact once the ports wider than 64 bits are counted
  from the vectors (:func:`_port_toggles`).

The wrapper puts one register in front of every input port but the clock. With it, the
only event that changes a net of the netlist is the rising clock edge, where the unit's
flip-flops and the input registers (the upstream logic a unit sits behind) update together
and the logic settles once. So each net changes at most once per cycle, as in a zero-delay
simulation of a synchronous design; glitches (a gate output that changes and changes back
while its inputs arrive at different times) are not seen.

Each cycle ``c``: the wrapper inputs take vector ``c`` with the clock low and the model is
evaluated (only the input registers' D nets change), then the clock rises and the model is
evaluated again; then the outputs are recorded. The window ``[start, stop)`` counts the
toggles of the rising edges of cycles ``start .. stop-1``.

Verilator builds are cached under ``build/energy/<top>-<hash>/`` by the texts of the
netlist, wrapper and harness and the Verilator arguments.
"""

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.tools import make_verilated

from .netlist import bit_name

__all__ = ["WRAPPER", "BUILD_ROOT", "ActivityError", "Port", "module_ports", "wrapper_verilog",
           "harness_cpp", "build", "verilate", "Activity", "simulate", "parse_coverage", "lint",
           "GateSim", "simulate_gates"]

REPO = Path(__file__).resolve().parents[2]
BUILD_ROOT = REPO / "build" / "energy"
#: Name of the generated top module; the netlist's instance in it is ``u``.
WRAPPER = "hif4_energy_top"
#: Verilator arguments of the build (besides the files and the top module); every warning
#: fails the build.
VERILATOR_ARGS = ("--cc", "--exe", "--coverage-toggle", "--coverage-max-width", "65536",
                  "--x-assign", "0", "--x-initial", "0")
#: The C++ is large (tens of MB for a unit, most of it coverage bookkeeping); unoptimized
#: it compiles several times faster, and a few thousand cycles still run in seconds.
_MAKE_OPT = ("OPT_FAST=-O0", "OPT_SLOW=-O0", "OPT_GLOBAL=-O0")


class ActivityError(RuntimeError):
    """A Verilator build or harness run that failed; the message names its log."""


@dataclass(frozen=True)
class Port:
    """A port of the netlist's top module."""

    name: str
    direction: str          # "input" or "output"
    width: int

    @property
    def words(self):
        return -(-self.width // 32)


def module_ports(verilog_text, top):
    """The ports of module ``top`` in a ``write_verilog`` netlist, in declaration order."""
    m = re.search(r"^module\s+" + re.escape(top) + r"\s*\((.*?)\);(.*?)^endmodule",
                  verilog_text, flags=re.M | re.S)
    if not m:
        raise ActivityError(f"module {top} not found in the netlist")
    order = [p.strip() for p in m.group(1).split(",")]
    decl = {}
    for d in re.finditer(r"^\s*(input|output)\s+(?:\[(\d+):(\d+)\]\s+)?([A-Za-z_]\w*)\s*;",
                         m.group(2), flags=re.M):
        hi, lo = d.group(2), d.group(3)
        width = abs(int(hi) - int(lo)) + 1 if hi is not None else 1
        decl[d.group(4)] = Port(d.group(4), d.group(1), width)
    missing = [p for p in order if p not in decl]
    if missing:
        raise ActivityError(f"port {missing[0]} of {top} has no plain input/output declaration")
    return [decl[p] for p in order]


def _wname(i, p, clock):
    """The wrapper's name of port ``p`` (number ``i``): ``clk`` for the clock, else
    ``p<i>`` (plain names: Verilator renames ports such as ``i__valid`` in C++)."""
    return "clk" if p.name == clock else f"p{i}"


def wrapper_verilog(top, ports, clock="clk"):
    """The top module: a register per non-clock input, the netlist instance ``u``; its ports
    are named by :func:`_wname`."""
    lines = [f"module {WRAPPER}("]
    lines.append(",\n".join(f"  {p.direction} wire {_range(p)}{_wname(i, p, clock)}"
                            for i, p in enumerate(ports)))
    lines.append(");")
    conns = []
    for i, p in enumerate(ports):
        w = _wname(i, p, clock)
        if p.direction == "input" and p.name != clock:
            lines.append(f"  reg {_range(p)}{w}_q = 0;")
            lines.append(f"  always @(posedge clk) {w}_q <= {w};")
            conns.append(f".{p.name}({w}_q)")
        else:
            conns.append(f".{p.name}({w})")
    lines.append(f"  {top} u({', '.join(conns)});")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def _range(p):
    return f"[{p.width - 1}:0] " if p.width > 1 else ""


def _set(name, p, expr):
    if p.width <= 32:
        return [f"    top->{name} = {expr}[0];"]
    if p.width <= 64:
        return [f"    top->{name} = (QData){expr}[0] | ((QData){expr}[1] << 32);"]
    return [f"    for (int i = 0; i < {p.words}; ++i) top->{name}[i] = {expr}[i];"]


def _get(name, p, expr):
    if p.width <= 32:
        return [f"    {expr}[0] = top->{name};"]
    if p.width <= 64:
        return [f"    {expr}[0] = (uint32_t)top->{name}; "
                f"{expr}[1] = (uint32_t)(top->{name} >> 32);"]
    return [f"    for (int i = 0; i < {p.words}; ++i) {expr}[i] = top->{name}[i];"]


def harness_cpp(ports, clock="clk"):
    """C++ main of the harness: ``Vtop STIM OUT COV START STOP``.

    STIM holds one vector per cycle (the inputs but the clock, in port order, each as
    little-endian 32-bit words); OUT receives the outputs after each rising edge, the same
    way; COV the toggle counts of cycles START..STOP-1.
    """
    ins = [(_wname(i, p, clock), p) for i, p in enumerate(ports)
           if p.direction == "input" and p.name != clock]
    outs = [(_wname(i, p, clock), p) for i, p in enumerate(ports) if p.direction == "output"]
    nin, nout = sum(p.words for _, p in ins), sum(p.words for _, p in outs)
    body = ["#include <cstdio>", "#include <cstdlib>", "#include <cstdint>", "#include <vector>",
            f'#include "V{WRAPPER}.h"', '#include "verilated.h"', '#include "verilated_cov.h"',
            "", "int main(int argc, char** argv) {",
            "  if (argc != 6) { std::fprintf(stderr, \"usage: STIM OUT COV START STOP\\n\"); "
            "return 2; }",
            "  FILE* fs = std::fopen(argv[1], \"rb\");",
            "  if (!fs) { std::perror(argv[1]); return 2; }",
            "  std::vector<uint32_t> stim;",
            "  uint32_t buf[4096];",
            "  size_t got;",
            "  while ((got = std::fread(buf, 4, 4096, fs)) > 0) stim.insert(stim.end(), buf, "
            "buf + got);",
            "  std::fclose(fs);",
            f"  const size_t NIN = {nin}, NOUT = {nout};",
            "  if (NIN == 0 || stim.size() % NIN) { std::fprintf(stderr, \"bad stimulus size\\n\");"
            " return 2; }",
            "  const long cycles = (long)(stim.size() / NIN);",
            "  const long start = std::atol(argv[4]), stop = std::atol(argv[5]);",
            "  if (start < 0 || stop < start || stop > cycles) { std::fprintf(stderr, "
            "\"bad window\\n\"); return 2; }",
            "  VerilatedContext ctx;",
            f"  V{WRAPPER}* top = new V{WRAPPER}(&ctx);",
            "  std::vector<uint32_t> out((size_t)cycles * NOUT);",
            "  top->clk = 0;",
            "  top->eval();",
            "  for (long c = 0; c < cycles; ++c) {",
            "    const uint32_t* in = &stim[(size_t)c * NIN];",
            "    uint32_t* o = &out[(size_t)c * NOUT];"]
    off = 0
    for name, p in ins:
        body += _set(name, p, f"(in + {off})")
        off += p.words
    body += ["    top->clk = 0;", "    top->eval();",
             "    if (c == start) ctx.coveragep()->zero();",
             "    top->clk = 1;", "    top->eval();",
             "    if (c + 1 == stop) ctx.coveragep()->write(argv[3]);"]
    off = 0
    for name, p in outs:
        body += _get(name, p, f"(o + {off})")
        off += p.words
    body += ["  }",
             "  if (start == stop) { ctx.coveragep()->zero(); ctx.coveragep()->write(argv[3]); }",
             "  FILE* fo = std::fopen(argv[2], \"wb\");",
             "  if (!fo || std::fwrite(out.data(), 4, out.size(), fo) != out.size()) "
             "{ std::perror(argv[2]); return 2; }",
             "  std::fclose(fo);",
             "  top->final();",
             "  delete top;",
             "  return 0;",
             "}"]
    return "\n".join(body) + "\n"


def _env():
    from sim.tools import verilator_env
    verilator_env()
    env = dict(os.environ)
    env.pop("MAKEFLAGS", None)          # the bench's make flags; this build sets its own
    return env


def lint(netlist_verilog, top):
    """Raise :class:`ActivityError` unless ``verilator --lint-only`` (default warnings) is
    silent on the netlist."""
    env = _env()
    proc = subprocess.run(["verilator", "--lint-only", "--top-module", top,
                           str(netlist_verilog)], env=env, capture_output=True, text=True)
    if proc.returncode != 0 or "%Warning" in proc.stderr or "%Error" in proc.stderr:
        raise ActivityError(f"verilator --lint-only on {netlist_verilog}: "
                            + (proc.stderr.strip().splitlines() or ["failed"])[0])


def build(netlist_verilog, top, *, build_root=BUILD_ROOT, log=None):
    """Build the wrapper, netlist and harness with Verilator (cached); returns
    ``(folder, ports)``; the executable is ``folder / "V" + WRAPPER``."""
    text = Path(netlist_verilog).read_text()
    ports = module_ports(text, top)
    sources = {"netlist.v": text, "wrapper.v": wrapper_verilog(top, ports),
               "harness.cpp": harness_cpp(ports)}
    return verilate(sources, WRAPPER, build_root, top), ports


def verilate(sources, top, build_root, name, *, args=VERILATOR_ARGS, make_opts=_MAKE_OPT):
    """Build Verilog and C++ ``sources`` (``{file name: text}``, one ``main`` among the C++)
    with Verilator into the executable ``V<top>`` of the folder
    ``build_root / "<name>-<hash>"``, the hash taken over the sources, ``args`` (Verilator's
    arguments besides the files and the top module) and ``make_opts`` (make variables);
    returns the folder, at once when it already holds the executable.

    Any warning in the log fails the build; the log of a failed build is kept as
    ``<name>-<hash>.failed.log`` and named in the :class:`ActivityError`.
    """
    key = hashlib.sha256("\0".join([*sources.values(), " ".join(args),
                                    " ".join(make_opts)]).encode()).hexdigest()[:16]
    build_root = Path(build_root)
    folder = build_root / f"{name}-{key}"
    if (folder / f"V{top}").is_file():
        return folder
    env = _env()
    build_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=build_root))
    for fname, text in sources.items():
        (work / fname).write_text(text)
    logf = work / "build.log"
    kept = build_root / f"{name}-{key}.failed.log"
    cmd = ["verilator", *args, "--top-module", top, "-Mdir", "obj", *sources]
    with open(logf, "w") as handle:
        proc = subprocess.run(cmd, cwd=work, env=env, stdout=handle, stderr=subprocess.STDOUT)
        if proc.returncode == 0:
            proc = make_verilated(work / "obj", f"V{top}", build_root, env, handle,
                                  jobs=min(2, os.cpu_count() or 1),
                                  make_vars=("VK_PCH_I_FAST=", "VK_PCH_I_SLOW=", *make_opts))
        if proc.returncode != 0:
            shutil.copyfile(logf, kept)
            shutil.rmtree(work, ignore_errors=True)
            raise ActivityError(f"Verilator build of {name} failed; see {kept}")
    if "%Warning" in logf.read_text():
        shutil.copyfile(logf, kept)
        raise ActivityError(f"Verilator warned on {name}; see {kept}")
    shutil.move(str(work / "obj" / f"V{top}"), str(work / f"V{top}"))
    shutil.rmtree(work / "obj")
    try:
        os.replace(work, folder)
    except OSError:                       # built meanwhile by another process
        shutil.rmtree(work, ignore_errors=True)
    return folder


_COV_LINE = re.compile(r"^C '(.*)' (\d+)$")


def parse_coverage(text, hier_prefix):
    """Toggle counts ``{bit name: toggles}`` (both directions added) of the coverage points
    whose hierarchy is ``hier_prefix``, from a Verilator ``coverage.dat`` text.

    Names are as the netlist writes them: ``n12``, ``acc[3]`` (a vector's bit, or a
    single-bit net that ``splitnets`` named so).
    """
    counts = {}
    for line in text.splitlines():
        m = _COV_LINE.match(line)
        if not m:
            continue
        fields = dict(kv.split("\x02", 1) for kv in m.group(1).split("\x01") if "\x02" in kv)
        if fields.get("t") != "toggle" or fields.get("h") != hier_prefix:
            continue
        comment = fields.get("o", "")
        name, _, edge = comment.rpartition(":")
        if edge not in ("0->1", "1->0"):
            raise ActivityError(f"unexpected toggle point {comment!r}")
        name = _demangle(name)
        counts[name] = counts.get(name, 0) + int(m.group(2))
    return counts


def _demangle(name):
    """A Verilator name as the netlist wrote it: escaped identifiers' characters come back
    from Verilator's ``__0XX`` codes (``c__05b3__05d`` -> ``c[3]``), ``__DOT__`` is ``.``."""
    name = name.replace("__DOT__", ".")
    return re.sub(r"__0([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), name)


@dataclass
class Activity:
    """Result of :func:`simulate`.

    Attributes
    ----------
    toggles : dict
        ``{bit name: toggles}`` of the netlist's nets in the window (every name of the
        netlist, aliases included).
    outputs : dict
        ``{output port: uint32 array (cycles, words)}`` after each rising edge.
    cycles : int
        Cycles in the window.
    """

    toggles: dict
    outputs: dict
    cycles: int


def pack_vectors(ports, values, cycles, clock="clk"):
    """The stimulus words: ``values[name]`` per non-clock input, an int array (cycles,) for
    ports up to 64 bits or a uint8 array (cycles, bytes) little-endian for wider ones."""
    cols = []
    for p in ports:
        if p.direction != "input" or p.name == clock:
            continue
        v = values[p.name]
        if p.width <= 64:
            v = np.asarray(v, dtype=np.uint64).reshape(cycles)
            words = np.stack([(v >> np.uint64(32 * i)) & np.uint64(0xFFFFFFFF)
                              for i in range(p.words)], axis=1).astype(np.uint32)
        else:
            b = np.asarray(v, dtype=np.uint8).reshape(cycles, -1)
            pad = 4 * p.words - b.shape[1]
            if pad < 0:
                raise ValueError(f"{p.name}: {b.shape[1]} bytes for {p.width} bits")
            b = np.concatenate([b, np.zeros((cycles, pad), np.uint8)], axis=1)
            words = b.view("<u4")
        cols.append(words)
    return np.ascontiguousarray(np.concatenate(cols, axis=1).astype("<u4"))


def simulate(folder, ports, values, cycles, window, *, top_instance="u", clock="clk"):
    """Run the harness built in ``folder`` on ``values`` (see :func:`pack_vectors`) for
    ``cycles`` cycles, counting toggles in ``window = (start, stop)``."""
    stim = pack_vectors(ports, values, cycles, clock)
    with tempfile.TemporaryDirectory(prefix="hif4-activity-") as work:
        work = Path(work)
        (work / "stim.bin").write_bytes(stim.tobytes())
        exe = Path(folder) / f"V{WRAPPER}"
        proc = subprocess.run([str(exe), "stim.bin", "out.bin", "coverage.dat",
                               str(window[0]), str(window[1])], cwd=work, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise ActivityError(f"harness {exe} failed (exit {proc.returncode}): "
                                + (proc.stderr.strip() or "no message")[-500:])
        raw = np.frombuffer((work / "out.bin").read_bytes(), dtype="<u4")
        cov = (work / "coverage.dat").read_text(errors="replace")
    outs = [p for p in ports if p.direction == "output"]
    raw = raw.reshape(cycles, sum(p.words for p in outs))
    outputs, off = {}, 0
    for p in outs:
        outputs[p.name] = raw[:, off:off + p.words]
        off += p.words
    toggles = parse_coverage(cov, f"TOP.{WRAPPER}.{top_instance}")
    for p in ports:
        if p.width > 64 and p.direction == "output":
            raise ActivityError(f"output {p.name} is wider than 64 bits; its toggles are not "
                                "counted correctly")
        if p.width > 64 and p.name != clock:
            toggles.update(_port_toggles(p, values[p.name], cycles, window))
    return Activity(toggles=toggles, outputs=outputs, cycles=window[1] - window[0])


def _port_toggles(p, value, cycles, window):
    """Toggles of a wide input port's bits in the window, from the vectors themselves: the
    port is the wrapper's register, which takes vector c at the edge of cycle c (0 before).
    Verilator's toggle coverage miscounts the bits of ports wider than 64 bits (its counts
    exceed one toggle per cycle), so these come from here."""
    b = np.asarray(value, dtype=np.uint8).reshape(cycles, -1)
    bits = np.unpackbits(b, axis=1, bitorder="little")[:, :p.width]
    prev = np.concatenate([np.zeros((1, p.width), np.uint8), bits[:-1]])
    start, stop = window
    counts = (bits[start:stop] != prev[start:stop]).sum(axis=0)
    return {f"{p.name}[{j}]": int(c) for j, c in enumerate(counts)}


# ---------------------------------------------------------------------------------------
# The same counts from an evaluation of the gates in NumPy


class GateSim:
    """Zero-delay cycle simulation of a ``write_json`` gate netlist in NumPy, with the
    wrapper and harness semantics above (a register in front of every input, vector ``c``
    taken at the rising edge of cycle ``c``, the logic settled once per edge), several
    independent streams at once.

    The gates are evaluated level by level (inputs before outputs); a netlist with a
    combinational loop has no such order and is refused (:mod:`sim.cost.netlist` makes none).
    """

    def __init__(self, netjson, top):
        mod = netjson["modules"][top]
        index = {"0": 0, "1": 1, "x": 0, "z": 0}

        def idx(bit):
            if isinstance(bit, str):
                return index[bit]
            if bit not in index:
                index[bit] = len(index) - 2
            return index[bit]

        gates, ffs = [], []
        for cell in mod["cells"].values():
            kind, con = cell["type"], cell["connections"]
            if kind == "$scopeinfo":
                continue
            if kind == "$_DFF_P_":
                ffs.append((idx(con["D"][0]), idx(con["Q"][0])))
            elif kind in ("$_NAND_", "$_NOR_", "$_NOT_"):
                a = idx(con["A"][0])
                b = idx(con["B"][0]) if "B" in con else a
                gates.append((0 if kind == "$_NOR_" else 1, a, b, idx(con["Y"][0])))
            else:
                raise ActivityError(f"cell type {kind} is not a gate of the flow")
        self.ports = {name: [idx(b) for b in p["bits"]] for name, p in mod["ports"].items()}
        self.names = {}
        for name, net in mod["netnames"].items():
            width = len(net["bits"])
            for i, bit in enumerate(net["bits"]):
                if not isinstance(bit, str):
                    self.names.setdefault(idx(bit), []).append(
                        bit_name(name, i, width, net.get("offset", 0), net.get("upto", 0)))
        self.size = len(index) - 2              # array rows: the constants 0 and 1, the bits
        self.ff_d = np.array([d for d, _ in ffs], dtype=np.int64)
        self.ff_q = np.array([q for _, q in ffs], dtype=np.int64)
        self.levels = self._levelize(gates)

    def _levelize(self, gates):
        driver = {g[3]: k for k, g in enumerate(gates)}
        level = [None] * len(gates)
        pending = list(range(len(gates)))
        deps = [[driver[x] for x in (g[1], g[2]) if x in driver] for g in gates]
        users = [[] for _ in gates]
        for k, ds in enumerate(deps):
            for d in ds:
                users[d].append(k)
        count = [len(ds) for ds in deps]
        ready = [k for k in pending if count[k] == 0]
        for k in ready:
            level[k] = 0
        order = []
        while ready:
            k = ready.pop()
            order.append(k)
            for u in users[k]:
                count[u] -= 1
                level[u] = max(level[u] or 0, level[k] + 1)
                if count[u] == 0:
                    ready.append(u)
        if len(order) < len(gates):
            raise ActivityError(f"{len(gates) - len(order)} gates of the netlist are in or "
                                "after a combinational loop: it has no evaluation order")
        return self._groups(gates, order, level)

    @staticmethod
    def _groups(gates, members, level):
        by = {}
        for k in members:
            by.setdefault(level[k], []).append(gates[k])
        out = []
        for lv in sorted(by):
            grp = []
            for kind in (1, 0):
                sel = [g for g in by[lv] if g[0] == kind]
                if sel:
                    grp.append((kind, np.array([g[1] for g in sel]), np.array([g[2] for g in sel]),
                                np.array([g[3] for g in sel])))
            out.append(grp)
        return out

    def _settle(self, v):
        for grp in self.levels:
            for kind, a, b, y in grp:
                v[y] = 1 ^ ((v[a] & v[b]) if kind else (v[a] | v[b]))

    def run(self, inputs, cycles, windows, outputs=()):
        """Simulate ``B`` streams: ``inputs`` maps each input port but the clock to a uint8
        array (B, cycles, width) of bits; ``windows`` is one ``(start, stop)`` per stream.
        Returns ``(toggles, out)``: toggles an int64 array (rows, B) indexed like
        :attr:`names` (rows 0 and 1: the constants), each column counted over the rising
        edges of its window; ``out`` maps each port of ``outputs`` to its bits
        (B, cycles, width) after each edge."""
        batch = next(iter(inputs.values())).shape[0]
        v = np.zeros((self.size, batch), dtype=np.uint8)
        v[1] = 1
        self._settle(v)
        counts = np.zeros((self.size, batch), dtype=np.int64)
        out = {p: np.zeros((batch, cycles, len(self.ports[p])), np.uint8) for p in outputs}
        active = np.array([[start <= c < stop for start, stop in windows]
                           for c in range(cycles)], dtype=np.uint8)
        for c in range(cycles):
            prev = v.copy() if active[c].any() else None
            v[self.ff_q] = v[self.ff_d]
            for name, bits in inputs.items():
                v[self.ports[name]] = bits[:, c, :].T
            self._settle(v)
            if prev is not None:
                counts += (v != prev) & active[c]
            for p in outputs:
                out[p][:, c, :] = v[self.ports[p]].T
        return counts, out

    def toggles_by_name(self, counts, column=0):
        """``{bit name: toggles}`` (every alias) of one stream of :meth:`run`."""
        res = {}
        for i, names in self.names.items():
            for n in names:
                res[n] = int(counts[i, column])
        return res


def _bits(p, value, cycles):
    """An input's values as bits (cycles, width): ints up to 64 bits, else uint8 bytes."""
    if p.width > 64:
        b = np.asarray(value, dtype=np.uint8).reshape(cycles, -1)
        return np.unpackbits(b, axis=1, bitorder="little")[:, :p.width]
    v = np.asarray(value, dtype=np.uint64).reshape(cycles)
    return ((v[:, None] >> np.arange(p.width, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)


def simulate_gates(gatesim, ports, runs, clock="clk"):
    """:func:`simulate`'s results from a :class:`GateSim` instead of Verilator, for several
    streams at once: ``runs`` is a list of ``(values, cycles, window)``; returns one
    :class:`Activity` per run (outputs as 32-bit words, as the harness writes them)."""
    total = max(cycles for _, cycles, _ in runs)
    inputs = {}
    for p in ports:
        if p.direction != "input" or p.name == clock:
            continue
        cols = []
        for values, cycles, _ in runs:
            bits = _bits(p, values[p.name], cycles)
            pad = np.repeat(bits[-1:], total - cycles, axis=0)    # hold the last vector
            cols.append(np.concatenate([bits, pad]))
        inputs[p.name] = np.stack(cols)
    outs = [p for p in ports if p.direction == "output"]
    counts, bits = gatesim.run(inputs, total, [w for _, _, w in runs],
                               outputs=[p.name for p in outs])
    result = []
    for k, (_, cycles, window) in enumerate(runs):
        outputs = {}
        for p in outs:
            b = bits[p.name][k, :cycles]
            pad = np.zeros((cycles, 32 * p.words - p.width), np.uint8)
            packed = np.packbits(np.concatenate([b, pad], axis=1), axis=1, bitorder="little")
            outputs[p.name] = packed.view("<u4").astype(np.uint32)
        result.append(Activity(toggles=gatesim.toggles_by_name(counts, k), outputs=outputs,
                               cycles=window[1] - window[0]))
    return result
