"""Reports as Rich tables in a terminal: the answer first.

People get the leaderboard across cohorts and one line per cohort; the per-cohort tables
(standings, open positions, stated beliefs, categories) on request. The figures come from
``arena.reports.model``; this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from arena.reports.coverage import GAP_SECONDS, Coverage
from arena.reports.model import (
    BRIER_IMPLIED,
    BRIER_POOLED,
    MARK,
    MARK_LEGEND,
    IntervalSettings,
    Usage,
    board_heading,
    cohort_status,
    common_failure,
    execution_text,
    interval_hint,
    interval_info,
    iso_utc,
    misleading_briers,
    open_positions,
    report_categories,
    returns_by_agent,
    scored_count,
    stated_beliefs,
    universe_size,
    universe_volume,
    usage_by_agent,
)
from arena.run.cohort import start_text
from ledger.leaderboard import (
    AgentStanding,
    CategoryRow,
    LeaderboardRow,
    cohort_standings,
    leaderboard,
)
from ledger.projection import CohortState, Ledger
from ledger.usage import ModelUsage, total_usage
from replays.untrusted import printable

COHORT_COLUMNS = 6
"""Agents shown as columns of the one-line-per-cohort table; the rest are in --all/--json."""


def shown(text: str) -> str:
    """Text the log holds (agent and market names, categories, cohort ids, reasons, all of
    which a tape or a plugin wrote) as a table cell: control characters written out, not sent
    to the terminal (an escape sequence in a category retitled the window and cleared the
    screen), and Rich's markup escaped, so a ``[link=...]`` is text, not a link."""
    return escape(printable(text))


def _num(x: float | None, fmt: str = "{:,.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _signed(x: float | None, suffix: str = "") -> str:
    if x is None:
        return "—"
    colour = "green" if x > 0 else "red" if x < 0 else "white"
    return f"[{colour}]{x:+,.2f}{suffix}[/]"


def house_table(title: str, caption: str | None = None) -> Table:
    """The house style: light rules, so that twelve columns still fit 80 characters."""
    return Table(
        title=title, title_justify="left", caption=caption, caption_justify="left",
        header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
        collapse_padding=True,
    )  # fmt: skip


def marked_briers(
    rows: Sequence[tuple[str, float | None, float, float | None]],
) -> tuple[dict[str, RenderableType], str | None]:
    """Each agent's Brier (impl.) as a cell, ``MARK`` after those ``misleading_briers`` finds
    at odds with the results and a blank after the others, so that the decimals stay aligned
    (padded: Rich strips a trailing space from a cell's text), from rows ``(agent, Brier
    (impl.), return, win rate)``; and the legend line, when any is marked."""
    flags = misleading_briers([(brier, ret, win) for _, brier, ret, win in rows])
    cells: dict[str, RenderableType] = {}
    for (agent, brier, _, _), flag in zip(rows, flags, strict=True):
        text = _num(brier, "{:.3f}")
        cells[agent] = text + MARK if flag else text
        if any(flags) and not flag:
            cells[agent] = Padding(Text(text, justify="right"), (0, 1, 0, 0))
    return cells, MARK_LEGEND if any(flags) else None


def standings_table(title: str, rows: Sequence[AgentStanding]) -> Table:
    """One row per agent; columns that are zero for everyone (open positions, rejections,
    errors) are left out, and cash with them when it is everyone's total, so the table fits a
    narrow terminal (80 columns for the sample's seven agents)."""
    briers, legend = marked_briers([(s.agent, s.brier, s.return_pct, s.win_rate) for s in rows])
    columns: list[tuple[str, Callable[[AgentStanding], RenderableType]]] = [
        ("cash", lambda s: _num(s.cash, "{:,.0f}")),
        ("pos.", lambda s: _num(s.positions_value, "{:,.0f}")),
        ("total", lambda s: _num(s.total_value, "{:,.0f}")),
        ("P/L", lambda s: _signed(s.pnl)),
        ("return", lambda s: _signed(s.return_pct, "%")),
        (BRIER_POOLED, lambda s: briers[s.agent]),
        ("Brier\n(paid)", lambda s: _num(s.brier_paid, "{:.3f}")),
        ("BSS", lambda s: _num(s.bss, "{:+.2f}")),
        ("BSS\nmkt", lambda s: _num(s.bss_market, "{:+.2f}")),
        ("res.", lambda s: f"{s.n_resolved:,}"),
        ("win", lambda s: _num(s.win_rate, "{:.0%}")),
        ("bets", lambda s: f"{s.n_bets:,}"),
        ("rej.", lambda s: f"{s.n_rejected:,}"),
        ("err.", lambda s: f"{s.n_errors:,}"),
    ]
    optional = {
        "cash": lambda s: s.positions_value != 0,
        "pos.": lambda s: s.positions_value != 0,
        "rej.": lambda s: s.n_rejected > 0,
        "err.": lambda s: s.n_errors > 0,
    }
    columns_shown = [(n, f) for n, f in columns if n not in optional or any(map(optional[n], rows))]
    table = house_table(title, "\n".join(filter(None, [BRIER_IMPLIED, legend])))
    table.padding = (0, 0)  # the box's one blank between columns: 11 of them fit 80 characters
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=18)
    for name, _ in columns_shown:
        table.add_column(name, justify="right", no_wrap=True)
    for s in rows:
        table.add_row(shown(s.agent), *(cell(s) for _, cell in columns_shown))
    return table


def positions_table(rows: Sequence[dict[str, Any]]) -> Table:
    table = house_table("Open positions (marked)")
    for name in ("agent", "market", "side", "shares", "avg entry", "price", "value",
                 "unrealized"):  # fmt: skip
        left = name in ("agent", "market", "side")
        table.add_column(name, justify="left" if left else "right", no_wrap=True)
    for r in rows:
        table.add_row(
            shown(r["agent"]), shown(r["market"]), shown(r["side"]), f"{r['shares']:,.2f}",
            f"{r['avg_entry']:.3f}", f"{r['price']:.3f}", _num(r["value"]),
            _signed(r["unrealized_pnl"]),
        )  # fmt: skip
    return table


def beliefs_table(beliefs: dict[str, dict[str, Any]]) -> Table:
    table = house_table(
        "Stated beliefs (P of the bet's side), scored",
        "Brier (stated): the probability the agent gave for its bet's side; ECE, and REL and "
        "RES (the Murphy reliability and resolution), of the same; Brier (impl.) of the same "
        "bets beside it",
    )
    for name in ("agent", "n", "Brier\n(stated)", "log\nloss", "ECE", "REL", "RES",
                 BRIER_POOLED):  # fmt: skip
        table.add_column(name, justify="left" if name == "agent" else "right", no_wrap=True)
    for agent, b in beliefs.items():
        m = b["murphy"]
        table.add_row(
            shown(agent), scored_count(b), f"{b['brier']:.4f}", f"{b['log_loss']:.4f}",
            f"{b['ece']:.4f}", f"{m['reliability']:.4f}", f"{m['resolution']:.4f}",
            f"{b['implied_brier']:.4f}",
        )  # fmt: skip
    return table


def categories_table(title: str, rows: Sequence[CategoryRow]) -> Table:
    table = house_table(
        title,
        "Polymarket's categories; labels: the tape's own · return: the category's P/L in points "
        "of starting cash, mean over cohorts (an agent's rows add up to its mean return); Brier "
        "(impl.) pooled over the category's resolved bets",
    )
    table.padding = (0, 0)
    cells = [
        [shown(r.agent), shown(r.category), f"{r.markets:,}", f"{r.n_bets:,}", _signed(r.pnl),
         _signed(r.return_pp, " pp"), _num(r.brier, "{:.3f}")]
        for r in rows
    ]  # fmt: skip
    names = ("agent", "category", "markets", "bets", "P/L", "return", BRIER_POOLED)
    for k, name in enumerate(names):
        # the figures keep their width; the labels, last, take what is left and are cut
        heading = max(len(line) for line in name.split("\n"))
        width = max([heading, *(Text.from_markup(c[k]).cell_len for c in cells)])
        table.add_column(name, justify="left" if k < 2 else "right", no_wrap=True,
                         overflow="ellipsis", min_width=min(width, 28), max_width=28)  # fmt: skip
    table.add_column("labels", min_width=6)  # wrappable, so Rich narrows it first
    for r, row in zip(rows, cells, strict=True):
        labels = Text(printable(", ".join(r.labels)), no_wrap=True, overflow="ellipsis")
        table.add_row(*row, labels)
    return table


NAME_WIDTH = 16
"""The widest an agent's name is shown in the tables of many agents."""


def short_names(names: Sequence[str], width: int = NAME_WIDTH) -> dict[str, str]:
    """Each name in at most ``width`` cells, and still told apart: a longer one keeps its head
    and its tail around a "…", split as evenly as leaves every name distinct. A sweep's
    settings differ in the middle and at the end ("sign-B_500-min_edge_0.02" and
    "sign-B_100-min_edge_0" are "sign-B_5…ge_0.02" and "sign-B_1…n_edge_0"), which a cut at the
    end made identical. Names no split tells apart are left whole."""
    splits = sorted(range(width), key=lambda head: (abs(2 * head - (width - 1)), -head))
    for head in splits:
        tail = width - 1 - head
        cut = {
            n: n if len(n) <= width else n[:head] + "…" + (n[len(n) - tail :] if tail else "")
            for n in names
        }
        if len(set(cut.values())) == len(set(names)):
            return cut
    return {n: n for n in names}


MIN_NAME_WIDTH = 8
"""The narrowest ``fit_names`` cuts a name: a head, "…" and a tail still say which it is."""


def fit_names(
    names: Sequence[str], build: Callable[[dict[str, str]], Table], width: int | None
) -> Table:
    """The table ``build`` lays out from ``names`` (each name to what it is shown as), with the
    names cut as ``short_names`` cuts them to the widest that lets the table fit ``width``
    cells. Rich would cut them at the end instead, where a sweep's settings read alike."""
    table = build({n: n for n in names})
    if width is None or not names:
        return table
    longest = max(map(len, names))
    cut_to = max(longest - max(table_width(table) - width, 0), MIN_NAME_WIDTH)
    while cut_to < longest:
        table = build(short_names(names, cut_to))
        if table_width(table) <= width or cut_to == MIN_NAME_WIDTH:
            break
        cut_to -= 1
    return table


LEADERBOARD_DROPS = ("BSS", "win", "cohorts")
"""Columns the leaderboard leaves out, in this order, until it fits the terminal (``--json``
and ``--html`` have them all): BSS first, a rescaling of Brier (impl.)."""


def leaderboard_table(
    rows: Sequence[LeaderboardRow],
    interval: dict[str, Any],
    width: int | None = None,
    returns: Mapping[str, Sequence[float]] | None = None,
) -> Table:
    """Across the ``interval["cohorts"]`` cohorts of the log (``interval_info``): summed P/L,
    mean return per cohort with its 95% interval (its method in the heading and the caption),
    pooled implied Brier beside the Brier of the prices paid, both skill scores, and win rate;
    in ``width`` cells, leaving out ``LEADERBOARD_DROPS`` as it must. With each agent's
    ``returns`` in its cohorts, the caption names the t interval over them where the bootstrap
    is far wider (``interval_hint``)."""
    names = short_names([r.agent for r in rows])
    briers, marked = marked_briers([(r.agent, r.brier, r.return_mean, r.win_rate) for r in rows])
    method = f"\n({rows[0].interval})" if rows else ""
    columns: list[tuple[str, Callable[[LeaderboardRow], RenderableType]]] = [
        ("agent", lambda r: shown(names[r.agent])),
        ("cohorts", lambda r: str(r.cohorts)),
        ("bets", lambda r: f"{r.n_bets:,}"),
        ("total P/L", lambda r: _signed(r.total_pnl)),
        ("mean\nreturn", lambda r: _signed(r.return_mean, "%")),
        (f"95% CI{method}", _interval),
        (BRIER_POOLED, lambda r: briers[r.agent]),
        ("Brier\n(paid)", lambda r: _num(r.brier_paid, "{:.3f}")),
        ("BSS", lambda r: _num(r.bss, "{:+.2f}")),
        ("BSS\nmkt", lambda r: _num(r.bss_market, "{:+.2f}")),
        ("win", lambda r: _num(r.win_rate, "{:.0%}")),
    ]
    title, mixed = board_heading([r.cohorts for r in rows], interval["cohorts"])
    hint = interval_hint(
        ((r.agent, r.return_ci_low, r.return_ci_high) for r in rows), returns or {}
    )
    caption = "\n".join(filter(None, [
        f"mean return: mean of the cohorts' returns · {interval['text']}", hint, mixed,
        BRIER_IMPLIED, marked,
    ]))  # fmt: skip
    # on a board of agents from different cohorts the count is the last column to go
    drops = LEADERBOARD_DROPS if mixed is None else ("BSS", "win", "BSS\nmkt", "cohorts")
    left_out: list[str] = []
    for drop in (None, *drops):
        if drop is not None:
            left_out.append(drop)
        table = house_table(title, caption)
        table.padding = (0, 0)
        shown_columns = [(n, cell) for n, cell in columns if n not in left_out]
        for name, _ in shown_columns:
            table.add_column(name, justify="left" if name == "agent" else "right", no_wrap=True)
        for r in rows:
            table.add_row(*(cell(r) for _, cell in shown_columns))
        if width is None or table_width(table) <= width:
            break
    if left_out:
        dropped = ", ".join(name.replace("\n", " ") for name in left_out)
        table.caption = f"{caption}\nleft out to fit: {dropped} (see --json)"
    return table


def _interval(r: LeaderboardRow) -> str:
    low, high = r.return_ci_low, r.return_ci_high
    return "—" if low is None or high is None else f"{low:+.2f}..{high:+.2f}"


def table_width(table: Table) -> int:
    """How wide ``table`` lays out with room to spare."""
    return Console(width=10_000).measure(table).maximum


def usage_table(title: str, rows: dict[str, ModelUsage]) -> Table:
    """Model calls per agent: attempts, re-asks, failures, tokens, dollars, latency; under it,
    each failing agent's most common reason."""
    failing = {agent: reason for agent, u in rows.items() if (reason := common_failure(u))}
    caption = "\n".join(f"{agent} failed most with: {r}" for agent, r in failing.items())
    table = house_table(title, shown(caption) if caption else None)
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=18)
    for name in ("calls", "re-asks", "failed", "rejected", "tokens in", "tokens out", "USD",
                 "median s", "p95 s"):  # fmt: skip
        table.add_column(name, justify="right", no_wrap=True)
    for agent, u in rows.items():
        d = u.as_dict()
        table.add_row(
            shown(agent), str(u.calls), str(u.reasks), str(u.failures), str(u.rejected),
            f"{u.tokens_in:,}", f"{u.tokens_out:,}", _num(u.cost, "{:,.4f}"),
            _num(_seconds(d["latency_median_ms"]), "{:.2f}"),
            _num(_seconds(d["latency_p95_ms"]), "{:.2f}"),
        )  # fmt: skip
    return table


def cohort_lines_table(
    states: Sequence[CohortState],
    standings: Sequence[Sequence[AgentStanding]],
    agents: Sequence[str],
    width: int | None = None,
) -> Table:
    """One line per cohort: when, how many markets, whether it closed, each agent's return
    (from the cohort's ``standings``); as many agents (up to ``COHORT_COLUMNS``) as fit
    ``width``, names told apart."""
    rows = []
    for state, standing in zip(states, standings, strict=True):
        returns = {s.agent: s.return_pct for s in standing}
        start = iso_utc(state.opened.start)[:10] if state.opened else "?"
        status = "closed" if state.closed else "open"
        rows.append(([start, shown(state.cohort), str(universe_size(state)), status], returns))
    for count in range(min(COHORT_COLUMNS, len(agents)), -1, -1):
        first = list(agents[:count])
        more = len(agents) - len(first)
        caption = "return of each agent in each cohort; the cohort's tables: --cohort ID or --all"
        if more:
            caption += f"; {more} more agent(s) in --all and --json"
        table = house_table(f"{len(states)} cohorts", caption)
        for name in ("start", "cohort", "markets", "status"):
            table.add_column(name, no_wrap=True, justify="right" if name == "markets" else "left")
        headings = short_names(first, 10)
        for agent in first:
            table.add_column(shown(headings[agent]), justify="right", no_wrap=True)
        for cells, returns in rows:
            table.add_row(*cells, *(_signed(returns.get(a), "%") for a in first))
        if width is None or table_width(table) <= width:
            break
    return table


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def usage_line(usage: Usage) -> str:
    """The run's model usage in one line, for the end of ``arena replay``."""
    return f"run total: {total_usage(usage).summary()}"


def print_cohort(console: Console, state: CohortState, usage: Usage) -> None:
    """The tables of one cohort: standings, open positions, stated beliefs, model calls,
    categories."""
    opened = state.opened
    start = start_text(opened.start) if opened else "?"
    status = cohort_status(state)
    chosen = f" chosen by {universe_volume(opened)}" if opened else ""
    if opened is not None and opened.settings.get("listing") == "rolling":
        first = f"the start's {len(opened.universe)} by {universe_volume(opened)}"
        chosen = f" listed as they opened ({first})"
    markets = universe_size(state)
    title = (
        f"Cohort {shown(state.cohort)} — start {start}, {markets:,} market"
        f"{'' if markets == 1 else 's'}"
        f"{shown(chosen)}; {shown(status)}; {shown(execution_text(state))}"
    )
    console.print(standings_table(title, cohort_standings(state)))
    positions = open_positions(state)
    if positions:
        console.print(positions_table(positions))
    beliefs = stated_beliefs(state)
    if beliefs:
        console.print(beliefs_table(beliefs))
    if usage.get(state.cohort):
        console.print(usage_table("Model calls (latency per attempt)", usage[state.cohort]))
    rows = report_categories([state])
    if len({label for r in rows for label in r.labels}) > 1:
        console.print(categories_table(f"By category, cohort {shown(state.cohort)}", rows))


LEDGER_COLUMNS = (
    ("snapshots", "snaps"), ("gaps", f"gaps\n>{GAP_SECONDS:g}s"), ("crossed", "crossed"),
    ("locked", "locked"), ("one_sided", "1-sided"), ("empty", "empty"),
    ("tick_changes", "tick Δ"), ("mirror_pairs", "pairs"), ("mirror_mismatches", "un-\nmirrored"),
)  # fmt: skip
"""The coverage ledger's counts (``MarketLedger.as_dict`` keys) and their headings."""


def coverage_table(c: Coverage) -> Table | str:
    """The books' coverage ledger over the markets the cohorts traded, a market a line; or the
    one line that says why it cannot be shown."""
    if c.missing is not None:
        return f"[dim]{shown(c.missing)}[/]"
    table = house_table(
        f"Books {c.books[:12]}: coverage of the {len(c.markets)} market(s) traded",
        "pairs: snapshots of a market's two tokens at one instant; unmirrored: those where one "
        "book is not the other's mirror",
    )
    table.padding = (0, 0)  # ten columns in 80 characters
    table.add_column("market", no_wrap=True, overflow="ellipsis", max_width=16)
    for _, name in LEDGER_COLUMNS:
        table.add_column(name, justify="right", no_wrap=True)
    for entry in c.entries:
        counts = entry.as_dict()
        table.add_row(shown(entry.market), *(f"{counts[k]:,}" for k, _ in LEDGER_COLUMNS))
    return table


def print_report(
    console: Console,
    ledger: Ledger,
    *,
    detail: bool | None = None,
    intervals: IntervalSettings | None = None,
    usage: Usage | None = None,
    books: Sequence[Coverage] = (),
) -> None:
    """The answer first: the leaderboard (and what model calls cost, if any), then one line
    per cohort; with ``detail`` (the default for a single cohort) the results per category and
    every cohort's own tables; last, the coverage of the order ``books`` the cohorts met."""
    states = [ledger.cohorts[name] for name in sorted(ledger.cohorts)]
    settings = intervals or IntervalSettings()
    usage = usage or {}
    if detail is None:
        detail = len(states) == 1
    if len(states) > 1:
        board = leaderboard(
            states, interval=settings.choice, draws=settings.draws, seed=settings.seed
        )
        standings = [cohort_standings(state) for state in states]
        returns = returns_by_agent((s.agent, s.return_pct) for rows in standings for s in rows)
        info = interval_info(states, settings)
        console.print(leaderboard_table(board, info, console.width, returns))
        ways = sorted({execution_text(state) for state in states})
        console.print(f"[dim]{shown('; '.join(ways))}[/]")
        if usage:
            console.print(usage_table("Model calls over every cohort", usage_by_agent(usage)))
        if not detail:
            agents = [r.agent for r in board]
            console.print(cohort_lines_table(states, standings, agents, console.width))
        else:
            console.print(categories_table("By category, every cohort", report_categories(states)))
    if detail:
        for state in states:
            print_cohort(console, state, usage)
    for c in books:
        console.print(coverage_table(c))
