"""Progress on long work: a bar with an ETA and a line per slow decision on a terminal (agent,
week, calls, seconds, the most common failure so far), and nothing at all when piped or under
``--json``."""

from __future__ import annotations

import io
import os
import re
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from arena.bench.pty_terminal import PtyTerminal, TerminalError
from arena.progress import decision_line, on_a_terminal, progress_of
from strategies.llm.connection import Connection
from tests.conftest import Arena
from tests.llm_server import FakeLLM, Received, Reply
from tests.tmux_terminal import Tmux


@dataclass(frozen=True)
class Seen:
    agent: str
    week: int
    seconds: float
    calls: int
    failures: tuple[str, ...] = ()
    start: str = "2024-06-02"


def plain(text: str) -> list[str]:
    """The lines a terminal shows, its control sequences taken out."""
    return [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line).rstrip() for line in text.splitlines()]


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120, color_system=None), out


def test_a_slow_or_model_backed_decision_gets_a_line_with_the_commonest_failure() -> None:
    console, out = terminal()
    with progress_of("replaying", 1, shown=True, decisions=4, console=console) as work:
        work.decided(Seen("llm", 1, 2.4, 2, ("HTTP 400: context", "HTTP 400: context")))
        work.decided(Seen("llm", 2, 0.5, 1, ("no JSON",)))
        work.decided(Seen("fav", 2, 0.01, 0))  # fast, no calls: counted, no line
        work.decided(Seen("slow", 2, 1.5, 0))
        work.advance()
    lines = plain(out.getvalue())
    assert "llm week 1 · 2 call(s) · 2.4 s · most common failure: HTTP 400: context (2)" in lines
    assert "llm week 2 · 1 call(s) · 0.5 s · most common failure: HTTP 400: context (2)" in lines
    assert "slow week 2 · 0 call(s) · 1.5 s" in lines
    assert not any(line.startswith("fav") for line in lines)
    assert work.progress.tasks[1].completed == 4  # the decisions' bar, every one counted
    assert work.progress.tasks[0].completed == 1
    assert work.watcher == work.decided


def test_with_more_than_one_cohort_each_line_names_its_cohort_s_start() -> None:
    """Two workers at the same week of two cohorts: their lines told apart by the start."""
    console, out = terminal()
    with progress_of("replaying", 2, shown=True, decisions=2, console=console) as work:
        work.decided(Seen("m", 6, 0.4, 1, start="2024-06-02"))
        work.decided(Seen("m", 6, 0.4, 1, start="2024-06-09 08:50"))
    lines = plain(out.getvalue())
    assert "2024-06-02 m week 6 · 1 call(s) · 0.4 s" in lines
    assert "2024-06-09 08:50 m week 6 · 1 call(s) · 0.4 s" in lines
    console, out = terminal()
    with progress_of("replaying", 1, shown=True, decisions=1, console=console) as work:
        work.decided(Seen("m", 6, 0.4, 1))
    assert "m week 6 · 1 call(s) · 0.4 s" in plain(out.getvalue())  # one cohort: no start


def test_the_commonest_failure_is_the_first_seen_among_equals() -> None:
    from collections import Counter

    line = decision_line(Seen("a", 3, 1.0, 1), Counter(["b", "a", "a", "b"]))
    assert line.endswith("most common failure: b (2)[/]")


def test_not_shown_nothing_is_drawn() -> None:
    console, out = terminal()
    with progress_of("replaying", 2, shown=False, decisions=1, console=console) as work:
        work.decided(Seen("llm", 1, 9.0, 3, ("timeout",)))
        work.advance()
    assert out.getvalue() == ""
    assert work.watcher is None  # a run is asked for no decisions at all


@pytest.mark.parametrize(
    ("stdout", "stderr", "as_json", "shown"),
    [(True, True, False, True), (True, True, True, False), (False, True, False, False),
     (True, False, False, False)],
)  # fmt: skip
def test_shown_only_on_a_terminal_and_never_under_json(
    monkeypatch: pytest.MonkeyPatch, stdout: bool, stderr: bool, as_json: bool, shown: bool
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: stderr)
    assert on_a_terminal(as_json=as_json) is shown


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    """A model that answers what no parser takes, a little slowly."""
    for name in Connection.model_fields:
        monkeypatch.delenv(f"ARENA_LLM_{name.upper()}", raising=False)

    def slow_refusal(_: Received) -> Reply:
        return Reply("I would rather not say.", stall=0.05)

    with FakeLLM(slow_refusal) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", "")
        monkeypatch.setenv("ARENA_LLM_RETRIES", "0")
        yield fake


ONE = ("--start", "2024-01-07", "--jobs", "1")
"""One cohort (three weekly decisions), replayed in the command's own process."""
TWO = ("--starts", "2024-01-07..2024-01-14")
"""Two cohorts, of three and of two weekly decisions."""
TWO_WORKERS = (*TWO, "--jobs", "2")
"""Those, each on a local worker process of its own."""
TWO_WEEKS = sorted([("2024-01-07", 1), ("2024-01-07", 2), ("2024-01-07", 3), ("2024-01-14", 1),
                    ("2024-01-14", 2)])  # fmt: skip
"""The lines of the two cohorts' decisions: each names its cohort's start."""


def replay_args(tape: Path, db: Path, how: tuple[str, ...] = ONE) -> list[str]:
    return [
        "replay", "--tape", str(tape), "--db", str(db), "--universe", "3", "--marks", "weekly",
        "--agent", "llm=llm:test/model", *how,
    ]  # fmt: skip


@pytest.mark.parametrize("how", [ONE, TWO_WORKERS], ids=["in process", "on workers"])
def test_piped_the_replay_shows_no_progress(
    arena: Arena, tmp_path: Path, server: FakeLLM, hand_tape_file: Path, how: tuple[str, ...]
) -> None:
    done = arena(*replay_args(hand_tape_file, tmp_path / "run.db", how))
    assert done.exit_code == 0, done.output
    assert "replaying" not in done.stderr and "call(s)" not in done.stderr


def on_a_pty(args: list[str]) -> str:
    """``arena ARGS`` on a pseudo-terminal 160 columns wide, with this process's model
    connection, to its end (which must be a success): the text it showed."""
    argv = [sys.executable, "-c", "from arena.cli import main; main()", *args]
    env = {k: v for k, v in os.environ.items() if k.startswith("ARENA_LLM_")} | {"COLUMNS": "160"}
    with PtyTerminal(argv, size=(160, 50), env=env) as screen:
        deadline = time.perf_counter() + 120
        try:
            while time.perf_counter() < deadline:
                screen._read(deadline)
        except TerminalError:
            pass  # the program ended
        assert screen.process.wait(10) == 0
    return "\n".join(plain(screen.output.decode(errors="replace")))


def weeks_decided(text: str) -> list[tuple[str, int]]:
    """The cohort's start (where the run has more than one) and the week of each LLM
    decision line shown (two calls each: the unreadable answer, and the one re-ask after it)."""
    found = re.findall(r"^(\S* ?)llm week (\d+) · 2 call\(s\)", text, re.M)
    return sorted((start.strip(), int(week)) for start, week in found)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "weeks"), [(ONE, [("", 1), ("", 2), ("", 3)]), (TWO_WORKERS, TWO_WEEKS)],
    ids=["in process", "on workers"],
)  # fmt: skip
def test_on_a_terminal_the_replay_shows_each_decision(
    tmp_path: Path,
    server: FakeLLM,
    hand_tape_file: Path,
    how: tuple[str, ...],
    weeks: list[tuple[str, int]],
) -> None:
    """``arena replay`` on a pseudo-terminal: the bars while it runs, and a line per decision
    of the LLM agent naming its calls and why they failed, from every cohort, also those on
    worker processes."""
    text = on_a_pty(replay_args(hand_tape_file, tmp_path / "run.db", how))
    assert "replaying cohorts" in text and "eta" in text
    assert "replaying decisions" in text
    assert weeks_decided(text) == weeks
    assert "most common failure:" in text
    assert "digest" in text


@pytest.mark.slow
def test_on_a_terminal_a_ray_replay_shows_each_decision(
    tmp_path: Path, server: FakeLLM, hand_tape_file: Path, ray_cluster: None
) -> None:
    """The same from Ray tasks, the command joining the tests' Ray instance."""
    import ray

    how = (*TWO, "--engine", "ray", "--address", ray.get_runtime_context().gcs_address)
    text = on_a_pty(replay_args(hand_tape_file, tmp_path / "run.db", how))
    assert "replaying decisions" in text
    assert weeks_decided(text) == TWO_WEEKS
    assert "most common failure:" in text


@pytest.mark.slow
def test_under_json_a_terminal_shows_no_progress(
    tmp_path: Path, server: FakeLLM, hand_tape_file: Path
) -> None:
    text = on_a_pty([*replay_args(hand_tape_file, tmp_path / "run.db", TWO_WORKERS), "--json"])
    assert '"digest"' in text
    assert "replaying" not in text and "call(s)" not in text


@pytest.mark.slow  # a real terminal: tmux
def test_after_ctrl_c_the_resume_line_is_whole_below_the_bars(tmux: Tmux, tmp_path: Path) -> None:
    """A replay in an 80-column tmux pane, Ctrl-C while its bars run: the bars are gone and
    the line saying how to resume is whole, on a line of its own (it was printed over the live
    bars, after their ``eta``, and cut at the pane's width)."""
    db = tmp_path / "long.db"
    program = Path(sys.executable).with_name("arena")
    command = shlex.join([str(program), "replay", "--starts", "2024-05-12..2024-11-03",
                          "--decisions", "daily", "--db", str(db)])  # fmt: skip
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "30",
         "env", *(f"{k}={v}" for k, v in env.items()),
         "sh", "-c", f"trap true INT; {command}; echo replay-ended $?; sleep 600")  # fmt: skip
    tmux.wait_for("replaying decisions")  # the shell outlives the Ctrl-C (trapped, not ignored)
    tmux("send-keys", "-t", "step", "C-c")
    tmux.wait_for("replay-ended")
    screen = tmux("capture-pane", "-p", "-J", "-t", "step").splitlines()
    message = (
        f"interrupted: {db} holds the run up to the decision Ctrl-C cut short, kept as a HOLD "
        "if it asked a model (a run never interrupted may have traded there); the same "
        "command resumes it"
    )
    assert message in [line.rstrip() for line in screen], "\n".join(screen)
    assert "replay-ended 130" in screen
    assert not any("eta" in line or "replaying" in line for line in screen), "\n".join(screen)
