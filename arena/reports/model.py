"""What a log says, as plain data: the read model behind every report (terminal, ``--json``, HTML).

Reports are always computed from the log itself, never from the runner's memory, so
``arena report`` on a database gives exactly what ``arena replay`` printed when it made it. Every
figure says what it is: "Brier (impl.)" is the implied-confidence Brier of the bets, "Brier
(stated)" that of the probabilities agents stated, and each interval names its method.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from ledger.events import CohortOpened
from ledger.intervals import DRAWS, MethodChoice, mean_ci
from ledger.leaderboard import (
    CategoryRow,
    belief_scores,
    categories,
    cohort_standings,
    interval_method,
    leaderboard,
)
from ledger.projection import CohortState, Ledger
from ledger.restore import load
from ledger.store import EventStore
from ledger.usage import ModelUsage, total_usage
from replays.categories import top_category

Usage = dict[str, dict[str, ModelUsage]]

BRIER_IMPLIED = (
    "ranked by return · Brier (impl., pooled): the bet's size as confidence (bet / 25% of "
    "cash), which small losing bets score well · Brier (paid): the price paid as the "
    "probability risked · both against the result, pooled over every resolved bet (not a mean "
    "of cohorts) · BSS = 1 − impl. / 0.25 · BSS mkt = 1 − impl. / paid, shown from 10 bets and "
    "a paid Brier of 0.04"
)
"""The legend under every table that shows the two Briers: what each scores, in one line.
"Pooled" is in every heading of the figure because ``arena sweep`` shows another one under
the same name, the mean of the cohorts' Briers (favourite over the tour's 26 cohorts: 0.425
pooled, 0.457 as a mean of cohorts)."""

BRIER_POOLED = "Brier\n(impl.,\npooled)"
"""The heading of the implied-confidence Brier pooled over every resolved bet, in a terminal
table: three short lines, as narrow as "(impl.)" was."""

MARK = "†"
"""Set after an implied-confidence Brier that ``misleading_briers`` finds at odds with the
results."""

MARK_LEGEND = (
    f"{MARK}: Brier (impl.) better than the median of the table's, though the return is the "
    "worst or no bet won: it scores how small the bets were, not foresight (so does BSS, made "
    "from it); Brier (paid) and the return say how the bets went"
)
"""The legend line under a table that marks a row with ``MARK``."""


def load_ledger(store: EventStore, cohorts: Iterable[str] | None = None) -> Ledger:
    """The projections of the log (or only the given cohort streams): each cohort's newest
    snapshot restored and the events after it folded, their chain links checked on the way
    (``ledger.restore``; IntegrityError if they do not link)."""
    return load(store, cohorts).ledger


def iso_utc(ts: int) -> str:
    """An instant as ``YYYY-MM-DDTHH:MM:SSZ``: the one spelling of time in reports and JSON."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class IntervalSettings:
    """How a report's intervals are made: the method asked for and the bootstrap's shape."""

    choice: MethodChoice = "auto"
    draws: int = DRAWS
    seed: int = 0


def interval_info(states: Sequence[CohortState], settings: IntervalSettings) -> dict[str, Any]:
    """The interval method as data, with the sentence every table and page shows beside it."""
    method = interval_method(states, settings.choice)
    markets = len({m for s in states for m in s.markets})
    info: dict[str, Any] = {"method": method, "level": 0.95, "cohorts": len(states)}
    if method == "markets":
        info |= {"markets": markets, "draws": settings.draws, "seed": settings.seed}
        shared = " the cohorts share" if len(states) > 1 else ""
        info["text"] = (
            f"95% interval: bootstrap over the {markets:,} markets{shared} "
            f"({settings.draws:,} draws, seed {settings.seed})"
        )
        info["detail"] = (
            "each draw resamples the markets with replacement, alike in every cohort; the "
            "interval is the estimate ± the draws' standard deviation × t(G − 1) × √(G/(G − 1)), "
            "G the markets that carry the figure. Markets are taken as independent."
        )
    elif len(states) == 1:
        info["text"] = "95% interval: none over one cohort"
        info["detail"] = "--interval markets resamples its markets instead."
    else:
        info["text"] = f"95% interval: Student's t over {len(states)} cohorts"
        info["detail"] = "the cohorts share no market and are taken as independent draws."
    return info


def board_heading(counts: Sequence[int], cohorts: int) -> tuple[str, str | None]:
    """The leaderboard's title, and the line its legend adds when the board mixes agents of
    different cohorts. ``counts`` are the rows' cohort counts, ``cohorts`` the log's: the
    title counts the log's cohorts, never one agent's. Two replays into one log (a default run,
    then ``--agent fav=favourite --agent coin=random``) gave two cohorts of one agent each, and
    the title said "across 1 cohort(s)" over ``fav`` ranked beside ``favourite``."""
    title = f"Leaderboard across {cohorts} cohort(s), by mean return"
    if not counts or min(counts) == cohorts:
        return title, None
    low, high = min(counts), max(counts)
    each = f"each agent in {low}" if low == high else f"agents in {low} to {high}"
    return f"{title} ({each} of them)", (
        "agents ran in different cohorts (replays added to one log): compare a row only with "
        "rows of the same cohorts (each cohort's own standings: --all)"
    )


def misleading_briers(rows: Sequence[tuple[float | None, float, float | None]]) -> list[bool]:
    """Which rows, each ``(Brier (impl.), return, win rate)``, get ``MARK``: an implied Brier
    better (lower) than the median of the rows that have one, while the row's return is the
    worst of them all or it won none of its resolved bets. The score is Forecaster Arena's and
    stays; the mark keeps an agent that lost 33 of 33 long shots (Brier 0.000, BSS +1.00, the
    best possible) from reading as the best forecaster on the first screen."""
    briers = [brier for brier, _, _ in rows if brier is not None]
    if not briers:
        return [False] * len(rows)
    median = statistics.median(briers)
    worst = min(ret for _, ret, _ in rows)
    return [
        brier is not None and brier < median and (ret == worst or win == 0)
        for brier, ret, win in rows
    ]


def returns_by_agent(returns: Iterable[tuple[str, float]]) -> dict[str, list[float]]:
    """``(agent, return in one cohort)`` pairs gathered by agent, in the order given."""
    by_agent: dict[str, list[float]] = {}
    for agent, value in returns:
        by_agent.setdefault(agent, []).append(value)
    return by_agent


WIDER = 3.0
"""How many times wider than the t interval over an agent's cohorts its bootstrap interval
over markets must be before the board shows the t interval beside it."""


def interval_hint(
    board: Iterable[tuple[str, float | None, float | None]],
    returns: Mapping[str, Sequence[float]],
) -> str | None:
    """The line that names Student's t interval over cohorts for each row, ``(agent, low,
    high)`` of a bootstrap over markets, at least ``WIDER`` times as wide as it; None where
    none is. On the tour's 26 cohorts ``edge`` showed −22.49..+19.16 while every cohort's
    return lay within −4.87..+5.50: the cohorts trade the same markets to the same outcomes,
    so their spread cannot show how those outcomes might have gone, and where a few markets
    carry a result the bootstrap says so by its width (docs/reports.md)."""
    named = []
    for agent, low, high in board:
        values = returns.get(agent, ())
        if low is None or high is None or len(values) < 2:
            continue
        _, t_low, t_high = mean_ci(values)
        if t_low is not None and t_high is not None and high - low > WIDER * (t_high - t_low):
            t_width = t_high - t_low
            ratio = f"{(high - low) / t_width:.0f}× narrower" if t_width else "every cohort alike"
            named.append(f"{agent} {t_low:+.2f}..{t_high:+.2f}, {ratio}")
    if not named:
        return None
    return (
        f"by Student's t over cohorts (--interval cohorts): {'; '.join(named)}: the cohorts "
        "share their markets' outcomes, which t cannot vary, and a few markets carry the result"
    )


def open_positions(state: CohortState) -> list[dict[str, Any]]:
    """Every open position with its marked value and unrealized P/L."""
    rows = []
    for agent, book in sorted(state.books.items()):
        for p in book.positions.values():
            price = state.side_price(p)
            rows.append({
                "agent": agent, "position_id": p.id, "market": p.market, "side": p.side,
                "shares": p.shares, "cost": p.cost, "avg_entry": p.avg_entry, "price": price,
                "value": p.shares * price, "unrealized_pnl": p.shares * price - p.cost,
            })  # fmt: skip
    return rows


def stated_beliefs(state: CohortState) -> dict[str, dict[str, object]]:
    """Proper scores of the probabilities agents stated with their bets, where they did."""
    return {
        agent: scores
        for agent, book in sorted(state.books.items())
        if (scores := belief_scores(book.brier_rows)) is not None
    }


def universe_volume(opened: CohortOpened) -> str:
    """Which volume chose (and ranks) the cohort's universe; logs from before it was recorded
    were all chosen by final volume."""
    chosen = opened.settings.get("universe_by")
    if chosen is None:
        # imported here: arena.run.cohort brings pydantic and the tapes, a fifth of a report's time
        from arena.run.plan import VOLUME_FINAL

        chosen = VOLUME_FINAL
    return str(chosen)


def cohort_settings(state: CohortState) -> dict[str, Any]:
    """Everything ``arena replay`` needs to make this cohort again, as its log recorded it."""
    opened = state.opened
    if opened is None:
        return {}
    return {
        "start": iso_utc(opened.start),
        "tape": opened.tape,
        "rules": opened.rules,
        "cash": opened.cash,
        "universe": opened.settings.get("universe_size", len(opened.universe)),
        "universe_by": universe_volume(opened),
        "decision_cadence": opened.decision_cadence,
        "mark_cadence": opened.mark_cadence,
        "seed": opened.seed,
        "agents": dict(opened.agent_specs) or {a: a for a in opened.agents},
        **({"listing": opened.settings["listing"]} if "listing" in opened.settings else {}),
        **{key: opened.settings[key] for key in EXECUTION_KEYS if key in opened.settings},
    }


EXECUTION_KEYS = ("execution", "fees", "books", "latency_ms", "latency", "liquidity", "marks_at")
"""The settings an execution model adds to a cohort's opening (none for Forecaster Arena's
rule, ``fa``, which every cohort before them ran under)."""


def execution_text(state: CohortState) -> str:
    """How the cohort's orders filled, in words for a report's header: Forecaster Arena's rule
    (the tape's price, whole, no fee), or the model, its fees and books."""
    opened = state.opened
    settings = opened.settings if opened is not None else {}
    spec = settings.get("execution")
    if not isinstance(spec, str):
        return "fills: fa (the tape's price, whole, no fee)"
    fees = str(settings.get("fees", "none"))
    if fees.startswith("table:"):  # a user's table: its own name, and its hash short
        fees = f"{_table_name(settings.get('fee_table'))} (table {fees[6:18]})"
    parts = [f"fills: {spec}", f"fees {fees}"]
    books = settings.get("books")
    parts.append(f"books {str(books)[:12]}" if books else "no books")
    if settings.get("latency_ms"):
        parts.append(f"latency {settings['latency_ms']} ms")
    if settings.get("liquidity") == "shared":
        parts.append("shared liquidity")
    if settings.get("latency") == "llm":
        parts.append("latency + each decision's recorded model time")
    marks = {"mid": "marked at the book's mid", "bid": "marked at the bid",
             "liquidation": "marked by liquidation"}  # fmt: skip
    if settings.get("marks_at") in marks:
        parts.append(marks[settings["marks_at"]])
    if "spread_ticks" in spec and not books:
        parts.append("synthetic spread")
    return ", ".join(parts)


def _table_name(text: object) -> str:
    """The name a user's fee table gives itself (recorded whole in the opening), else 'a fee
    file'."""
    try:
        name = json.loads(str(text)).get("name")
    except (ValueError, AttributeError):
        name = None
    return str(name) if isinstance(name, str) and name else "a fee file"


EARLY_STOP = "; no decision after "
"""Where a close reason written by the runner goes on to say that decisions ended early."""


def cohort_status(state: CohortState) -> str:
    """How the cohort went, in the order it happened. The runner's close reason puts the end
    first ("every market settled; no decision after …, where the tape's recording ends with 2
    market(s) still open"), which reads as a contradiction; the log keeps it as written and the
    report says it the other way round: decisions ended, then the markets still open
    settled."""
    if state.closed is None:
        status = "still open"
        if state.stopped is not None:
            status += f"; no more decisions: {state.stopped.reason}"
        return status
    outcome, early, stop = state.closed.reason.partition(EARLY_STOP)
    if not early:
        return outcome
    return f"no decision after {stop}; after that, {outcome}"


def report_categories(states: Sequence[CohortState]) -> list[CategoryRow]:
    """Results per category as reports show them: the tape's labels grouped into Polymarket's
    categories (``replays.categories``), the labels kept in each row."""
    return categories(states, top_category)


def category_row(row: CategoryRow) -> dict[str, Any]:
    """A category row as JSON has it (its labels a list, as they read back)."""
    return {**msgspec.to_builtins(row), "labels": list(row.labels)}


def cohort_summary(state: CohortState) -> dict[str, Any]:
    opened = state.opened
    stopped = state.stopped
    return {
        "cohort": state.cohort,
        "start": iso_utc(opened.start) if opened else None,
        "rules": opened.rules if opened else None,
        "tape": opened.tape if opened else None,
        "markets": universe_size(state),
        "universe_by": universe_volume(opened) if opened else None,
        "closed": state.closed is not None,
        "close_reason": state.closed.reason if state.closed else None,
        "status": cohort_status(state),
        "decisions_stopped": (
            {"ts": iso_utc(stopped.ts), "reason": stopped.reason, "markets": stopped.markets}
            if stopped
            else None
        ),
        "settings": cohort_settings(state),
        "agents": [msgspec.to_builtins(s) for s in cohort_standings(state)],
        "positions": open_positions(state),
        "beliefs": stated_beliefs(state),
        "categories": [category_row(r) for r in report_categories([state])],
    }


def report_data(
    ledger: Ledger, usage: Usage | None = None, intervals: IntervalSettings | None = None
) -> dict[str, Any]:
    """The report as plain data: per-cohort standings, the cross-cohort leaderboard with its
    interval method, results per category, and what reproduces the run; with ``usage``
    (``ledger.usage.model_usage``), each cohort's ``model_usage`` per agent, each agent's
    ``model_usage_by_agent`` over all cohorts and the run's ``model_usage_total`` (calls,
    re-asks, failures, tokens, dollars, latency)."""
    settings = intervals or IntervalSettings()
    states = [ledger.cohorts[name] for name in sorted(ledger.cohorts)]
    board = leaderboard(states, interval=settings.choice, draws=settings.draws, seed=settings.seed)
    usage = usage or {}
    cohorts = [cohort_summary(state) for state in states]
    for summary in cohorts:
        agents = usage.get(summary["cohort"], {})
        summary["model_usage"] = {agent: usage_dict(u) for agent, u in agents.items()}
    from importlib.metadata import version  # here: only JSON and HTML print it

    return {
        "package_version": version("arena"),
        "interval": interval_info(states, settings),
        "cohorts": cohorts,
        "leaderboard": [msgspec.to_builtins(row) for row in board],
        "categories": [category_row(row) for row in report_categories(states)],
        "model_usage_by_agent": {a: usage_dict(u) for a, u in usage_by_agent(usage).items()},
        "model_usage_total": usage_dict(total_usage(usage)) if usage else None,
    }


# -- tables ---------------------------------------------------------------------------------


def scored_count(b: dict[str, Any]) -> str:
    """How many beliefs were scored, and how many were left out for not being probabilities."""
    left_out = b.get("left_out")
    return f"{b['n']} ({left_out} outside [0, 1] left out)" if left_out else str(b["n"])


def failure_reason(error: str) -> str:
    """A failed call's reason without its particulars, so that like failures count together:
    the error up to its first parenthesis or ``|`` (a server's detail, what came before an
    abort), at most 100 characters. "HTTP 400: the prompt is longer than the model's context
    (8780 > 8192): show fewer markets" is "HTTP 400: the prompt is longer than the model's
    context"."""
    return re.split(r" \(| \| ", error, maxsplit=1)[0][:100].strip()


def common_failure(u: ModelUsage) -> str | None:
    """The most common reason among the failed calls, with its count ("HTTP 400: … (10 of 10
    failed)"); ties by the reason's text, so the same log always names the same one."""
    counts: Counter[str] = Counter()
    for error, n in u.errors.items():
        counts[failure_reason(error)] += n
    if not counts:
        return None
    reason, n = min(counts.items(), key=lambda item: (-item[1], item[0]))
    return f"{reason} ({n} of {u.failures} failed)"


def usage_dict(u: ModelUsage) -> dict[str, Any]:
    """An agent's usage as JSON: ``ModelUsage.as_dict`` and its ``common_failure``."""
    return u.as_dict() | {"common_failure": common_failure(u)}


def usage_by_agent(usage: Usage) -> dict[str, ModelUsage]:
    """Each agent's model usage summed over its cohorts, agents in sorted order."""
    merged: dict[str, ModelUsage] = {}
    for agents in usage.values():
        for agent, u in agents.items():
            merged.setdefault(agent, ModelUsage()).merge(u)
    return dict(sorted(merged.items()))


def universe_size(state: CohortState) -> int:
    """The markets the cohort chose, as its opening names them: a cohort cut short (a replay
    killed at its first step) has listed fewer of them, and said '0 markets'. A rolling
    cohort's opening names only the start's markets; the others list as they open, so it
    chose every market it listed."""
    opened = state.opened
    if opened is not None and opened.settings.get("listing") == "rolling":
        return len(state.markets)
    return len(opened.universe) if opened and opened.universe else len(state.markets)
