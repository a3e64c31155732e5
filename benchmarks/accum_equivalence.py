"""Equivalence of the two exact accumulator back ends over a million steps per unit: the
bounded window (:class:`hwgen.accum_bounded.BoundedAdd`) against the full window
(:class:`hwgen.accum.ExactAdd`) word for word in Verilator, and both against the golden
model (:func:`sim.dot.accumulate`).

Usage::

    python benchmarks/accum_equivalence.py [--steps N] [--unit UNIT ...] [--seed S]
        [--interleave LIST]

Units: every registered dot unit in each of its residual modes (:data:`UNITS`), with the
terms and the exponent-field bound its accumulator gets: ``hif4`` (HiF4 without residual,
one term), ``hif4_24`` and ``hif4_dense`` (HiF4 with a residual: two terms pre-added,
exponent fields at most :data:`hwgen.hif4.MAX_TERM_EXP_DIFF` apart), ``mxfp4`` (MXFP4
without residual: two independent block terms paired), ``mxfp4_24`` and ``mxfp4_dense``
(MXFP4 with a residual: four independent terms split, :mod:`hwgen.accum_split`),
``nvfp4`` (one term); all of them by default. The
steps are :func:`sim.stimulus.accum.accum_steps` (random, and the adversarial classes listed
there), ``N`` per unit (default 1,000,000).

Per unit one Verilog module (:class:`Pair`) feeds the same ``acc`` and ``step`` into both
back ends (with ``--interleave`` L > 1, each adder cut as a ring of L accumulators cuts it,
:func:`hwgen.ring.place`, its cut registers always loading and its accumulator input
delayed by its P stages ahead of the join; both words come out the larger P + L - 1
cycles after their step, and the harness clocks the module once per step); Verilator builds it with a C++ harness that reads a file of steps and writes both
words of each, into ``build/accum_equiv/<unit>/`` (cached by the hash of the sources, so a
rerun skips the build; a first build takes about 10 s per unit on two cores, about a minute
for the split units).

Printed: per unit the steps, the mismatches bounded vs window and of each vs golden, and the
wall times (build, stimulus and golden words, simulation); then the steps of each class and
how many golden words are +-0, subnormal, +-Inf and NaN. Progress goes to stderr. Exit
status 1 on any mismatch, after the first mismatching steps in hex; 2 on bad arguments.
"""

import argparse
import functools
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from amaranth.back import verilog  # noqa: E402
from amaranth.hdl import Module, Signal, UnusedElaboratable  # noqa: E402
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402

from hwgen.accum import AccumSpec, ExactAdd, accum_layout  # noqa: E402
from hwgen.accum_bounded import BoundedAdd  # noqa: E402
from hwgen.parts import probe  # noqa: E402
from hwgen.ring import place  # noqa: E402
from hif4spec import INTERLEAVES, units_of_kind  # noqa: E402
from hwgen.units import build_unit  # noqa: E402
from sim.cli import _Parser  # noqa: E402
from sim.cost.activity import ActivityError, verilate  # noqa: E402
from sim.progress import Reporter  # noqa: E402
from sim.stimulus.accum import CLASSES, accum_steps  # noqa: E402


def accum_terms(unit, residual):
    """``(terms, max_exp_diff)`` of the accumulator of dot unit ``unit`` with ``residual``:
    the unit's term list, and the bound on two terms' exponent fields it gives its back end
    (None where its terms are one, or independent)."""
    built = build_unit(unit, residual=residual)
    terms = list(built.terms)
    return terms, (built._max_exp_diff if len(terms) == 2 else None)


def accum_units():
    """``{name: () -> (terms, max_exp_diff)}`` of every registered dot unit in each of its
    residual modes: ``unit`` without residual, ``unit_24`` / ``unit_dense`` with one."""
    return {u.name if r == "none" else f"{u.name}_{r.replace(':', '')}":
            functools.partial(accum_terms, u.name, r)
            for u in units_of_kind("dot") for r in u.residuals}


#: :func:`accum_units` of the units registered when this module is imported.
UNITS = accum_units()
BUILD_ROOT = ROOT / "build" / "accum_equiv"
TOP = "accum_equiv"
#: Verilator arguments and make variables of the build: the evaluation code optimized, the
#: constructors not.
VERILATOR_ARGS = ("--cc", "--exe", "-Wno-WIDTH", "--x-assign", "0", "--x-initial", "0")
MAKE_OPTS = ("OPT_FAST=-O2", "OPT_SLOW=-O0", "OPT_GLOBAL=-O1")
#: Steps per harness run (a progress update after each).
CHUNK = 1 << 17
#: Mismatching steps printed per unit.
SHOW = 5

def harness(k, latency=0):
    """The C++ harness for steps of ``k`` 32-bit words (Verilator's port is a 64-bit integer
    for ``k <= 2``, a ``VlWide`` array above); with a ``latency`` it clocks the pair once per
    step and reads each step's words ``latency`` cycles later."""
    rec = 1 + k
    if k <= 2:
        load = ("top->step = (uint64_t)in[r + 1]"
                + (" | ((uint64_t)in[r + 2] << 32);" if k == 2 else ";"))
    else:
        load = f"for (int j = 0; j < {k}; ++j) top->step[j] = in[r + 1 + j];"
    low, edge = ("top->clk = 0; ", "top->clk = 1; top->eval();") if latency else ("", "")
    return f"""\
// V{TOP} STEPS OUT: STEPS holds {rec} little-endian 32-bit words per step (acc, then the
// step's bits from bit 0); OUT receives two per step (window word, bounded word).
#include <cstdint>
#include <cstdio>
#include <vector>
#include "V{TOP}.h"
#include "verilated.h"

int main(int argc, char** argv) {{
  if (argc != 3) {{ std::fprintf(stderr, "usage: STEPS OUT\\n"); return 2; }}
  FILE* fi = std::fopen(argv[1], "rb");
  if (!fi) {{ std::perror(argv[1]); return 2; }}
  std::vector<uint32_t> in;
  uint32_t buf[{rec} << 12];
  size_t got;
  while ((got = std::fread(buf, 4, {rec} << 12, fi)) > 0) in.insert(in.end(), buf, buf + got);
  std::fclose(fi);
  if (in.size() % {rec}) {{ std::fprintf(stderr, "bad steps file size\\n"); return 2; }}
  const size_t n = in.size() / {rec};
  VerilatedContext ctx;
  V{TOP}* top = new V{TOP}(&ctx);
  std::vector<uint32_t> out(2 * n);
  const size_t lat = {latency};
  for (size_t i = 0; i < n + lat; ++i) {{
    const size_t r = {rec} * (i < n ? i : n - 1);
    top->acc = in[r];
    {load}
    {low}top->eval();
    if (i >= lat) {{
      out[2 * (i - lat)] = top->window;
      out[2 * (i - lat) + 1] = top->bounded;
    }}
    {edge}
  }}
  FILE* fo = std::fopen(argv[2], "wb");
  if (!fo || std::fwrite(out.data(), 4, out.size(), fo) != out.size()) {{
    std::perror(argv[2]);
    return 2;
  }}
  std::fclose(fo);
  top->final();
  delete top;
  return 0;
}}
"""




class Pair(wiring.Component):
    """Both back ends on the same inputs.

    Members
    -------
    acc : In(32)
    step : In(accum_layout(terms))
    window : Out(32)
        :class:`hwgen.accum.ExactAdd`'s word.
    bounded : Out(32)
        :class:`hwgen.accum_bounded.BoundedAdd`'s word.
    """

    def __init__(self, terms, max_exp_diff=None, interleave=1):
        self._terms, self._diff = list(terms), max_exp_diff
        self._l = interleave
        super().__init__({"acc": In(32), "step": In(accum_layout(self._terms)),
                          "window": Out(32), "bounded": Out(32)})

    def makers(self):
        """``[(name, make_add(cuts))]`` of the two back ends."""
        return [("window", lambda cuts: ExactAdd(AccumSpec(self._terms), cuts)),
                ("bounded", lambda cuts: BoundedAdd(self._terms, self._diff, cuts=cuts))]

    @property
    def latency(self):
        """Cycles from a step to both words: 0 for one-cycle adders; with ``interleave``
        L > 1 the larger of the two cut adders' P + L - 1."""
        if self._l == 1:
            return 0
        return max(place(probe(make(None)), self._l).join + self._l - 1
                   for _, make in self.makers())

    def elaborate(self, platform):
        m = Module()
        D = self.latency
        for name, make in self.makers():
            if self._l == 1:
                add = make(None)
                m.submodules[name] = add
                m.d.comb += [add.acc.eq(self.acc), add.step.eq(self.step),
                             getattr(self, name).eq(add.word)]
                continue
            # The ring's cut adder with its registers always loading: the step at the
            # input, the accumulator P cycles later (where the ring's word joins), the word
            # P + L - 1 cycles after the step, then delayed to the pair's latency.
            cuts = place(probe(make(None)), self._l)
            m.submodules[name] = add = make(cuts)
            m.d.comb += [cuts.enable.eq(1), add.step.eq(self.step),
                         add.acc.eq(_delayed(m, self.acc, cuts.join, f"{name}_acc")),
                         getattr(self, name).eq(_delayed(
                             m, add.word, D - (cuts.join + self._l - 1), f"{name}_word"))]
        return m


def _delayed(m, value, n, name):
    """``value`` through ``n`` registers."""
    for k in range(n):
        reg = Signal.like(value, name=f"{name}_d{k}")
        m.d.sync += reg.eq(value)
        value = reg
    return value


def build(unit, report=None, interleave=1):
    """The folder of the unit's harness executable (built, or found in the cache);
    ``report()`` is called about once a second while Verilator runs."""
    terms, diff = UNITS[unit]()
    pair = Pair(terms, diff, interleave)
    text = verilog.convert(pair, name=TOP, emit_src=False)
    sources = {f"{TOP}.v": text, "harness.cpp": harness(_words(terms), pair.latency)}
    folder = unit if interleave == 1 else f"{unit}_i{interleave}"
    result = {}

    def work():
        try:
            result["folder"] = verilate(sources, TOP, BUILD_ROOT / folder, TOP,
                                        args=VERILATOR_ARGS, make_opts=MAKE_OPTS)
        except BaseException as exc:        # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(1.0)
        if report:
            report()
    if "error" in result:
        raise result["error"]
    return result["folder"]


def _words(terms):
    """32-bit words of a step of ``terms`` in the harness."""
    return max(1, -(-accum_layout(terms).size // 32))


def simulate(folder, acc, words, report=None):
    """``(window, bounded)`` words (uint32 arrays) of the harness in ``folder`` for the
    accumulator words ``acc`` and step words ``words`` (uint32 (n, k), the harness's ``k``
    words per step); ``report(done)`` after each chunk."""
    out = np.empty((len(acc), 2), dtype=np.uint32)
    k = words.shape[1]
    with tempfile.TemporaryDirectory(prefix="accum_equiv-") as tmp:
        fin, fout = Path(tmp) / "steps.bin", Path(tmp) / "words.bin"
        for lo in range(0, len(acc), CHUNK):
            hi = min(lo + CHUNK, len(acc))
            rec = np.empty((hi - lo, 1 + k), dtype="<u4")
            rec[:, 0] = acc[lo:hi]
            rec[:, 1:] = words[lo:hi]
            rec.tofile(fin)
            proc = subprocess.run([str(folder / f"V{TOP}"), str(fin), str(fout)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"the harness in {folder} failed: {proc.stderr.strip()}")
            out[lo:hi] = np.fromfile(fout, dtype="<u4").reshape(-1, 2)
            if report:
                report(hi)
    return out[:, 0], out[:, 1]


def run_unit(unit, steps, seed, report=None, interleave=1):
    """Build (cached) and run ``steps`` steps of ``unit``; returns a result dict:
    ``steps``, ``bounded_vs_window``, ``window_vs_golden``, ``bounded_vs_golden``
    (mismatch counts), ``classes`` (steps per class), ``results`` (golden words that are +-0,
    subnormal, +-Inf, NaN), ``mismatches`` (lines for the first :data:`SHOW`), and the times
    ``build_s``, ``stimulus_s``, ``sim_s``. ``report(done, what)`` follows the work."""
    rep = report or (lambda done, what: None)
    t0 = time.perf_counter()
    folder = build(unit, lambda: rep(0, f"{unit}: Verilator build"), interleave)
    t1 = time.perf_counter()
    terms, diff = UNITS[unit]()
    st = accum_steps(terms, steps, seed, diff)
    words = st.pack_words([(f.offset, f.width) for _, f in accum_layout(terms)],
                          _words(terms))
    golden = st.golden()
    t2 = time.perf_counter()
    rep(0, f"{unit}: simulation")
    window, bounded = simulate(folder, st.acc, words,
                               lambda done: rep(done, f"{unit}: simulation"))
    t3 = time.perf_counter()
    bad = (window != bounded) | (window != golden) | (bounded != golden)
    lines = []
    for i in np.flatnonzero(bad)[:SHOW]:
        fields = ", ".join(f"sig{j}={int(st.sig[i, j]):#x} exp{j}={int(st.exp[i, j]):#x}"
                           for j in range(len(terms)))
        step = sum(int(x) << (32 * j) for j, x in enumerate(words[i]))
        lines.append(f"step {i} ({CLASSES[st.kind[i]]}): acc={int(st.acc[i]):#010x} "
                     f"step={step:#x} ({fields}, nan={int(st.nan[i])}, "
                     f"first={int(st.first[i])}) window={int(window[i]):#010x} "
                     f"bounded={int(bounded[i]):#010x} golden={int(golden[i]):#010x}")
    mag = golden & 0x7FFFFFFF
    return {
        "steps": steps,
        "bounded_vs_window": int((window != bounded).sum()),
        "window_vs_golden": int((window != golden).sum()),
        "bounded_vs_golden": int((bounded != golden).sum()),
        "classes": st.counts(),
        "results": {"+-0": int((mag == 0).sum()),
                    "subnormal": int(((mag != 0) & (mag < 0x800000)).sum()),
                    "+-Inf": int((mag == 0x7F800000).sum()),
                    "NaN": int((mag > 0x7F800000).sum())},
        "mismatches": lines,
        "build_s": t1 - t0, "stimulus_s": t2 - t1, "sim_s": t3 - t2,
    }


def _steps(text):
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def _ways(text):
    try:
        ways = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    bad = [w for w in ways if w not in INTERLEAVES]
    if bad:
        raise argparse.ArgumentTypeError(
            f"takes values of {','.join(map(str, INTERLEAVES))}, not {bad[0]}")
    return list(dict.fromkeys(ways))


def main(argv=None):
    warnings.simplefilter("ignore", UnusedElaboratable)
    ap = _Parser(prog="accum_equivalence.py",
                 description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--steps", type=_steps, default=1_000_000, metavar="N",
                    help="steps per unit (default 1000000)")
    ap.add_argument("--unit", nargs="+", action="extend", choices=list(UNITS), metavar="UNIT",
                    help=f"units to run: {', '.join(UNITS)} (default: all)")
    ap.add_argument("--seed", type=int, default=1, help="stimulus seed (default 1)")
    ap.add_argument("--interleave", type=_ways, default=[1], metavar="LIST",
                    help="comma-separated L of 1,2,4,8: each back end's adder cut as an "
                         "L-accumulator ring cuts it (default 1)")
    args = ap.parse_args(argv)
    runs = {(u if L == 1 else f"{u}_i{L}"): (u, L)
            for u in dict.fromkeys(args.unit or UNITS) for L in args.interleave}
    units = list(runs)
    total = args.steps * len(units)
    t0 = time.perf_counter()
    progress = Reporter("accum equivalence", unit="step")
    results = {}
    print(f"bounded vs window back end: {args.steps:,} steps per unit, seed {args.seed}")
    print(f"{'unit':<14} {'steps':>9} {'bounded!=window':>15} {'window!=golden':>14} "
          f"{'bounded!=golden':>15} {'build s':>8} {'stim s':>7} {'sim s':>7}", flush=True)
    try:
        for k, unit in enumerate(units):
            base = k * args.steps
            r = run_unit(runs[unit][0], args.steps, args.seed,
                         lambda done, what: progress(base + done, total, what),
                         interleave=runs[unit][1])
            results[unit] = r
            print(f"{unit:<14} {r['steps']:>9,} {r['bounded_vs_window']:>15,} "
                  f"{r['window_vs_golden']:>14,} {r['bounded_vs_golden']:>15,} "
                  f"{r['build_s']:>8.1f} {r['stimulus_s']:>7.1f} {r['sim_s']:>7.1f}",
                  flush=True)
    except (ActivityError, RuntimeError) as exc:
        print(f"accum_equivalence.py: {exc}", file=sys.stderr)
        return 1
    finally:
        progress.close()
    print(f"total {time.perf_counter() - t0:.1f} s\n")
    print(f"{'steps per class':<17}" + "".join(f"{u:>12}" for u in units))
    for c in CLASSES:
        if any(c in r["classes"] for r in results.values()):
            print(f"{c:<17}" + "".join(f"{results[u]['classes'].get(c, 0):>12,}"
                                       for u in units))
    print(f"{'golden results':<17}")
    for what in next(iter(results.values()))["results"]:
        print(f"{'  ' + what:<17}" + "".join(f"{results[u]['results'][what]:>12,}"
                                             for u in units))
    failed = [u for u in units if results[u]["mismatches"]]
    for u in failed:
        print(f"\n{u}: first mismatching steps")
        for line in results[u]["mismatches"]:
            print("  " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
