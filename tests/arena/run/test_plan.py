"""How long a cohort decides, and what an agent may know while it does.

A cohort decides at every cadence instant where at least one universe market is open and the
tape covers it (knows its price then); a price carries forward from its last point for as long
as the tape covers the instant. When decisions end with markets still open, the log says why,
once. Agents see the scheduled end of a market (never when it actually closed) and its volume
as of the instant (never its final total).

Times are offsets from ``START`` (Sunday 2024-01-07 00:00 UTC), as in ``conftest.py``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.run.cohort import CohortConfig
from arena.run.plan import (
    NO_INSTANT,
    UNCOVERED,
    VOLUME_AS_OF_START,
    VOLUME_FINAL,
    plan_cohorts,
    select_universe,
)
from arena.run.runner import CohortRunner
from ledger.errors import LedgerError
from ledger.events import (
    AnyEvent,
    CohortClosed,
    CohortOpened,
    DecisionMade,
    DecisionsStopped,
    OrderFilled,
)
from ledger.stream import MemorySink
from replays.errors import TapeError
from replays.importers import import_polymarket
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape
from strategies.api import Bet, Context, Decision, MarketMeta, Strategy, View
from strategies.builtin.hold import Hold
from strategies.llm.prompt import user_prompt
from tests.conftest import DAY, START, WEEK, Arena


def market(mid: str, **fields: Any) -> MarketInfo:
    return MarketInfo(id=mid, question=f"{mid}?", outcomes=("Yes", "No"), **fields)


def tape_of(
    *specs: tuple[MarketInfo, list[tuple[int, float]], tuple[int, str] | None],
) -> Tape:
    """A tape from ``(market, [(offset, YES price)], (resolution offset, winner) | None)``."""
    series = {
        m.id: (np.array([START + t for t, _ in pts], np.int64), np.array([p for _, p in pts]))
        for m, pts, _ in specs
    }
    resolutions = [
        Resolution(market=m.id, ts=START + r[0], winner=r[1]) for m, _, r in specs if r is not None
    ]
    return Tape.from_series([m for m, _, _ in specs], series, resolutions)


def config(**overrides: Any) -> CohortConfig:
    values: dict[str, Any] = {"start": START, "agents": {"h": "hold"}, "mark_cadence": "weekly"}
    return CohortConfig(**(values | overrides))


def run(tape: Tape, cfg: CohortConfig, strategies: dict[str, Strategy] | None = None) -> list[Any]:
    """The events a cohort writes, replayed in memory."""
    sink = MemorySink()
    run = CohortRunner(tape, cfg, strategies=strategies or {"h": Hold()}).run(sink)
    return sink.read(run.cohort)


def decision_offsets(events: list[AnyEvent]) -> list[int]:
    return sorted({e.ts - START for e in events if isinstance(e, DecisionMade)})


def of_type(events: list[AnyEvent], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# A sparse tape: both markets' last points are before the start, but both trade for weeks
# after it (s until +5w, t until +3w), and the recording says so.
SPARSE = tape_of(
    (
        market("s", volume=200.0, close_ts=START + 5 * WEEK, covered_until=START + 5 * WEEK),
        [(-2 * DAY, 0.7), (-DAY, 0.8)],
        (5 * WEEK, "Yes"),
    ),
    (
        market("t", volume=100.0, close_ts=START + 3 * WEEK, covered_until=START + 3 * WEEK),
        [(-3 * DAY, 0.4)],
        (3 * WEEK, "No"),
    ),
)


class BuyS(Strategy):
    """$100 on YES of s at every decision."""

    def decide(self, view: View) -> Decision:
        return Decision(bets=[Bet(market="s", side="YES", amount=100.0)])


def test_a_sparse_tape_decides_weekly_until_its_markets_close() -> None:
    """Today's code stopped at the last point (the day before the start): no decision at all,
    and "every market settled". Now: every week while s or t is open, at the carried price."""
    events = run(SPARSE, config(agents={"b": "hold"}), {"b": BuyS()})
    assert decision_offsets(events) == [0, WEEK, 2 * WEEK, 3 * WEEK, 4 * WEEK]
    fills = of_type(events, OrderFilled)
    assert [(f.ts - START, f.price) for f in fills] == [(k * WEEK, 0.8) for k in range(5)]
    assert of_type(events, DecisionsStopped) == []  # both closed as their coverage ended
    closed = events[-1]
    assert isinstance(closed, CohortClosed) and closed.reason == "every market settled"


def sparse_market(tmp_path: Path, end_date: str) -> Tape:
    """A closed Gamma market whose CLOB history ends days before the start (illiquid, or coarse
    fidelity), scheduled to end on ``end_date`` and closed at +3w 5h."""
    obj = {
        "id": "9", "question": "Sparse?", "outcomes": '["Yes", "No"]', "clobTokenIds": '["1", "2"]',
        "volumeNum": 50.0, "startDate": "2023-12-01T00:00:00Z", "endDate": end_date,
        "closedTime": START + 3 * WEEK + 5 * 3600, "closed": True, "outcomePrices": '["0", "1"]',
    }  # fmt: skip
    markets = tmp_path / "m.json"
    markets.write_bytes(msgspec.json.encode([obj]))
    prices = tmp_path / "p.jsonl"
    prices.write_bytes(msgspec.json.encode({"token_id": "1", "history": [
        {"t": START - 5 * DAY, "p": 0.3}, {"t": START - 2 * DAY, "p": 0.25}]}))  # fmt: skip
    return import_polymarket(markets, prices).tape


def test_an_imported_sparse_history_is_covered_until_its_scheduled_end(tmp_path: Path) -> None:
    """No trade for weeks before its end is not the end of trading: the cohort decides until
    the market's scheduled end, 2024-01-28 (+3w), five hours before Gamma closed it."""
    tape = sparse_market(tmp_path, "2024-01-28T00:00:00Z")
    info = tape.markets[0]
    assert (info.covered_until, info.end_ts) == (START + 3 * WEEK, START + 3 * WEEK)
    assert info.close_ts == START + 3 * WEEK + 5 * 3600
    assert info.volume_history == ()  # a closed market's volume is final: never shown
    assert decision_offsets(run(tape, config())) == [0, WEEK, 2 * WEEK, 3 * WEEK]


def test_an_imported_market_is_not_decided_between_its_scheduled_end_and_its_close(
    tmp_path: Path,
) -> None:
    """Scheduled to end on 2024-01-20 (+13d), closed by Gamma eight days later, with no point
    after its end: nothing says what it traded at once its answer was knowable, so decisions
    stop at the end (the old rule carried 0.25 to +3w 5h, decided at +2w and +3w) and the log
    says why."""
    events = run(sparse_market(tmp_path, "2024-01-20T00:00:00Z"), config())
    assert decision_offsets(events) == [0, WEEK]
    [stopped] = of_type(events, DecisionsStopped)
    assert (stopped.ts, stopped.markets) == (START + 13 * DAY + 1, ["9"])


def test_a_minute_recording_that_stops_at_the_end_fills_nothing_after_it(tmp_path: Path) -> None:
    """The shape of the shared BTC tapes: a point a minute for a day, the last one a minute
    before the scheduled end (+1d 17:00), Gamma's close 3 h 17 min later. An agent buying every
    hour filled at 17:00 and never after (the old rule filled at 18:00, 19:00 and 20:00 at the
    16:59 price, after the answer was known)."""
    end = START + DAY + 17 * 3600  # 2024-01-08 17:00 UTC
    obj = {
        "id": "s", "question": "BTC in range?", "outcomes": '["Yes", "No"]',
        "clobTokenIds": '["1", "2"]', "startDate": "2024-01-01T17:00:00Z",
        "endDate": "2024-01-08T17:00:00Z", "closedTime": end + 3 * 3600 + 17 * 60,
        "closed": True, "outcomePrices": '["0", "1"]',
    }  # fmt: skip
    markets = tmp_path / "m.json"
    markets.write_bytes(msgspec.json.encode([obj]))
    history = [{"t": end - DAY + 60 * k, "p": 0.5 if k < 1439 else 0.4} for k in range(1440)]
    prices = tmp_path / "p.jsonl"
    prices.write_bytes(msgspec.json.encode({"token_id": "1", "history": history}))
    tape = import_polymarket(markets, prices).tape
    start = end - 3 * 3600  # 14:00
    events = run(tape, config(start=start, decision_cadence="hourly"), {"h": BuyS()})
    fills = [(f.ts - end, f.price) for f in of_type(events, OrderFilled)]
    assert fills == [(-3 * 3600, 0.5), (-2 * 3600, 0.5), (-3600, 0.5), (0, 0.4)]
    [stopped] = of_type(events, DecisionsStopped)
    assert stopped.ts == end + 1


# Coverage ends at +10d while u trades until +5w: decisions at 0 and +7d, then a stop.
CUT = tape_of(
    (
        market("u", volume=200.0, close_ts=START + 5 * WEEK, covered_until=START + 10 * DAY),
        [(-DAY, 0.6), (3 * DAY, 0.65), (9 * DAY, 0.7)],
        (5 * WEEK, "Yes"),
    ),
    (market("v", volume=100.0, covered_until=START + 10 * DAY), [(-DAY, 0.5)], (WEEK, "No")),
)


def test_decisions_stop_where_the_coverage_ends_and_the_log_says_why_once() -> None:
    events = run(CUT, config(decision_cadence="daily", mark_cadence="daily"))
    assert decision_offsets(events) == [k * DAY for k in range(11)]  # 0 .. +10d inclusive
    [stopped] = of_type(events, DecisionsStopped)
    assert (stopped.ts, stopped.markets) == (START + 10 * DAY + 1, ["u"])
    assert stopped.reason == (
        "the tape's recording ends at 2024-01-17 00:00 UTC with 1 market(s) still open (u): "
        "no price is known after it, so no decision is made"
    )
    # u is not marked past the coverage: no price is known for it there
    marks = [e for e in events if type(e).__name__ == "Marked"]
    assert [m.ts - START for m in marks if "u" in m.markets][-1] == 10 * DAY
    closed = events[-1]
    assert isinstance(closed, CohortClosed) and closed.ts == START + 5 * WEEK
    assert closed.reason.startswith("every market settled; no decision after 2024-01-17 00:00")


def test_report_and_step_show_why_decisions_stopped(arena: Arena, tmp_path: Path) -> None:
    tape_path, db = tmp_path / "cut.tape", tmp_path / "run.db"
    save_tape(CUT, tape_path)
    done = arena("replay", "--tape", tape_path, "--start", "2024-01-07", "--agent", "h=hold",
                 "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    shown = " ".join(arena("report", db).output.split())
    assert "no decision after 2024-01-17 00:00 UTC" in shown
    assert f"chosen by {VOLUME_FINAL}" in shown
    data = arena("report", db, "--json")
    stop = msgspec.json.decode(data.stdout)["cohorts"][0]["decisions_stopped"]
    assert stop["markets"] == ["u"] and stop["ts"] == "2024-01-17T00:00:01Z"
    stepped = " ".join(arena("step", db, "--no-input").output.replace("│", " ").split())
    assert "no more decisions: the tape's recording ends at 2024-01-17 00:00 UTC" in stepped
    assert re.search(rf"what it saw: \d+ markets?, by {VOLUME_FINAL}", stepped)


def test_a_start_past_the_coverage_is_a_one_line_error_before_anything_is_written(
    arena: Arena,
    tmp_path: Path,
) -> None:
    """u is open and priced at +14d, but the tape knows nothing after +10d. Today's code ran
    a cohort with a universe and no decision ("every market settled")."""
    tape_path, db = tmp_path / "cut.tape", tmp_path / "run.db"
    save_tape(CUT, tape_path)
    result = arena("replay", "--tape", tape_path, "--start", "2024-01-21", "--db", db)
    assert result.exit_code != 0
    assert result.output.strip().splitlines() == [
        f"Error: no market of tape {CUT.hash[:12]} is open with a price at 2024-01-21 00:00 UTC: "
        "the tape's recording of the 1 market(s) open then ends at 2024-01-17 00:00 UTC, "
        "before it"
    ]
    assert not db.exists()
    with pytest.raises(LedgerError, match="recording of the 1 market"):
        CohortRunner(CUT, config(start=START + 2 * WEEK))


def test_a_universe_without_a_decision_instant_is_an_error_and_a_named_skip() -> None:
    """At tick cadence a cohort decides at tape points; SPARSE has none after the start."""
    with pytest.raises(LedgerError, match=r"^no decision at or after 2024-01-07 00:00 UTC"):
        CohortRunner(SPARSE, config(decision_cadence="tick"))
    starts = [datetime_at(0), datetime_at(WEEK), datetime_at(6 * WEEK)]
    configs = [config(start=int(s.timestamp()), decision_cadence="tick") for s in starts]
    planned, skipped = plan_cohorts(SPARSE, configs)
    assert planned == []
    assert [(s.start, s.reason) for s in skipped[:2]] == [
        (starts[0], NO_INSTANT),
        (starts[1], NO_INSTANT),
    ]
    configs = [config(start=START), config(start=START + 2 * WEEK)]
    planned, skipped = plan_cohorts(CUT, configs)
    assert [p.config.start for p in planned] == [datetime_at(0)]
    assert [s.reason for s in skipped] == [UNCOVERED]
    # the plan the runner is handed is the one it would have made itself
    runner = CohortRunner(CUT, configs[0], plan=planned[0].plan)
    assert runner.schedule is planned[0].plan.schedule
    assert runner.schedule.steps == CohortRunner(CUT, configs[0]).schedule.steps


def datetime_at(offset: int) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(START + offset, UTC)


# -- what agents may know ----------------------------------------------------------------------

END, CLOSED = START + 3 * WEEK, START + 4 * WEEK + 12_345  # scheduled end; actual close
FINAL = 7_654_321.0
KNOWN = tape_of(
    (
        market("m", volume=FINAL, end_ts=END, close_ts=CLOSED, covered_until=CLOSED),
        [(-DAY, 0.6)],
        (4 * WEEK + 20_000, "Yes"),  # resolved (UMA) after it closed
    ),
    (
        market(
            "n",
            volume=FINAL + 1,
            volume_history=((START - DAY, 1_000.0), (START + WEEK, 2_500.0)),
            end_ts=END,
            close_ts=CLOSED,
            covered_until=CLOSED,
        ),
        [(-DAY, 0.3)],
        (4 * WEEK + 20_000, "No"),
    ),
    (
        market("old", volume=11.0, end_ts=START - 3 * DAY, close_ts=START - 2 * DAY),
        [(-5 * DAY, 0.9)],
        (-DAY, "Yes"),
    ),
)


def numbers(value: Any) -> list[float]:
    """Every number reachable in a value: fields of dataclasses, items of tuples, arrays."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float | np.number):
        return [float(value)]
    if isinstance(value, np.ndarray):
        return [float(x) for x in value.ravel()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [x for f in dataclasses.fields(value) for x in numbers(getattr(value, f.name))]
    if isinstance(value, tuple | list):
        return [x for item in value for x in numbers(item)]
    return []


class Snoop(Strategy):
    """Collects every number of every MarketMeta, Context field and view array it can reach,
    and the LLM prompt it would be shown."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[float] = []
        self.metas: list[MarketMeta] = []
        self.volumes: list[dict[str, float]] = []
        self.prompts: list[str] = []

    def setup(self, context: Context) -> None:
        super().setup(context)
        for f in dataclasses.fields(context):
            if f.name != "rng":
                self.seen += numbers(getattr(context, f.name))
        self.metas += context.universe

    def decide(self, view: View) -> Decision:
        markets = view.markets
        for mid in markets.ids:
            meta = markets.meta(mid)
            self.metas.append(meta)
            self.seen += numbers(meta)
            self.seen += numbers(markets.prices(mid))
            self.seen += numbers(markets.history(mid))
        self.seen += numbers([markets.yes, markets.volume, markets.open, view.shares])
        self.volumes.append(dict(zip(markets.ids, markets.volume.tolist(), strict=True)))
        self.prompts.append(user_prompt(view))
        return Decision.hold()


def test_agents_never_see_when_a_market_actually_closed_nor_its_final_volume() -> None:
    snoop = Snoop()
    events = run(KNOWN, config(agents={"s": "hold"}), {"s": snoop})
    assert decision_offsets(events) == [0, WEEK, 2 * WEEK, 3 * WEEK, 4 * WEEK]
    seen = set(snoop.seen)
    assert CLOSED not in seen and START - 2 * DAY not in seen  # actual closes, also of `old`
    assert FINAL not in seen and FINAL + 1 not in seen  # final volumes of open markets
    assert {END, START - 3 * DAY} <= seen  # scheduled ends are knowable
    assert {m.end_ts for m in snoop.metas} == {END}
    assert not any(hasattr(m, "close_ts") for m in snoop.metas)
    # volume as of each decision: n's points at -1d and +7d; m has none (NaN, not FINAL)
    assert [v["n"] for v in snoop.volumes] == [1_000.0, 2_500.0, 2_500.0, 2_500.0, 2_500.0]
    assert all(math.isnan(v["m"]) for v in snoop.volumes)
    # the prompt: the scheduled end as "Closes", no final volume
    first = snoop.prompts[0]
    assert "Closes: 2024-01-28" in first and "2024-02-04" not in first
    assert "7,654,321" not in first and "Volume: $1,000" in first and "Volume: $N/A" in first


def test_universe_ranked_by_volume_as_of_the_start_where_the_tape_knows_it() -> None:
    """By final volume b > a; as of the start a (900) > b (100): a is first, and said so."""
    known = tape_of(
        (market("a", volume=1_000.0, volume_history=((START - DAY, 900.0),), covered_until=START),
         [(-DAY, 0.5)], (WEEK, "Yes")),
        (market("b", volume=5_000.0, volume_history=((START - DAY, 100.0),), covered_until=START),
         [(-DAY, 0.5)], (WEEK, "No")),
    )  # fmt: skip
    assert [known.markets[m].id for m in select_universe(known, START, 1)] == ["a"]
    opened = run(known, config(universe=2))[0]
    assert isinstance(opened, CohortOpened) and opened.universe == ["a", "b"]
    assert opened.settings["universe_by"] == VOLUME_AS_OF_START
    # without a volume point at the start for every market, the final volume ranks them
    partly = tape_of(
        (market("a", volume=1_000.0, volume_history=((START + DAY, 900.0),), covered_until=START),
         [(-DAY, 0.5)], (WEEK, "Yes")),
        (market("b", volume=5_000.0, covered_until=START), [(-DAY, 0.5)], (WEEK, "No")),
    )  # fmt: skip
    opened = run(partly, config(universe=2))[0]
    assert opened.universe == ["b", "a"] and opened.settings["universe_by"] == VOLUME_FINAL
    # the ranking is of every candidate: one chosen market with a volume point is not enough
    mixed = tape_of(
        (market("a", volume=5_000.0, volume_history=((START - DAY, 900.0),), covered_until=START),
         [(-DAY, 0.5)], (WEEK, "Yes")),
        (market("b", volume=1_000.0, covered_until=START), [(-DAY, 0.5)], (WEEK, "No")),
    )  # fmt: skip
    opened = run(mixed, config(universe=1))[0]
    assert opened.universe == ["a"] and opened.settings["universe_by"] == VOLUME_FINAL


# -- the tape's new fields -----------------------------------------------------------------------


def test_new_fields_survive_both_file_forms_and_absent_ones_keep_the_hash(tmp_path: Path) -> None:
    for name in ("k.tape", "k.tape.jsonl.gz"):
        save_tape(KNOWN, tmp_path / name)
        again = load_tape(tmp_path / name, verify_hash=True)
        assert again.markets == KNOWN.markets and again.hash == KNOWN.hash
    bare = [msgspec.structs.replace(m, end_ts=None, covered_until=None, volume_history=())
            for m in KNOWN.markets]  # fmt: skip
    plain = Tape(bare, *KNOWN.columns, KNOWN.resolutions)
    assert plain.hash != KNOWN.hash
    # the canonical metadata of a tape without them is byte for byte what it was before them
    assert b"covered_until" not in _canonical(plain) and b"end_ts" not in _canonical(plain)
    # and the documented default coverage: the tape's last point
    assert [plain.coverage(m) for m in range(3)] == [START - DAY] * 3


def _canonical(tape: Tape) -> bytes:
    from replays.tape import canonical_meta

    return canonical_meta(tape.markets, tape.resolutions)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"covered_until": START - 2 * DAY}, "covered until t=1704412800, before its first point"),
        (
            {"volume_history": ((START, 5.0), (START, 6.0))},
            "volume history instants not increasing at t=1704585600",
        ),
        ({"volume_history": ((START, -1.0),)}, "volume -1.0 at t=1704585600 is not a finite"),
        ({"volume_history": ((START, math.nan),)}, "volume nan at t=1704585600"),
    ],
)
def test_bad_coverage_or_volume_history_is_a_one_line_error(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(TapeError, match=rf"^<memory>: market x: {problem}"):
        tape_of((market("x", **fields), [(-DAY, 0.5)], None))


# -- the property ------------------------------------------------------------------------------

OFFSETS = st.integers(-3 * WEEK, 6 * WEEK)


@st.composite
def random_tapes(draw: st.DrawFn) -> Tape:
    """1-4 markets, sparse or dense, closing or not, coverage recorded (before or after the
    close) or left to the default, resolved or not."""
    specs = []
    for k in range(draw(st.integers(1, 4))):
        first = draw(OFFSETS)
        gaps = draw(st.lists(st.integers(1, 4 * DAY), min_size=0, max_size=6))
        times = list(np.cumsum([first, *gaps]))
        points = [(int(t), draw(st.floats(0.01, 0.99))) for t in times]
        close = draw(st.none() | st.integers(first + 1, 9 * WEEK))
        covered = draw(st.none() | st.integers(first, 9 * WEEK))
        resolved = draw(st.none() | st.integers(first, 9 * WEEK))
        fields: dict[str, Any] = {"volume": float(draw(st.integers(0, 3)))}
        if close is not None:
            fields["close_ts"] = START + close
        if covered is not None:
            fields["covered_until"] = START + covered
        specs.append(
            (market(f"m{k}", **fields), points, None if resolved is None else (resolved, "Yes"))
        )
    return tape_of(*specs)


@settings(max_examples=150, deadline=None)
@given(
    tape=random_tapes(),
    start=st.integers(-2 * WEEK, 5 * WEEK),
    step=st.sampled_from([DAY, 3 * DAY, WEEK]),
    size=st.integers(1, 4),
)
def test_a_decision_happens_exactly_where_a_universe_market_is_open_and_covered(
    tape: Tape, start: int, step: int, size: int
) -> None:
    start_ts = START + start
    cadence = {DAY: "daily", 3 * DAY: "3d", WEEK: "weekly"}[step]
    universe = select_universe(tape, start_ts, size)

    def live(m: int, t: int) -> bool:
        info = tape.markets[m]
        resolution = tape.resolutions.get(info.id)
        closed = (info.close_ts is not None and t >= info.close_ts) or (
            resolution is not None and t >= resolution.ts
        )
        return not closed and t <= tape.coverage(m)

    horizon = START + 10 * WEEK
    expected = [t for t in range(start_ts, horizon, step) if any(live(m, t) for m in universe)]
    cfg = config(start=datetime_at(start), decision_cadence=cadence, universe=size)
    try:
        events = run(tape, cfg)
    except LedgerError:
        assert expected == []
        return
    decided = sorted({e.ts for e in events if isinstance(e, DecisionMade)})
    assert decided == expected
    # the stop: said once, naming the markets still open when the last one stops being live
    last_live = max(min(_close(tape, m), tape.coverage(m) + 1) for m in universe)
    still_open = [tape.markets[m].id for m in universe if _close(tape, m) > last_live]
    stops = of_type(events, DecisionsStopped)
    assert [(e.ts, e.markets) for e in stops] == ([(last_live, still_open)] if still_open else [])


def _close(tape: Tape, m: int) -> int:
    """When trading in market ``m`` stops (2**62 if the tape never says)."""
    info = tape.markets[m]
    resolution = tape.resolutions.get(info.id)
    ends = [x for x in (info.close_ts, resolution and resolution.ts) if x is not None]
    return min(ends, default=2**62)
