"""The standard set's comparison with each accumulator back end: the full window (every
unit) beside the bounded one (the units that have it) and the truncating one (not exact,
every unit: what exactness costs), synthesized.

Usage::

    python benchmarks/accum_comparison.py [--plot PNG] [--synth-backend native]

For each dot unit of ``rtl_out/`` (stages 3, 64 lanes) and back end: NAND2-eq and per MAC,
the stage areas (front end; terms, where a unit has that stage; accumulator, and of it the
pre-add of HiF4 + residual), the accumulator loop's depth and the feed-forward depth in
cells (:mod:`sim.cost.depth`), effective TOPS per million NAND2-eq on a 256x2048x256 GEMM on
a 4x4 array at 1 GHz, and the area per MAC against NVFP4 and MXFP4 *as they are built in the
same column*: the "best" column takes each unit's bounded back end where it has one, else
its window (every unit has one now). The truncating units are not in ``rtl_out/``:
they are generated into ``build/units_trc/``. Figures come from
``sim/cost/synth_table.json`` where recorded, else from a synthesis in this run (``hif4
estimate --synth``; a unit takes minutes). ``--plot`` draws area per MAC and both depths.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hif4spec import accums_of, module_name, resolve, residuals_of  # noqa: E402
from sim.bench.runner import generate_cached  # noqa: E402
from sim.cost import synth, table  # noqa: E402
from sim.cost.estimate import estimate_rows  # noqa: E402

UNITS = ("hif4", "mxfp4", "nvfp4")
RESIDUALS = ("none", "2:4")


def _rows(accum, backend, manifests=None):
    def progress(i, n, module):
        print(f"[{i}/{n}] {module}", file=sys.stderr, flush=True)
    return [r for r in estimate_rows(UNITS, RESIDUALS, accum=accum, synth=True,
                                     gemm=(256, 2048, 256), array=(4, 4), progress=progress,
                                     synth_backend=backend, manifests=manifests)
            if r["kind"] == "dot"]


def _trunc_manifests():
    """``[(verilog, manifest)]`` of the truncating units at the standard stages and lanes,
    generated (cached) under ``build/units_trc/``."""
    out = []
    for unit in UNITS:
        for res in RESIDUALS:
            if res in residuals_of(unit):
                params = resolve(unit, residual=res, accum="trunc")
                out.append(generate_cached(unit, params, ROOT / "build" / "units_trc"
                                           / module_name(unit, **params)))
    return out


def _stages(row):
    """``(front, terms, acc, preadd)`` NAND2-eq of a row's unit (None where absent)."""
    entry = table.lookup((ROOT / row["verilog"]).read_text())
    st = (entry or {}).get("depth", {}).get("stages", {})
    pre = (entry or {}).get("blocks", {}).get(f"{row['module']}.acc.add.preadd")
    return tuple(st.get(k, {}).get("nand2") for k in ("front", "terms", "acc")) + (pre,)


def comparison(backend=None):
    """``[(column, row)]``: every window row, then every bounded row, then every truncating
    row (``column`` is the back end); a row's ratios are against its own column's bases
    (the bounded column's: each unit's bounded back end where it has one, else its
    window)."""
    window = _rows("window", backend)
    best = _rows("bounded", backend)
    trunc = _rows("trunc", backend, _trunc_manifests())
    return ([("window", r) for r in window]
            + [("bounded", r) for r in best if "bounded" in accums_of(r["unit"], r["residual"])]
            + [("trunc", r) for r in trunc])


def _fmt(v, spec=",.0f"):
    return "-" if v is None else format(v, spec)


def table_lines(rows):
    head = ("| unit | residual | back end | NAND2-eq | / MAC | front | terms | acc (pre-add) "
            "| loop | feed-fwd | TOPS / M NAND2 | vs NVFP4 | vs MXFP4 |")
    out = [head, "|" + "---|" * 3 + "---:|" * 10]
    for col, r in rows:
        front, terms, acc, pre = _stages(r)
        acc_s = _fmt(acc) + (f" ({_fmt(pre)})" if pre is not None else "")
        out.append(
            f"| {r['unit']} | {r['residual']} | {col} | {_fmt(r['area_synth_nand2'])} "
            f"| {_fmt(r['area_per_mac_nand2'], '.1f')} | {_fmt(front)} | {_fmt(terms)} "
            f"| {acc_s} | {_fmt(r['loop_depth'], 'd')} | {_fmt(r['feed_forward_depth'], 'd')} "
            f"| {_fmt(r['tops_per_mnand2'], '.2f')} | {_fmt(r['area_per_mac_vs_nvfp4'], '.2f')} "
            f"| {_fmt(r['area_per_mac_vs_mxfp4'], '.2f')} |")
    return out


def plot(rows, path):
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = []
    for _, r in rows:
        if (r["unit"], r["residual"]) not in configs:
            configs.append((r["unit"], r["residual"]))
    by = {(c, r["unit"], r["residual"]): r for c, r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    x = range(len(configs))
    columns = (("window", "tab:gray", "dimgray"), ("bounded", "tab:blue", "black"),
               ("trunc", "tab:orange", "saddlebrown"))
    for k, (col, color, tick) in enumerate(columns):
        have = [(i + (k - 1) * 0.28, by[col, u, res]) for i, (u, res) in enumerate(configs)
                if (col, u, res) in by]
        pos = [p for p, _ in have]
        name = "truncating (not exact)" if col == "trunc" else col
        axes[0].bar(pos, [r["area_per_mac_nand2"] for _, r in have], width=0.28, color=color,
                    label=f"{name} accumulator")
        axes[1].bar(pos, [r["loop_depth"] for _, r in have], width=0.28, color=color,
                    label=f"{name}: loop")
        axes[1].scatter(pos, [r["feed_forward_depth"] for _, r in have], marker="_", s=250,
                        color=tick, zorder=3, label=f"{name}: feed-forward")
    labels = [f"{u}\n{res}" for u, res in configs]
    for ax in axes:
        ax.set_xticks(list(x), labels)
    axes[0].set_ylabel("NAND2-eq per MAC/cycle")
    axes[0].set_title("Unit area per MAC (synthesized)")
    axes[0].legend()
    axes[1].set_ylim(0, 1.5 * max(max(r["loop_depth"], r["feed_forward_depth"])
                                  for _, r in rows))       # room for the legend
    axes[1].set_ylabel("cells on the longest path")
    axes[1].set_title("Accumulator loop vs feed-forward depth")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    Path(path).write_bytes(buf.getvalue())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", metavar="PNG", help="write the comparison plot here")
    ap.add_argument("--synth-backend", choices=synth.BACKENDS, default=None,
                    help="Yosys build for units not in the table (default: "
                         "$HIF4_SYNTH_BACKEND, else yowasp)")
    args = ap.parse_args(argv)
    if args.plot:
        out = Path(args.plot)
        if out.suffix.lower() != ".png" or not out.parent.is_dir():
            ap.error(f"--plot {out}: give a .png file in an existing folder")
    try:
        rows = comparison(args.synth_backend)
    except (LookupError, synth.SynthError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(table_lines(rows)))
    if args.plot:
        plot(rows, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
