"""``arena cassette DB OUT.jsonl``: a run's model calls as a cassette to replay from."""

from __future__ import annotations

import json
from pathlib import Path

import click

from strategies.llm.cassette import export_cassette


@click.command()
@click.argument("db", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def cassette(db: Path, out: Path, as_json: bool) -> None:
    """Write every model question a log holds (each with all of its attempts) as a JSON Lines
    cassette. A replay answers from it as from the log itself, with the same digest:
    ARENA_LLM_MODE=replay ARENA_LLM_CASSETTE=OUT.jsonl arena replay ...

    \b
    Example:
      arena cassette arena.db answers.jsonl
      arena cassette arena.db answers.jsonl --json
    """
    try:
        n = export_cassette(db, out)
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"questions": n, "cassette": str(out), "db": str(db)}))
        return
    click.echo(f"{n:,} model question(s) written to {out}")
