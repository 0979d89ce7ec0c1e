"""``arena.step.frames.frames`` and ``arena step``: one agent's decisions, what it saw, what
followed.

The scripted scenario runs once per module on the hand tape of ``conftest.py`` (universe a, b,
tie-w; weekly decisions and marks at +0, +7d, +14d) with agents ``s`` (the script below) and
``h`` (hold). What the log then holds, in order, and so what the frames must show:

    +0    marks a 0.5, b 0.2, tie-w 0.5
          s BET: $1,000 of a YES at 0.5 -> 2,000 shares, conf 1,000 / (0.25 x 10,000) = 0.4;
                 $40 of b YES rejected (under the $50 minimum)
    +7d   tie-w resolves Yes; marks a 0.75, b 0.3
          s SELL 50% of a: 1,000 shares at 0.75 -> $750, cost basis 500, realized 250
    +14d  a resolves Yes: 1,000 shares pay $1,000 (cost 500); marks b 0.3
          s HOLD (script finished)
    +21d  b resolves No; the cohort closes
"""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import Result
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.step.frames import Fit, Frame, Portfolio, Seen, fit, frames, iter_frames
from arena.step.printed import render
from ledger.events import (
    BetIntent,
    DecisionMade,
    DecisionsStopped,
    Event,
    MarketResolved,
    OrderFilled,
    OrderPlaced,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
    PromptStored,
    SellIntent,
)
from ledger.store import EventStore
from replays.tape import Tape
from replays.tapefile import save_tape
from tests.conftest import START, WEEK, Arena

SCRIPT = [
    {
        "action": "BET",
        "reasoning": "a looks cheap",
        "bets": [
            {"market_id": "a", "side": "YES", "amount": 1000, "probability": 0.7},
            {"market_id": "b", "side": "YES", "amount": 40},
        ],
    },
    {"action": "SELL", "sells": [{"market_id": "a", "side": "YES", "percentage": 50}]},
]
REJECTION = "bet $40.00 is below the $50.00 minimum"
FRAME_KEYS = {
    "index", "ts", "week", "decision", "seen", "before", "after", "at_next", "outcomes",
    "model_usage", "model_usage_so_far",
}  # fmt: skip


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def replay_script(arena: Arena, tmp: Path, tape: Path, *starts: str) -> Path:
    """Replay the script (agent ``s``) beside ``h=hold`` into ``tmp/run.db``."""
    script = tmp / "script.json"
    script.write_text(json.dumps(SCRIPT))
    db = tmp / "run.db"
    when = ("--starts", starts[0]) if starts else ("--start", "2024-01-07")
    result = arena(
        "replay",
        "--tape",
        tape,
        *when,
        "--universe",
        "3",
        "--marks",
        "weekly",
        "--agent",
        f"s=scripted:{script}?checked=false",
        "--agent",
        "h=hold",
        "--jobs",
        "1",
        "--db",
        db,
        "--json",
    )
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture(scope="module")
def tape_file(tmp_path_factory: pytest.TempPathFactory, hand_tape: Tape) -> Path:
    path = tmp_path_factory.mktemp("tape") / "hand.tape"
    save_tape(hand_tape, path)
    return path


@pytest.fixture(scope="module")
def db(arena: Arena, tmp_path_factory: pytest.TempPathFactory, tape_file: Path) -> Path:
    return replay_script(arena, tmp_path_factory.mktemp("run"), tape_file)


@pytest.fixture(scope="module")
def log(db: Path) -> tuple[str, list[Event]]:
    with EventStore.open(db, readonly=True) as store:
        [cohort] = store.streams()
        return cohort, list(store.read(stream=cohort))


@pytest.fixture(scope="module")
def cut(log: tuple[str, list[Event]]) -> list[Frame]:
    cohort, events = log
    return frames(events, cohort, "s")


def own_outcomes(events: Iterable[Event], agent: str) -> list[Event]:
    kinds = (OrderFilled, OrderRejected, PositionSettled, PositionRefunded)
    return [e for e in events if isinstance(e, kinds) and e.agent == agent]


# -- frames by hand ------------------------------------------------------------------------------


def test_one_frame_per_decision(log: tuple[str, list[Event]], cut: list[Frame]) -> None:
    _, events = log
    decisions = [e for e in events if isinstance(e, DecisionMade) and e.agent == "s"]
    assert len(cut) == len(decisions) == 3
    assert [f.decision for f in cut] == decisions
    assert [f.index for f in cut] == [0, 1, 2]
    assert [(f.decision.action, f.decision.ts, f.decision.week) for f in cut] == [
        ("BET", START, 1),
        ("SELL", START + WEEK, 2),
        ("HOLD", START + 2 * WEEK, 3),
    ]


def test_portfolios_before_after_and_at_the_next_decision(cut: list[Frame]) -> None:
    start = Portfolio(10_000.0, 0.0, 10_000.0, None, None, 0, ())
    # right after the BET, at +0's prices: cash 10,000 - 1,000 = 9,000 and 2,000 shares of a
    # at 0.5 = 1,000; total still 10,000 (a buy at the market price is no gain). The rejected
    # $40 moves nothing. Before, this showed 10,500: the shares valued at +7d's 0.75.
    bought = Portfolio(
        9_000.0, 1_000.0, 10_000.0, None, None, 0, (("a", "YES", 2_000.0, 1_000.0, 1_000.0),)
    )
    # at the SELL a week later, a is marked 0.75: 2,000 x 0.75 = 1,500, total 10,500
    long = Portfolio(
        9_000.0, 1_500.0, 10_500.0, None, None, 0, (("a", "YES", 2_000.0, 1_000.0, 1_500.0),)
    )
    # right after the SELL of half at 0.75: cash 9,000 + 750 = 9,750; 1,000 shares (cost
    # 1,000 - 500 sold) x 0.75 = 750; total 10,500 again
    sold = Portfolio(
        9_750.0, 750.0, 10_500.0, None, None, 0, (("a", "YES", 1_000.0, 500.0, 750.0),)
    )
    # by the HOLD, a resolved Yes: 1,000 shares pay $1,000, cash 10,750, nothing held; Brier of
    # the one resolved buy (0.4 - 1)^2 = 0.36 (exact in binary too: 1 - 0.4 rounds to the
    # double nearest 0.6, whose square rounds to the one nearest 0.36); the Brier of the price
    # paid, 0.5 for a winner, (0.5 - 1)^2 = 0.25
    flat = Portfolio(10_750.0, 0.0, 10_750.0, 0.36, 0.25, 1, ())
    assert [(f.before, f.after, f.at_next) for f in cut] == [
        (start, bought, long),
        (long, sold, flat),
        (flat, flat, flat),
    ]
    for f in cut:
        assert f.after is not None and f.at_next is not None
        assert isinstance(f.before.positions_value, float)  # 0.0, not the int 0 of an empty sum
        assert f.at_next.total_value == f.at_next.cash + f.at_next.positions_value


def test_outcomes_are_the_agents_fills_rejections_and_settlements_in_order(
    log: tuple[str, list[Event]], cut: list[Frame]
) -> None:
    _, events = log
    summary = [
        [
            (type(e).__name__, getattr(e, "order_id", None) or getattr(e, "market", None))
            for e in f.outcomes
        ]
        for f in cut
    ]
    assert summary == [
        [("OrderFilled", "o1"), ("OrderRejected", "o2"), ("MarketResolved", "tie-w")],
        [("OrderFilled", "o3"), ("MarketResolved", "a"), ("PositionSettled", "a")],
        [("DecisionsStopped", None), ("MarketResolved", "b")],  # b open past the tape's end
    ]
    rejected = cut[0].outcomes[1]
    assert isinstance(rejected, OrderRejected) and rejected.reason == REJECTION
    # every own fill, rejection and settlement of the log lands in exactly one frame, in order
    assert [e for f in cut for e in own_outcomes(f.outcomes, "s")] == own_outcomes(events, "s")
    assert not any(isinstance(e, OrderPlaced) for f in cut for e in f.outcomes)


def test_after_waits_for_the_decisions_transcript_and_orders(
    log: tuple[str, list[Event]], cut: list[Frame]
) -> None:
    """An LLM decision's prompt text and model calls sit between it and its orders."""
    cohort, events = log
    at = next(i for i, e in enumerate(events) if isinstance(e, DecisionMade) and e.agent == "s")
    prompt = PromptStored(cohort=cohort, ts=events[at].ts, digest="d", text="You are…")
    with_transcript = [*events[: at + 1], prompt, *events[at + 1 :]]
    assert [f.after for f in frames(with_transcript, cohort, "s")] == [f.after for f in cut]


def test_brier_moves_only_when_the_bet_resolves(cut: list[Frame]) -> None:
    assert cut[0].at_next is not None and cut[1].at_next is not None
    # the buy filled in frame 0 but a resolves at +14d, inside frame 1
    assert (cut[0].before.brier, cut[0].at_next.brier, cut[1].before.brier) == (None, None, None)
    assert cut[1].at_next.brier == pytest.approx(0.36)  # confidence 0.4, won: (0.4 - 1)^2
    assert (cut[1].before.n_resolved, cut[1].at_next.n_resolved) == (0, 1)
    assert any(isinstance(e, MarketResolved) and e.market == "a" for e in cut[1].outcomes)


def test_seen_is_the_latest_mark_of_each_outcome_of_the_unresolved_markets(
    cut: list[Frame],
) -> None:
    def prices(f: Frame) -> dict[str, dict[str, float]]:
        return {m: s.prices for m, s in f.seen.items()}

    assert [prices(f) for f in cut] == [
        # the marks at +0, biggest volume first: a 500, b 300, tie-w 100
        {"a": {"Yes": 0.5, "No": 0.5}, "b": {"Yes": 0.2, "No": 0.8},
         "tie-w": {"Yes": 0.5, "No": 0.5}},
        {"a": {"Yes": 0.75, "No": 0.25}, "b": {"Yes": 0.3, "No": 0.7}},  # tie-w resolved
        {"b": {"Yes": 0.3, "No": 0.7}},  # a resolved at +14d; b's last point is +1d's 0.3
    ]  # fmt: skip
    assert [list(f.seen) for f in cut] == [["a", "b", "tie-w"], ["a", "b"], ["b"]]
    assert cut[0].seen["b"].label() == "YES 0.200"


def test_the_hold_agent_only_sees_resolutions(log: tuple[str, list[Event]]) -> None:
    cohort, events = log
    held = frames(events, cohort, "h")
    assert [f.decision.action for f in held] == ["HOLD"] * 3
    cash = Portfolio(10_000.0, 0.0, 10_000.0, None, None, 0, ())
    assert {(f.before, f.after) for f in held} == {(cash, cash)}
    assert all(isinstance(e, MarketResolved | DecisionsStopped) for f in held for e in f.outcomes)
    assert frames(events, cohort, "nobody") == []


def test_a_whole_log_of_two_cohorts_gives_each_cohorts_frames(
    arena: Arena, tmp_path: Path, tape_file: Path
) -> None:
    db = replay_script(arena, tmp_path, tape_file, "2024-01-07..2024-01-14")
    with EventStore.open(db, readonly=True) as store:
        cohorts = store.streams()
        whole = list(store.read())
        alone = {c: list(store.read(stream=c)) for c in cohorts}
    assert len(cohorts) == 2
    for cohort in cohorts:
        mixed = [f.as_dict() for f in frames(whole, cohort, "s")]
        assert mixed == [f.as_dict() for f in frames(alone[cohort], cohort, "s")]
        assert {d["decision"]["cohort"] for d in mixed} == {cohort}


# -- invariants over random runs -----------------------------------------------------------------


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_frames_chain_and_account_for_every_dollar(synthetic_tape: Tape, seed: int) -> None:
    config = CohortConfig(
        start=datetime.fromtimestamp(START, UTC),
        agents={"rnd": "random?bets=3"},
        universe=6,
        seed=seed,
        decision_cadence="2d",
    )
    with tempfile.TemporaryDirectory() as tmp, EventStore.open(Path(tmp) / "run.db") as store:
        run = CohortRunner(synthetic_tape, config).run(store)
        events = list(store.read())
    cut = frames(events, run.cohort, "rnd")
    book = run.state.books["rnd"]
    assert len(cut) == book.n_decisions
    for f, following in zip(cut, [*cut[1:], None], strict=True):
        assert f.after is not None and f.at_next is not None
        if following is not None:
            assert f.at_next == following.before
        # cash moves only by what the frame's own outcomes say; by the decision's own fills
        # (those at its instant) right after it
        moved = {True: 0.0, False: 0.0}
        for e in f.outcomes:
            if isinstance(e, OrderFilled):
                moved[e.ts == f.decision.ts] += e.amount if e.kind == "sell" else -e.amount
            elif isinstance(e, PositionSettled):
                moved[False] += e.payout
            elif isinstance(e, PositionRefunded):
                moved[False] += e.refund
        assert f.after.cash == pytest.approx(f.before.cash + moved[True])
        assert f.at_next.cash == pytest.approx(f.after.cash + moved[False])
        # marks fall on every decision instant here (daily marks, decisions every 2 days), so
        # trading at the market price neither gains nor loses at that instant
        assert f.after.total_value == pytest.approx(f.before.total_value, rel=1e-12)
        for p in (f.after, f.at_next):
            assert p.total_value == pytest.approx(p.cash + p.positions_value)
    assert cut[-1].at_next is not None
    assert cut[-1].at_next.cash == pytest.approx(book.cash)
    assert cut[-1].at_next.n_resolved == len(book.brier_rows)
    assert [e for f in cut for e in own_outcomes(f.outcomes, "rnd")] == own_outcomes(events, "rnd")


# -- the command ---------------------------------------------------------------------------------


def test_no_input_prints_one_panel_per_decision(arena: Arena, db: Path) -> None:
    result = arena("step", db, "--agent", "s", "--no-input")
    assert result.exit_code == 0, result.output
    out = result.output
    assert [out.count(f"s · decision {i}/3") for i in (1, 2, 3)] == [1, 1, 1]
    assert out.count("s · decision") == 3
    assert out.index("BET") < out.index("SELL") < out.index("HOLD")
    assert REJECTION in out
    assert "bet $1,000.00 on YES of a (YES seen at 0.500)" in out
    assert "sell 50% of YES of a" in out
    assert "a looks cheap" in out


def test_printed_frames_open_with_the_cohort_and_end_with_every_agent(
    arena: Arena, db: Path
) -> None:
    """Piped, the frames follow one agent: a line first says which cohort, rules, tape and
    how many decisions, and after the last frame every agent's standing at the end of the log
    is the report's table (s: $10,750 in cash, nothing held; h: its $10,000)."""
    result = arena("step", db, "--agent", "s", "--no-input")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert re.fullmatch(r"cohort \S+ · rules v1 · tape [0-9a-f]{12} · s: 3 decisions", first)
    after = result.stdout[result.stdout.rindex("╯") :]
    assert "every agent at the end of the log" in after
    rows = {line.split()[0]: line.split()[1:4] for line in after.splitlines()
            if line.split() and line.split()[0] in ("s", "h")}  # fmt: skip
    # total, P/L, return (cash, the total when nothing is open, is not repeated)
    assert rows == {"s": ["10,750", "+750.00", "+7.50%"], "h": ["10,000", "+0.00", "+0.00%"]}


def test_json_has_one_frame_per_decision(arena: Arena, db: Path, cut: list[Frame]) -> None:
    result = arena("step", db, "--agent", "s", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert len(shown) == len(cut) == 3
    assert all(set(frame) == FRAME_KEYS for frame in shown)
    assert [(f["index"], f["ts"], f["week"]) for f in shown] == [
        (0, START, 1),
        (1, START + WEEK, 2),
        (2, START + 2 * WEEK, 3),
    ]
    assert [f["decision"]["action"] for f in shown] == ["BET", "SELL", "HOLD"]
    assert [(f["before"]["total_value"], f["after"]["total_value"]) for f in shown] == [
        (10_000.0, 10_000.0),
        (10_500.0, 10_500.0),
        (10_750.0, 10_750.0),
    ]
    assert [(f["before"]["cash"], f["after"]["cash"], f["at_next"]["cash"]) for f in shown] == [
        (10_000.0, 9_000.0, 9_000.0),
        (9_000.0, 9_750.0, 10_750.0),
        (10_750.0, 10_750.0, 10_750.0),
    ]
    assert shown[1]["seen"] == {"a": {"Yes": 0.75, "No": 0.25}, "b": {"Yes": 0.3, "No": 0.7}}
    assert [o["type"] for o in shown[0]["outcomes"]] == [
        "OrderFilled",
        "OrderRejected",
        "MarketResolved",
    ]
    assert shown[0]["outcomes"][1]["reason"] == REJECTION


def test_the_default_agent_is_the_cohorts_first(arena: Arena, db: Path) -> None:
    result = arena("step", db, "--json")
    assert result.exit_code == 0, result.output
    assert [f["decision"]["agent"] for f in json.loads(result.stdout)] == ["s"] * 3


def test_bad_input_is_a_one_line_error(arena: Arena, tmp_path: Path, db: Path) -> None:
    assert "has no agent 'zz' (s, h)" in one_line_error(arena("step", db, "--agent", "zz"))
    assert "has no cohort nope" in one_line_error(arena("step", db, "--cohort", "nope"))
    missing = tmp_path / "missing.db"
    assert "no such event log" in one_line_error(arena("step", missing))
    assert "is a directory" in one_line_error(arena("step", tmp_path))
    empty = tmp_path / "empty.db"
    EventStore.open(empty).close()
    assert "holds no cohorts" in one_line_error(arena("step", empty))


# -- multi-outcome markets, and fitting an 80 x 24 terminal ----------------------------------------


def test_a_multi_outcome_market_is_labelled_by_its_outcomes(tmp_path: Path) -> None:
    """Today's frame said "YES 0.500" of a three-way market: its first outcome's price."""
    from tests.arena.run.test_multi_outcome import ThreeWay, election

    config = CohortConfig(start=datetime.fromtimestamp(START, UTC), agents={"x": "hold"},
                          decision_cadence="weekly", mark_cadence="weekly")  # fmt: skip
    with EventStore.open(tmp_path / "run.db") as store:
        run = CohortRunner(election(), config, strategies={"x": ThreeWay()}).run(store)
        events = list(store.read())
    first = frames(events, run.cohort, "x")[0]
    seen = first.seen["pres"]
    assert seen.prices == {"Trump": 0.5, "Harris": 0.4, "Other": 0.1}
    assert seen.label() == "Trump 0.50 · Harris 0.40 · Other 0.10"
    assert (seen.price_of("Harris"), seen.price_of("harris")) == (0.4, None)  # as the broker
    # $1,000 on Harris at 0.4 = 2,500 shares, $500 on Other at 0.1 = 5,000; 'harris' rejected:
    # cash 8,500 and shares worth 1,000 + 500 at the same prices, so the total stays 10,000.
    # A week later Harris is 0.5 and Other 0.05: 1,250 + 250, the total 10,000 again.
    assert first.after is not None and first.at_next is not None
    assert (first.after.cash, first.after.positions_value) == (8_500.0, 1_500.0)
    assert first.at_next.positions_value == 1_500.0
    assert [row[4] for row in first.at_next.positions] == [1_250.0, 250.0]
    console = Console(width=80, height=24, record=True, color_system=None)
    console.print(render(first, 3, "x", 23, 80))
    text = console.export_text()
    assert "Trump 0.50 · Harris 0.40 · Other 0.10" in text
    assert "bet $1,000.00 on Harris of pres (Harris seen at 0.400)" in text
    assert "bet $50.00 on harris of pres\n" in text.replace(" │", "").replace("  ", "")
    assert "YES" not in text


def busy_frame() -> Frame:
    """A frame with more of everything than a terminal holds, and long, markup-like text."""
    seen = {
        f"m{i}-{'x' * 30}": Seen(
            market=f"m{i}-{'x' * 30}", question="[bold]Will it?[/] " * 10, volume=1e9 - i,
            prices=({"Yes": 0.5, "No": 0.5} if i % 2 else
                    {f"Outcome number {k}": 0.2 for k in range(5)}),
        )
        for i in range(40)
    }  # fmt: skip
    decision = DecisionMade(
        cohort="c", ts=START, agent="z", week=1, action="BET",
        reasoning="because\n" * 500, error="Traceback (most recent call last):\n  boom",
        bets=[BetIntent(market=m, side="YES", amount=1e12) for m in list(seen)[:12]],
        sells=[SellIntent(percentage=50.0, market=m, side="YES") for m in list(seen)[:5]],
    )  # fmt: skip
    outcomes: list[Event] = [
        OrderRejected(cohort="c", ts=START, agent="z", order_id=f"o{i}", kind="buy",
                      market=f"m{i}", side="YES", reason="[red]no[/] " * 20)
        for i in range(30)
    ]  # fmt: skip
    rich = Portfolio(1e12, 1e12, 2e12, 0.25, 0.0625, 40, tuple(
        (m, "YES", 1e9, 1e9, 1e9) for m in seen))  # fmt: skip
    return Frame(0, decision, seen, rich, rich, rich, outcomes)


@pytest.mark.parametrize(("width", "height"), [(80, 24), (100, 40), (60, 20)])
def test_a_busy_frame_fits_the_terminal(width: int, height: int) -> None:
    console = Console(width=width, height=height, record=True, color_system=None)
    console.print(render(busy_frame(), 1, "z", height - 1, width))  # and a line for the keys
    lines = console.export_text().splitlines()
    assert len(lines) <= height - 1
    assert max(cell_len(line) for line in lines) <= width
    text = "\n".join(lines)
    assert "[bold]" in text and "[red]no[/]" in text  # markup in names is shown as text
    rows = fit(busy_frame(), height - 1)
    # every section got rows, what was cut says how much: 40 markets, 19 decision lines, 30
    assert len(re.findall(r"… \d+ more", text)) == 3
    assert f"… {40 - rows.seen} more" in text and f"… {30 - rows.outcomes} more" in text
    assert f"… {12 + 5 + 2 - rows.decision} more" in text


def test_fit_shares_the_height_and_never_exceeds_it() -> None:
    frame = busy_frame()
    # 24 lines: 12 fixed, 12 free; decision and outcomes get up to (12 - 3) // 2 = 4 each
    # (3 shown and "… more"), the markets seen the other 4 (3 and "… more")
    assert fit(frame, 24) == Fit(seen=3, decision=3, outcomes=3)
    # a line fewer is a market fewer: 11 free, 4 + 4 as before, 3 left (2 and "… more")
    assert fit(frame, 23) == Fit(seen=2, decision=3, outcomes=3)
    quiet = Frame(0, frame.decision, dict(list(frame.seen.items())[:2]), frame.before)
    quiet.decision = DecisionMade(cohort="c", ts=START, agent="z", week=1, action="HOLD")
    # HOLD: one "no orders" line, one "nothing happened" line, both markets
    assert fit(quiet, 23) == Fit(seen=2, decision=1, outcomes=1)


def test_the_step_command_fits_80_by_24(arena: Arena, db: Path) -> None:
    """On an 80 x 24 terminal the panels were 28, 25 and 22 lines tall."""
    result = arena("step", db, "--agent", "s", "--no-input",
                   env={"COLUMNS": "80", "LINES": "24"})  # fmt: skip
    assert result.exit_code == 0, result.output
    framed, standings = result.output.split("╭", 1)[1].rsplit("╯", 1)
    panels = framed.split("╭")
    assert len(panels) == 3
    for panel in panels:
        lines = panel.rstrip("\n").splitlines()
        assert len(lines) <= 24 and all(cell_len(line) <= 80 for line in lines[1:])
    assert all(cell_len(line) <= 80 for line in standings.splitlines())  # every agent, after


# -- printed frames on a long or damaged log -------------------------------------------------------


def test_each_frame_is_given_when_the_fold_passes_it_not_after_the_whole_log(
    log: tuple[str, list[Event]],
) -> None:
    """Piped, a million-event log's 28,550 frames were made into one list first: 325 s and
    3.4 GB before the first line. Each frame is now given at the agent's next decision."""
    cohort, events = log
    read = 0

    def reading() -> Iterable[Event]:
        nonlocal read
        for e in events:
            read += 1
            yield e

    second = next(i for i, e in enumerate(events)
                  if isinstance(e, DecisionMade) and e.agent == "s" and e.week == 2)  # fmt: skip
    made = iter_frames(reading(), cohort, "s")
    first = next(made)
    assert first.index == 0 and first.decision.week == 1
    assert read == second + 1  # the first frame is done at s's second decision, not at the end
    assert [first, *made] == frames(events, cohort, "s")
    assert read == len(events)


def _break_chain(db: Path, tmp_path: Path, seq: int) -> Path:
    """A copy of ``db`` whose event ``seq`` was edited (a space in its payload), so that only
    the hash chain can tell."""
    copy = tmp_path / "broken.db"
    copy.write_bytes(db.read_bytes())
    conn = sqlite3.connect(copy, isolation_level=None)
    conn.execute("DROP TRIGGER IF EXISTS events_no_update")
    conn.execute("""UPDATE events SET payload = replace(payload, '"ts":', '"ts": ') """
                 f"WHERE seq = {seq}")  # fmt: skip
    conn.close()
    return copy


@pytest.mark.parametrize("how", ["--no-input", "--json"])
def test_a_chain_broken_half_way_is_one_line_naming_the_event_and_arena_verify(
    arena: Arena, db: Path, tmp_path: Path, how: str
) -> None:
    """The hint to run 'arena verify' was lost when the reader became lazy; and printed, half
    the frames came out before the error."""
    broken = _break_chain(db, tmp_path, 20)
    result = arena("step", broken, "--agent", "s", how)
    assert result.stdout == ""  # nothing shown: the links are checked before the first frame
    line = one_line_error(result)
    assert f"{broken}: event 20 was altered" in line
    assert line.endswith(f"nothing shown (run 'arena verify {broken}')")


def test_a_log_that_breaks_only_as_it_folds_says_how_many_frames_came_before(
    arena: Arena, db: Path, tmp_path: Path
) -> None:
    """A chain that holds but whose events do not fold (a fill for an agent never opened, as a
    buggy writer could leave it, re-chained) is found while the frames print: the ones before
    it stay printed, and the line says so."""
    with EventStore.open(db, readonly=True) as store:
        [cohort] = store.streams()
        events = list(store.read(stream=cohort))
    week2 = next(i for i, e in enumerate(events)
                 if isinstance(e, DecisionMade) and e.agent == "s" and e.week == 3)  # fmt: skip
    alien = OrderFilled(cohort=cohort, ts=events[week2].ts, agent="nobody", order_id="x",
                        kind="buy", market="a", side="YES", position_id="p", price=0.5,
                        shares=2.0, amount=1.0, cash_before=10.0)  # fmt: skip
    forged = tmp_path / "forged.db"
    with EventStore.open(forged) as store:
        store.append(cohort, [*events[: week2 + 1], alien, *events[week2 + 1 :]])
    result = arena("step", forged, "--agent", "s", "--no-input")
    assert result.stdout.count("s · decision") == 2  # the frames of weeks 1 and 2
    line = result.stderr.strip()
    assert line.startswith(f"Error: cohort {cohort} does not fold")
    assert line.endswith(f"the 2 frames before it printed (run 'arena verify {forged}')")


def test_in_a_terminal_a_chain_broken_under_the_first_screen_is_the_same_one_line(
    arena: Arena, db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("arena.commands.step._keys_available", lambda: True)
    broken = _break_chain(db, tmp_path, 5)  # in the first page the first screen reads
    line = one_line_error(arena("step", broken, "--agent", "s"))
    assert line == (f"Error: {broken}: event 5 was altered (hash mismatch); nothing shown "
                    f"(run 'arena verify {broken}')")  # fmt: skip
