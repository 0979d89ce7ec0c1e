"""The ladder's per-decision depth, forecasters' edge beside Brier, and its HTML page."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from arena.backtests.depth import bet_depths, by_agent, within
from arena.backtests.edge import agent_edges
from arena.reports.charts import PALETTE
from ledger.events import BetIntent, DecisionMade, OrderFilled
from replays.books import Books
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.validate_books import BookToken
from tests.arena.reports.test_html_report import near
from tests.browser import screenshot
from tests.conftest import WEEK, Arena

T0 = int(datetime(2026, 6, 7, tzinfo=UTC).timestamp())
ASKS = [(0.50, 100.0), (0.51, 200.0), (0.55, 1000.0), (0.56, 5.0)]


def test_the_dollars_within_a_cent_and_five_of_the_price_shown() -> None:
    """Shown 0.50: within 1¢, 100 x 0.50 + 200 x 0.51 = $152; within 5¢ also 1,000 x 0.55 =
    $702 (0.56 is past it). Shown 0.49: 1¢ reaches 0.50 only, $50."""
    px, sz = [p for p, _ in ASKS], [s for _, s in ASKS]
    assert within(px, sz, 0.50, 0.01) == pytest.approx(152.0)
    assert within(px, sz, 0.50, 0.05) == pytest.approx(702.0)
    assert within(px, sz, 0.49, 0.01) == pytest.approx(50.0)
    assert within(px, sz, 0.40, 0.05) == 0.0


def test_each_bet_meets_the_book_standing_at_its_decision() -> None:
    """Two bets on YES of m (tape 0.50): $1,000 by a at T0 meets the book of a second before;
    $50 by b a day later meets the newer book, whose asks start at 0.60 (nothing within 5¢ of
    0.50). Of a's $1,000, $152 can fill within 1¢ (15.2%), $702 within 5¢ (70.2%)."""
    market = MarketInfo(id="m", question="m?", outcomes=("Yes", "No"), volume=1.0)
    times = np.array([T0 - 60, T0 + WEEK - 60], dtype=np.int64)
    tape = Tape.from_series([market], {"m": (times, np.array([0.5, 0.5]))},
                            [Resolution(market="m", ts=T0 + WEEK, winner="Yes")])  # fmt: skip
    later = [(0.60, 500.0)]
    books = Books.from_snapshots(
        [BookToken(token="y", market="m", outcome="Yes")],
        {"y": [(T0 * 1000 - 1000, [(0.48, 10.0)], ASKS),
               ((T0 + 86_400) * 1000 - 1, [(0.58, 10.0)], later)]},
        tick=0.01,
    )  # fmt: skip

    def decided(agent: str, ts: int, amount: float) -> DecisionMade:
        return DecisionMade(cohort="c", ts=ts, agent=agent, week=1, action="BET",
                            bets=[BetIntent(market="m", side="yes", amount=amount)])  # fmt: skip

    rows = bet_depths([decided("a", T0, 1000.0), decided("b", T0 + 86_400, 50.0)], tape, books)
    assert [(r.agent, r.side, r.shown) for r in rows] == [("a", "YES", 0.5), ("b", "YES", 0.5)]
    assert rows[0].within == pytest.approx((152.0, 702.0))
    assert rows[1].within == (0.0, 0.0)
    [a, b] = by_agent(rows)
    assert a.share == pytest.approx((0.152, 0.702)) and b.share == (0.0, 0.0)


def fill(order: str, price: float, shares: float, amount: float, **more: object) -> OrderFilled:
    return OrderFilled(cohort="c", ts=T0, agent="f", order_id=order, kind="buy", market="m",
                       side="YES", position_id="p", price=price, shares=shares, amount=amount,
                       cash_before=10_000.0, **more)  # type: ignore[arg-type]  # fmt: skip


def test_the_edge_left_after_execution() -> None:
    """Belief 0.70. At the tape's 0.50: $100 for 200 shares, edge 0.20. On the last rung the
    $100 kept 180 shares and paid $1 of fee in dollars: 101 / 180 = 0.56111 a share, edge
    0.13889. A second bet, belief 0.60, $300 at 0.50 (edge 0.10) filled only $150 at 0.55
    (edge 0.05): shown (100 x 0.20 + 300 x 0.10) / 400 = 0.125; after (100 x 0.13889 + 150 x
    0.05) / 250 = 0.08556; dollars still spent 250 / 400."""
    shown = [fill("o1", 0.5, 200.0, 100.0, belief=0.7), fill("o2", 0.5, 600.0, 300.0, belief=0.6)]
    after = [
        fill("o1", 0.5, 180.0, 100.0, belief=0.7, fee=1.0, fee_currency="usdc"),
        fill("o2", 0.55, 150.0 / 0.55, 150.0, belief=0.6),
    ]
    [edge] = agent_edges("c", {"f": shown}, {"f": after}, {"f": 0.2})
    assert edge.shown == pytest.approx(0.125)
    assert edge.executed == pytest.approx((100 * (0.7 - 101 / 180) + 150 * 0.05) / 250)
    assert (edge.bets, edge.brier, edge.kept) == (2, 0.2, 250 / 400)
    # no belief stated: not a forecaster, no row
    assert agent_edges("c", {"h": [fill("o3", 0.5, 2.0, 1.0)]}, {}, {}) == []


@pytest.fixture(scope="module")
def btc_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("ladder") / "btc.db"
    done = Arena()("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                   "--decisions", "1m", "--marks", "1m", "--agent", "fav=favourite?stake=20000",
                   "--agent", "hold=hold", "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    return db


def test_the_ladder_prints_depth_and_edge(arena: Arena, btc_log: Path) -> None:
    data = arena.json("ladder", btc_log, "--tape", "sample-books")
    [bet] = data["depth"]["bets"]
    assert bet["agent"] == "fav" and bet["asked"] == 2500.0
    low, high = bet["within"]
    assert 0.0 < low <= high
    [edge] = data["edge"]  # the favourite states the price it pays as its belief
    assert edge["agent"] == "fav" and edge["shown"] == pytest.approx(0.0, abs=1e-12)
    assert edge["executed"] < 0.0  # the book and the fee took what the tape's price hid
    said = " ".join(arena("ladder", btc_log, "--tape", "sample-books").stdout.split())
    assert "Depth near the price shown" in said and f"{low:,.2f}" in said
    assert "the edge that survives execution" in said and "0.2450" in said
    plain = arena.json("ladder", btc_log, "--tape", "sample-books")
    assert plain == data  # the same decisions give the same ladder


@pytest.mark.slow  # headless Chromium started, the page drawn and decoded
def test_the_ladder_page_as_chromium_draws_it(arena: Arena, btc_log: Path, tmp_path: Path) -> None:
    """The waterfall draws the favourite's first and last rung in its colour (the palette's
    first: agents by name, fav before hold) and each step that took something in grey."""
    out = tmp_path / "page"
    done = arena("ladder", btc_log, "--tape", "sample-books", "--latency", "1500", "--html", out)
    assert done.exit_code == 0, done.output
    data = json.loads((out / "ladder.json").read_text())
    html = (out / "index.html").read_text()
    assert "Depth near the price shown" in html and "Forecasters: the edge" in html
    took = data["agents"][0]["took"]
    assert (
        f"<title>fav, the depth cost: {took['the depth']:,.2f}</title>" in html
    )  # the table's sign
    pixels = screenshot(out / "index.html", tmp_path / "page.png", 1200, 1400)
    assert np.count_nonzero(near(pixels, PALETTE[0], 20)) > 300, "no fav bars"
    assert np.count_nonzero(near(pixels, "#8c959f", 12)) > 20, "no step bars"


def test_the_ladder_reads_whole_at_80_columns(arena: Arena, btc_log: Path) -> None:
    """Ten columns of dollars do not fit 80 cells: Rich cut every P/L to "+2,4…" and every
    heading to "midp…". At 80 columns the rungs are rows, and every figure is printed whole."""
    data = arena.json("ladder", btc_log, "--tape", "sample-books", "--latency", "1500")
    done = arena("ladder", btc_log, "--tape", "sample-books", "--latency", "1500",
                 env={"COLUMNS": "80"})  # fmt: skip
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "…" not in done.stdout
    for row in data["agents"]:
        for figure in row["pnl"].values():
            assert f"{figure:+,.2f}" in done.stdout
        for figure in row["took"].values():
            assert f"{figure:,.2f}" in done.stdout
    rung_rows = {line.split("  ")[0].strip() for line in lines}
    assert {r["name"] for r in data["rungs"]} <= rung_rows


def test_no_agent_s_bars_are_drawn_in_the_colours_of_loss_and_gain(
    arena: Arena, btc_log: Path, tmp_path: Path
) -> None:
    """The second agent took the palette's red: its first and last bars read as losses
    whatever their sign, beside green steps that add. Agents' bars are never red or green."""
    out = tmp_path / "page"
    assert arena("ladder", btc_log, "--tape", "sample-books", "--html", out).exit_code == 0
    html = (out / "index.html").read_text()
    fills = {
        title.split(",")[0]: fill
        for fill, title in re.findall(r'fill="(#[0-9a-f]{6})"><title>([^<]*)</title>', html)
        if ", fa:" in title
    }
    assert set(fills) == {"fav", "hold"}
    assert not set(fills.values()) & {"#d62728", "#2ca02c"}, fills
