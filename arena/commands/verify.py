"""``arena verify DB``: re-check the hash chain and rebuild the projections."""

from __future__ import annotations

import json
from pathlib import Path

import click

from arena.console import make_console
from arena.verify import verify_store
from ledger.errors import IntegrityError, LedgerError
from ledger.store import EventStore


@click.command()
@click.argument("db", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify(db: Path, as_json: bool) -> None:
    """Prove a log was not altered: hash chain, checking fold, recorded state digests.

    Exits 1 naming the first bad sequence number if anything was changed.

    \b
    Example:
      arena verify arena.db
    """
    try:
        with EventStore.open(db, readonly=True) as store:
            result = verify_store(store)
    except IntegrityError as exc:
        if as_json:
            click.echo(json.dumps({"ok": False, "first_bad_seq": exc.seq, "error": str(exc)}))
            raise SystemExit(1) from None
        raise click.ClickException(f"{exc} (first bad seq {exc.seq})") from None
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"ok": True, "events": result.events, "cohorts": result.cohorts,
                               "closed_cohorts_checked": result.closed}))  # fmt: skip
        return
    make_console().print(
        f"[green]OK[/] {db}: {result.events:,} events, hash chain intact; "
        f"{result.cohorts} cohort(s) rebuilt, {result.closed} matched their recorded final state"
    )
