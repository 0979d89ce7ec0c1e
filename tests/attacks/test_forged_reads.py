"""Reads never print numbers the log does not prove (issue 25).

Every tamper of ``tests.attacks.tampers`` (each one ``arena verify`` rejects) is fed to
``report``, ``export`` and ``step``: each must end in one line that names what failed and says
to run ``arena verify``, with nothing else printed. Before, five of them printed forged figures
with no note (the favourite $5,000 richer; a fill after the close; a whole cohort no run wrote;
a halved fill), a flipped bit in the stream index made ``export`` write a fill twice, and
another made it read for ever.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import Result

from ledger.anchor import head_path, write_head
from ledger.events import DecisionMade, ModelCall, ModelCalled
from ledger.rebuild import rebuild
from ledger.snapshot import FORMAT, encode_state
from ledger.store import EventStore
from tests.attacks import tampers
from tests.attacks.tampers import ALIEN_STREAM, FORGED_COHORT, TAMPERS
from tests.conftest import Arena

SNAPSHOT = r"snapshot \d+ \(cohort \S+, seq \d+\)"
EXPECTED: dict[str, tuple[int | str, str]] = {
    # tamper: (the cohort step is pointed at, by its place in the log or its id; what the
    # line says)
    "unflagged closing snapshot": (
        0, rf"{SNAPSHOT} is not the state its close \(event \d+\) recorded"
    ),
    "forged periodic snapshot": (
        -1, rf"cohort \S+, restored from {SNAPSHOT}, does not reach the state its close \(event "
        r"\d+\) recorded",
    ),
    "fill after the close, head moved": (-1, r"event 177 follows the close of cohort \S+"),
    "extra cohort": (0, r"67 event\(s\) were appended after the recorded head \(seq 176\)"),
    "extra cohort, head moved": (
        FORGED_COHORT, rf"cohort {FORGED_COHORT} does not rebuild to the state its close \(event "
        r"243\)"
    ),
    "a cohort's fill in a stream of its own, head moved": (
        ALIEN_STREAM, rf"stream {ALIEN_STREAM} holds an event of cohort \S+"
    ),
    "re-chained halved fill": (
        0, rf"{SNAPSHOT} no longer matches the event it was taken after: the log was rewritten"
    ),
    "re-chained halved fill, no snapshots": (
        0, r"cohort \S+ does not rebuild to the state its close \(event 67\) recorded"
    ),
    "flipped version in the stream index": (
        1, r"the stream index counts 168 events where the log holds 176"
    ),
    "flipped key in the streams index": (
        0, "the index of stream keys disagrees with the streams table"
    ),
}  # fmt: skip


@pytest.fixture
def log(weekly_log: Path, tmp_path: Path) -> Path:
    db = tmp_path / "arena.db"
    shutil.copy(weekly_log, db)
    shutil.copy(head_path(weekly_log), head_path(db))
    return db


def _cohorts(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [r[0] for r in conn.execute("SELECT key FROM streams NOT INDEXED ORDER BY id")]


def _read(arena: Arena, read: str, db: Path, cohort: str) -> Result:
    if read == "report":
        return arena("report", db)
    if read == "export":
        return arena("export", db, "--to", db.parent / "out")
    return arena("step", db, "--cohort", cohort, "--no-input")


def _one_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.mark.parametrize("read", ["report", "export", "step"])
@pytest.mark.parametrize("tamper", list(EXPECTED))
def test_a_tampered_log_is_one_line_naming_what_failed(
    arena: Arena, log: Path, tamper: str, read: str
) -> None:
    place, said = EXPECTED[tamper]
    cohort = place if isinstance(place, str) else _cohorts(log)[place]
    TAMPERS[tamper](log)
    line = _one_line(_read(arena, read, log, cohort))
    assert re.search(said, line), line
    assert line.endswith(f"(run 'arena verify {log}')"), line


@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_verify_rejects_every_tamper(arena: Arena, log: Path, tamper: str) -> None:
    """What the reads refuse is a real alteration: the full check names it too."""
    TAMPERS[tamper](log)
    assert _one_line(arena("verify", log))


def test_the_untouched_log_is_read_whole_with_no_note(arena: Arena, log: Path) -> None:
    for read in ("report", "export", "step"):
        result = _read(arena, read, log, _cohorts(log)[0])
        assert result.exit_code == 0 and result.stderr == "", result.output


def test_the_unflagged_snapshot_would_have_made_the_favourite_5000_richer(
    arena: Arena, log: Path
) -> None:
    """What the first tamper is after, shown on the state it holds: the favourite's cash,
    $5,000 more than the closing state the run recorded (which the chain still proves)."""
    with closing(sqlite3.connect(log)) as conn:
        [(image,)] = conn.execute("SELECT CAST(state AS BLOB) FROM snapshots WHERE id = 1")
    tampers.unflagged_closing_snapshot(log)
    with closing(sqlite3.connect(log)) as conn:
        [(forged, closing_flag)] = conn.execute(
            "SELECT CAST(state AS BLOB), closing FROM snapshots WHERE id = 1"
        )
    cash = [{b["agent"]: b["cash"] for b in json.loads(i)["books"]}["fav"] for i in (image, forged)]
    assert cash[1] - cash[0] == tampers.RICHER and closing_flag == 0


def test_a_flipped_row_id_in_the_stream_index_leaves_the_report_whole_and_stops_the_rest(
    arena: Arena, log: Path
) -> None:
    """A version whose index entry names a later row of its cohort: a read by the index meets
    that row twice (``export`` wrote the fill in it twice) and the row it named not at all.
    ``report`` reads none of these rows (the closing snapshots hold the state, which the close
    proves), so its figures are the run's; ``export`` and ``step`` read them and stop."""
    before = arena.json("report", log)
    TAMPERS["flipped seq in the stream index"](log)
    assert arena.json("report", log) == before
    # named where the page of the stream is read (the chain check) or where the index is
    said = (
        r"event \d+ comes again in its stream's index"
        r"|the stream index puts version \d+ of \S+ at event \d+, which an earlier version's"
    )
    for read in ("export", "step"):
        assert re.search(said, _one_line(_read(arena, read, log, _cohorts(log)[0])))


def _with_a_model_call(weekly_log: Path, db: Path) -> int:
    """The weekly log's first cohort written again with a model call of the favourite after
    its first decision (a call changes no state, so the close still holds), its closing
    snapshot and head as a replay leaves them; the call's seq."""
    with EventStore.open(weekly_log, readonly=True) as store:
        cohort = store.streams()[0]
        events = list(store.read(cohort))
    first = next(i for i, e in enumerate(events) if isinstance(e, DecisionMade))
    call = ModelCalled(
        cohort=cohort, ts=events[first].ts, agent="fav", week=1, n=1,
        call=ModelCall(model="m", question="decision", request="r", status=200, answer="{}",
                       tokens_in=100, tokens_out=10, cost=0.25, latency_ms=5.0),
    )  # fmt: skip
    events.insert(first + 1, call)
    with EventStore.open(db) as store:
        version = store.append(cohort, events)
        state = rebuild(store).cohorts[cohort]
        store.add_snapshot(cohort, version, encode_state(state), fmt=FORMAT, closing=True)
        write_head(store)
    return first + 2


def test_an_edited_model_call_is_refused_not_summed(
    arena: Arena, weekly_log: Path, tmp_path: Path
) -> None:
    """The transcript is in no state a close proves, so ``report`` read the calls' cost from
    the rows unchecked: a cost raised in place (no hash recomputed) was printed as the run's."""
    db = tmp_path / "calls.db"
    seq = _with_a_model_call(weekly_log, db)
    assert arena.json("report", db)["model_usage_total"]["cost"] == 0.25
    conn = tampers.connect(db)
    conn.execute(
        f"UPDATE events SET payload = json_set(payload, '$.call.cost', 25.0) WHERE seq = {seq}"
    )
    conn.close()
    line = _one_line(arena("report", db))
    assert f"event {seq} was altered (hash mismatch)" in line


def test_the_html_curves_are_held_to_the_chain_too(arena: Arena, log: Path) -> None:
    """``report --html`` draws each cohort's equity curve from its events, not from the
    closing snapshot the figures came from: an edit before the snapshot (which the figures
    never read) changed the curves with no note."""
    seq = _first_fill(log)
    conn = tampers.connect(log)
    conn.execute(
        f"UPDATE events SET payload = json_set(payload, '$.amount', 2 * (payload ->> '$.amount'))"
        f" WHERE seq = {seq}"
    )
    conn.close()
    assert arena("report", log).exit_code == 0  # the figures: the closing snapshots, proven
    line = _one_line(arena("report", log, "--html", log.parent / "page"))
    assert f"event {seq} was altered (hash mismatch)" in line
    assert not (log.parent / "page" / "index.html").exists()


def _first_fill(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        [(seq,)] = conn.execute(
            "SELECT min(seq) FROM events WHERE payload ->> '$.type' = 'OrderFilled'"
        )
    return int(seq)
