"""``arena step --tape …``: a replay stepped while it runs, in a child process of its own.

The scenario is ``test_frames``'s script on the hand tape (agents s and h, weekly decisions and
marks at +0, +7d, +14d; tie-w resolves at +7d, a at +14d, b at +21d). Stepped live it must
write exactly the log ``arena replay`` writes (the same digest), stop between steps with every
step committed, and resume under ``arena replay`` to the same digest. The app's view at every
stop is what ``arena report`` says of the log cut there.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from arena.run.cohort import CohortConfig
from arena.run.runner import Step
from arena.run.settings import RunOptions, RunSettings
from arena.step.app import StepApp
from arena.step.live import LiveError, LiveRun, LogTail
from arena.step.timeline import LogTimeline
from ledger.events import DecisionMade, Event
from ledger.store import EventStore
from replays.samples import sample_path
from replays.tape import Tape
from replays.tapefile import save_tape
from tests.arena.boundary.test_isolation import without_isolation
from tests.arena.step.test_app import board, report_totals, screen_text
from tests.arena.step.test_frames import SCRIPT, one_line_error
from tests.conftest import Arena
from tests.tmux_terminal import Tmux

START = "2024-01-07"
T0 = int(datetime(2024, 1, 7, tzinfo=UTC).timestamp())


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, hand_tape: Tape) -> Path:
    folder = tmp_path_factory.mktemp("live")
    save_tape(hand_tape, folder / "hand.tape")
    (folder / "script.json").write_text(json.dumps(SCRIPT))
    return folder


def options(folder: Path, db: Path) -> list[str]:
    """The replay options of the scenario, the same for ``arena replay`` and ``arena step``."""
    return [
        "--tape", str(folder / "hand.tape"), "--start", START, "--universe", "3",
        "--marks", "weekly", "--agent", f"s=scripted:{folder / 'script.json'}?checked=false",
        "--agent", "h=hold", "--db", str(db),
    ]  # fmt: skip


def replay_digest(arena: Arena, folder: Path, db: Path) -> str:
    return str(arena.json("replay", *options(folder, db))["digest"])


@pytest.fixture(scope="module")
def reference(arena: Arena, folder: Path) -> tuple[str, list[Event]]:
    """An uninterrupted ``arena replay``: its digest and its events."""
    db = folder / "reference.db"
    digest = replay_digest(arena, folder, db)
    with EventStore.open(db, readonly=True) as store:
        [cohort] = store.streams()
        return digest, list(store.read(stream=cohort))


def config(folder: Path) -> CohortConfig:
    return CohortConfig(
        start=datetime(2024, 1, 7, tzinfo=UTC),
        agents={"s": f"scripted:{folder / 'script.json'}?checked=false", "h": "hold"},
        universe=3,
        mark_cadence="weekly",
    )


@pytest.fixture
def live(folder: Path, tmp_path: Path) -> Iterator[LiveRun]:
    run = LiveRun(folder / "hand.tape", config(folder), tmp_path / "live.db")
    yield run
    run.stop()


def stored(db: Path) -> int:
    with EventStore.open(db, readonly=True) as store:
        return store.last_seq()


def test_each_step_is_committed_when_reported_and_the_log_is_the_replays(
    live: LiveRun, reference: tuple[str, list[Event]]
) -> None:
    digest, events = reference
    # opened + 3 listed; then per week: the mark, s's decision (+ its orders), h's HOLD
    assert live.advance("open").version == 4 == stored(live.db)
    first = live.advance("decision")
    # +0: the mark, s's BET with a placed+filled a and a placed+rejected b, h's HOLD; the
    # runner's own Step, sent through the pipe as it was yielded
    assert first == Step("decision", T0, 11) and type(first) is Step
    assert stored(live.db) == 11
    resolution = live.advance("resolution")  # tie-w at +7d: resolved, nothing held to settle
    assert (resolution.kind, resolution.version) == ("resolution", 12)
    end = live.advance("close")
    assert end.kind == "close" and end.version == len(events) == stored(live.db)
    assert live.advance("decision") == end  # nothing after the close
    tail = LogTail(live.db, live.cohort)
    assert tail.read(end.version) == events
    live.stop()
    with EventStore.open(live.db, readonly=True) as store:
        assert store.digest() == digest


def test_quitting_between_steps_leaves_a_log_arena_replay_completes(
    arena: Arena, folder: Path, tmp_path: Path, reference: tuple[str, list[Event]]
) -> None:
    db = tmp_path / "cut.db"
    run = LiveRun(folder / "hand.tape", config(folder), db)
    run.advance("decision")
    run.advance("decision")
    run.stop()
    assert stored(db) == 17  # up to h's HOLD at +7d: the rest was never decided
    assert replay_digest(arena, folder, db) == reference[0]


def test_a_dead_replay_process_is_a_clear_error_not_a_hang(live: LiveRun) -> None:
    live.advance("decision")
    assert live.pid is not None
    os.kill(live.pid, signal.SIGKILL)
    with pytest.raises(LiveError, match=r"the replay process died \(signal 9\) after version 11"):
        live.advance("decision")


def test_a_bad_tape_or_agent_is_a_one_line_error(
    arena: Arena, folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "x.db"
    bad = tmp_path / "bad.tape"
    bad.write_bytes(b"not a tape")
    no_tape = [*options(folder, db)]
    no_tape[1] = str(bad)
    assert "bad.tape: not a tape" in one_line_error(arena("step", *no_tape, "--no-input"))
    unknown = [*options(folder, db), "--agent", "z=no-such-strategy"]
    assert "no-such-strategy" in one_line_error(arena("step", *unknown, "--no-input"))
    late = [*options(folder, db)]
    late[3] = "2030-01-06"  # after the tape: nothing to decide
    assert "2030-01-06" in one_line_error(arena("step", *late, "--no-input"))
    mixed = arena("step", db, "--tape", folder / "hand.tape")
    assert mixed.exit_code == 2 and "give one or the other" in mixed.output


RAISES = """
from strategies.api import Decision, Strategy


class Raises(Strategy):
    def decide(self, view):
        raise RuntimeError("boom at " + str(view.week))
"""


def test_a_plugin_that_raises_is_a_recorded_hold(
    arena: Arena, folder: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "raises.py"
    plugin.write_text(RAISES)
    db = tmp_path / "raises.db"
    args = [*options(folder, db), "--agent", f"x={plugin}:Raises"]
    arena.json("step", *args)
    with EventStore.open(db, readonly=True) as store:
        decisions = [e for e in store.read() if isinstance(e, DecisionMade) and e.agent == "x"]
    assert [d.action for d in decisions] == ["HOLD"] * 3
    assert all("boom at" in (d.error or "") for d in decisions)


def test_piped_it_runs_the_replay_to_the_end_and_prints_the_frames(
    arena: Arena, folder: Path, tmp_path: Path, reference: tuple[str, list[Event]]
) -> None:
    db = tmp_path / "piped.db"
    frames = arena.json("step", *options(folder, db))
    assert [f["decision"]["action"] for f in frames] == ["BET", "SELL", "HOLD"]
    with EventStore.open(db, readonly=True) as store:
        assert store.digest() == reference[0]


# -- the app on a live replay --------------------------------------------------------------------


def opened(
    folder: Path, settings: RunSettings | CohortConfig, db: Path
) -> tuple[LiveRun, LogTail, LogTimeline]:
    """A live replay of the hand tape stepped to its open, and its log read that far."""
    run = LiveRun(folder / "hand.tape", settings, db)
    tail = LogTail(run.db, run.cohort)
    return run, tail, LogTimeline(tail.read(run.advance("open").version), run.cohort)


def shown_totals(app: StepApp) -> dict[str, str]:
    """Each agent's total value as the app's leaderboard shows it: the first dollar figure of
    its row, after its name (the columns after it vary with the screen's width)."""
    totals = {}
    for row in board(app):
        at = next(i for i, word in enumerate(row) if word.startswith("$"))
        totals[row[at - 1]] = row[at]
    return totals


def report_of(events: list[Event]) -> dict[str, str]:
    """Each agent's total value as ``arena report`` gives it for these events."""
    return {agent: f"${total:,.2f}" for agent, total in report_totals(events).items()}


# the same walk on a wide screen: what -m "not slow" leaves to CI, the narrow one checks the keys
@pytest.mark.parametrize("size", [(80, 24), pytest.param((200, 50), marks=pytest.mark.slow)])
def test_keys_step_the_live_replay_and_each_stop_is_the_report_of_the_cut(
    folder: Path, tmp_path: Path, size: tuple[int, int], reference: tuple[str, list[Event]]
) -> None:
    width, height = size
    run, tail, line = opened(folder, config(folder), tmp_path / "app.db")
    seen: list[tuple[str, int, str, int]] = []

    async def press(app: StepApp, pilot: object, key: str) -> str:
        await pilot.press(key)  # type: ignore[attr-defined]
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]
        screen = screen_text(app)
        lines = screen.splitlines()
        assert len(lines) >= height and all(len(x) <= width for x in lines[:height])
        seen.append((key, app.cut, screen, run.version))
        assert shown_totals(app) == report_of(line.events[: app.cut]), (key, app.cut)
        return screen

    async def drive() -> None:
        app = StepApp(line, run.agents, "s", (run, tail))
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            start = screen_text(app)
            assert "s has not decided yet" in start and "end of the log · event 4/4 · live" in start
            first = await press(app, pilot, "n")
            assert "week 1 · after s's decision · event 10/11" in first
            assert "✓ bought 2,000.00 YES of a at 0.500" in first
            again = await press(app, pilot, "d")  # h's HOLD: already in the log, no new step
            assert "after h's decision · event 11/11" in again
            await press(app, pilot, "r")
            assert "after a resolution · event 12/12" in seen[-1][2]
            await press(app, pilot, "p")
            assert app.cut == 11 and run.version == 12  # back: the replay stays
            await pilot.press("w", "3", "enter")  # week 3 is not in the log yet: run to it
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert "week 3 · after s's decision" in screen_text(app)
            assert run.step is not None and run.step.kind == "decision" and not run.closed
            await pilot.press("w", "2", "enter")  # week 2 is in the log now: no step
            await pilot.pause()
            assert "week 2 · after s's decision" in screen_text(app)
            assert "SELL" in screen_text(app)
            end = await press(app, pilot, "e")
            assert "end of the log" in end and "replay done" in end
            assert run.closed and app.cut == len(reference[1])
            assert shown_totals(app) == {"s": "$10,750.00", "h": "$10,000.00"}
            await pilot.press("q")
            await pilot.pause()
        assert not app.is_running

    try:
        asyncio.run(drive())
    finally:
        run.stop()
    with EventStore.open(run.db, readonly=True) as store:
        assert store.digest() == reference[0]


def test_a_replay_that_dies_under_the_app_is_shown_and_the_app_stays(
    folder: Path, tmp_path: Path
) -> None:
    run, tail, line = opened(folder, config(folder), tmp_path / "dies.db")

    async def drive() -> None:
        app = StepApp(line, run.agents, "s", (run, tail))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("d")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert run.pid is not None
            os.kill(run.pid, signal.SIGKILL)
            await pilot.press("r")
            await app.workers.wait_for_complete()
            await pilot.pause()
            screen = screen_text(app)
            assert "stopped: the replay process died (signal 9)" in screen
            assert app.cut == 11  # it stays on what the log holds
            await pilot.press("p")  # and still steps through it
            await pilot.pause()
            assert app.cut < 11
            await pilot.press("q")
            await pilot.pause()
        assert not app.is_running

    try:
        asyncio.run(drive())
    finally:
        run.stop()


# -- the real program in tmux, on the sample ------------------------------------------------------

SAMPLE_AGENTS = ["f=favourite", "c=contrarian", "r=random", "h=hold"]


def sample_options(db: Path) -> list[str]:
    agents = [a for spec in SAMPLE_AGENTS for a in ("--agent", spec)]
    return ["--tape", str(sample_path()), *agents, "--db", str(db)]


def start_in_tmux(tmux: Tmux, db: Path) -> None:
    program = Path(sys.executable).with_name("arena")
    command = shlex.join([str(program), "step", *sample_options(db)])
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "24",
         "env", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", command)  # fmt: skip


def wait_gone(tmux: Tmux) -> None:
    for _ in range(300):
        if not tmux.alive():
            return
        time.sleep(0.1)
    raise AssertionError(f"arena step did not quit; the screen:\n{tmux.screen()}")


def test_in_tmux_a_live_replay_of_the_sample_runs_to_the_end_with_the_reports_totals(
    tmux: Tmux, tmp_path: Path
) -> None:
    db = tmp_path / "sample.db"
    start_in_tmux(tmux, db)
    tmux.wait_for("· live")
    tmux("send-keys", "-t", "step", "d")
    tmux.wait_for("after f's decision")
    tmux("send-keys", "-t", "step", "e")
    end = tmux.wait_for("replay done")
    tmux("send-keys", "-t", "step", "q")
    wait_gone(tmux)
    with EventStore.open(db, readonly=True) as store:
        events: list[Event] = list(store.read())
    totals = report_totals(events)
    assert sorted(totals) == ["c", "f", "h", "r"]
    rows = [line.replace("│", " ").split() for line in end.splitlines()]
    for agent, total in totals.items():
        assert any(agent in row and f"${total:,.2f}" in row for row in rows), (agent, end)


def test_in_tmux_quitting_midway_then_arena_replay_gives_the_uninterrupted_digest(
    arena: Arena, tmux: Tmux, tmp_path: Path
) -> None:
    db = tmp_path / "midway.db"
    start_in_tmux(tmux, db)
    tmux.wait_for("· live")
    for agent in ("f", "c", "r"):
        tmux("send-keys", "-t", "step", "d")
        tmux.wait_for(f"after {agent}'s decision")
    tmux("send-keys", "-t", "step", "q")
    wait_gone(tmux)
    cut = stored(db)
    resumed = arena.json("replay", *sample_options(db))
    whole = arena.json("replay", *sample_options(tmp_path / "whole.db"))
    assert 0 < cut < stored(db)
    assert resumed["digest"] == whole["digest"]


SLEEPS = """
import time
from strategies.api import Decision, Strategy


class Sleeps(Strategy):
    def decide(self, view):
        time.sleep(600)
        return Decision.hold("never")
"""


def test_a_plugin_that_hangs_leaves_the_screen_usable_and_q_quits(
    folder: Path, tmp_path: Path
) -> None:
    """No time limit (--timeout 0) and a plugin that sleeps for ten minutes: the step runs off
    the event loop, the header says so, other keys still answer, and q ends the replay's
    process in the middle of its step."""
    plugin = tmp_path / "sleeps.py"
    plugin.write_text(SLEEPS)
    agents = {"s": f"scripted:{folder / 'script.json'}?checked=false", "z": f"{plugin}:Sleeps"}
    cohort = config(folder).model_copy(update={"agents": agents})
    settings = RunSettings(cohort=cohort, options=RunOptions(decision_timeout=0))
    run, tail, line = opened(folder, settings, tmp_path / "hangs.db")

    async def drive() -> None:
        app = StepApp(line, run.agents, "s", (run, tail))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("d")
            await pilot.pause(0.5)
            assert app.running and "replay running…" in screen_text(app)
            await pilot.press("a")  # the screen still answers keys
            await pilot.pause()
            assert app.agent == "z" and app.running
            await pilot.press("q")
            await pilot.pause()
        assert not app.is_running

    began = time.monotonic()
    try:
        asyncio.run(drive())
    finally:
        run.stop()
    assert time.monotonic() - began < 60  # not the plugin's ten minutes
    # the mark at +0 is a step of its own, committed on the way; the decisions never finished
    assert stored(run.db) == 5


PRINTS = """
import sys
from strategies.api import Decision, Strategy


class Prints(Strategy):
    def decide(self, view):
        print("thinking about week", view.week)
        print("and complaining", file=sys.stderr)
        return Decision.hold("said so")
"""


def test_what_plugins_print_goes_to_the_output_file_not_the_screen(
    folder: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "prints.py"
    plugin.write_text(PRINTS)
    cohort = config(folder).model_copy(update={"agents": {"p": f"{plugin}:Prints"}})
    output = tmp_path / "live.db.step-output.txt"
    run = LiveRun(folder / "hand.tape", cohort, tmp_path / "live.db", output)
    try:
        run.advance("decision")
        run.advance("decision")
    finally:
        run.stop()
    lines = output.read_text().splitlines()
    assert sorted(lines) == sorted(
        ["thinking about week 1", "and complaining", "thinking about week 2", "and complaining"]
    )


def test_a_week_the_replay_never_reaches_is_said_once_it_has_run_to_its_end(
    folder: Path, tmp_path: Path
) -> None:
    """w 99 ran the replay to its close and showed the end with no word of the week, nor of
    the weeks there are; w 0 before any decision is said at once, the replay not run."""
    run, tail, line = opened(folder, config(folder), tmp_path / "week.db")
    said: list[str] = []

    async def drive() -> None:
        app = StepApp(line, run.agents, "s", (run, tail))
        app.notify = lambda message, **kw: said.append(message)  # type: ignore[method-assign]
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("w", "0", "enter")
            await pilot.pause()
            assert not run.closed and not app.running
            await pilot.press("w", "9", "9", "enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert run.closed and app.cut == len(line.events)

    try:
        asyncio.run(drive())
    finally:
        run.stop()
    assert said == [
        "no decision in week 0: the log has no decision yet",
        "no decision in week 99: the replay ran to its end; the decisions are in weeks 1–3",
    ]


def test_isolate_runs_each_agent_in_a_worker_of_the_replays_process(
    folder: Path, tmp_path: Path, reference: tuple[str, list[Event]]
) -> None:
    """The replay's process was a daemon, which may start no process: arena step --isolate
    failed with 'daemonic processes are not allowed to have children'."""
    settings = RunSettings(cohort=config(folder), options=RunOptions(isolate=True))
    run = LiveRun(folder / "hand.tape", settings, tmp_path / "isolated.db")
    try:
        assert run.advance("decision").version == 11
        assert run.advance("close").kind == "close"
    finally:
        run.stop()
    with EventStore.open(run.db, readonly=True) as store:
        events = list(store.read())
    assert without_isolation(events) == reference[1]  # as the replay in one process
