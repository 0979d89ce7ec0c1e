"""README.md's tour: every command in it names a real command with real options, and the ones
that run on the embedded sample alone run, in the tour's order, as a newcomer would type them.

The rest (a file of the reader's own, the network, a Ray cluster, a long benchmark) are parsed
by the command they name, so a renamed option or command fails here rather than in a reader's
terminal.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from arena import open_run
from arena.cli import cli

ROOT = Path(__file__).resolve().parents[1]
ARENA = Path(sys.executable).parent / "arena"
SAMPLE_DIGEST = "c890b6c510ee6c3dffef419d83a2599cddc15f9af968a50396e0f063b89d7c3b"
"""The first replay's: the embedded sample's one cohort, as ``arena replay`` alone writes it."""
TOUR = re.compile(r"## A tour\n\n```bash\n(.*?)```", re.S)

NEEDS_MORE = {
    "./their.py:Them": "a plugin file of the reader's own",
    "my.tape": "a tape of the reader's own",
    "m.json": "the reader's Polymarket export",
    "record": "the network",  # arena tapes record
    "--engine": "a Ray cluster",
    "bench": "minutes of benchmarking",
    "lab": "minutes of experiments",
    "step": "a terminal (driven in tests/arena/step/)",
}


def tour() -> list[list[str]]:
    """The tour's command lines, continuation lines joined, comments dropped."""
    found = TOUR.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, "README.md lost its tour (a ```bash block under '## A tour')"
    text = found.group(1).replace("\\\n", " ")
    return [argv for line in text.splitlines() if (argv := shlex.split(line, comments=True))]


def runnable(argv: list[str]) -> bool:
    """No word of the line needs what the sample alone cannot give (a word may hold more, as
    ``them=./their.py:Them`` does)."""
    return not any(need in word for word in argv[1:] for need in NEEDS_MORE)


def test_every_tour_line_is_an_arena_command_with_options_it_has() -> None:
    lines = tour()
    assert len(lines) >= 15
    for argv in lines:
        assert argv[0] == "arena", argv
        command: click.Command = cli
        parent = click.Context(cli, info_name="arena")
        args = argv[1:]
        # a group that runs on its own (`tapes record --out …`) takes its options before any
        # subcommand's name (`tapes record books …`)
        while isinstance(command, click.Group) and not (
            command.invoke_without_command and args and args[0].startswith("-")
        ):
            name, sub, args = command.resolve_command(parent, args)
            assert name is not None and sub is not None, f"no such command: {shlex.join(argv)}"
            command, parent = sub, click.Context(sub, info_name=name, parent=parent)
        # parsed for real: an unknown option or a missing argument is a UsageError here
        command.make_context(parent.info_name, list(args), parent=parent.parent)


@pytest.mark.slow  # the tour's runnable commands as processes: the 26-cohort replay takes seconds
def test_the_tour_runs_on_the_sample(tmp_path: Path) -> None:
    # the tour is typed in the clone: its example files are where the clone has them
    (tmp_path / "arena").mkdir()
    (tmp_path / "arena" / "examples").symlink_to(ROOT / "arena" / "examples")
    ran = []
    said = {}
    for argv in tour():
        if not runnable(argv):
            continue
        done = subprocess.run(
            [str(ARENA), *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stdout}\n{done.stderr}"
        ran.append(argv[1])
        said[shlex.join(argv[1:])] = done.stdout
    # replay four times (two on the BTC books, one of them rolling), report twice, verify three
    # times, export, backtest, strategies, score, tapes show
    assert ran.count("replay") == 4 and ran.count("report") == 2 and ran.count("verify") == 3
    assert {"verify", "export", "backtest", "strategies", "score", "tapes", "ladder"} <= set(ran)
    assert (tmp_path / "report" / "index.html").exists()
    assert (tmp_path / "backtest" / "index.html").exists()
    # each experiment in a log of its own: the one Sunday of the first replay (the sample's
    # digest), the 26 Sundays of the second, one cohort on the books, one rolling
    cohorts = {db: len(open_run(tmp_path / db).cohorts)
               for db in ("arena.db", "weekly.db", "btc.db", "rolling.db")}  # fmt: skip
    assert cohorts == {"arena.db": 1, "weekly.db": 26, "btc.db": 1, "rolling.db": 1}
    assert f"digest {SAMPLE_DIGEST}" in said["replay"]
    assert "Leaderboard across 26 cohort(s), by mean return" in said["report weekly.db"]
    assert "26 cohort(s) rebuilt" in said["verify weekly.db --tape sample"]
