"""``hif4 soak``: a long check of one unit on the fast harness, in resumable seeded chunks."""

import sys

from ._util import (CLIError, ToolError, add_unit_options, check_output_folder, display_path,
                    output_option, refuse_interleave, select_module, unit_params)



def register(subparsers):
    p = subparsers.add_parser(
        "soak", help="check a unit on the fast harness for many steps, in resumable chunks",
        description="Check --steps steps (an encoder: groups) of one unit against the golden "
                    "model on the compiled Verilator harness (hif4 verify --engine fast), "
                    "in seeded chunks of --chunk-steps run as local processes (--jobs) or "
                    "Ray tasks (--cluster). Each chunk mixes random, adversarial "
                    "(cancelling K-loops; an encoder's named groups) and NaN/Inf steps in "
                    "the shares of --mix, with random stalls on valid and ready. The soak's "
                    "state (BUILD/soak/<module>-<key>.json) records every finished chunk, so "
                    "the same command run again goes on where it stopped, and a larger "
                    "--steps adds chunks. A failing chunk is shrunk to the shortest failing "
                    "K-loop found and saved as a replay file (BUILD/soak/cases/); "
                    "hif4 verify --replay FILE runs it again. Exits 1 if any chunk failed.")
    add_unit_options(p, rtl="generate", unit_default="hif4")
    p.add_argument("--steps", type=float, required=True, metavar="N",
                   help="steps to check (an encoder: groups of 64 elements); 1e9 is accepted")
    p.add_argument("--chunk-steps", type=int, default=1 << 18, metavar="N",
                   help="steps per chunk (default 262144: one to two seconds each on one "
                        "core)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--mix", default="random=0.6,cancel=0.3,special=0.1", metavar="SHARES",
                   help="shares of random, cancel (adversarial) and special (NaN/Inf) steps "
                        "(default random=0.6,cancel=0.3,special=0.1)")
    p.add_argument("--valid-prob", type=float, default=0.9,
                   help="probability the driver offers a step in a cycle (default 0.9)")
    p.add_argument("--ready-prob", type=float, default=0.9,
                   help="probability the output is ready in a cycle (default 0.9)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run the chunks on Ray: ray://HOST:PORT, HOST:PORT or auto")
    p.add_argument("--jobs", type=int, default=None,
                   help="local worker processes without --cluster (default: the CPU count)")
    output_option(p, "--build-dir", kind="folder", default=None, metavar="DIR",
                  help="folder for generated Verilog, harness builds and the soak's state "
                        "(default: build/ in the repository)")
    output_option(p, "--state-dir", kind="folder", default=None, metavar="DIR",
                  help="folder of the soak's state and replay files, to keep or share them "
                       "apart from the builds (default: BUILD/soak)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)


def parse_mix(text):
    """``{"random": share, ...}`` from ``"random=0.6,cancel=0.3,special=0.1"``."""
    from sim.stimulus.draw import SOAK_MIX

    out = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in SOAK_MIX:
            raise CLIError(f"--mix: unknown kind {name!r} (kinds: {', '.join(SOAK_MIX)})")
        try:
            share = float(value)
        except ValueError:
            raise CLIError(f"--mix: {item!r} needs a number, as in {name}=0.5") from None
        if not share >= 0:
            raise CLIError(f"--mix: the share of {name} must be at least 0, not {value}")
        out[name] = share
    if not sum(out.values()) > 0:
        raise CLIError("--mix: the shares add up to 0")
    return out


def run(args):
    import os

    from sim.bench.runner import REPO, SimulatorError
    from sim.sweep import Interrupted, soak

    from .sweep import _check_cluster

    steps = args.steps
    if not (steps == int(steps) and steps >= 1):
        raise CLIError(f"--steps must be a whole number of at least 1, not {args.steps:g}")
    if args.chunk_steps < 1:
        raise CLIError(f"--chunk-steps must be at least 1, not {args.chunk_steps}")
    for name in ("valid_prob", "ready_prob"):
        value = getattr(args, name)
        if not 0 < value <= 1:
            raise CLIError(f"--{name.replace('_', '-')} must be in (0, 1], not {value}")
    if args.jobs is not None and args.jobs < 1:
        raise CLIError(f"--jobs must be at least 1, not {args.jobs}")
    mix = parse_mix(args.mix)
    refuse_interleave(args, "soak")
    cluster = _check_cluster(args.cluster)
    build_root = check_output_folder(args.build_dir or REPO / "build", "--build-dir")
    state_dir = (check_output_folder(args.state_dir, "--state-dir")
                 if args.state_dir is not None else None)
    if args.rtl_dir or args.manifest:
        rtl = select_module(args, "soak")
        unit, params = None, None
    else:
        rtl = None
        unit, params = unit_params(args)
    from hif4spec import unit_spec
    name = unit if rtl is None else rtl[1]["unit"]
    if unit_spec(name).formats:
        raise CLIError(f"{name} is a multi-format unit, which the soak does not shrink or "
                       f"replay; verify it in chunks with hif4 verify --unit {name} --vectors N")
    try:
        state, report = soak(unit, params, rtl=rtl, steps=int(steps), chunk=args.chunk_steps,
                             seed=args.seed, mix=mix, valid_prob=args.valid_prob,
                             ready_prob=args.ready_prob, cluster=cluster,
                             jobs=args.jobs or os.cpu_count() or 1, progress=not args.quiet,
                             build_root=build_root, state_dir=state_dir)
    except Interrupted as exc:
        print(f"soak: stopped ({exc.report.summary('chunks')}); the same command goes on "
              "where it stopped", file=sys.stderr)
        return 130
    except SimulatorError as exc:
        raise ToolError(str(exc)) from None
    return summarize(state, report, int(steps), args.chunk_steps)


def summarize(state, report, steps, chunk):
    """Print the soak's totals and failures; returns the exit status."""
    from hif4spec import unit_spec
    from sim.sweep import soak_totals

    s = state["settings"]
    t = soak_totals(state, -(-steps // chunk))
    what = "groups" if unit_spec(s["unit"]).kind == "encoder" else "steps"
    print(f"{s['module']}: {t['steps']:,} of {steps:,} {what} in {t['chunks']} chunks, "
          f"{t['outputs']:,} outputs checked, {t['mismatches']} mismatches "
          f"in {len(t['failed'])} chunks; {t['seconds']:,.0f} s of worker time "
          f"({t['steps'] / t['seconds'] if t['seconds'] else 0:,.0f} {what}/s per worker), "
          f"{report.seconds:,.0f} s this run ({report.summary('chunks')})")
    print(f"state: {display_path(state['path'])}")
    for c in t["failed"]:
        why = ("timeout" if c["timeout"] else "late output" if c["late"] and
               not c["mismatches"] else f"{c['mismatches']} mismatches")
        case = c.get("case")
        print(f"FAIL: chunk {c['index']}: {why}; replay ({c.get('case_steps')} steps): "
              f"hif4 verify --replay {display_path(case)}" if case else
              f"FAIL: chunk {c['index']}: {why}")
    if report.failed:
        for name, err in report.failed.items():
            print(f"FAIL: {name} did not run: {err}", file=sys.stderr)
    return 1 if t["failed"] or report.failed or t["steps"] < steps else 0
