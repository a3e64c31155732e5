"""Shared helpers for CLI subcommands: error type, safe input loading, atomic output."""

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["CLIError", "atomic_output", "load_npy", "parse_choice_list"]


class CLIError(Exception):
    """Bad input from the user; shown as one line, exit status 2."""


@contextlib.contextmanager
def atomic_output(path, mode="wb"):
    """Open a temporary file beside ``path`` and move it into place only on success.

    A failure inside the ``with`` block leaves no file at ``path`` (nor a temporary).
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise CLIError(f"output folder {str(directory)!r} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)       # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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
