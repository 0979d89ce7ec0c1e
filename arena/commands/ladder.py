"""``arena ladder``: a run's own decisions replayed under more and more of the real market, and
what each step took from every agent's P/L."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from arena.backtests.ladder import climb, rungs
from arena.console import make_console
from arena.engines.base import TapeSource
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
    "latency_ms",
    type=click.IntRange(0, 86_400_000),
    default=0,
    help="With books: a last rung whose orders meet the book this many ms later.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def ladder(
    db: Path,
    tape_path: str,
    books_path: Path | None,
    spread_ticks: int,
    latency_ms: int,
    as_json: bool,
) -> None:
    """Replay a run's own decisions under fa, mid, touch, l2, fees and latency: what the
    spread, the depth, the fee and the delay took from each agent.

    Every cohort of DB is replayed in memory on each rung with its agents' recorded decisions
    played back at their instants; nothing is written.

    \b
    Examples:
      arena ladder arena.db
      arena ladder btc.db --tape sample-books --latency 1500 --json
    """
    if books_path is None and tape_path == SAMPLE_BOOKS:
        books_path = Path(SAMPLE_BOOKS)
    source = TapeSource.load(
        tape_file(tape_path), books_file(books_path) if books_path is not None else None
    )
    with EventStore.open(db, readonly=True) as store:
        events = list(store.read())
    steps = rungs(source.books is not None, spread_ticks, latency_ms)
    result = climb(events, source, steps)
    if as_json:
        click.echo(json.dumps(result.as_data(), indent=2))
        return
    table = Table(
        title="P/L on each rung, the same decisions (dollars; mean over cohorts)",
        caption="each rung meets more of the market than the one before; 'took' columns are "
        "the P/L that step cost: fa → mid the midpoint, → touch the spread, → l2 the depth, "
        "then the fee and the delay",
    )
    table.add_column("agent")
    for step in steps:
        table.add_column(step.name, justify="right")
    for step in steps[1:]:
        table.add_column(f"took: {step.took}", justify="right")
    by_agent: dict[str, list[list[float]]] = {}
    for row in result.rows:
        by_agent.setdefault(row.agent, []).append(row.pnl)
    for agent, runs in sorted(by_agent.items()):
        mean = [sum(values) / len(runs) for values in zip(*runs, strict=True)]
        took = [mean[k - 1] - mean[k] for k in range(1, len(mean))]
        table.add_row(agent, *(f"{v:+,.2f}" for v in mean), *(f"{v:,.2f}" for v in took))
    console = make_console()
    console.print(table)
    cohorts = len({row.cohort for row in result.rows})
    console.print(f"[dim]{cohorts} cohort(s) of {db} · tape {source.tape.hash[:12]}"
                  + (f" · books {source.books.hash[:12]}" if source.books else
                     " · no books: the touch rung's spread is synthetic") + "[/]")  # fmt: skip
