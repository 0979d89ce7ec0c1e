"""The one place terminal output is configured.

Rich assumes 80 columns when output is not a terminal (a pipe, a CI log), which folds the wide
report tables into unreadable ellipses; there we use 120 unless COLUMNS says otherwise.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console


def make_console(*, stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(stderr=stderr, width=120 if wide else None)
