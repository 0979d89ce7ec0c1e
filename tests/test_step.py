"""``arena.step.frames`` and ``arena step``: one agent's decisions, what it saw, what followed.

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
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import START, WEEK
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.cohort import CohortConfig
from arena.commands.replay import replay
from arena.commands.step import move, step
from arena.runner import CohortRunner
from arena.step import Frame, Portfolio, frames
from ledger.events import (
    DecisionMade,
    DecisionsStopped,
    Event,
    MarketResolved,
    OrderFilled,
    OrderPlaced,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
)
from ledger.store import EventStore
from replays.tape import Tape
from replays.tapefile import save_tape

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
    "index", "ts", "week", "decision", "before", "after", "outcomes", "model_usage",
    "model_usage_so_far",
}  # fmt: skip


def invoke(command: Any, *args: str | Path) -> Result:
    """Run a command; a wide terminal, so rich panels keep whole lines."""
    return CliRunner().invoke(command, [str(a) for a in args], env={"COLUMNS": "200"})


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def replay_script(tmp: Path, tape: Path, *starts: str) -> Path:
    """Replay the script (agent ``s``) beside ``h=hold`` into ``tmp/run.db``."""
    script = tmp / "script.json"
    script.write_text(json.dumps(SCRIPT))
    db = tmp / "run.db"
    when = ("--starts", starts[0]) if starts else ("--start", "2024-01-07")
    result = invoke(
        replay,
        "--tape",
        tape,
        *when,
        "--universe",
        "3",
        "--marks",
        "weekly",
        "--agent",
        f"s=scripted:{script}",
        "--agent",
        "h=hold",
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
def db(tmp_path_factory: pytest.TempPathFactory, tape_file: Path) -> Path:
    return replay_script(tmp_path_factory.mktemp("run"), tape_file)


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


def test_portfolios_before_and_after_each_decision(cut: list[Frame]) -> None:
    start = Portfolio(10_000.0, 0.0, 10_000.0, None, 0, ())
    # after the BET, up to the SELL: cash 10,000 - 1,000 = 9,000; the 2,000 shares are marked
    # at +7d at 0.75 -> 1,500; total 10,500. The rejected $40 moves nothing.
    long = Portfolio(
        9_000.0, 1_500.0, 10_500.0, None, 0, (("a", "YES", 2_000.0, 1_000.0, 1_500.0),)
    )
    # after the SELL, up to the HOLD: cash 9,000 + 750 (sold) + 1,000 (settled) = 10,750,
    # nothing held; Brier of the one resolved buy (0.4 - 1)^2 = 0.36 (exact in binary too:
    # 1 - 0.4 rounds to the double nearest 0.6, whose square rounds to the one nearest 0.36)
    flat = Portfolio(10_750.0, 0.0, 10_750.0, 0.36, 1, ())
    assert [(f.before, f.after) for f in cut] == [(start, long), (long, flat), (flat, flat)]
    for f in cut:
        assert f.after is not None
        assert isinstance(f.before.positions_value, float)  # 0.0, not the int 0 of an empty sum
        assert f.after.total_value == f.after.cash + f.after.positions_value


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


def test_brier_moves_only_when_the_bet_resolves(cut: list[Frame]) -> None:
    assert cut[0].after is not None and cut[1].after is not None
    # the buy filled in frame 0 but a resolves at +14d, inside frame 1
    assert (cut[0].before.brier, cut[0].after.brier, cut[1].before.brier) == (None, None, None)
    assert cut[1].after.brier == pytest.approx(0.36)  # confidence 0.4, won: (0.4 - 1)^2
    assert (cut[1].before.n_resolved, cut[1].after.n_resolved) == (0, 1)
    assert any(isinstance(e, MarketResolved) and e.market == "a" for e in cut[1].outcomes)


def test_seen_is_the_latest_marked_yes_price_of_the_unresolved_markets(cut: list[Frame]) -> None:
    assert [f.seen for f in cut] == [
        {"a": 0.5, "b": 0.2, "tie-w": 0.5},  # the marks at +0
        {"a": 0.75, "b": 0.3},  # +7d marks; tie-w resolved just before
        {"b": 0.3},  # a resolved at +14d; b's last point is still +1d's 0.3
    ]


def test_the_hold_agent_only_sees_resolutions(log: tuple[str, list[Event]]) -> None:
    cohort, events = log
    held = frames(events, cohort, "h")
    assert [f.decision.action for f in held] == ["HOLD"] * 3
    cash = Portfolio(10_000.0, 0.0, 10_000.0, None, 0, ())
    assert {(f.before, f.after) for f in held} == {(cash, cash)}
    assert all(isinstance(e, MarketResolved | DecisionsStopped) for f in held for e in f.outcomes)
    assert frames(events, cohort, "nobody") == []


def test_a_whole_log_of_two_cohorts_gives_each_cohorts_frames(
    tmp_path: Path, tape_file: Path
) -> None:
    db = replay_script(tmp_path, tape_file, "2024-01-07..2024-01-14")
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
        assert f.after is not None
        if following is not None:
            assert f.after == following.before
        # cash moves only by what the frame's own outcomes say
        moved = 0.0
        for e in f.outcomes:
            if isinstance(e, OrderFilled):
                moved += e.amount if e.kind == "sell" else -e.amount
            elif isinstance(e, PositionSettled):
                moved += e.payout
            elif isinstance(e, PositionRefunded):
                moved += e.refund
        assert f.after.cash == pytest.approx(f.before.cash + moved)
        assert f.after.total_value == pytest.approx(f.after.cash + f.after.positions_value)
    assert cut[-1].after is not None
    assert cut[-1].after.cash == pytest.approx(book.cash)
    assert cut[-1].after.n_resolved == len(book.brier_rows)
    assert [e for f in cut for e in own_outcomes(f.outcomes, "rnd")] == own_outcomes(events, "rnd")


# -- the command ---------------------------------------------------------------------------------


def test_no_input_prints_one_panel_per_decision(db: Path) -> None:
    result = invoke(step, db, "--agent", "s", "--no-input")
    assert result.exit_code == 0, result.output
    out = result.output
    assert [out.count(f"s · decision {i}/3") for i in (1, 2, 3)] == [1, 1, 1]
    assert out.count("s · decision") == 3
    assert out.index("BET") < out.index("SELL") < out.index("HOLD")
    assert REJECTION in out
    assert "bet $1,000.00 on YES of a (YES seen at 0.500)" in out
    assert "sell 50% of YES of a" in out
    assert "a looks cheap" in out


def test_json_has_one_frame_per_decision(db: Path, cut: list[Frame]) -> None:
    result = invoke(step, db, "--agent", "s", "--json")
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
    assert [(f["before"]["cash"], f["after"]["cash"]) for f in shown] == [
        (10_000.0, 9_000.0),
        (9_000.0, 10_750.0),
        (10_750.0, 10_750.0),
    ]
    assert [o["type"] for o in shown[0]["outcomes"]] == [
        "OrderFilled",
        "OrderRejected",
        "MarketResolved",
    ]
    assert shown[0]["outcomes"][1]["reason"] == REJECTION


def test_keys_walk_the_frames(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """n next, p previous, G last, g first, a stray key stays, q quits."""
    monkeypatch.setattr("arena.commands.step._keys_available", lambda: True)
    result = CliRunner().invoke(step, [str(db), "--agent", "s"], input="nnnpxGgq")
    assert result.exit_code == 0, result.output
    shown = [int(line.split("decision ")[1].split("/")[0])
             for line in result.output.splitlines() if "s · decision" in line]  # fmt: skip
    # n, n, n (already at the last), p, x (stays), G, g, then q quits
    assert shown == [1, 2, 3, 3, 2, 2, 3, 1]


@pytest.mark.parametrize(
    ("key", "k", "expected"),
    [("n", 0, 1), ("\r", 1, 2), (" ", 2, 2), ("p", 0, 0), ("p", 2, 1), ("g", 2, 0),
     ("G", 0, 2), ("?", 1, 1), ("q", 1, None), ("\x1b", 0, None), ("\x03", 2, None)],
)  # fmt: skip
def test_move(key: str, k: int, expected: int | None) -> None:
    assert move(key, k, last=2) == expected


def test_the_default_agent_is_the_cohorts_first(db: Path) -> None:
    result = invoke(step, db, "--json")
    assert result.exit_code == 0, result.output
    assert [f["decision"]["agent"] for f in json.loads(result.stdout)] == ["s"] * 3


def test_bad_input_is_a_one_line_error(tmp_path: Path, db: Path) -> None:
    assert "has no agent 'zz' (s, h)" in one_line_error(invoke(step, db, "--agent", "zz"))
    assert "has no cohort nope" in one_line_error(invoke(step, db, "--cohort", "nope"))
    missing = tmp_path / "missing.db"
    assert "no such event log" in one_line_error(invoke(step, missing))
    assert "is a directory" in one_line_error(invoke(step, tmp_path))
    empty = tmp_path / "empty.db"
    EventStore.open(empty).close()
    assert "holds no cohorts" in one_line_error(invoke(step, empty))
