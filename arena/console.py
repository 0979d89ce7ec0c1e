"""The one place terminal output is configured.

Rich assumes 80 columns when output is not a terminal (a pipe, a CI log), which folds the wide
report tables into unreadable ellipses; there we use 120 unless COLUMNS says otherwise.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from rich.console import Console


def make_console(*, stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(stderr=stderr, width=120 if wide else None)


@contextlib.contextmanager
def plugins_print_to_stderr() -> Iterator[None]:
    """While agents are loaded and run, what anything prints goes to stderr.

    A command's stdout is its result, and with ``--json`` a machine parses it: one ``print`` in
    a plugin's ``decide`` (or at its import) made ``arena replay --json`` unreadable. Workers
    (the local pool, ``--isolate``'s, Ray's, whose logs the driver echoes) write to file
    descriptor 1 of their own, inherited when they start, so descriptor 1 is pointed at
    stderr's file too, not only ``sys.stdout``; both are restored before the result is printed.
    """
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1 to redirect (a closed stdout): Python's stream only
        saved = None
    else:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
