"""``arena ladder``: a run's own decisions replayed under more and more of the real market, and
what each step took from every agent's P/L."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import RenderableType
from rich.table import Table

from arena.backtests.depth import CENTS, AgentDepth, by_agent
from arena.backtests.ladder import (
    Ladder,
    climb,
    cost_text,
    mean_pnl,
    pnl_text,
    rungs,
    step_costs,
    steps_note,
)
from arena.backtests.ladder_page import write_ladder_report
from arena.backtests.narrow import split_to_fit
from arena.console import make_console
from arena.engines.base import TapeSource
from arena.reports.terminal import house_table, table_width
from ledger.store import EventStore
from replays.samples import SAMPLE, SAMPLE_BOOKS, books_file, tape_file


@click.command()
@click.argument("db", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--tape",
    "tape_path",
    default=SAMPLE,
    show_default=True,
    help=f"The tape the run replayed ('{SAMPLE}', '{SAMPLE_BOOKS}' or a file).",
)
@click.option(
    "--books",
    "books_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Order books for the touch and l2 rungs ('{SAMPLE_BOOKS}' brings its own).",
)
@click.option(
    "--spread-ticks",
    type=click.IntRange(1, 100),
    default=2,
    show_default=True,
    help="Without books: the synthetic spread, in ticks of 0.01, of the touch rung.",
)
@click.option(
    "--latency",
    metavar="MS|llm|FILE|llm+MS|llm+FILE",
    default="0",
    help="With books: a last rung whose orders meet the book this many ms later (llm: each "
    "decision's recorded model time; FILE: milliseconds per agent).",
)
@click.option(
    "--fees",
    metavar="auto|none|FILE",
    default="auto",
    show_default=True,
    help="What the fee rungs charge: Polymarket's schedule, nothing, or a fee table file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--html",
    "html_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write DIR/index.html (the ladder as a page) and DIR/ladder.json.",
)
def ladder(
    db: Path,
    tape_path: str,
    books_path: Path | None,
    spread_ticks: int,
    latency: str,
    fees: str,
    as_json: bool,
    html_dir: Path | None,
) -> None:
    """Replay a run's own decisions under fa, mid, touch, l2, fees and latency: what the
    spread, the depth, the fee and the delay took from each agent.

    Every cohort of DB is replayed in memory on each rung with its agents' recorded decisions
    played back at their instants; nothing is written.

    \b
    Examples:
      arena ladder arena.db
      arena ladder btc.db --tape sample-books --latency 1500 --json
      arena ladder btc.db --tape sample-books --html ladder/
    """
    if books_path is None and tape_path == SAMPLE_BOOKS:
        books_path = Path(SAMPLE_BOOKS)
    source = TapeSource.load(
        tape_file(tape_path), books_file(books_path) if books_path is not None else None
    )
    steps = rungs(source.books is not None, spread_ticks, latency, fees)
    with EventStore.open(db, readonly=True) as store:
        events = list(store.read())
    result = climb(events, source, steps)
    console = make_console()
    if html_dir is not None:
        about = {"log": str(db), "tape": source.tape.hash}
        if source.books is not None:
            about["books"] = source.books.hash
        written = write_ladder_report(html_dir, result, about)
        console.print(f"ladder [bold]{written}[/]", highlight=False)
    if as_json:
        click.echo(json.dumps(result.as_data(), indent=2))
        return
    console.print(_rungs_table(result, console.width))
    depths = by_agent(result.bets)
    if depths:
        console.print(_depth_table(depths))
    if result.edges:
        console.print(_edge_table(result))
    cohorts = len({row.cohort for row in result.rows})
    console.print(f"[dim]{cohorts} cohort(s) of {db} · tape {source.tape.hash[:12]}"
                  + (f" · books {source.books.hash[:12]}" if source.books else
                     " · no books: the touch rung's spread is synthetic, and no depth is "
                     "known") + "[/]")  # fmt: skip


RUNGS_TITLE = "P/L on each rung, the same decisions (dollars; mean over cohorts)"


def _rungs_table(result: Ladder, width: int | None = None) -> RenderableType:
    """An agent a row and a rung a column, then a column per step for what it cost; where
    that is wider than ``width`` (ten columns of dollars do not fit 80 cells, and Rich cut
    every figure to "+198…"), a rung a row, with the step that led to it, and an agent two
    columns, its P/L and the step's cost, in as many tables as it takes to keep every figure
    whole (four agents' eight columns did not fit one: "-1,723…  4…")."""
    means = mean_pnl(result.rows)
    costs = {agent: step_costs(pnl) for agent, pnl in means.items()}
    caption = f"each rung meets more of the market than the one before; {steps_note(result.rungs)}"
    table = house_table(RUNGS_TITLE, caption)
    table.add_column("agent", no_wrap=True)
    for rung in result.rungs:
        table.add_column(rung.name.replace(" + ", " +\n"), justify="right", no_wrap=True)
    for rung in result.rungs[1:]:
        table.add_column(f"cost ($):\n{rung.took}", justify="right", no_wrap=True)
    for agent, pnl in means.items():
        table.add_row(agent, *map(pnl_text, pnl), *map(cost_text, costs[agent]))
    if width is None or table_width(table) <= width:
        return table

    def by_rung(agents: Sequence[str]) -> Table:
        table = house_table(RUNGS_TITLE, caption)
        table.add_column("rung", no_wrap=True)
        table.add_column("step", no_wrap=True)
        for agent in agents:
            table.add_column(f"{agent}\nP/L ($)", justify="right", no_wrap=True)
            table.add_column(f"{agent}\ncost ($)", justify="right", no_wrap=True)
        for k, rung in enumerate(result.rungs):
            cells = [(pnl_text(means[a][k]), cost_text(costs[a][k - 1]) if k else "")
                     for a in agents]  # fmt: skip
            table.add_row(rung.name, rung.took, *(c for pair in cells for c in pair))
        return table

    return split_to_fit(by_rung, list(means), width)


def _depth_table(depths: list[AgentDepth]) -> Table:
    cents = [f"{c * 100:.0f}¢" for c in CENTS]
    table = house_table(
        "Depth near the price shown (each bet, the book at its decision)",
        "dollars the asks offered at most 1¢ / 5¢ over the price the agent was shown; "
        "'of $ asked': how much of its bets those levels could fill",
    )
    table.add_column("agent")
    table.add_column("bets", justify="right")
    for c in cents:
        table.add_column(f"median $ within {c}", justify="right")
    for c in cents:
        table.add_column(f"of $ asked, within {c}", justify="right")
    for d in depths:
        table.add_row(d.agent, str(d.bets), *(f"{v:,.2f}" for v in d.median),
                      *(f"{v:.1%}" for v in d.share))  # fmt: skip
    return table


def _edge_table(result: Ladder) -> Table:
    table = house_table(
        "Forecasters: the edge that survives execution",
        f"edge: belief − cost per share, probability points, dollar-weighted; shown at "
        f"the tape's price (fa), after execution on the last rung ({result.rungs[-1].name})",
    )
    for name in ("agent", "cohort", "bets", "Brier (stated)", "edge shown", "edge after",
                 "$ still spent"):  # fmt: skip
        left = name in ("agent", "cohort")
        table.add_column(name, justify="left" if left else "right", no_wrap=left)
    for e in result.edges:
        after = "—" if e.executed is None else f"{e.executed * 100:+.2f} pt"
        brier = "—" if e.brier is None else f"{e.brier:.4f}"
        table.add_row(e.agent, e.cohort, str(e.bets), brier, f"{e.shown * 100:+.2f} pt", after,
                      f"{e.kept:.1%}")  # fmt: skip
    return table
