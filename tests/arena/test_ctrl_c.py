"""Ctrl-C at the CLI: from the first instant of the console script, a quiet end with status
130 (or the command's normal end), never a trace from arena's code.

At the start, each trial starts the installed ``arena`` script as a process and sends the
terminal's SIGINT to its group after a delay; the delays step through the start-up (the
interpreter's, the CLI's import, the command's own imports and work). What arena cannot cover
runs before any of its code, and a trace from there is told apart by where it struck
(``before_arena``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

ARENA = Path(sys.executable).parent / "arena"
TRIALS = 20
LAST = 0.3
"""Seconds: the delays are 0, LAST / TRIALS, ... up to LAST (the CLI's import ends near 0.1 s,
a replay's first cohort runs past 0.3 s)."""
BOUND = 60.0
"""Seconds past which a process that has not ended hangs: a bound on a hang, not a speed test."""

STDLIB = sysconfig.get_paths()["stdlib"]
FILE = re.compile(r'^  File "([^"]+)"', re.MULTILINE)


def before_arena(err: str) -> bool:
    """A Ctrl-C that struck before arena's entry (``arena/__main__.py``) ran: while the
    interpreter started (it says "init_import_site" itself) or while the console script
    imported the package (``arena/__init__.py``), so every frame of its trace is the script's,
    the package's ``__init__``, the standard library's or the editable install's finder.

    One such trace cannot be placed: a KeyboardInterrupt raised inside the import system's
    callback for a module lock is printed ("Exception ignored in ... _get_module_lock") and
    dropped, with importlib's frame alone: 3 in 800 Ctrl-Cs over the first 0.2 s of ``arena
    --help`` (one 7 ms after the start, in ``site``). It is let through wherever it struck."""
    if "Fatal Python error: init_import_site" in err:
        return True
    allowed = (str(ARENA), str(Path(__file__).parents[2] / "arena" / "__init__.py"))
    return all(
        path in allowed
        or path.startswith((STDLIB, "<frozen "))
        or Path(path).name.startswith("__editable__")
        for path in FILE.findall(err)
    )


def interrupted_at(delay: float, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen([str(ARENA), *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, cwd=cwd,
                               start_new_session=True)  # fmt: skip
    try:
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGINT)  # as the terminal sends it: the whole group
        _, err = process.communicate(timeout=BOUND)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(args, process.returncode, "", err)


@pytest.mark.slow  # 40 processes, each sent a real SIGINT
@pytest.mark.parametrize("args", [("--help",), ("replay", "--db", "run.db", "--json")])
def test_ctrl_c_at_any_moment_of_the_start_ends_quietly(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    ends = []
    for k in range(TRIALS):
        folder = tmp_path / str(k)  # each replay from nothing
        folder.mkdir()
        done = interrupted_at(LAST * k / TRIALS, *args, cwd=folder)
        ends.append(done.returncode)
        if "Traceback" in done.stderr or "Fatal Python error" in done.stderr:
            assert before_arena(done.stderr), done.stderr
            continue
        # -SIGINT: killed before Python set its handler (a shell's own Ctrl-C end); 0: done first
        assert done.returncode in (130, 0, -signal.SIGINT), done.stderr
        assert "Aborted" not in done.stderr, done.stderr
    assert 130 in ends, ends  # the Ctrl-C did reach the command as it started


def test_a_ctrl_c_in_a_command_ends_with_130_and_imports_nothing_more(tmp_path: Path) -> None:
    """A command's KeyboardInterrupt (click's Abort) passes the CLI's edge as status 130 and no
    "Aborted." line, without the domain errors' roots being imported on its way out: they bring
    httpx, 60 ms of imports in which a second Ctrl-C printed a trace from inside an import."""
    (tmp_path / "pressed.py").write_text(
        "import click\n\n\n@click.command()\ndef pressed() -> None:\n    raise KeyboardInterrupt\n"
    )
    script = textwrap.dedent("""
        import sys
        from arena import cli
        cli.COMMANDS["pressed"] = "pressed:pressed"
        sys.argv = ["arena", "pressed"]
        try:
            cli.main()
        finally:
            print("strategies.llm.client" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)},
                          timeout=BOUND)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr.strip()) == (130, "False\n", "")
