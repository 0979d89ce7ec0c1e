"""A cohort's plan: its universe and its schedule, decided from the tape and its settings alone.

``plan_cohort`` makes a ``CohortPlan`` once, before the first event is written: the universe (top N
by volume among markets open, priced and covered at the start; how they were ranked), and the
``Schedule``, decision, mark and resolution instants merged in one order. The driver plans every
cohort of a run before any worker starts (``plan_cohorts``: a start with nothing to decide is
``Skipped`` with its reason, not an error half-way through) and hands each plan to the runner
that replays it, so no cohort is planned twice. The same inputs always give the same plan.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from arena.run.cohort import CohortConfig, cadence_seconds, iso_minute
from ledger.errors import LedgerError
from replays.tape import Tape

# Instants that coincide are taken in this order: a market that resolves at t can no longer be
# traded at t, a decision at t sees the mark taken at t and the markets listed at t.
# Decisions stop (STOP) after the marks of their instant, where no decision is made anyway.
RESOLUTION, MARK, LISTING, DECISION, STOP = 0, 1, 2, 3, 4

ROLLING_DAYS = 7
"""A rolling cohort (``listing="rolling"``) takes in the markets that list during its first
week: a weekly cohort's own week, as Forecaster Arena's cohorts are weekly."""

VOLUME_AS_OF_START = "volume as of the start"
VOLUME_FINAL = "final volume"
"""How a universe was ranked (``CohortOpened.settings["universe_by"]``): by what the tape knew
at the start, or, where it knows no volume then, by the volume it recorded later."""


@dataclass(frozen=True)
class Skipped:
    """A start left out of a range, and why (one of a few short reasons, so they group)."""

    start: datetime
    reason: str


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
    else:  # nothing open then: where the tape has something (arena.run.first_start)
        text += ": the tape runs {} to {}".format(*(iso_minute(t) for t in tape.span()))
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


def listing_instant(tape: Tape, m: int) -> int | None:
    """When market ``m`` can first be traded: its first price point, or its opening if that is
    later (a price recorded before the market opened is not a market yet); None if unpriced."""
    times = tape.times(m)
    if times.size == 0:
        return None
    opens = tape.markets[m].open_ts
    return int(times[0]) if opens is None else max(int(times[0]), opens)


def rolling_listings(
    tape: Tape, start: int, size: int, first: Sequence[int]
) -> tuple[list[int], list[int]]:
    """The markets that join a rolling cohort after its start, in the order they list, and
    their listing instants.

    A market listing in the cohort's first ``ROLLING_DAYS`` joins when fewer than ``size``
    markets of the cohort are live then (listed, not yet closed, still covered): ``size``
    bounds what an agent watches at once, as the top-N universe does at the start. Markets
    listing at the same instant are taken by their volume as of that instant where the tape
    knows it, then by id: only what is known at the listing decides, never how a market went
    on to trade."""
    taken = set(first)
    live_until = [min(_close(tape, m), tape.coverage(m) + 1) for m in first]
    horizon = start + ROLLING_DAYS * 86_400
    candidates = []
    for m in range(len(tape.markets)):
        at = listing_instant(tape, m)
        if m in taken or at is None or not start < at < horizon:
            continue
        if _close(tape, m) <= at or tape.coverage(m) < at:
            continue  # closed, resolved or unrecorded by the time it lists
        volume = tape.volume_as_of(m, at)
        known = not math.isnan(volume)
        candidates.append((at, not known, -volume if known else 0.0, tape.markets[m].id, m))
    candidates.sort()
    joined, instants = [], []
    for at, _, _, _, m in candidates:
        if sum(1 for until in live_until if until > at) >= size:
            continue
        joined.append(m)
        instants.append(at)
        live_until.append(min(_close(tape, m), tape.coverage(m) + 1))
    return joined, instants


@dataclass(frozen=True)
class EarlyStop:
    """Decisions end while markets of the universe are still open: when, and why."""

    ts: int  # the first instant with no market both open and covered
    covered_until: int  # the last instant the tape covers any universe market
    reason: str
    markets: tuple[str, ...]


@dataclass(frozen=True)
class Schedule:
    """The cohort's instants in processing order, and the arrays the runner indexes by them."""

    instants: np.ndarray  # int64, one per decision or mark instant (sorted, unique)
    steps: list[tuple[int, int, int]]  # (ts, kind, payload): payload = instant row or market
    close: np.ndarray  # int64 per universe market: when trading stops (close or resolution)
    coverage: np.ndarray  # int64 per universe market: the last instant the tape covers
    end: int
    decisions: int  # how many decision instants
    stop: EarlyStop | None  # set when decisions end before every universe market has closed


def _close(tape: Tape, m: int) -> int:
    """When trading in market ``m`` stops: its close or its resolution, whichever is first."""
    info = tape.markets[m]
    close = np.iinfo(np.int64).max if info.close_ts is None else info.close_ts
    resolution = tape.resolutions.get(info.id)
    return close if resolution is None else min(close, resolution.ts)


def decision_instants(
    tape: Tape, universe: Sequence[int], start: int, cadence: str, until: int
) -> np.ndarray:
    """Decision instants from ``start`` up to (not including) ``until``: the cadence's, or
    every point of a universe market for ``tick``."""
    step = cadence_seconds(cadence)
    if step is not None:
        return np.arange(start, until, step, dtype=np.int64)
    return tape.instants(universe, start, until - 1)


def build_schedule(
    tape: Tape, universe: list[int], config: CohortConfig, listed: Sequence[int] = ()
) -> Schedule:
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
    steps += [(ts, LISTING, j) for j, ts in enumerate(listed) if ts > start]
    stop = _early_stop(tape, universe, close, coverage, trading_ends)
    if stop is not None:
        steps.append((stop.ts, STOP, 0))
    steps.sort()
    return Schedule(
        instants=instants, steps=steps, close=close, coverage=coverage, end=end,
        decisions=int(decisions.size), stop=stop,
    )  # fmt: skip


def _early_stop(
    tape: Tape, universe: list[int], close: np.ndarray, coverage: np.ndarray, ends: int
) -> EarlyStop | None:
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
    return EarlyStop(ts=ends, covered_until=reach, reason=reason, markets=ids)


def no_decision_detail(tape: Tape, schedule: Schedule, start: int) -> str:
    """The one-line error for a cohort with a universe but no decision instant."""
    reach = int(schedule.coverage.max())
    return (
        f"no decision at or after {iso_minute(start)}: no tape point of its markets before "
        f"their coverage ends at {iso_minute(reach)} (tape {tape.hash[:12]})"
    )


@dataclass(frozen=True)
class CohortPlan:
    """A cohort's universe (tape market indices: the start's in ranked order, then a rolling
    cohort's later markets in the order they list), how the start's were ranked
    (``VOLUME_AS_OF_START`` or ``VOLUME_FINAL``), its schedule, and when each market is
    listed (empty: every one at the start)."""

    universe: tuple[int, ...]
    universe_by: str
    schedule: Schedule
    listed: tuple[int, ...] = ()

    def listed_by(self, ts: int) -> int:
        """How many markets are listed at ``ts``: the universe's first ones (it is in listing
        order, so the listed markets are always a prefix of it)."""
        return bisect.bisect_right(self.listed, ts) if self.listed else len(self.universe)


def plan_cohort(tape: Tape, config: CohortConfig) -> CohortPlan:
    """The cohort's plan; a start with nothing open, priced and covered, or with no decision
    instant, is a LedgerError in one line saying which."""
    plan = try_plan(tape, config)
    if isinstance(plan, CohortPlan):
        return plan
    start = config.start_ts
    if plan == NO_INSTANT:
        universe = select_universe(tape, start, config.universe)
        raise LedgerError(no_decision_detail(tape, build_schedule(tape, universe, config), start))
    raise LedgerError(empty_start_detail(tape, start))


def try_plan(tape: Tape, config: CohortConfig) -> CohortPlan | str:
    """The cohort's plan, or why it would decide nothing (``NO_MARKET``, ``UNCOVERED`` or
    ``NO_INSTANT``)."""
    start = config.start_ts
    universe, by = choose_universe(tape, start, config.universe)
    listed: list[int] = []
    if config.listing == "rolling":
        later, instants = rolling_listings(tape, start, config.universe, universe)
        listed = [start] * len(universe) + instants
        universe += later
    if not universe:
        return UNCOVERED if _open_priced(tape, start) else NO_MARKET
    schedule = build_schedule(tape, universe, config, listed)
    if not schedule.decisions:
        return NO_INSTANT
    return CohortPlan(tuple(universe), by, schedule, tuple(listed))


@dataclass(frozen=True)
class PlannedCohort:
    """A cohort and its plan, as the driver hands them to an engine."""

    config: CohortConfig
    plan: CohortPlan


def plan_cohorts(
    tape: Tape, configs: Sequence[CohortConfig]
) -> tuple[list[PlannedCohort], list[Skipped]]:
    """Every cohort that would decide something, planned, and the starts that would not, with
    why. A range of Sundays over a tape of short-lived markets (daily BTC ranges, say) can hold
    weeks when nothing trades at 00:00, or starts past where the recording reaches; those are
    skipped and named rather than ending a run half-way through."""
    planned: list[PlannedCohort] = []
    skipped: list[Skipped] = []
    for config in configs:
        plan = try_plan(tape, config)
        if isinstance(plan, CohortPlan):
            planned.append(PlannedCohort(config, plan))
        else:
            skipped.append(Skipped(config.start, plan))
    return planned, skipped


FINER = (("daily", 86_400), ("hourly", 3_600), ("1m", 60))
"""Cadences ``cadence_note`` may suggest, coarsest first: the first that decides a market ten
times over its life."""


def cadence_note(tape: Tape, planned: Sequence[PlannedCohort]) -> str | None:
    """One line when every planned cohort's decisions come less often than any of its markets
    trades (the BTC sample's 15-minute markets under the default weekly cadence): each market is
    then decided once at most, which reads as an agent that barely trades. It names the longest
    life, a cadence that decides through it, and ``--listing rolling`` where markets list after
    the start; None when some market lives across two decisions, as on the election sample."""
    lives = [_longest_life(cohort) for cohort in planned]
    steps = [cadence_seconds(cohort.config.decision_cadence) for cohort in planned]
    if not planned or any(
        step is None or life >= step for life, step in zip(lives, steps, strict=True)
    ):
        return None
    first = planned[0]
    finer = next((name for name, seconds in FINER if 10 * seconds <= max(lives)), "tick")
    cadence = first.config.decision_cadence
    text = (
        f"note: decisions come {cadence if cadence.endswith('ly') else 'every ' + cadence}, "
        f"but no market here trades that long (the longest, {_duration(max(lives))}), so each "
        f"is decided once at most: --decisions {finer} decides through their lives"
    )
    if first.config.listing == "start":
        later, _ = rolling_listings(
            tape, first.config.start_ts, first.config.universe, first.plan.universe
        )
        if later:
            text += (
                f", and --listing rolling takes in the {len(later)} markets listed after the start"
            )
    return text


def _longest_life(cohort: PlannedCohort) -> int:
    """Seconds the longest-trading market of the cohort is open and recorded after it lists."""
    schedule = cohort.plan.schedule
    listed = cohort.plan.listed or (cohort.config.start_ts,) * len(cohort.plan.universe)
    live_until = np.minimum(schedule.close, schedule.coverage + 1)
    return int((live_until - np.array(listed, dtype=np.int64)).max())


def _duration(seconds: int) -> str:
    """``28 min``, ``5 h``, ``3 days``: a market's life, as a person reads it."""
    if seconds < 2 * 3_600:
        return f"{seconds // 60} min"
    if seconds < 2 * 86_400:
        return f"{seconds // 3_600} h"
    return f"{seconds // 86_400} days"
