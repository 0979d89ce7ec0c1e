"""How far an imported closed market is covered, and when it resolves.

A closed market's history is trusted over its scheduled life (a gap is a time nobody traded),
not past its scheduled end unless it has points there: after the end the answer is knowable
and a history without points there is a recording that stopped, not a price that held. A
market UMA settled before Gamma closed it resolves at the settlement.

Instants are hand-computed: 2025-12-30 17:00 UTC = 1767114000 (a BTC market's ``endDate``),
20:16:51 = 1767125811 (its ``closedTime``); the ``gamma()`` object's endDate 2024-02-01 =
1706745600 and closedTime 2024-02-02 = 1706832000.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replays.importers import import_election2024, import_polymarket
from replays.importers.parsing import market_info, verdict
from replays.importers.polymarket import closed_coverage, read_market_objects
from replays.markets import MarketInfo
from tests.replays.test_tape_import import SHARED, gamma, needs_shared, write_inputs

END, CLOSE = 1767114000, 1767125811  # 2025-12-30 17:00:00 and 20:16:51 UTC
MINUTE, HOUR, DAY = 60, 3600, 86_400


def covered(tmp_path: Path, obj: dict[str, Any], times: list[int]) -> int | None:
    """``covered_until`` of one market imported from ``obj`` and a YES history at ``times``."""
    history = [{"t": t, "p": 0.4} for t in times]
    mpath, ppath = write_inputs(tmp_path, [obj], [{"token_id": "111", "history": history}])
    [market] = import_polymarket(mpath, ppath).tape.markets
    return market.covered_until


def btc(**over: Any) -> dict[str, Any]:
    """A BTC daily-range market as the shared data has it: scheduled to end at 17:00, closed by
    Gamma 3 h 17 min later."""
    return gamma(endDate="2025-12-30T17:00:00Z", closedTime="2025-12-30 20:16:51+00",
                 startDate="2025-12-23T17:34:18Z", **over)  # fmt: skip


def test_a_recording_that_stops_at_the_scheduled_end_is_not_carried_to_the_close(
    tmp_path: Path,
) -> None:
    """The shared BTC tapes: a point a minute for 24 h, the last at 16:59. Covered until it
    closed, its 16:59 price was tradable until 20:16, after the answer was known."""
    minutes = [END - DAY + k * MINUTE for k in range(1440)]
    assert minutes[-1] == END - MINUTE
    assert covered(tmp_path, btc(), minutes) == END  # not CLOSE


def test_a_sparse_history_is_covered_until_the_scheduled_end(tmp_path: Path) -> None:
    """Illiquid: the last trade was five days before the end. No trade is not no market: it is
    covered until its end, and not past it, where nothing says what it was traded at."""
    assert covered(tmp_path, btc(), [END - 9 * DAY, END - 5 * DAY]) == END


def test_points_past_the_scheduled_end_are_covered_and_no_further(tmp_path: Path) -> None:
    """Trading went on after the end and the recording saw it until 18:30; from there to the
    close (20:16) it saw nothing."""
    last = END + 90 * MINUTE
    assert covered(tmp_path, btc(), [END - DAY, END - HOUR, last]) == last


def test_a_market_closed_before_its_scheduled_end_is_covered_until_it_closed(
    tmp_path: Path,
) -> None:
    """Resolved early (e.g. "by <date>" questions that happen sooner): its life ended at the
    close, and a gap before it is a gap in trading. A point after the close still counts."""
    early = gamma(endDate="2024-03-01T00:00:00Z")  # closedTime 2024-02-02 00:00
    assert covered(tmp_path, early, [1706745600 - 3 * DAY]) == 1706832000
    assert covered(tmp_path, early, [1706832000 + HOUR]) == 1706832000 + HOUR


def test_no_scheduled_end_means_covered_until_the_close(tmp_path: Path) -> None:
    assert covered(tmp_path, gamma(endDate=None), [1706745600 - 3 * DAY]) == 1706832000


@given(
    last=st.integers(0, 10 * DAY),
    close=st.integers(0, 10 * DAY),
    end=st.none() | st.integers(0, 10 * DAY),
)
def test_coverage_never_cuts_the_history_or_the_scheduled_life_and_never_outruns_both(
    last: int, close: int, end: int | None
) -> None:
    market = MarketInfo(id="m", question="q?", outcomes=("Yes", "No"), close_ts=close, end_ts=end)
    reach = closed_coverage(market, last)
    assert reach >= last  # every recorded point is covered
    life = close if end is None else min(close, end)
    assert reach >= life  # a gap before the end (or close) is a gap in trading
    assert reach == max(last, life)  # and nothing past both is assumed


# -- resolution instant: UMA's settlement where it is earlier than Gamma's close -----------------

SETTLED = "2024-02-01T10:00:00Z"  # 1706781600, 14 h before closedTime 2024-02-02 00:00


@pytest.mark.parametrize(
    ("over", "ts"),
    [
        ({"umaResolutionStatus": "resolved", "umaEndDate": SETTLED}, 1706781600),
        # the usual case: the same second as closedTime
        ({"umaResolutionStatus": "resolved", "umaEndDate": "2024-02-02T00:00:00Z"}, 1706832000),
        # settled later than Gamma says it closed: the close stands
        ({"umaResolutionStatus": "resolved", "umaEndDate": "2024-02-03T00:00:00Z"}, 1706832000),
        # proposed or disputed, not settled: nothing is claimable yet
        ({"umaResolutionStatus": "proposed", "umaEndDate": SETTLED}, 1706832000),
        ({"umaEndDate": SETTLED}, 1706832000),
        # 2021-22 markets carry a free-text deadline there: not an instant, not an error
        ({"umaResolutionStatus": "resolved", "umaEndDate": "November 1, 2022"}, 1706832000),
        # before the market opened (startDate 2024-01-01): not believable
        ({"umaResolutionStatus": "resolved", "umaEndDate": "2023-12-31T00:00:00Z"}, 1706832000),
    ],
)
def test_a_market_resolves_when_uma_settled_it_if_that_was_before_it_closed(
    over: dict[str, Any], ts: int
) -> None:
    obj = gamma(**over)
    resolution = verdict(obj, market_info(obj)).resolution
    assert resolution is not None and (resolution.winner, resolution.ts) == ("Yes", ts)


@needs_shared
def test_every_gamma_fixture_is_judged_and_resolves_at_its_close() -> None:
    """The raw API fixtures (2020-2026 objects, some with free-text ``umaEndDate``) all judge
    without error; none was settled by UMA before Gamma closed it."""
    folder = SHARED / "api_fixtures" / "gamma"
    judged = 0
    for path in sorted(folder.glob("*/*.json")):
        for obj in read_market_objects(path):
            if "outcomes" not in obj:
                continue  # an event without markets
            resolution = verdict(obj, market_info(obj)).resolution
            if resolution is not None:
                assert resolution.ts == market_info(obj).close_ts, (path.name, obj["id"])
                judged += 1
    assert judged == 37  # of 60 objects: 8 open, 15 AMM-era closed with no decisive price


@needs_shared
def test_vermont_president_resolves_when_uma_settled_it() -> None:
    """UMA settled it on 2024-11-06 13:32:07 (its series stopped at 12:00, at 0.999); Gamma
    closed it on 11-20. It is the one election market of the 99 with ``umaEndDate`` whose
    settlement was not the second it closed."""
    tape = import_election2024(SHARED / "election2024").tape
    vermont = tape.resolutions["255186"]
    assert (vermont.winner, vermont.ts) == ("Yes", 1730899927)
    markets = json.loads((SHARED / "election2024" / "gamma_markets_election2024.json").read_text())
    moved = [m["id"] for m in markets if tape.resolutions[m["id"]].ts != market_info(m).close_ts]
    assert moved == ["255186"]
