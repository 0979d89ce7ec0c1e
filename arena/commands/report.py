"""``arena report DB``: standings per cohort and the cross-cohort leaderboard."""

from __future__ import annotations

import json
from pathlib import Path

import click

from arena.console import make_console
from arena.report import load_ledger, print_report, report_data
from ledger.errors import LedgerError
from ledger.store import EventStore
from ledger.usage import model_usage


@click.command()
@click.argument("db", type=click.Path(path_type=Path))
@click.option("--cohort", "cohorts", multiple=True, help="Only these cohorts (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def report(db: Path, cohorts: tuple[str, ...], as_json: bool) -> None:
    """Cash, P/L, return, Brier, win rate, bets and rejections per agent and cohort, and the
    leaderboard across cohorts with 95% confidence intervals; for agents that ask a model,
    its calls, re-asks, failures, tokens, dollars and latency.

    \b
    Example:
      arena report arena.db --json
    """
    try:
        with EventStore.open(db, readonly=True) as store:
            unknown = set(cohorts) - set(store.streams())
            if unknown:
                raise click.ClickException(f"{db} has no cohort {sorted(unknown)[0]}")
            ledger = load_ledger(store, cohorts or None)
            usage = model_usage(store, cohorts or None)
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(report_data(ledger, usage), indent=2))
        return
    print_report(make_console(), ledger, usage=usage)
