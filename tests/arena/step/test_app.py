"""``arena step``'s Textual app, driven by keys: with Textual's pilot at 80×24 and 200×50, and
as the real program in a tmux terminal.

The log is ``test_frames``'s scripted run on the hand tape (agents s and h): s buys $1,000 of a
YES at 0.5 (and has $40 of b rejected), sells half at 0.75 in week 2, holds in week 3; a
resolves Yes in week 3. At the end s holds $10,750 in cash (10,000 - 1,000 + 750 + 1,000) and
h its $10,000, which is what ``arena report`` says.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from textual.events import MouseScrollDown

from arena.bench.rebuild_bench import make_log
from arena.reports.model import report_data
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.step import panels
from arena.step.app import StepApp
from arena.step.log import open_timeline
from arena.step.timeline import LogTimeline
from arena.step.widgets import HELP, Lines
from ledger.events import CohortOpened, DecisionMade, Event, ModelCall, ModelCalled
from ledger.projection import Ledger
from ledger.store import EventStore
from replays.markets import MarketInfo, Resolution
from replays.samples import SAMPLE_HASH
from replays.tape import Tape
from replays.tapefile import save_tape
from strategies.loader import build_strategy
from tests.arena.step.test_frames import REJECTION, replay_script
from tests.conftest import Arena
from tests.tmux_terminal import Tmux


@pytest.fixture(scope="module")
def db(arena: Arena, tmp_path_factory: pytest.TempPathFactory, hand_tape: Tape) -> Path:
    folder = tmp_path_factory.mktemp("step-app")
    save_tape(hand_tape, folder / "hand.tape")
    return replay_script(arena, folder, folder / "hand.tape")


@pytest.fixture(scope="module")
def log(db: Path) -> tuple[str, list[Event]]:
    with EventStore.open(db, readonly=True) as store:
        [cohort] = store.streams()
        return cohort, list(store.read(stream=cohort))


def report_totals(events: list[Event]) -> dict[str, float]:
    [cohort] = report_data(Ledger().apply_all(events))["cohorts"]
    return {a["agent"]: a["total_value"] for a in cohort["agents"]}


def screen_text(app: StepApp) -> str:
    """The screen as a person sees it, line by line (the compositor's current strips)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


def board(app: StepApp) -> list[list[str]]:
    """The leaderboard's rows, word by word."""
    return [row.split() for row in app.query_one("#board", Lines).plain()[1:]]


def drive(
    log: tuple[str, list[Event]], size: tuple[int, int], script: list[str], db: Path | None = None
) -> list[str]:
    """Start the app on agent s, press each entry's keys (space-separated) and capture the
    screen after each; the last entry's keys are expected to quit. With ``db`` the app reads
    the log as ``arena step DB`` does (``open_timeline``), else the events read whole."""
    cohort, events = log
    screens: list[str] = []

    async def run() -> None:
        if db is None:
            await walk(LogTimeline(events, cohort))
            return
        with EventStore.open(db, readonly=True) as store:
            await walk(open_timeline(store, cohort))

    async def walk(line: LogTimeline) -> None:
        app = StepApp(line, ["s", "h"], "s")
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            screens.append(screen_text(app))
            for keys in script:
                await pilot.press(*keys.split())
                await pilot.pause()
                if app.is_running:
                    screens.append(screen_text(app))
                    screens[-1] += "\n" + repr(board(app))
        assert not app.is_running

    asyncio.run(run())
    return screens


# the same walk on a wide screen: what -m "not slow" leaves to CI, the narrow one checks the keys;
# and on the log read lazily, as arena step DB reads it
@pytest.mark.parametrize(("size", "lazy"), [((80, 24), False),
                                            pytest.param((200, 50), False, marks=pytest.mark.slow),
                                            ((80, 24), True)])  # fmt: skip
def test_keys_walk_the_log_and_every_panel_fits(
    log: tuple[str, list[Event]], db: Path, size: tuple[int, int], lazy: bool
) -> None:
    width, height = size
    screens = drive(log, size, ["n", "p", "r", "e", "a", "t", "w 2 enter", "t slash b enter",
                                "question_mark", "escape", "q"], db if lazy else None)  # fmt: skip
    start, week2, back, resolution, end, h, transcript, week, search, helped, closed = screens
    for screen in screens:
        lines = screen.splitlines()
        assert len(lines) >= height and all(len(line) <= width for line in lines[:height])
    assert "week 1 · after s's decision · event 10/26" in start
    assert "✓ bought 2,000.00 YES of a at 0.500" in start
    assert "✗ rejected buy YES on b" in start
    assert "$9,000.00" in start  # cash after the buy
    assert "week 2 · after s's decision · event 16/26" in week2
    assert "SELL" in week2 and "realized +250.00" in week2.replace("\n", " ")
    assert "week 1 · after s's decision · event 10/26" in back  # p returns where n left
    assert "after a resolution · event 12/26" in resolution
    assert "end of the log · event 26/26" in end
    totals = report_totals(log[1])
    assert totals == {"s": 10_750.0, "h": 10_000.0}
    # and, where the panel has room for it, the Brier of the prices paid beside the implied one
    paid = (["0.2500"], ["—"]) if width > 80 else ([], [])
    s_row = ["▶", "s", "$10,750.00", "+7.50%", "0.3600", "(1)", *paid[0]]
    assert f"[{s_row}, {['h', '$10,000.00', '+0.00%', '—', '(0)', *paid[1]]}]" in end
    assert "h's decision" in h and "HOLD" in h
    assert "h's decision asked no model" in transcript
    assert "week 2 · after h's decision · event 17/26" in week
    assert "markets 1/2 · 'b'" in search, search
    assert "next resolution" in helped and "go to week N" in helped
    assert "next resolution" not in closed


def test_the_view_holds_no_state_but_the_cut_and_the_agent(log: tuple[str, list[Event]]) -> None:
    """Switching the agent at a cut shows the same leaderboard; the portfolio is the new one's."""
    cohort, events = log

    async def run() -> None:
        app = StepApp(LogTimeline(events, cohort), ["s", "h"], "s")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("e")
            await pilot.pause()
            before = board(app)
            await pilot.press("a")
            await pilot.pause()
            assert app.cut == len(events)
            assert [r[-4:] for r in board(app)] == [r[-4:] for r in before]
            assert app.view.portfolio.total_value == 10_000.0

    asyncio.run(run())


# -- the real program in a real terminal --------------------------------------------------------


def test_arena_step_in_tmux_runs_to_the_end_and_shows_the_reports_totals(
    tmux: Tmux, db: Path, log: tuple[str, list[Event]]
) -> None:
    program = Path(sys.executable).with_name("arena")
    command = f"{shlex.quote(str(program))} step {shlex.quote(str(db))} --agent s"
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "24",
         "env", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", command)  # fmt: skip
    first = tmux.wait_for("after s's decision")
    assert REJECTION.split(" is ")[0] in first.replace("\n", " ")
    tmux("send-keys", "-t", "step", "e")
    end = tmux.wait_for("end of the log")
    totals = report_totals(log[1])
    for agent, total in totals.items():
        rows = [line.replace("│", " ").split() for line in end.splitlines()]
        assert any(agent in row and f"${total:,.2f}" in row for row in rows), end
    tmux("send-keys", "-t", "step", "q")
    for _ in range(100):
        if not tmux.alive():
            break
        time.sleep(0.1)
    assert not tmux.alive()


def test_the_mouse_wheel_scrolls_a_long_markets_panel(tmp_path: Path) -> None:
    """60 markets at 80×24: the wheel over the markets panel brings later markets into view."""
    with EventStore.open(tmp_path / "wide.db") as store:
        make_log(store, 3_000, markets=60, agents=("x", "y"))
    with EventStore.open(tmp_path / "wide.db", readonly=True) as store:
        [cohort] = store.streams()
        events = list(store.read(stream=cohort))
    line = LogTimeline(events, cohort)

    async def run() -> None:
        app = StepApp(line, ["x", "y"], "x")
        async with app.run_test(size=(80, 24)) as pilot:
            app.move(line.next_stop(len(events) // 2, "decision", "x"))
            await pilot.pause()
            markets = app.query_one("#markets", Lines)
            assert markets.count == 60
            # biggest volume first: m0059 is the first row under the heading
            assert markets.render_line(1).text.startswith("m0059 ")
            await pilot._post_mouse_events([MouseScrollDown], "#markets", times=10)
            await pilot.pause()
            top = markets.scroll_offset.y
            assert top > 0
            assert markets.render_line(1).text.startswith(f"m{59 - top:04d} ")

    asyncio.run(run())


def test_without_the_tui_extra_a_terminal_gets_a_one_line_error(
    arena: Arena, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("arena.commands.step._keys_available", lambda: True)
    monkeypatch.setitem(sys.modules, "arena.step.app", None)  # import fails as if not installed
    result = arena("step", db)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: the interactive view needs the tui extra: pip install 'arena[tui]' "
        "(or pass --no-input to print every frame)"
    ]


# -- an 80×24 terminal with a multi-outcome market, a long id and a long agent name ---------------

LONG_ID = "election2024-president-national"  # as the sample's one slug among numeric ids
HOLDER = "a-holder-with-a-long-name"
START_TS = 1_704_585_600  # Sunday 2024-01-07 00:00 UTC
YES_NO = ("Yes", "No")


def crowded_log(folder: Path) -> tuple[str, list[Event]]:
    """``test_multi_outcome``'s three-way market and agent x, beside a binary market with a
    long id and 20 small ones (so the markets panel scrolls), and a hold agent with a long name
    that decides after x."""
    from tests.arena.run.test_multi_outcome import START as T0
    from tests.arena.run.test_multi_outcome import ThreeWay

    day = 86_400
    times = np.array([T0 - day, T0 + 7 * day], dtype=np.int64)
    pres = MarketInfo(id="pres", question="Who wins?", outcomes=("Trump", "Harris", "Other"),
                      volume=1e6)  # fmt: skip
    markets = [MarketInfo(id=LONG_ID, question="Who wins the popular vote?", outcomes=YES_NO,
                          volume=9e5),
               *(MarketInfo(id=f"m{i:02d}", question=f"Market {i}?", outcomes=YES_NO,
                            volume=1e3 + i) for i in range(20))]  # fmt: skip
    binary = np.array([[0.3, 0.7], [0.35, 0.65]])
    series = {"pres": (times, np.array([[0.5, 0.4, 0.1], [0.45, 0.5, 0.05]])),
              **{m.id: (times, binary) for m in markets}}  # fmt: skip
    won = Resolution(market="pres", ts=T0 + 14 * day, winner="Harris")
    tape = Tape.from_series([pres, *markets], series, [won])
    config = CohortConfig(start=datetime.fromtimestamp(T0, UTC),
                          agents={"x": "hold", HOLDER: "hold"},
                          decision_cadence="weekly", mark_cadence="weekly")  # fmt: skip
    with EventStore.open(folder / "crowded.db") as store:
        agents = {"x": ThreeWay(), HOLDER: build_strategy("hold")}
        run = CohortRunner(tape, config, strategies=agents).run(store)
        return run.cohort, list(store.read(stream=run.cohort))


def test_at_80_by_24_every_panel_shows_what_it_is_for(tmp_path: Path) -> None:
    """Walked in tmux at 80×24 on the sample: one long market id pushed the price, change and
    history out of the markets panel, a multi-outcome market showed 'Trump 0.49 Ha', every
    scrolling panel lost a row to a horizontal scrollbar and wrapped text under its vertical
    one, the leaderboard cut its Brier column, the header gave the shown agent's last
    decision's week, the footer had no room for ? and q, and the help wrapped mid-sentence."""
    cohort, events = crowded_log(tmp_path)
    line = LogTimeline(events, cohort)

    async def run() -> None:
        app = StepApp(line, ["x", HOLDER], "x")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            screen = screen_text(app).splitlines()

            def row(*words: str) -> str:
                return next((s for s in screen if all(w in s for w in words)), "")

            # the three-way market a line per outcome with its price; the long id cut, priced
            assert row("pres", "3 outcomes")
            for name, price in (("Trump", "0.500"), ("Harris", "0.400"), ("Other", "0.100")):
                assert row(f" {name} ", price), "\n".join(screen)
            assert row("electi…", "0.300")  # a narrow panel cuts ids to NARROW_ID (7)
            markets = app.query_one("#markets", Lines)
            assert markets.count == 1 + 3 + 21 and not markets.show_horizontal_scrollbar
            # each order's fill or rejection right under it, every wrapped row in sight
            decision = panels.decision(app.view).plain.splitlines()
            harris = decision.index("bet $1,000.00 on Harris of pres")
            assert decision[harris + 1].startswith("  ✓ bought 2,500.00 Harris of pres at 0.400")
            assert decision[harris + 2] == "bet $50.00 on harris of pres"
            assert decision[harris + 3].startswith("  ✗ rejected buy harris on pres")
            for panel in app.query(Lines):  # the wrapped texts, and the leaderboard
                if panel.text is None and panel.id != "board":
                    continue
                width = panel.scrollable_content_region.width
                assert all(len(text) <= width for text in panel.plain()), panel.id
            # the leaderboard: every column of every agent, the long name cut to fit
            rows = app.query_one("#board", Lines).plain()
            assert rows[0].split() == ["agent", "total", "return", "impl.", "(n)"]
            assert any(r.startswith(" a-holder") and "$10,000" in r and "— (0)" in r
                       for r in rows)  # fmt: skip
            assert "? help" in screen[-1] and "q quit" in screen[-1]
            # x's week 2; then the holder, whose last decision is still week 1's
            await pilot.press("n", "a")
            await pilot.pause()
            header = screen_text(app).splitlines()[0]
            assert " · week 2 · after x's decision" in header
            assert app.view.decision is not None and app.view.decision.week == 1
            await pilot.press("question_mark")
            await pilot.pause()
            helped = screen_text(app)
            assert all(text in helped for text in HELP.splitlines())

    asyncio.run(run())


def test_a_chain_broken_further_on_is_said_with_its_event_and_arena_verify(tmp_path: Path) -> None:
    """Stepping onto a damaged page of a long log: one line naming the event, what came of it
    and the command that checks the whole log (the hint was lost with the lazy reader)."""
    db = tmp_path / "long.db"
    with EventStore.open(db) as store:
        make_log(store, 3_000, markets=5, agents=("x", "y"))
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER IF EXISTS events_no_update")
    conn.execute("""UPDATE events SET payload = replace(payload, '"ts":', '"ts": ') """
                 "WHERE seq = 2500")  # fmt: skip
    conn.close()
    said: list[str] = []

    async def run(line: LogTimeline) -> None:
        app = StepApp(line, ["x", "y"], "x")
        app.notify = lambda message, **kw: said.append(message)  # type: ignore[method-assign]
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            cut = app.cut
            await pilot.press("e")
            await pilot.pause()
            assert app.cut == cut and app.is_running

    with EventStore.open(db, readonly=True) as store:
        [cohort] = store.streams()
        line = open_timeline(store, cohort)
        line.snapshots.clear()  # so the end is folded through the damage
        asyncio.run(run(line))
    assert (f"{db}: event 2500 was altered (hash mismatch); the view stays where it "
                       "was (run 'arena verify')") in said  # fmt: skip


def test_in_tmux_at_80_by_24_the_samples_seven_agents_end_with_every_reported_figure(
    arena: Arena, tmux: Tmux, tmp_path: Path
) -> None:
    """The sample's seven agents (names up to ten letters) at 80×24: after the end, each row
    showed its total but cut its Brier and count ("0.2526 ("). Every agent's total, return and
    Brier with its count of resolved bets is on screen, as ``arena report`` gives them (whole
    dollars and three decimals, as its table shows them, when cents do not fit)."""
    db = tmp_path / "sample.db"
    assert arena("replay", "--tape", "sample", "--db", db).exit_code == 0
    program = Path(sys.executable).with_name("arena")
    command = f"{shlex.quote(str(program))} step {shlex.quote(str(db))}"
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "24",
         "env", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", command)  # fmt: skip
    first = tmux.wait_for("after hold's decision")
    assert f"rules v1 · tape sample {SAMPLE_HASH[:12]}" in first  # named as commands take it
    tmux("send-keys", "-t", "step", "e")
    end = tmux.wait_for("end of the log")
    tmux("send-keys", "-t", "step", "q")
    with EventStore.open(db, readonly=True) as store:
        [cohort] = report_data(Ledger().apply_all(store.read()))["cohorts"]
    assert len(cohort["agents"]) == 7
    rows = [line.replace("│", " ").replace("▶", " ").split() for line in end.splitlines()]
    for a in cohort["agents"]:
        brier = "—" if a["brier"] is None else f"{a['brier']:.3f}"
        figures = [a["agent"], f"${a['total_value']:,.0f}", f"{a['return_pct']:+.2f}%", brier,
                   f"({a['n_resolved']})"]  # fmt: skip
        assert any(row[-5:] == figures for row in rows), (figures, end)


def test_search_brings_each_match_of_a_long_transcript_into_view() -> None:
    """A model's prompt runs to hundreds of lines: the search highlighted a match somewhere
    below the panel's edge. It now scrolls the transcript (and the decision) to the first
    match, to the next on the same search again, and says when nothing matches."""
    c, t = "c1", START_TS
    prompt = "\n".join(f"market m{i:03d} at 0.5" + (" needle" if i in (150, 260) else "")
                       for i in range(300))  # fmt: skip
    call = ModelCall(
        model="m",
        question="decision",
        request="r1",
        status=200,
        messages=[{"role": "user", "content": prompt}],
        answer='{"action": "HOLD"}',
    )
    events: list[Event] = [
        CohortOpened(cohort=c, ts=t, start=t, rules="v1", cash=10_000.0, agents=["llm"],
                     decision_cadence="weekly", mark_cadence="weekly"),
        DecisionMade(cohort=c, ts=t, agent="llm", week=1, action="HOLD", reasoning="quiet"),
        ModelCalled(cohort=c, ts=t, agent="llm", week=1, n=1, call=call),
    ]  # fmt: skip
    said: list[str] = []

    async def run() -> None:
        app = StepApp(LogTimeline(events, c), ["llm"], "llm")
        app.notify = lambda message, **kw: said.append(message)  # type: ignore[method-assign]
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("t")
            await pilot.pause()
            transcript = app.query_one("#transcript", Lines)
            assert transcript.scroll_offset.y == 0 and transcript.count > 300
            shown: list[str] = []
            for _ in range(3):
                await pilot.press("slash", *"needle", "enter")
                await pilot.pause()
                shown.append(transcript.line(transcript.scroll_offset.y).plain)
            assert shown == ["market m150 at 0.5 needle", "market m260 at 0.5 needle",
                             "market m150 at 0.5 needle"]  # fmt: skip
            await pilot.press("slash", *"zzz", "enter")
            await pilot.pause()

    asyncio.run(run())
    assert said == ["no 'zzz' in the markets, the decision or the transcript"]


def test_the_leaderboard_is_laid_out_again_when_the_terminal_grows(tmp_path: Path) -> None:
    """Its columns are chosen for the panel's width: cut to fit 80 columns, whole again at
    200 (a resize redrew the rows as they were)."""
    cohort, events = crowded_log(tmp_path)

    async def run() -> None:
        app = StepApp(LogTimeline(events, cohort), ["x", HOLDER], "x")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            rows = app.query_one("#board", Lines).plain()
            assert not any(HOLDER in r for r in rows) and any("a-holder" in r for r in rows)
            await pilot.resize_terminal(200, 50)
            await pilot.pause()
            rows = app.query_one("#board", Lines).plain()
            assert any(r.split()[:2] == [HOLDER, "$10,000.00"] for r in rows), rows

    asyncio.run(run())


def test_ctrl_c_quits_as_q_does(log: tuple[str, list[Event]]) -> None:
    """Textual's ctrl+c asked to press ctrl+q instead."""
    cohort, events = log

    async def run() -> None:
        app = StepApp(LogTimeline(events, cohort), ["s", "h"], "s")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert not app.is_running

    asyncio.run(run())


def test_a_week_with_no_decision_is_said_with_the_weeks_there_are(
    log: tuple[str, list[Event]],
) -> None:
    """``w`` then 50 said "no decision in week 50" and left the weeks to guess; the log's
    decisions are in weeks 1 to 3. The view stays where it was."""
    cohort, events = log
    said: list[str] = []

    async def run() -> None:
        app = StepApp(LogTimeline(events, cohort), ["s", "h"], "s")
        app.notify = lambda message, **kw: said.append(message)  # type: ignore[method-assign]
        async with app.run_test(size=(80, 24)) as pilot:
            cut = app.cut
            await pilot.press("w", "5", "0", "enter", "w", "x", "enter")
            await pilot.pause()
            assert app.cut == cut

    asyncio.run(run())
    assert said == [
        "no decision in week 50: the decisions are in weeks 1–3",
        "no week 'x': a week is a number (the decisions are in weeks 1–3)",
    ]
