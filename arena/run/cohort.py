"""A cohort's settings, its identity, its universe and its timeline.

Everything here is decided before the first event is written, from the tape and the settings
alone, so the same inputs always give the same cohort id, the same universe and the same order
of instants.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pydantic

from ledger.rules import RULES
from replays.instants import parse_instant as parse_instant  # re-exported: commands read it here
from replays.tape import Tape

WEEK = 7 * 86_400
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": WEEK}
_NAMED = {"weekly": WEEK, "daily": 86_400, "hourly": 3_600}
TICK = "tick"

# Instants that coincide are taken in this order: a market that resolves at t can no longer be
# traded at t, and a decision at t sees the mark taken at t.
# Decisions stop (STOP) after the marks of their instant, where no decision is made anyway.
RESOLUTION, MARK, DECISION, STOP = 0, 1, 2, 3


def cadence_seconds(cadence: str) -> int | None:
    """Seconds between instants, or None for ``tick`` (every tape point)."""
    if cadence == TICK:
        return None
    if cadence in _NAMED:
        return _NAMED[cadence]
    match = re.fullmatch(r"(\d+)([smhdw])", cadence)
    if not match or int(match.group(1)) == 0:
        raise ValueError(
            f"cadence {cadence!r} is not weekly, daily, hourly, tick or a count with a unit "
            "(e.g. 15m, 4h, 2d)"
        )
    return int(match.group(1)) * _UNITS[match.group(2)]


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive time is taken as UTC already, since tapes are all in UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def sundays(first: datetime, last: datetime) -> list[datetime]:
    """Every Sunday 00:00 UTC from ``first`` to ``last`` inclusive."""
    day = first.replace(hour=0, minute=0, second=0, microsecond=0)
    day += timedelta(days=(6 - day.weekday()) % 7)
    if day < first:
        day += timedelta(days=7)
    out = []
    while day <= last:
        out.append(day)
        day += timedelta(days=7)
    return out


MAX_CASH = 1e12
"""The most an agent may start with: the largest amount a bet may have (``boundary.MAX_AMOUNT``).
Infinity, which JSON cannot hold, was written into ``CohortOpened`` as null and left a log that
could not be read again; sums past 10¹² are past what the tables can show."""


class CohortConfig(pydantic.BaseModel):
    """What a user chooses for one cohort; validated at the boundary, then frozen."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    start: datetime
    agents: dict[str, str]
    universe: int = pydantic.Field(default=500, ge=1)
    cash: float = pydantic.Field(default=10_000.0, gt=0, le=MAX_CASH)
    rules: str = pydantic.Field(default="v1", description=f"betting rules: {', '.join(RULES)}")
    decision_cadence: str = "weekly"
    mark_cadence: str = "daily"
    seed: int = pydantic.Field(default=0, ge=0)  # numpy refuses a negative seed

    @pydantic.field_validator("start")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)

    @pydantic.field_validator("rules")
    @classmethod
    def _rules(cls, value: str) -> str:
        """A version ``ledger.rules.RULES`` defines (where the versions are listed, once)."""
        if value not in RULES:
            raise ValueError(f"unknown rules version {value!r} (known: {', '.join(RULES)})")
        return value

    @pydantic.field_validator("decision_cadence", "mark_cadence")
    @classmethod
    def _cadence(cls, value: str) -> str:
        cadence_seconds(value)
        return value

    @pydantic.field_validator("agents")
    @classmethod
    def _agents(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("a cohort needs at least one agent")
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"agent name {name!r} may use only letters, digits, _ . -")
        return value

    @property
    def start_ts(self) -> int:
        return int(self.start.timestamp())

    def cohort_id(self, tape_hash: str) -> str:
        """``YYYY-MM-DD-xxxxxxxx``: the start date and a hash of everything that shapes the log."""
        blob = json.dumps(
            {"tape": tape_hash, **self.model_dump(mode="json")}, sort_keys=True
        ).encode()
        return f"{self.start:%Y-%m-%d}-{hashlib.sha256(blob).hexdigest()[:8]}"


VOLUME_AS_OF_START = "volume as of the start"
VOLUME_FINAL = "final volume"
"""How a universe was ranked (``CohortOpened.settings["universe_by"]``): by what the tape knew
at the start, or, where it knows no volume then, by the volume it recorded later."""


def iso_minute(ts: int) -> str:
    """An instant as people read it in reasons and errors: ``2024-11-12 15:01 UTC``."""
    return f"{datetime.fromtimestamp(ts, UTC):%Y-%m-%d %H:%M} UTC"


@dataclass(frozen=True)
class Skipped:
    """A start left out of a range, and why (one of a few short reasons, so they group)."""

    start: datetime
    reason: str


def split_starts(
    tape: Tape, starts: Sequence[datetime], size: int, decision_cadence: str = "weekly"
) -> tuple[list[datetime], list[Skipped]]:
    """``starts`` on which a cohort would make at least one decision, and those without.

    A range of Sundays over a tape of short-lived markets (daily BTC ranges, say) can hold
    weeks when nothing trades at 00:00, or starts past where the recording reaches; those are
    skipped and named rather than ending a run half-way through.
    """
    kept: list[datetime] = []
    skipped: list[Skipped] = []
    for start in starts:
        problem = start_problem(tape, int(start.timestamp()), size, decision_cadence)
        if problem is None:
            kept.append(start)
        else:
            skipped.append(Skipped(start, problem))
    return kept, skipped


def describe_skipped(skipped: Sequence[Skipped], limit: int | None = None) -> str:
    """``"no open, priced market: 2024-01-28, 2024-02-04"``, one group per reason (at most
    ``limit`` dates each), in the order the reasons first occur."""
    groups: dict[str, list[datetime]] = {}
    for s in skipped:
        groups.setdefault(s.reason, []).append(s.start)
    parts = []
    for reason, days in groups.items():
        shown = ", ".join(f"{d:%Y-%m-%d}" for d in days[:limit])
        if limit is not None and len(days) > limit:
            shown += f" and {len(days) - limit} more"
        parts.append(f"{reason}: {shown}")
    return "; ".join(parts)


NO_MARKET = "no open, priced market"
UNCOVERED = "no open market the tape covers (its recording ends before the start)"
NO_INSTANT = "no decision instant (no tape point before the markets' coverage ends)"


def start_problem(tape: Tape, start: int, size: int, decision_cadence: str) -> str | None:
    """Why a cohort at ``start`` would make no decision at all (None if it makes one)."""
    universe = select_universe(tape, start, size)
    if not universe:
        return UNCOVERED if _open_priced(tape, start) else NO_MARKET
    return None if decides(tape, universe, start, decision_cadence) else NO_INSTANT


def decides(tape: Tape, universe: Sequence[int], start: int, decision_cadence: str) -> bool:
    """Whether a cohort of ``universe`` at ``start`` has at least one decision instant."""
    live = _live_until(tape, universe)
    return decision_instants(tape, universe, start, decision_cadence, int(live.max())).size > 0


def empty_start_detail(tape: Tape, start: int) -> str:
    """The one-line error for a start with nothing open, priced and covered."""
    text = f"no market of tape {tape.hash[:12]} is open with a price at {iso_minute(start)}"
    uncovered = _open_priced(tape, start)
    if uncovered:
        reach = max(tape.coverage(m) for m in uncovered)
        text += (
            f": the tape's recording of the {len(uncovered)} market(s) open then ends "
            f"at {iso_minute(reach)}, before it"
        )
    return text


def _open_priced(tape: Tape, start: int) -> list[int]:
    """Markets open at ``start`` that already have a price there, covered or not."""
    found = []
    for m, info in enumerate(tape.markets):
        resolution = tape.resolutions.get(info.id)
        if info.open_ts is not None and info.open_ts > start:
            continue
        if info.close_ts is not None and info.close_ts <= start:
            continue
        if resolution is not None and resolution.ts <= start:
            continue
        times = tape.times(m)
        if times.size == 0 or times[0] > start:
            continue
        found.append(m)
    return found


def select_universe(tape: Tape, start: int, size: int) -> list[int]:
    """Top ``size`` markets by volume that are open at ``start``, already have a price and
    are covered by the tape there (``choose_universe`` also says which volume ranked them)."""
    return choose_universe(tape, start, size)[0]


def choose_universe(tape: Tape, start: int, size: int) -> tuple[list[int], str]:
    """The universe and how it was ranked: by volume as of the start where the tape knows it
    for every candidate (one market ranked by a later figure would mix two clocks in one
    ranking), else by final volume. Ties break on market id, never on tape order."""
    chosen = [m for m in _open_priced(tape, start) if tape.coverage(m) >= start]
    known = all(not math.isnan(tape.volume_as_of(m, start)) for m in chosen)
    by = VOLUME_AS_OF_START if chosen and known else VOLUME_FINAL

    def volume(m: int) -> float:
        return tape.volume_as_of(m, start) if by == VOLUME_AS_OF_START else tape.markets[m].volume

    chosen.sort(key=lambda m: (-volume(m), tape.markets[m].id))
    return chosen[:size], by


@dataclass(frozen=True)
class Stop:
    """Decisions end while markets of the universe are still open: when, and why."""

    ts: int  # the first instant with no market both open and covered
    covered_until: int  # the last instant the tape covers any universe market
    reason: str
    markets: tuple[str, ...]


@dataclass(frozen=True)
class Timeline:
    """The cohort's instants in processing order, and the arrays the runner indexes by them."""

    instants: np.ndarray  # int64, one per decision or mark instant (sorted, unique)
    steps: list[tuple[int, int, int]]  # (ts, kind, payload): payload = instant row or market
    close: np.ndarray  # int64 per universe market: when trading stops (close or resolution)
    coverage: np.ndarray  # int64 per universe market: the last instant the tape covers
    end: int
    decisions: int  # how many decision instants
    stop: Stop | None  # set when decisions end before every universe market has closed


def _close(tape: Tape, m: int) -> int:
    """When trading in market ``m`` stops: its close or its resolution, whichever is first."""
    info = tape.markets[m]
    close = np.iinfo(np.int64).max if info.close_ts is None else info.close_ts
    resolution = tape.resolutions.get(info.id)
    return close if resolution is None else min(close, resolution.ts)


def _live_until(tape: Tape, universe: Sequence[int]) -> np.ndarray:
    """Per market, the first instant it is no longer both open and covered."""
    return np.array([min(_close(tape, m), tape.coverage(m) + 1) for m in universe], dtype=np.int64)


def decision_instants(
    tape: Tape, universe: Sequence[int], start: int, cadence: str, until: int
) -> np.ndarray:
    """Decision instants from ``start`` up to (not including) ``until``: the cadence's, or
    every point of a universe market for ``tick``."""
    step = cadence_seconds(cadence)
    if step is not None:
        return np.arange(start, until, step, dtype=np.int64)
    return tape.instants(universe, start, until - 1)


def build_timeline(tape: Tape, universe: list[int], config: CohortConfig) -> Timeline:
    """Merge decision, mark and resolution instants in one deterministic order.

    A cohort decides at an instant when at least one universe market is open there (not
    closed, not resolved) and covered (the tape knows its price then). Every universe market
    is covered at the start, and each stays live over one interval from it, so decisions run
    until the last of those intervals ends; if markets are still open then, ``stop`` says so.
    """
    start = config.start_ts
    close = np.array([_close(tape, m) for m in universe], dtype=np.int64)
    coverage = np.array([tape.coverage(m) for m in universe], dtype=np.int64)
    live_until = np.minimum(close, coverage + 1)
    trading_ends = int(live_until.max())
    resolutions = sorted(
        (r.ts, j)
        for j, m in enumerate(universe)
        if (r := tape.resolutions.get(tape.markets[m].id)) is not None
    )
    end = max([trading_ends, *(ts for ts, _ in resolutions)])

    decisions = decision_instants(tape, universe, start, config.decision_cadence, trading_ends)
    mark_step = cadence_seconds(config.mark_cadence)
    if mark_step is None:
        marks = tape.instants(universe, start, end)
    else:
        marks = np.arange(start, end + 1, mark_step, dtype=np.int64)
    instants = np.union1d(decisions, marks)
    row = {int(t): i for i, t in enumerate(instants)}
    steps = [(int(t), MARK, row[int(t)]) for t in marks]
    steps += [(int(t), DECISION, row[int(t)]) for t in decisions]
    steps += [(ts, RESOLUTION, j) for ts, j in resolutions]
    stop = _stop(tape, universe, close, coverage, trading_ends)
    if stop is not None:
        steps.append((stop.ts, STOP, 0))
    steps.sort()
    return Timeline(
        instants=instants, steps=steps, close=close, coverage=coverage, end=end,
        decisions=int(decisions.size), stop=stop,
    )  # fmt: skip


def _stop(
    tape: Tape, universe: list[int], close: np.ndarray, coverage: np.ndarray, ends: int
) -> Stop | None:
    """Decisions end at ``ends``; if some market is open after that, why (in words)."""
    still_open = [j for j in range(len(universe)) if close[j] > ends]
    if not still_open:
        return None
    reach = int(coverage.max())
    ids = tuple(tape.markets[universe[j]].id for j in still_open)
    shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    reason = (
        f"the tape's recording ends at {iso_minute(reach)} with {len(ids)} market(s) "
        f"still open ({shown}): no price is known after it, so no decision is made"
    )
    return Stop(ts=ends, covered_until=reach, reason=reason, markets=ids)


def no_decision_detail(tape: Tape, timeline: Timeline, start: int) -> str:
    """The one-line error for a cohort with a universe but no decision instant."""
    reach = int(timeline.coverage.max())
    return (
        f"no decision at or after {iso_minute(start)}: no tape point of its markets before "
        f"their coverage ends at {iso_minute(reach)} (tape {tape.hash[:12]})"
    )


def week_of(start: int, ts: int) -> int:
    """Decision week as Forecaster Arena counts it: whole weeks between UTC midnights, plus 1."""
    return (ts // 86_400 - start // 86_400) // 7 + 1
