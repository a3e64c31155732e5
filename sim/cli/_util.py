"""Shared helpers for CLI subcommands: error types, safe input loading, output paths checked
before any work and written all or nothing, and the unit-selecting options (``--unit
--residual --stages --lanes --accum --interleave``, ``--rtl-dir``/``--manifest``) with their
choices, defaults and help texts taken from :mod:`hif4spec`."""

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

from hif4spec import (ACC_FIELD, ACCUMS, DEFAULTS, EXACT_ACCUMS, INTERLEAVES, REFERENCE_ACCUM,
                      TRUNC_BITS, LANES, RESIDUAL_MODES, STAGES, STEP_ELEMS, UNITS, check_params,
                      unit_spec, units_of_kind)

__all__ = ["CLIError", "ToolError", "output_option", "check_output_file", "check_output_folder",
           "make_folder", "write_files", "atomic_output", "load_npy", "parse_choice_list",
           "add_unit_options", "unit_params", "unit_lists", "select_module", "read_manifest",
           "say_using", "display_path", "refuse_interleave"]


class CLIError(Exception):
    """Bad input from the user; shown as one line, exit status 2."""


class ToolError(Exception):
    """A tool run that failed (a simulator build, say), named with its log; shown as one
    line, exit status 1."""


def output_option(parser, *flags, kind, **kwargs):
    """``parser.add_argument`` for an option naming a file (``kind="file"``) or a folder
    (``"folder"``) the command writes; the action is marked (``action.output = kind``) so
    that the bad-use tests find every output option. Check its value with
    :func:`check_output_file` / :func:`check_output_folder` before any work."""
    if kind not in ("file", "folder"):
        raise ValueError(f"kind must be 'file' or 'folder', not {kind!r}")
    action = parser.add_argument(*flags, **kwargs)
    action.output = kind
    return action


def _probe(folder, option, path):
    """Create and remove a temporary file in ``folder``: the one test of writability that
    holds for root too (permission bits do not stop root; a read-only mount does)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".hif4-probe-", dir=folder)
    except OSError as exc:
        raise CLIError(f"{option} {str(path)!r}: cannot write in folder {str(folder)!r} "
                       f"({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)


def check_png_file(path, option):
    """:func:`check_output_file` for a plot: the name must end in ``.png``."""
    if not str(path).lower().endswith(".png"):
        raise CLIError(f"{option} writes a PNG file; give a name ending in .png, "
                       f"not {str(path)!r}")
    return check_output_file(path, option)


def check_output_file(path, option="output"):
    """Check, before any work, that ``path`` can be written as a file; returns it as a Path.

    Refused: a path that is a folder, a folder that does not exist (it is not created), a
    file standing where the folder should be, a folder the process cannot write in.
    """
    path = Path(path)
    if path.is_dir():
        raise CLIError(f"{option} {str(path)!r} is a folder; give a file name")
    _check_parent(path.parent, option, path)
    return path


def _check_parent(folder, option, path):
    """``folder`` (where ``path`` goes) must be an existing, writable folder."""
    if not folder.is_dir():
        base = folder
        while not base.exists() and base != base.parent:
            base = base.parent
        if base.exists() and not base.is_dir():
            raise CLIError(f"{option} {str(path)!r}: {str(base)!r} is a file, not a folder")
        raise CLIError(f"{option} {str(path)!r}: folder {str(folder)!r} does not exist; "
                       "create it first")
    _probe(folder, option, path)


def check_output_folder(path, option="output folder"):
    """Check, before any work, that ``path`` is a writable folder or can be made as one
    (its parent must exist: only the last level is created, by :func:`make_folder`)."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise CLIError(f"{option} {str(path)!r} is a file, not a folder")
        _probe(path, option, path)
        return path
    _check_parent(path.parent, option, path)
    return path


def make_folder(path):
    """Create a folder checked by :func:`check_output_folder` (nothing if it exists)."""
    try:
        Path(path).mkdir(exist_ok=True)
    except OSError as exc:
        raise CLIError(f"cannot create folder {str(path)!r} ({exc.strerror or exc})") from None


def _temp_beside(path, data):
    """Write ``data`` to a new temporary file in ``path``'s folder; returns its name."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)       # mkstemp makes 0600; give the usual mode
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def write_files(items):
    """Write every ``(path, bytes)`` of ``items``, or none of them.

    Each is written to a temporary file beside its target first; only when all are written
    are they moved into place. A failure removes the temporaries and any file already moved,
    and is raised as :class:`CLIError`.
    """
    items = [(check_output_file(path), data) for path, data in items]
    temps, moved = [], []
    target = None
    try:
        for target, data in items:
            temps.append((_temp_beside(target, data), target))
        for tmp, target in temps:
            os.replace(tmp, target)
            moved.append(target)
    except BaseException as exc:
        for tmp, _ in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        for done in moved:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(done)
        if isinstance(exc, OSError):
            raise CLIError(f"cannot write {str(target)!r} ({exc.strerror or exc})") from None
        raise


@contextlib.contextmanager
def atomic_output(path, mode="wb"):
    """Collect what the ``with`` block writes and put it at ``path`` (through
    :func:`write_files`) only when the block succeeds; a failure leaves nothing at ``path``.
    """
    import io

    path = check_output_file(path)
    buffer = io.BytesIO() if "b" in mode else io.StringIO()
    yield buffer
    data = buffer.getvalue()
    write_files([(path, data if isinstance(data, bytes) else data.encode())])


def load_npy(path):
    """Load a numeric ``.npy`` array or raise :class:`CLIError` saying what is wrong."""
    import numpy as np

    path = Path(path)
    if not path.exists():
        raise CLIError(f"input file {str(path)!r} does not exist")
    if not path.is_file():
        raise CLIError(f"input {str(path)!r} is not a file")
    with open(path, "rb") as handle:
        if handle.read(6) != b"\x93NUMPY":
            raise CLIError(f"input {str(path)!r} is not a readable .npy file: it has no NumPy "
                           "header; save arrays with numpy.save")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise CLIError(f"input {str(path)!r} is not a readable .npy file ({exc}); "
                       "save arrays with numpy.save") from None
    if not isinstance(array, np.ndarray):
        raise CLIError(f"input {str(path)!r} holds several arrays; give one .npy array")
    if array.dtype.kind not in "fiu" and array.dtype.name != "bfloat16":
        raise CLIError(f"input {str(path)!r} has dtype {array.dtype}, not a real number type; "
                       "give float16, bfloat16, float32 or float64 data")
    return array


def parse_choice_list(text, choices, what):
    """Split a comma-separated list and check every item is one of ``choices``."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise CLIError(f"empty {what} list; give one or more of {', '.join(choices)}")
    for item in items:
        if item not in choices:
            raise CLIError(f"unknown {what} {item!r}; choose from {', '.join(choices)}")
    return items


def _join(items):
    return ", ".join(map(str, items))


def add_unit_options(parser, *, several=False, rtl=None, unit_default=None, unit_note=None,
                     kind=None):
    """Add ``--unit --residual --stages --lanes`` (``--accum`` and ``--interleave`` unless
    ``kind`` is ``"encoder"``; and, with ``rtl``, ``--rtl-dir DIR`` and ``--manifest PATH``)
    to ``parser``; read them back with :func:`unit_params` or :func:`select_module`.

    ``several``: ``--unit`` and ``--residual`` take comma-separated lists (default: every
    unit; the residual modes of the standard set). ``rtl``: None (the command generates),
    ``"generate"`` (the command reads generated files with ``--rtl-dir``/``--manifest`` and
    generates without them) or ``"read"`` (the command always reads generated files,
    ``rtl_out/`` by default). ``unit_default``: the ``--unit`` default of a single unit;
    ``unit_note`` replaces "required" in its help when there is none. ``kind``: a single-unit
    command that handles one kind of unit (``hif4spec.KINDS``) lists and accepts only those.
    """
    names = _names(kind)
    parser.set_defaults(unit_kind=kind)
    per_unit = "; ".join(f"{UNITS[u].name}: {'/'.join(UNITS[u].residuals)}" for u in names)
    if several:
        units, standard = ",".join(_grid_names()), ",".join(_standard_residuals())
        parser.add_argument("--unit", default=None, metavar="LIST",
                            help=f"comma-separated units of {_join(UNITS)} (default: {units})")
        parser.add_argument("--residual", default=None, metavar="LIST",
                            help=f"comma-separated residual modes of {_join(RESIDUAL_MODES)}; "
                                 f"pairs a unit does not accept are left out ({per_unit}) "
                                 f"(default: {standard})")
    else:
        default = f"default {unit_default}" if unit_default else unit_note or "required"
        if rtl:
            default += "; with --manifest: the manifest's"
        # None when not given, so that --manifest can tell; the default is applied on use
        parser.add_argument("--unit", default=None, metavar="{" + ",".join(names) + "}",
                            help=f"unit: {_join(names)} ({default})")
        parser.set_defaults(unit_default=unit_default)
        parser.add_argument("--residual", "--resq", dest="residual", default=None,
                            metavar="{" + ",".join(RESIDUAL_MODES) + "}",
                            help=f"residual input of a dot unit, residual output of an "
                                 f"encoder ({per_unit}; default {DEFAULTS['residual']})")
    if rtl == "read":
        when = "not given: any in the folder, if only one matches"
    else:
        when = f"default {{}}{'; with --rtl-dir: any, if only one matches' if rtl else ''}"
    parser.add_argument("--stages", type=int, default=None,
                        metavar="{" + ",".join(map(str, STAGES)) + "}",
                        help=f"pipeline depth, {STAGES[0]} to {STAGES[-1]}: a dot unit's "
                             f"registers from input to output, an encoder's plus one "
                             f"({when.format(DEFAULTS['stages'])})")
    parser.add_argument("--lanes", type=int, default=None,
                        metavar="{" + ",".join(map(str, LANES)) + "}",
                        help=f"element products per cycle, one of {_join(LANES)}; a step "
                             f"takes {STEP_ELEMS}/lanes cycles ({when.format(DEFAULTS['lanes'])})")
    if kind != "encoder":
        with_accum = "; ".join(f"{u.name}: {'/'.join(u.accums)}" for u in units_of_kind("dot")
                               if u.name in names)
        also = ("; units without it keep the default" if several else "")
        parser.add_argument("--accum", default=None, metavar="{" + ",".join(ACCUMS) + "}",
                            help=f"accumulator back end of a dot unit: window (every bit of "
                                 f"every term, the reference), bounded (a window a little "
                                 f"wider than one term; both exact) or trunc (aligned to the "
                                 f"largest operand, {TRUNC_BITS} extra bits, truncated: not "
                                 f"exact, for comparison) ({with_accum}{also}; default "
                                 f"{DEFAULTS['accum']} where the unit and residual mode have "
                                 f"it, else {REFERENCE_ACCUM})")
        parser.add_argument("--interleave", type=int, default=None,
                            metavar="{" + ",".join(map(str, INTERLEAVES)) + "}",
                            help=f"accumulators of a dot unit: L independent accumulations "
                                 f"share it, each step naming its own in the payload field "
                                 f"{ACC_FIELD}, so the accumulation loop may take L cycles "
                                 f"(L > 1: with an exact back end, {'/'.join(EXACT_ACCUMS)}, "
                                 f"in hif4 generate and verify; default 1)")
    if rtl:
        group = parser.add_mutually_exclusive_group()
        where = ("read the modules here instead of generating them" if rtl == "generate"
                 else "folder with the generated modules and manifests (default: rtl_out/)")
        pick = "one module per unit and residual" if several else "exactly one module"
        group.add_argument("--rtl-dir", metavar="DIR", default=None,
                           help=f"{where}; the options above pick {pick}")
        group.add_argument("--manifest", metavar="PATH", default=None,
                           help="use the module of this manifest (its .v beside it)")


def _names(kind):
    """Unit names of ``kind`` (None: every unit), as registered."""
    return [u.name for u in (UNITS.values() if kind is None else units_of_kind(kind))]


def _check_kind(unit, kind):
    """:class:`CLIError` unless ``unit`` is a registered unit of ``kind`` (None: any)."""
    names = _names(kind)
    if unit not in names:
        what = {"dot": " dot-product"}.get(kind, "") if unit in UNITS else ""
        raise CLIError(f"Unit must be one of{what and ' the' + what + ' units'} "
                       f"{_join(names)}, not {unit!r}")


def _check(unit, residual=None, stages=None, lanes=None, kind=None, accum=None,
           interleave=None):
    """Check the given parameters against the spec (defaults fill the others)."""
    _check_kind(unit, kind)
    try:
        unit_spec(unit)
        check_params(unit, DEFAULTS["residual"] if residual is None else residual,
                     DEFAULTS["stages"] if stages is None else stages,
                     DEFAULTS["lanes"] if lanes is None else lanes, accum,
                     1 if interleave is None else interleave)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _accum(args):
    """``--accum`` as given (None when not given, or when the command has no such option)."""
    return getattr(args, "accum", None)


def _interleave(args):
    """``--interleave`` as given (None when not given, or when the command has no such
    option)."""
    return getattr(args, "interleave", None)


def refuse_interleave(args, command):
    """:class:`CLIError` for a command that handles units with one accumulator only, when
    ``--interleave`` asks for more or the unit of ``--manifest`` has more (``--rtl-dir``
    without ``--interleave`` picks among units with one, :func:`select_module`)."""
    given = _interleave(args)
    if given is not None and given not in INTERLEAVES:
        raise CLIError(f"Interleave must be one of {_join(INTERLEAVES)}, not {given!r}")
    ways, what = given or 1, f"--interleave {given}"
    if getattr(args, "manifest", None):
        manifest = read_manifest(args.manifest)[1]
        have = manifest.get("parameters", {}).get("interleave", 1)
        if have != 1:
            ways, what = have, f"{manifest['module']} (interleave {have})"
    if ways != 1:
        raise CLIError(f"{what}: hif4 {command} handles units with one accumulator only so "
                       f"far; hif4 verify checks interleaved units"
                       + ("" if command.startswith("simulate") else
                          ", hif4 simulate models them"))


def unit_params(args):
    """``(unit, {"residual", "stages", "lanes"} and, for a dot unit, "accum" and, where it
    is not 1, "interleave")`` of a single-unit command, completed from
    :data:`hif4spec.DEFAULTS` and checked (the form of :func:`hif4spec.resolve`)."""
    unit = args.unit or args.unit_default
    kind = getattr(args, "unit_kind", None)
    if unit is None:
        raise CLIError(f"give --unit NAME (one of {_join(_names(kind))})")
    _check(unit, args.residual, args.stages, args.lanes, kind, _accum(args), _interleave(args))
    given = {"residual": args.residual, "stages": args.stages, "lanes": args.lanes}
    if unit_spec(unit).kind == "dot":
        given["accum"] = _accum(args)
    params = {k: DEFAULTS[k] if v is None else v for k, v in given.items()}
    if _interleave(args) not in (None, 1):
        params["interleave"] = _interleave(args)
    return unit, params


def _grid_names():
    """Names of the units of the grids (``UnitSpec.grid``): a several-unit command's default
    (a unit outside them, such as a multi-format unit, is named with ``--unit``)."""
    return [u.name for u in UNITS.values() if u.grid]


def _standard_residuals():
    """The residual modes of the standard set, in ``RESIDUAL_MODES`` order."""
    return [r for r in RESIDUAL_MODES if any(r in u.standard for u in UNITS.values())]


def unit_lists(args):
    """``(units, residuals)`` of a several-unit command (defaults: every unit, the residual
    modes of the standard set), each checked against the spec."""
    units = parse_choice_list(args.unit or ",".join(_grid_names()), tuple(UNITS), "unit")
    residuals = parse_choice_list(args.residual or ",".join(_standard_residuals()),
                                  RESIDUAL_MODES, "residual mode")
    _check(units[0], stages=args.stages, lanes=args.lanes)
    accum = _accum(args)
    if accum is not None and not any(accum in unit_spec(u).accums for u in units):
        have = "; ".join(f"{u}: {'/'.join(unit_spec(u).accums) or 'none'}" for u in units)
        raise CLIError(f"--accum {accum}: no unit given has that accumulator back end "
                       f"({have}); choose one of {_join(ACCUMS)}")
    return units, residuals


def display_path(path):
    """``path`` relative to the working folder when it is below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def say_using(command, verilog):
    """Tell the user (stderr, one line) which module a command uses."""
    print(f"hif4 {command}: using {display_path(verilog)}", file=sys.stderr)


def read_manifest(path):
    """``(verilog_path, manifest)`` of a manifest file, or :class:`CLIError`."""
    path = Path(path)
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot read manifest {str(path)!r}: {exc}") from None
    if not isinstance(manifest, dict) or "unit" not in manifest or "module" not in manifest:
        raise CLIError(f"{str(path)!r} is not a unit manifest (written by hif4 generate)")
    verilog = path.with_name(f"{manifest['module']}.v")
    if not verilog.is_file():
        raise CLIError(f"manifest {str(path)!r} has no Verilog beside it ({verilog.name})")
    return verilog, manifest


def select_module(args, command):
    """``(verilog_path, manifest)`` picked by a single-unit command's options from
    ``--manifest`` or the manifests in ``--rtl-dir`` (default ``rtl_out/``); says which on
    stderr. ``--residual`` (``--accum``) not given means the default mode (back end),
    ``--interleave`` not given a unit with one accumulator; ``--stages``/``--lanes`` not
    given match any, and the options must leave exactly one module."""
    from sim.cost.estimate import RTL_DIR, find_manifests, select_manifest

    kind = getattr(args, "unit_kind", None)
    if args.manifest:
        verilog, manifest = read_manifest(args.manifest)
        try:
            _check_kind(manifest["unit"], kind)
        except CLIError as exc:
            raise CLIError(f"manifest {args.manifest!r}: {exc}") from None
        par = {"interleave": 1, **manifest.get("parameters", {})}
        given = {"unit": args.unit, "residual": args.residual, "stages": args.stages,
                 "lanes": args.lanes, "accum": _accum(args), "interleave": _interleave(args)}
        have = {"unit": manifest["unit"], **{k: par.get(k) for k in given if k != "unit"}}
        for key, value in given.items():
            if value is not None and value != have[key]:
                raise CLIError(f"--{key} {value} disagrees with manifest {args.manifest!r} "
                               f"({key} {have[key]}); drop --{key} or give another manifest")
    else:
        unit = args.unit or args.unit_default
        if unit is None:
            raise CLIError(f"give --unit NAME (one of {_join(_names(kind))}) or --manifest PATH")
        ways = _interleave(args) or 1
        _check(unit, args.residual, args.stages, args.lanes, kind, _accum(args), ways)
        rtl_dir = Path(args.rtl_dir) if args.rtl_dir else RTL_DIR
        if not rtl_dir.is_dir():
            raise CLIError(f"--rtl-dir {display_path(rtl_dir)!r} is not a folder")
        residual = DEFAULTS["residual"] if args.residual is None else args.residual
        every = find_manifests(rtl_dir)
        found = [(v, m) for v, m in every
                 if m.get("parameters", {}).get("interleave", 1) == ways]
        others = sorted({m.get("parameters", {}).get("interleave", 1) for _, m in every
                         if m["unit"] == unit} - {ways})
        if (ways != 1 or others) and not any(m["unit"] == unit for _, m in found):
            also = (f" (its modules of {unit} have interleave {'/'.join(map(str, others))}: "
                    f"give --interleave)" if others else "")
            make = f" --interleave {ways}" if ways != 1 else ""
            raise CLIError(f"no generated module of unit {unit} with interleave {ways} in "
                           f"{display_path(rtl_dir)}{also}; make it with `hif4 generate "
                           f"--unit {unit}{make} --out {display_path(rtl_dir)}`")
        try:
            verilog, manifest = select_manifest(found, unit, residual,
                                                args.stages, args.lanes, _accum(args),
                                                where=display_path(rtl_dir))
        except LookupError as exc:
            raise CLIError(str(exc)) from None
    say_using(command, verilog)
    return verilog, manifest
