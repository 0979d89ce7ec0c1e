"""The console script: every mistake a user makes ends in one line and a non-zero exit."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tests.conftest import Arena

ARENA = Path(sys.executable).parent / "arena"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ARENA), *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )


def in_process(
    *args: str, cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> subprocess.CompletedProcess[str]:
    """``arena.cli.main`` (the console script's entry point) called here with ``args`` as its
    command line: what ``run`` gives without starting Python and importing arena again."""
    from arena.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["arena", *args])
    capsys.readouterr()
    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as stopped:
            main()
    finally:  # main leaves Ctrl-C ignored for the process's end: this process goes on
        signal.signal(signal.SIGINT, handler)
    out, err = capsys.readouterr()
    assert isinstance(stopped.value.code, int)  # main ends every failure with sys.exit(status)
    return subprocess.CompletedProcess(["arena", *args], stopped.value.code, out, err)


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("nosuch",), 2, "No such command 'nosuch'"),
        (("replay", "--universe", "x"), 2, "'x' is not a valid integer"),
        (("replay", "--agent", "x=nosuch"), 1, "unknown strategy 'nosuch'"),
        (("replay", "--agents-file", "agents.csv"), 2, "use a .toml or .json file"),
        (("replay", "--agents-file", "empty.toml"), 2, "--agents-file: the file names no agent"),
        (("replay", "--agents-file", "twice.json"), 2, "twice.json: 'a' given twice"),
        (("replay", "--starts", "2024-13-01..2024-14-01"), 2, "2024-13-01"),
        (("report", "missing.db"), 1, "missing.db: no such event log"),
        (("tapes", "show", "missing.tape"), 1, "missing.tape"),
        (("score", "missing.csv"), 1, "missing.csv: cannot read"),
    ],
)
def test_bad_input_is_one_line_on_stderr(
    tmp_path: Path, args: tuple[str, ...], code: int, says: str,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Each mistake through the entry point in this process; one of them also through the
    installed script as a process of its own, which must answer the same."""
    (tmp_path / "agents.csv").write_text("a,b\n")
    (tmp_path / "empty.toml").write_text("# agents to come\n")
    (tmp_path / "twice.json").write_text('{"a": "hold", "a": "favourite"}')
    done = in_process(*args, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    if args == ("replay", "--agent", "x=nosuch"):
        process = run(*args, cwd=tmp_path)
        assert (process.returncode, process.stdout, process.stderr) == (
            done.returncode, done.stdout, done.stderr,
        )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and says in lines[0], done.stderr


def test_help_and_version_still_work(tmp_path: Path) -> None:
    assert "replay" in run("--help", cwd=tmp_path).stdout
    assert run("--version", cwd=tmp_path).stdout.startswith("arena, version ")
    assert "Example" in run("replay", "--help", cwd=tmp_path).stdout


def test_help_lists_each_command_by_its_own_summary() -> None:
    """``arena --help`` lists summaries kept in ``arena.cli``; they must still be each
    command's own first paragraph (and every command must have one)."""
    from arena.cli import COMMANDS, SUMMARIES, cli

    ctx = click.Context(cli)
    assert set(SUMMARIES) == set(COMMANDS)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        assert command.get_short_help_str(limit=10_000) == SUMMARIES[name], name


def test_help_imports_no_command_module() -> None:
    """What makes ``arena --help`` fast (0.06 s instead of 0.7): no command, and none of the
    heavy libraries the commands use, is imported to list them."""
    probe = (
        "import sys\n"
        "sys.argv = ['arena', '--help']\n"
        "from arena.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('numpy', 'httpx', 'pydantic', 'freezegun', 'rich', 'arena.commands.')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "Commands:" in done.stdout and "verify" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "error",
    [
        "arena.errors:ArenaError",
        "arena.backtests.backtest:BacktestError",
        "arena.llm_server:LocalLLMError",
        "ledger.errors:LedgerError",
        "ledger.errors:IntegrityError",
        "ledger.snapshot:SnapshotError",
        "replays.errors:TapeError",
        "replays.http:FetchError",
        "strategies.api:StrategyError",
        "strategies.api:RunStopped",
        "strategies.llm.client:LLMError",
    ],
)
def test_every_domain_error_ends_at_the_edge_as_its_first_line(
    arena: Arena, error: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that does not catch a domain error still ends in one line: the edge does it
    once, for all of them (``cassette`` catches only OSError)."""
    import importlib

    from replays.errors import TapeError

    module, name = error.split(":")
    cls = getattr(importlib.import_module(module), name)

    exc = cls("what went wrong\nand a second line nobody needs")
    # a TapeError escapes its line breaks itself, so its one line is all of it
    line = str(exc) if issubclass(cls, TapeError) else "what went wrong"

    def broken(db: Path, out: Path) -> int:
        raise exc

    monkeypatch.setattr("arena.commands.cassette.export_cassette", broken)
    (tmp_path / "a.db").touch()  # the argument must exist; what is in it is never read
    result = arena("cassette", tmp_path / "a.db", tmp_path / "out.jsonl")
    assert (result.exit_code, result.output) == (1, f"Error: {line}\n")


def test_a_bug_is_not_dressed_as_a_domain_error(
    arena: Arena, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the domain roots are turned into a line; anything else is arena's bug and keeps
    its traceback (``main`` does not swallow it either)."""

    def broken(db: Path, out: Path) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr("arena.commands.cassette.export_cassette", broken)
    (tmp_path / "a.db").touch()  # the argument must exist; what is in it is never read
    result = arena("cassette", tmp_path / "a.db", tmp_path / "out.jsonl")
    assert result.exit_code == 1 and isinstance(result.exception, KeyError)


def test_a_missing_log_is_one_line_from_report(tmp_path: Path) -> None:
    """``report`` no longer catches LedgerError itself; the edge words it."""
    done = run("report", str(tmp_path / "missing.db"), cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("Error: ") and "missing.db" in done.stderr
