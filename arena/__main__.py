"""The ``arena`` console script's (and ``python -m arena``'s) first step: Ctrl-C quiet while the
CLI loads.

Importing ``arena.cli`` (click and what it brings) takes 40 to 160 ms here, and a Ctrl-C then
printed a KeyboardInterrupt trace from the middle of some import. So before importing it, a
Ctrl-C is set to end the process at once, silently, with status 130 (the status a shell gives a
Ctrl-C); once the CLI is loaded, Python's own handling is put back for ``arena.cli.main``, which
ends a Ctrl-C its own way (and where a plugin's sandbox counts on finding Python's handler).

Nothing is imported before the handler is in place but what the interpreter has loaded already:
``_signal``, the module ``signal`` wraps, rather than ``signal`` itself, whose import turns its
constants into enums (0.7 ms in which a Ctrl-C still printed a trace). What runs before this
module cannot be covered here: the interpreter's start-up (``site``: a Ctrl-C there prints
"Fatal Python error: init_import_site") and ``arena/__init__.py``.
"""

from __future__ import annotations

import _signal
import os
from types import FrameType


def _quit(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C while the CLI loads: nothing was done yet, so nothing to say or to flush."""
    os._exit(130)


def main() -> None:
    """The CLI loaded with Ctrl-C quiet, then run with Python's handling of it. A Ctrl-C that
    whoever started the process told it to ignore (``nohup``, a background job) stays ignored."""
    quiet = _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
    if quiet:
        _signal.signal(_signal.SIGINT, _quit)
    from arena.cli import interrupted
    from arena.cli import main as run

    try:
        if quiet:
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        run()
    except KeyboardInterrupt:  # pressed in the instant before run() began to handle it
        interrupted()


if __name__ == "__main__":
    main()
