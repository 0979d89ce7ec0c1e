"""Import the 2024 US election set (see the shared data's PROVENANCE.md, section 1).

The tapes carry no token ids, so the index CSV joins each region's series to its raw Gamma
market; the series is that market's YES price. Event objects supply the tags (and so the
category) that the markets' embedded events lack.

"National" has no Gamma market. It is kept, as the only whole-country race, under the id
``election2024-president-national`` with volume 0; its market object is synthesised and its
winner derived from its final price by the same §1.9 rule (a side at or above 0.99 wins),
resolving at its last point because its real close instant is unknown.

Coverage and resolution follow the generic importer's rules, which on this data cover each
market until its own last point: every series runs past its market's scheduled end (2024-11-04
or -05 12:00), and a series stops growing when its market stops trading, or where the source's
commits stopped (2024-11-12), which for three markets is one to two weeks before Gamma's
``closedTime``. Vermont's presidential series ends on 2024-11-06 12:00, UMA settled the market
at 13:32 and Gamma closed it only on 11-20: it resolves at the settlement.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from replays.errors import TapeError
from replays.importers.parsing import clean_series, json_list
from replays.importers.polymarket import ImportResult, Series, assemble, read_json
from replays.untrusted import Budget, read_file
from replays.validate import Instant

DEFAULT_DIR = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "polymarket" / "election2024"
)
INDEX = "election2024_market_index.csv"
NATIONAL_ID = "election2024-president-national"


def _national(series: Series) -> dict[str, Any]:
    times, prices = series
    last = float(prices[-1])
    return {
        "id": NATIONAL_ID,
        "question": "Will a Democrat win the 2024 US Presidential Election?",
        # the text is part of the embedded sample's bytes, and so of its hash and every cohort id
        # made on it: it keeps the wording it was imported with ("origins" is the reference that
        # docs/methodology.md §1.9 now gives in the project's own words)
        "description": "No Gamma market was matched; the winner is derived from the final "
        "tape price (origins §1.9) and the resolution instant is the last point.",
        "outcomes": ["Yes", "No"],
        "clobTokenIds": [f"{NATIONAL_ID}-yes", f"{NATIONAL_ID}-no"],
        "outcomePrices": [str(last), str(1.0 - last)],
        "closed": True,
        "closedTime": datetime.fromtimestamp(int(times[-1]), UTC).isoformat(),
        "category": "Politics",
    }


class _Point(msgspec.Struct):
    t: Instant
    p: float


def _series(raw: Any, source: Path, region: str) -> Series:
    points = raw.get(region) if isinstance(raw, dict) else None
    if not isinstance(points, list) or not points:
        raise TapeError(f"{source}: no series for region {region!r}")
    try:
        typed = msgspec.convert(points, list[_Point])
    except msgspec.ValidationError as exc:
        raise TapeError(f"{source}: region {region!r}: bad point: {exc}") from None
    times = np.fromiter((p.t for p in typed), dtype=np.int64, count=len(typed))
    prices = np.fromiter((p.p for p in typed), dtype=np.float64, count=len(typed))
    return clean_series(times, prices)


COLUMNS = ("race", "region", "gamma_market_id", "yes_token_id", "tape_file")


def _index_rows(index_path: Path) -> list[dict[str, str]]:
    """The index's rows, read within the size limit a tape file has (``Budget``): it is as
    untrusted as the tapes it names, and was read whole with no limit."""
    try:
        text = read_file(index_path, Budget(str(index_path))).decode("utf-8")
        reader = csv.DictReader(io.StringIO(text))
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise TapeError(f"{index_path}: missing columns {', '.join(missing)}")
        # a short row has None for its missing cells; an empty cell means the same
        return [{c: row.get(c) or "" for c in reader.fieldnames or ()} for row in reader]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TapeError(f"{index_path}: not a readable CSV: {exc}") from None


def _by_id(path: Path) -> dict[str, dict[str, Any]]:
    """Gamma objects of a JSON array keyed by their ``id``."""
    items = read_json(path)
    if not isinstance(items, list) or not all(isinstance(i, dict) and "id" in i for i in items):
        raise TapeError(f"{path}: expected a JSON array of objects with an id")
    return {str(i["id"]): i for i in items}


def import_election2024(directory: str | Path = DEFAULT_DIR) -> ImportResult:
    """The 2024 election tape (101 binary markets) from the shared data directory, with the
    import's notes (which series had no Gamma market)."""
    directory = Path(directory)
    index_path = directory / INDEX
    rows = _index_rows(index_path)
    gamma = _by_id(directory / "gamma_markets_election2024.json")
    events = _by_id(directory / "gamma_events_election2024.json")
    tapes: dict[str, Any] = {}
    objects: list[dict[str, Any]] = []
    histories: dict[str, Series] = {}
    notes: list[str] = []
    for row in rows:
        tape_path = directory / "tapes" / Path(row["tape_file"]).name
        if tape_path.name not in tapes:
            tapes[tape_path.name] = read_json(tape_path)
        series = _series(tapes[tape_path.name], tape_path, row["region"])
        market_id = row["gamma_market_id"]
        if not market_id:
            obj = _national(series)
            notes.append(f"{row['race']}/{row['region']}: no Gamma market; kept as {obj['id']}")
        elif market_id in gamma:
            obj = dict(gamma[market_id])
            obj["events"] = [
                events.get(str(e.get("id")), e)
                for e in obj.get("events") or []
                if isinstance(e, dict)
            ]
        else:
            raise TapeError(f"{index_path}: market {market_id}: not in the Gamma markets file")
        objects.append(obj)
        tokens = json_list(obj.get("clobTokenIds"))
        if not (row["yes_token_id"] or tokens):
            raise TapeError(f"{index_path}: market {obj.get('id')}: no YES token id")
        yes_token = row["yes_token_id"] or str(tokens[0])
        histories[yes_token] = series
    result = assemble(objects, histories, source=str(directory))
    result.notes.extend(notes)
    return result
