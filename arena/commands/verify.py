"""``arena verify DB``: re-check the hash chain, the fold, the snapshots and the head."""

from __future__ import annotations

import json
from pathlib import Path

import click

from arena.console import make_console
from arena.errors import domain_errors
from arena.verify.fills import verify_fills
from arena.verify.log import verify_store, write_snapshots
from ledger.errors import IntegrityError
from ledger.store import EventStore
from replays.bookfile import load_books
from replays.samples import SAMPLE_BOOKS, books_file, tape_file
from replays.tapefile import load_tape


@click.command()
@click.argument("db", type=click.Path(path_type=Path))
@click.option(
    "--head",
    metavar="SEQ:HASH",
    help="The head 'arena replay' printed: the log must end exactly there "
    "(default: the head recorded in DB.head, if any).",
)
@click.option(
    "--write-snapshots",
    "write_snapshots_",
    is_flag=True,
    help="After verifying, store the snapshots the log lacks (events are not touched), "
    "so reports read it at once.",
)
@click.option(
    "--tape",
    "tape_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also re-check every fill against the rules and this tape's price at its instant "
    "('sample': the embedded tape), or derive it again under the cohort's execution model.",
)
@click.option(
    "--books",
    "books_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --tape: the order books a cohort's fills walked ('sample-books' brings its own).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify(
    db: Path,
    head: str | None,
    write_snapshots_: bool,
    tape_path: Path | None,
    books_path: Path | None,
    as_json: bool,
) -> None:
    """Prove a log was not altered, cut or extended: hash chain, checking fold, recorded state
    digests, every snapshot, and the head.

    Exits 1 naming the first bad sequence number if anything was changed; names every cohort
    that never closed.

    \b
    Examples:
      arena verify arena.db
      arena verify arena.db --head 1341:5be0…   # the head arena replay printed
      arena verify old.db --write-snapshots
      arena verify arena.db --tape my.tape      # every fill against the tape and the rules
      arena verify btc.db --tape sample-books   # fills walked through the sample's books
    """
    if books_path is None and str(tape_path) == SAMPLE_BOOKS:
        books_path = Path(SAMPLE_BOOKS)
    if books_path is not None and tape_path is None:
        raise click.UsageError("--books goes with --tape")
    try:
        books = load_books(books_file(books_path)) if books_path is not None else None
        with EventStore.open(db, readonly=not write_snapshots_) as store:
            result = verify_store(store, head)
            tape = load_tape(tape_file(tape_path)) if tape_path else None
            fills = verify_fills(store, tape, books) if tape is not None else None
            written = write_snapshots(store, result) if write_snapshots_ else 0
    except domain_errors() as exc:  # as text it is the CLI edge's one line
        if not as_json:
            raise
        # a log that will not open, a missing tape, as an altered log: an object, exit 1
        seq = {"first_bad_seq": exc.seq} if isinstance(exc, IntegrityError) else {}
        click.echo(json.dumps({"ok": False, **seq, "error": str(exc)}))
        raise SystemExit(1) from None
    if as_json:
        click.echo(json.dumps({
            "ok": True, "events": result.events, "cohorts": result.cohorts,
            "closed_cohorts_checked": result.closed, "snapshots_checked": result.snapshots,
            "snapshots_written": written, "open_cohorts": result.open_cohorts,
            "head": result.head, "head_checked_against": result.head_source,
            **({"fills_checked": fills.fills} if fills else {}),
        }))  # fmt: skip
        return
    console = make_console()
    console.print(
        f"[green]OK[/] {db}: {result.events:,} events, hash chain intact; "
        f"{result.cohorts} cohort(s) rebuilt, {result.closed} matched their recorded final "
        f"state; {result.snapshots} snapshot(s) matched the fold"
        + (f"; {fills.fills:,} fill(s) {fills.how}" if fills else ""),
        highlight=False,
    )
    checked = f"matches the {result.head_source}" if result.head_source else "no head recorded"
    console.print(f"head {result.head} ({checked})", highlight=False, markup=False)
    if result.open_cohorts:
        names = ", ".join(result.open_cohorts)
        console.print(
            f"[yellow]never closed:[/] {len(result.open_cohorts)} cohort(s): {names}",
            highlight=False,
        )
    if written:
        console.print(f"wrote {written} snapshot(s)")
