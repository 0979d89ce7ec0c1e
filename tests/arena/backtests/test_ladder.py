"""The realism ladder: a run's own decisions, met again by more of the market."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from ledger.leaderboard import cohort_standings
from ledger.restore import load
from ledger.store import EventStore
from tests.conftest import Arena


def standings(db: Path) -> dict[str, float]:
    with EventStore.open(db, readonly=True) as store:
        [state] = load(store).ledger.cohorts.values()
    return {s.agent: s.pnl for s in cohort_standings(state)}


def test_the_first_rung_is_the_run_itself_and_each_step_costs(arena: Arena, tmp_path: Path) -> None:
    """On the election sample every bet pays at most what the tape's price gives: a worse
    price buys fewer shares of a winner, and a loser loses its dollars at any price."""
    db = tmp_path / "run.db"
    assert arena("replay", "--db", db).exit_code == 0
    data = arena.json("ladder", db)
    names = [r["name"] for r in data["rungs"]]
    assert names == ["fa", "mid", "touch (2 ticks, synthetic)", "touch + fees"]
    own = standings(db)
    assert {row["agent"]: row["pnl"]["fa"] for row in data["agents"]} == own
    for row in data["agents"]:
        pnl = list(row["pnl"].values())
        assert all(a >= b for a, b in itertools.pairwise(pnl)), row
        assert row["took"]["the midpoint"] == 0.0  # on a price tape the mid is the price
        # 2024: every category paid no fee
        assert row["took"]["the fee"] == 0.0
    took = {row["agent"]: row["took"]["the spread"] for row in data["agents"]}
    assert took["hold"] == 0.0 and took["favourite"] > 0.0


def test_on_books_the_depth_and_the_fee_have_a_price(arena: Arena, tmp_path: Path) -> None:
    """Two favourites on the BTC books, one staking twenty times the other: the big one walks
    deeper into the book, and both pay crypto's 0.07 fee in September 2026."""
    db = tmp_path / "btc.db"
    done = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                 "--decisions", "1m", "--marks", "1m", "--agent", "small=favourite?stake=400",
                 "--agent", "big=favourite?stake=8000", "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    result = arena("ladder", db, "--tape", "sample-books", "--latency", "1500", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r["name"] for r in data["rungs"]] == [
        "fa", "mid", "touch", "l2", "l2 + fees", "l2 + fees + 1500 ms",
    ]  # fmt: skip
    rows = {row["agent"]: row for row in data["agents"]}
    assert rows["big"]["took"]["the depth"] > rows["small"]["took"]["the depth"] >= 0.0
    assert rows["big"]["took"]["the fee"] > rows["small"]["took"]["the fee"] > 0.0
    assert {a: r["pnl"]["fa"] for a, r in rows.items()} == standings(db)


def test_a_rolling_universe_is_climbed_whole(arena: Arena, tmp_path: Path) -> None:
    """With --listing rolling, markets that list during the cohort join it; the ladder replays
    the cohort as it ran, so its fa rung is the run's own P/L. It used to replay only the
    markets open at the start (one of the BTC books' twelve) and printed a fraction of it."""
    db = tmp_path / "rolling.db"
    done = arena("replay", "--tape", "sample-books", "--listing", "rolling", "--decisions", "1m",
                 "--agent", "fav=favourite", "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    data = arena.json("ladder", db, "--tape", "sample-books")
    assert {row["agent"]: row["pnl"]["fa"] for row in data["agents"]} == standings(db)
    [edge] = data["edge"]
    assert edge["bets"] == len(data["depth"]["bets"]) > 1  # every bet, on every market
