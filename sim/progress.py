"""Progress of long work on stderr, through tqdm.

Work that ends within :data:`DELAY_S` seconds shows nothing. Longer work, on a terminal:
the bar is redrawn in place; anywhere else (a log file, a pipe, CI): the same tqdm status is
written as plain lines, at most one every :data:`LOG_INTERVAL_S` seconds and the last, so a
log holds no carriage returns and a long run is never silent for long.
"""

import sys
import time

from tqdm import tqdm

__all__ = ["DELAY_S", "LOG_INTERVAL_S", "progress", "Reporter"]

#: Seconds of work before anything is shown.
DELAY_S = 0.5

#: Seconds between two progress lines when stderr is not a terminal.
LOG_INTERVAL_S = 20.0


class _Lines:
    """A file for tqdm that turns every in-place redraw into one plain line."""

    def __init__(self, stream):
        self.stream = stream
        self.last = None

    def write(self, text):
        line = text.replace("\r", "").rstrip()
        if line and line != self.last:
            self.stream.write(line + "\n")
            self.last = line

    def flush(self):
        self.stream.flush()


class _LogBar(tqdm):
    """A tqdm bar for :class:`_Lines`: closing does not repeat a final state already shown."""

    def close(self):
        if not self.disable and getattr(self, "last_print_n", None) == self.n:
            self.leave = False          # the last line written is already the final one
        super().close()


def progress(total=None, desc="", *, enabled=True, stream=None, unit="it"):
    """A tqdm bar on ``stream`` (default stderr); ``enabled=False`` shows nothing.

    Update it with ``bar.update(n)`` and name the current item with
    ``bar.set_postfix_str(text, refresh=False)``; close it (or use it as a context manager)
    to print the final state.
    """
    stream = stream or sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty()
    kind = tqdm if tty else _LogBar
    return kind(total=total, desc=desc, unit=unit, disable=not enabled, leave=True,
                file=stream if tty else _Lines(stream), dynamic_ncols=tty, ascii=not tty,
                mininterval=0.1 if tty else LOG_INTERVAL_S, delay=DELAY_S)


class Reporter:
    """A ``report(i, n, what)`` callback (``i`` of ``n`` done, now at ``what``) that opens a
    :func:`progress` bar on its first call; :meth:`close` closes it if it was opened."""

    def __init__(self, desc, *, enabled=True, unit="it"):
        self.desc, self.enabled, self.unit, self.bar = desc, enabled, unit, None

    def __call__(self, i, n, what):
        """Report; a call without progress (``i`` unchanged) redraws the bar once its
        interval has passed, so a caller that calls every few seconds while one long item
        runs keeps the elapsed time moving."""
        if self.bar is None:
            self.bar = progress(n, self.desc, enabled=self.enabled, unit=self.unit)
        bar = self.bar
        bar.set_postfix_str(what, refresh=False)
        if i != bar.n:
            bar.update(i - bar.n)
        elif not bar.disable:
            now = time.time()
            if now - bar.last_print_t >= bar.mininterval and now >= bar.start_t + bar.delay:
                bar.refresh()
                bar.last_print_t = now

    def close(self):
        if self.bar is not None:
            self.bar.close()
