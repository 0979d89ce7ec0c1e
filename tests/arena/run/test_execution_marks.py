"""``--marks-at liquidation``: each agent's holding valued at what it fetches sold down the bid
book at the mark, worked out by hand on a small generated book."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRun, CohortRunner
from ledger.events import Event, Marked
from ledger.projection import CohortState
from ledger.snapshot import decode_state, encode_state
from ledger.stream import MemorySink
from replays.books import Books
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.validate_books import BookToken
from tests.conftest import WEEK, Arena

START_AT = datetime(2026, 6, 7, tzinfo=UTC)
T0 = int(START_AT.timestamp())
BIDS = [(0.48, 100.0), (0.45, 200.0), (0.40, 1000.0)]


def setting() -> tuple[Tape, Books]:
    """Market m at 0.49 for a week. YES: bids 100 at 0.48, 200 at 0.45, 1,000 at 0.40, asks
    10,000 at 0.50; NO: 100 bid at 0.50, 100 asked at 0.52; one snapshot a second before."""
    market = MarketInfo(id="m", question="m?", outcomes=("Yes", "No"), volume=1.0,
                        category="crypto")  # fmt: skip
    times = np.array([T0 - 60, T0 + WEEK - 60], dtype=np.int64)
    tape = Tape.from_series([market], {"m": (times, np.array([0.49, 0.49]))},
                            [Resolution(market="m", ts=T0 + WEEK, winner="Yes")])  # fmt: skip
    at = T0 * 1000 - 1000
    books = Books.from_snapshots(
        [BookToken(token="y", market="m", outcome="Yes"),
         BookToken(token="n", market="m", outcome="No")],
        {"y": [(at, BIDS, [(0.50, 10_000.0)])], "n": [(at, [(0.50, 100.0)], [(0.52, 100.0)])]},
        tick=0.01,
    )  # fmt: skip
    return tape, books


def run(tmp_path: Path, liquidity: Literal["isolated", "shared"]) -> tuple[list[Event], CohortRun]:
    """a buys $100 of YES at the 0.50 ask (200 shares), b $1,000 (2,000 shares)."""
    tape, books = setting()
    bet = '[{{"action": "BET", "bets": [{{"market_id": "m", "side": "YES", "amount": {}}}]}}]'
    agents = {}
    for name, amount in (("a", 100), ("b", 1000)):
        (tmp_path / f"{name}.json").write_text(bet.format(amount))
        agents[name] = f"scripted:{tmp_path / f'{name}.json'}"
    config = CohortConfig(start=START_AT, agents=agents, universe=1, execution="l2", fees="none",
                          books=books.hash, marks_at="liquidation",
                          liquidity=liquidity)  # fmt: skip
    sink = MemorySink()
    done = CohortRunner(tape, config, books=books).run(sink)
    return sink.read(done.cohort), done


def marks(tmp_path: Path, liquidity: Literal["isolated", "shared"]) -> list[Marked]:
    return [e for e in run(tmp_path, liquidity)[0] if isinstance(e, Marked)]


def test_isolated_each_holding_walks_the_whole_bid_book(tmp_path: Path) -> None:
    """a: 100 x 0.48 + 100 x 0.45 = $93, 0.465 a share. b: 100 x 0.48 + 200 x 0.45 +
    1,000 x 0.40 = $538 for 2,000 shares (700 no bid takes), 0.269 a share. The marks'
    own prices are the best bids, 0.48 and 0.50."""
    log, done = run(tmp_path, "isolated")
    found = [e for e in log if isinstance(e, Marked)]
    mark = found[1]  # the first mark, at the start, comes before the bets
    assert found[0].held == {}
    assert mark.prices == [[0.48, 0.50]]
    assert mark.held is not None
    assert mark.held["a"]["m"] == [pytest.approx(0.465), 0.50]
    assert mark.held["b"]["m"] == [pytest.approx(0.269), 0.50]
    # settlement paid the holdings at $1 a share since: marks value, they do not trade
    assert done.state.books["a"].cash == pytest.approx(10_000 - 100 + 200)


def test_shared_the_second_holder_walks_what_the_first_left(tmp_path: Path) -> None:
    """a first, as given: $93 as before. b then meets 100 at 0.45 and 1,000 at 0.40: $445,
    0.2225 a share."""
    held = marks(tmp_path, "shared")[1].held
    assert held is not None
    assert held["a"]["m"][0] == pytest.approx(0.465)
    assert held["b"]["m"][0] == pytest.approx(0.2225)


def test_the_fold_values_positions_by_their_own_agent_s_liquidation(tmp_path: Path) -> None:
    """Before the resolution the fold's values are the walk's dollars, and a state restored
    from its image values them the same."""
    log, done = run(tmp_path, "isolated")
    first = [e for e in log if isinstance(e, Marked)][1]
    state = CohortState(done.cohort)
    for event in log[: log.index(first) + 1]:
        state.apply(event)
    assert state.positions_value("a") == pytest.approx(93.0)
    assert state.positions_value("b") == pytest.approx(538.0)
    again = decode_state(encode_state(state))
    assert again.positions_value("b") == pytest.approx(538.0)
    assert again.digest() == state.digest()


def test_a_liquidation_run_reports_and_verifies(arena: Arena, tmp_path: Path) -> None:
    """On the embedded BTC books: the report's header says how marks valued positions, and
    verify's fold reaches every close and snapshot with the liquidation marks in it."""
    db = tmp_path / "btc.db"
    done = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                 "--decisions", "1m", "--marks", "1m", "--execution", "l2",
                 "--marks-at", "liquidation", "--agent", "fav=favourite?stake=20000",
                 "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    said = " ".join(arena("report", db).stdout.split())
    assert "books 5d5081eab9ef, marked by liquidation" in said
    checked = arena("verify", db, "--tape", "sample-books")
    assert checked.exit_code == 0, checked.output
    assert "matched their recorded final state" in " ".join(checked.stdout.split())


@pytest.mark.parametrize("marks_at", ["bid", "liquidation"])
def test_verify_derives_marks_from_the_books_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marks_at: Literal["bid", "liquidation"]
) -> None:
    """A runner patched to mark a cent over the bids (or to value holdings at the best bid
    whole) writes a chained log whose digests agree with its marks; verify, deriving every
    mark from the books again, names the first it does not give."""
    from arena.run import runner as runner_module
    from arena.verify.fills import verify_fills
    from ledger.errors import IntegrityError
    from ledger.store import EventStore

    tape, books = setting()
    config = CohortConfig(start=START_AT, agents={"a": "hold"}, universe=1, execution="l2",
                          fees="none", books=books.hash, marks_at=marks_at)  # fmt: skip
    (tmp_path / "a.json").write_text(
        '[{"action": "BET", "bets": [{"market_id": "m", "side": "YES", "amount": 1000}]}]'
    )
    config = config.model_copy(update={"agents": {"a": f"scripted:{tmp_path / 'a.json'}"}})
    with EventStore.open(tmp_path / "honest.db") as store:
        CohortRunner(tape, config, books=books).run(store)
        verify_fills(store, tape, books)
    if marks_at == "bid":
        from arena.run.execution import best_bids as real

        monkeypatch.setattr(runner_module, "best_bids",
                            lambda *a: [round(p + 0.01, 2) for p in real(*a)])  # fmt: skip
        said = "marks market m at [0.49, 0.51], where the books' best bids are [0.48, 0.5]"
    else:
        monkeypatch.setattr(runner_module, "liquidation_marks",
                            lambda *a: {"a": {"m": [0.48, 0.5]}})  # fmt: skip
        said = "marks holdings by liquidation at {'a': {'m': [0.48, 0.5]}}, where the books"
    with EventStore.open(tmp_path / "patched.db") as store:
        CohortRunner(tape, config, books=books).run(store)
    monkeypatch.undo()
    with EventStore.open(tmp_path / "patched.db") as store, pytest.raises(IntegrityError) as bad:
        verify_fills(store, tape, books)
    assert said in str(bad.value)


def test_mid_marks_each_outcome_at_its_book_s_midpoint(tmp_path: Path) -> None:
    """Worked by hand on the book above: YES bids 0.48 / asks 0.50, mid 0.49; NO bids 0.50 /
    asks 0.52, mid 0.51. a's 200 YES shares are worth 200 x 0.49 = $98 marked at the mid, and
    verify derives the same marks from the books again; a mark a cent off is named."""
    from arena.run import runner as runner_module
    from arena.run.execution import book_mids
    from arena.verify.fills import verify_fills
    from ledger.errors import IntegrityError
    from ledger.store import EventStore

    tape, books = setting()
    assert book_mids(tape, books, "m", T0 * 1000) == [0.49, 0.51]
    (tmp_path / "a.json").write_text(
        '[{"action": "BET", "bets": [{"market_id": "m", "side": "YES", "amount": 100}]}]'
    )
    config = CohortConfig(start=START_AT, agents={"a": f"scripted:{tmp_path / 'a.json'}"},
                          universe=1, execution="l2", fees="none", books=books.hash,
                          marks_at="mid")  # fmt: skip
    with EventStore.open(tmp_path / "mid.db") as store:
        run = CohortRunner(tape, config, books=books).run(store)
        verify_fills(store, tape, books)
        marked = [e for e in store.read() if isinstance(e, Marked)]
    assert marked[1].prices == [[0.49, 0.51]]
    state = CohortState(run.cohort)
    with EventStore.open(tmp_path / "mid.db", readonly=True) as store:
        for event in store.read():
            state.apply(event)
            if event == marked[1]:
                break
    assert state.positions_value("a") == pytest.approx(200 * 0.49)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner_module, "book_mids", lambda *a: [0.5, 0.5])
        with EventStore.open(tmp_path / "off.db") as store:
            CohortRunner(tape, config, books=books).run(store)
    with EventStore.open(tmp_path / "off.db") as store, pytest.raises(IntegrityError) as bad:
        verify_fills(store, tape, books)
    assert "marks market m at [0.5, 0.5], where the books' mids are [0.49, 0.51]" in str(bad.value)
