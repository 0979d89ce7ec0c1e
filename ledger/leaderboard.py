"""Standings within a cohort and the leaderboard across cohorts (methodology §1.11, §1.12).

Everything here is read off the projected state, so a leaderboard can be rebuilt from the log
like any other projection. The formulas are Forecaster Arena's: agents in a cohort rank by
total value; across cohorts an agent ranks by its mean return over cohorts (not by Brier: the
implied-confidence Brier rewards small losing bets, so a loser can top it), its Brier is the mean
over *all* its rows (trade-weighted, not cohort-weighted) and its P/L percentage is the
capital-weighted return. On top of that we add what the original only suggested: a Student-t
confidence interval over cohorts, because a mean return over three cohorts without its spread
invites reading noise as skill; and beside the implied Brier, never instead of it, the Brier of
the prices paid (``brier_paid``): a proper score of the probabilities the agent put money at.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import msgspec

from ledger.intervals import (
    DRAWS,
    Method,
    MethodChoice,
    PairedDifference,
    choose_method,
    mean_ci,
    paired_difference,
)
from ledger.projection import BrierRow, CohortState, Ledger, implied_briers

RANDOM_BRIER = 0.25
"""The Brier of always saying 0.5: the baseline of Forecaster Arena's skill score."""

MARKET_SKILL_MIN_BETS = 10
"""Fewest resolved bets for a skill score against the prices paid (``bss_market``)."""

MARKET_SKILL_MIN_REFERENCE = 0.04
"""Least Brier of the prices paid for ``bss_market``: against prices near certainty the ratio
is unbounded (favourites bought at 0.99 that won give 0.0001, and a skill score of −5,098);
from 0.04 on it lies in [1 − 1 / 0.04, 1] = [−24, 1]."""


class AgentStanding(msgspec.Struct, frozen=True, kw_only=True):
    """One agent's account and scores in one cohort, as the cohort page shows them."""

    cohort: str
    agent: str
    cash: float
    positions_value: float
    total_value: float
    pnl: float
    return_pct: float
    realized_pnl: float
    unrealized_pnl: float
    brier: float | None
    brier_paid: float | None
    bss: float | None
    bss_market: float | None
    n_resolved: int
    win_rate: float | None
    n_bets: int
    n_sells: int
    n_rejected: int
    n_decisions: int
    n_errors: int
    initial_cash: float


class LeaderboardRow(msgspec.Struct, frozen=True, kw_only=True):
    """One agent across every cohort it traded in."""

    agent: str
    cohorts: int
    total_pnl: float
    pnl_pct: float
    brier: float | None
    brier_paid: float | None
    win_rate: float | None
    n_resolved: int
    n_bets: int
    bss: float | None
    bss_market: float | None
    return_mean: float
    return_ci_low: float | None
    return_ci_high: float | None
    brier_mean: float | None
    brier_ci_low: float | None
    brier_ci_high: float | None
    interval: Method
    """How both intervals were made: ``markets`` (bootstrap) or ``cohorts`` (Student's t)."""


class CategoryRow(msgspec.Struct, frozen=True, kw_only=True):
    """One agent's results on the markets of one category, summed over its cohorts.

    ``return_pp`` is the category's share of the agent's mean return, in percentage points of
    starting cash, so an agent's categories add up to its mean return. ``labels`` are the
    tape's own category labels of those markets, when a report groups them more coarsely."""

    agent: str
    category: str
    labels: tuple[str, ...] = ()
    markets: int
    n_bets: int
    n_resolved: int
    pnl: float
    return_pp: float
    brier: float | None


# -- scores of Brier rows -----------------------------------------------------------------------


def mean_brier(rows: Sequence[BrierRow]) -> float | None:
    """The mean implied-confidence Brier of scored buys, summed exactly (``math.fsum``), so
    every view of the same rows (the report, ``arena step``'s portfolio) gives the same
    float."""
    return math.fsum(implied_briers(rows)) / len(rows) if rows else None


def paid_brier(rows: Sequence[BrierRow]) -> float | None:
    """The Brier of the prices paid: each resolved bet's price, the probability the agent put
    money at, against whether its side won (0.60 on a winner scores 0.16, 0.30 on a loser
    0.09). A proper score of what was risked, where the implied Brier scores only the stake's
    size; and the market's own score on the bets the agent chose."""
    return math.fsum([(r.price - r.won) ** 2 for r in rows]) / len(rows) if rows else None


class RowScores(msgspec.Struct, frozen=True):
    """The scores a standing shows of a list of Brier rows, each figure's pass made once (the
    paid Brier was walked twice, for itself and for the skill against it): a long cohort
    holds hundreds of thousands of rows, 5–15 ms a pass at 209 k."""

    n: int
    brier: float | None
    paid: float | None
    win_rate: float | None

    @classmethod
    def of(cls, rows: Sequence[BrierRow]) -> RowScores:
        win_rate = sum([r.won for r in rows]) / len(rows) if rows else None
        return cls(len(rows), mean_brier(rows), paid_brier(rows), win_rate)

    def market_skill(self) -> float | None:
        """``1 − implied Brier / Brier of the prices paid``, only where the reference means
        something: ``MARKET_SKILL_MIN_BETS`` resolved bets and a reference of at least
        ``MARKET_SKILL_MIN_REFERENCE`` (so the score is bounded below by −24)."""
        if self.n < MARKET_SKILL_MIN_BETS or self.paid is None:
            return None
        return _skill(self.brier, self.paid) if self.paid >= MARKET_SKILL_MIN_REFERENCE else None


def _skill(brier: float | None, reference: float | None) -> float | None:
    if brier is None or reference is None or reference <= 0:
        return None
    return 1.0 - brier / reference


# -- standings ----------------------------------------------------------------------------------


def cohort_standings(state: CohortState) -> list[AgentStanding]:
    """The agents of one cohort, richest first (ties by name, so the order is stable)."""
    rows = []
    for agent, book in state.books.items():
        positions_value = state.positions_value(agent)
        open_cost = math.fsum(p.cost for p in book.positions.values())
        total_value = book.cash + positions_value
        pnl = total_value - book.initial_cash
        scores = RowScores.of(book.brier_rows)
        rows.append(
            AgentStanding(
                cohort=state.cohort,
                agent=agent,
                cash=book.cash,
                positions_value=positions_value,
                total_value=total_value,
                pnl=pnl,
                return_pct=pnl / book.initial_cash * 100.0 if book.initial_cash else 0.0,
                realized_pnl=book.realized,
                unrealized_pnl=positions_value - open_cost,
                brier=scores.brier,
                brier_paid=scores.paid,
                bss=_skill(scores.brier, RANDOM_BRIER),
                bss_market=scores.market_skill(),
                n_resolved=scores.n,
                win_rate=scores.win_rate,
                n_bets=book.n_bets,
                n_sells=book.n_sells,
                n_rejected=book.n_rejected,
                n_decisions=book.n_decisions,
                n_errors=book.n_errors,
                initial_cash=book.initial_cash,
            )
        )
    rows.sort(key=lambda r: (-r.total_value, r.agent))
    return rows


def _states(source: Ledger | Iterable[CohortState]) -> list[CohortState]:
    if isinstance(source, Ledger):
        return [source.cohorts[name] for name in sorted(source.cohorts)]
    return list(source)


def standings(source: Ledger | Iterable[CohortState]) -> dict[str, list[AgentStanding]]:
    """``cohort_standings`` of every cohort, keyed by cohort name."""
    return {state.cohort: cohort_standings(state) for state in _states(source)}


def leaderboard(
    source: Ledger | Iterable[CohortState],
    *,
    interval: MethodChoice = "auto",
    draws: int = DRAWS,
    seed: int = 0,
) -> list[LeaderboardRow]:
    """Every agent name across all cohorts, best mean return first (then total P/L, then
    name). Forecaster Arena ranks by summed P/L (methodology §1.12), which is the same order
    when every agent trades the same cohorts; the mean return stays fair when they do not.

    ``interval`` picks how the 95% intervals are made (``ledger.intervals``); ``auto``
    resamples markets when the cohorts share any. ``draws`` and ``seed`` shape the bootstrap.
    """
    states = _states(source)
    method = interval_method(states, interval)
    resample = None
    if method == "markets":
        from ledger.resample import MarketResample  # numpy, loaded only for a bootstrap

        resample = MarketResample(states, draws, seed)
    per_agent: dict[str, list[AgentStanding]] = {}
    rows_of: dict[str, list[BrierRow]] = {}
    for state in states:
        for standing in cohort_standings(state):
            per_agent.setdefault(standing.agent, []).append(standing)
            rows_of.setdefault(standing.agent, []).extend(state.books[standing.agent].brier_rows)
    board = []
    for agent, results in per_agent.items():
        rows = rows_of[agent]
        total_pnl = math.fsum(r.pnl for r in results)
        capital = math.fsum(r.initial_cash for r in results)
        return_mean, return_low, return_high = mean_ci([r.return_pct for r in results])
        briers = [r.brier for r in results if r.brier is not None]
        brier_mean, brier_low, brier_high = mean_ci(briers) if briers else (None, None, None)
        if resample is not None:
            return_low, return_high = resample.return_interval(agent, return_mean)
            if brier_mean is not None:
                brier_low, brier_high = resample.brier_interval(agent, brier_mean)
        scores = RowScores.of(rows)
        board.append(
            LeaderboardRow(
                agent=agent,
                cohorts=len(results),
                total_pnl=total_pnl,
                pnl_pct=total_pnl / capital * 100.0 if capital else 0.0,
                brier=scores.brier,
                brier_paid=scores.paid,
                win_rate=scores.win_rate,
                n_resolved=scores.n,
                n_bets=sum(r.n_bets for r in results),
                bss=_skill(scores.brier, RANDOM_BRIER),
                bss_market=scores.market_skill(),
                return_mean=return_mean,
                return_ci_low=return_low,
                return_ci_high=return_high,
                brier_mean=brier_mean,
                brier_ci_low=brier_low,
                brier_ci_high=brier_high,
                interval=method,
            )
        )
    board.sort(key=lambda r: (-r.return_mean, -r.total_pnl, r.agent))
    return board


def interval_method(
    source: Ledger | Iterable[CohortState], choice: MethodChoice = "auto"
) -> Method:
    """The method ``leaderboard`` uses for these cohorts: ``auto`` resamples markets when any
    market is in more than one cohort's universe."""
    return choose_method(choice, [list(s.markets) for s in _states(source)])


def paired_returns(
    source: Ledger | Iterable[CohortState],
    a: str,
    b: str,
    *,
    interval: MethodChoice = "auto",
    draws: int = DRAWS,
    seed: int = 0,
) -> PairedDifference:
    """Agent ``a``'s return minus ``b``'s, cohort by cohort, with the interval of its mean by
    the same method as ``leaderboard``.

    The k-th cohort ``a`` traded in is paired with the k-th ``b`` traded in: the same cohort
    when both are in every one, or, in a sweep that runs the comparison agents once per start
    in cohorts of their own, the cohorts of the same start (same universe, same instants).
    Pass ``interval`` explicitly then: ``auto`` would see the starts' markets twice."""
    states = _states(source)
    returns: dict[str, list[float]] = {a: [], b: []}
    for state in states:
        for standing in cohort_standings(state):
            if standing.agent in returns:
                returns[standing.agent].append(standing.return_pct)
    t = paired_difference(returns[a], returns[b])
    if interval_method(states, interval) == "cohorts":
        return t
    from ledger.resample import MarketResample  # numpy, loaded only for a bootstrap

    return MarketResample(states, draws, seed).paired(a, b, t.mean)


def categories(
    source: Ledger | Iterable[CohortState], group: Callable[[str | None], str] | None = None
) -> list[CategoryRow]:
    """Each agent's bets, P/L, share of mean return and pooled implied Brier per market
    category, by agent then category: as the tape names it (``—`` when it names none), or as
    ``group`` maps the tape's label (a report's coarser set, ``replays.categories``), the
    labels kept in each row."""
    states = _states(source)
    cells: dict[tuple[str, str], dict[str, float]] = {}
    markets: dict[tuple[str, str], set[str]] = {}
    label: dict[str, str] = {}
    cohorts: dict[str, int] = {}
    scored: dict[str, list[tuple[dict[str, str], Sequence[BrierRow]]]] = {}
    for state in states:
        label |= {m: listed.category or "—" for m, listed in state.markets.items()}
        category = label
        if group is not None:
            category = {m: group(listed.category) for m, listed in state.markets.items()}
        for agent, book in state.books.items():
            cohorts[agent] = cohorts.get(agent, 0) + 1
            for market, pnl in state.market_pnl(agent).items():
                cell = _cell(cells, markets, agent, category[market], market)
                cell["pnl"] += pnl
                cell["pp"] += pnl / book.initial_cash * 100.0 if book.initial_cash else 0.0
            for market, n in book.bets_by_market.items():
                _cell(cells, markets, agent, category[market], market)["bets"] += n
            scored.setdefault(agent, []).append((category, book.brier_rows))
    for agent, books in scored.items():
        _add_briers(cells, markets, agent, books)
    return [
        CategoryRow(
            agent=agent,
            category=category,
            labels=tuple(sorted({label[m] for m in markets[agent, category]})) if group else (),
            markets=len(markets[agent, category]),
            n_bets=int(c["bets"]),
            n_resolved=int(c["resolved"]),
            pnl=c["pnl"],
            return_pp=c["pp"] / cohorts[agent],
            brier=c["brier"] / c["resolved"] if c["resolved"] else None,
        )
        for (agent, category), c in sorted(cells.items())
    ]


def _add_briers(
    cells: dict[tuple[str, str], dict[str, float]],
    markets: dict[tuple[str, str], set[str]],
    agent: str,
    books: list[tuple[dict[str, str], Sequence[BrierRow]]],
) -> None:
    """An agent's Brier rows, every cohort's in turn, summed into their categories' cells in
    the rows' order (so each sum is the float a row-by-row fold gives), with the cell found
    once per market rather than once per row."""
    index: dict[str, int] = {}
    summed: list[float] = []
    resolved: list[int] = []
    for category, rows in books:
        code = {}
        for market in {r.market for r in rows}:
            name = category[market]
            if name not in index:
                index[name] = len(index)
                summed.append(0.0)
                resolved.append(0)
            code[market] = index[name]
            _cell(cells, markets, agent, name, market)
        for k, brier in zip([code[r.market] for r in rows], implied_briers(rows), strict=True):
            summed[k] += brier
            resolved[k] += 1
    for name, k in index.items():
        cell = cells[agent, name]
        cell["resolved"] += resolved[k]
        cell["brier"] += summed[k]


def _cell(
    cells: dict[tuple[str, str], dict[str, float]],
    markets: dict[tuple[str, str], set[str]],
    agent: str,
    category: str,
    market: str,
) -> dict[str, float]:
    key = (agent, category)
    markets.setdefault(key, set()).add(market)
    cell = cells.get(key)
    if cell is None:
        cell = cells[key] = {"pnl": 0.0, "pp": 0.0, "bets": 0.0, "resolved": 0.0, "brier": 0.0}
    return cell


def belief_scores(rows: Sequence[BrierRow]) -> dict[str, object] | None:
    """Proper scores of the beliefs an agent stated, against the implied-confidence Brier of the
    same bets; None when it stated none (a belief is its P(the bet's side wins)).

    A belief outside [0, 1] is no probability and is left out (counted in ``left_out``): the
    runner refuses them now, but a log written before it did must still report."""
    given = [r for r in rows if r.belief is not None]
    stated = [r for r in given if 0.0 <= r.belief <= 1.0]  # type: ignore[operator]
    if not stated:
        return None
    # imported here: a report whose agents state no beliefs need not load numpy or the metrics
    import numpy as np

    from ledger.metrics import brier, ece, log_loss, murphy

    p = np.array([r.belief for r in stated], dtype=np.float64)
    won = np.array([r.won for r in stated], dtype=np.float64)
    decomposition = murphy(p, won)
    return {
        "n": len(stated),
        "brier": brier(p, won),
        "log_loss": log_loss(p, won),
        "ece": ece(p, won),
        "murphy": {
            "reliability": decomposition.reliability,
            "resolution": decomposition.resolution,
            "uncertainty": decomposition.uncertainty,
        },
        "implied_brier": math.fsum(r.brier for r in stated) / len(stated),
    } | ({"left_out": len(given) - len(stated)} if len(given) > len(stated) else {})
