"""``arena tapes import columns``: a plain prices file and a markets file → a tape, so any
archive becomes a tape without writing Polymarket JSON (``replays.importers.columns``)."""

from __future__ import annotations

import click

from replays.importers.columns import import_price_columns


@click.command("columns")
@click.option("--prices", "prices_path", required=True,
              help="CSV (.csv, .csv.gz) or Parquet of market, ts, price[, outcome].")  # fmt: skip
@click.option("--markets", "markets_path", required=True,
              help="CSV of market, question[, outcomes, resolution, resolved_at, end, volume, "
                   "category].")  # fmt: skip
@click.option("--out", required=True, help="Tape to write (.tape, .tape.jsonl.gz, .tape.jsonl).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def columns(prices_path: str, markets_path: str, out: str, as_json: bool) -> None:
    """Plain price columns + a small markets file → a tape (replays/FORMAT.md).

    \b
    Example:
      arena tapes import columns --prices prices.csv --markets markets.csv --out my.tape
    """
    from arena.commands.tapes import _finish_import  # the summary every import prints

    _finish_import(lambda: import_price_columns(prices_path, markets_path),
                   f"{prices_path} and {markets_path}", out, as_json)  # fmt: skip
