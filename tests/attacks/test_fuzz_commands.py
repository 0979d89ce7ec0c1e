"""A seeded fuzz of the commands that read files a stranger may hand over: ``arena tapes
validate``, ``tapes show``, ``tapes import polymarket`` and ``arena verify``, each fed a few
hundred mutations of a sound input, four classes of them (bit flips, truncations, huge numbers,
wrong types).

Every case is counted as one of:

* **contained**: the command answered (exit 0), or refused in one ``Error:``/``FAIL`` line
  (exit 1), counted apart (``answered``, ``refused``);
* **traceback**: anything else (an exception escaped, a second line, another exit status);
* **silent corruption**: it answered, but what it vouched for is not what the input holds: a
  tape ``validate`` passed whose content hash is not the one it records, a log ``verify``
  passed whose events are not the original's, an import whose tape does not load back.

The figures per class are printed (``-s`` shows them) and must be all contained.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import shutil
import sqlite3
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from ledger.store import EventStore
from replays.errors import TapeError
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape
from tests.conftest import Arena

SEED = 25
CASES_PER_CLASS = 25
CLASSES = ("bit flips", "truncations", "huge numbers", "wrong types")
HUGE = [b"1e999", b"-1e999", b"18446744073709551616", b"-9223372036854775809", b"NaN",
        b"1e-400", b"-0", b"4102444800", b"99999999999999999999999999999999"]  # fmt: skip
WRONG = [b'"x"', b"null", b"true", b"{}", b"[]", b"[[[[]]]]", b'{"a":1}', b'""', b"0.5"]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_VALUE = re.compile(rb'-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"(?:[^"\\]|\\.)*"|true|false|null')

Mutation = Callable[[random.Random, bytes], bytes]


def _flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _replace(pattern: re.Pattern[bytes], choices: list[bytes]) -> Mutation:
    def mutate(rng: random.Random, data: bytes) -> bytes:
        found = list(pattern.finditer(data))
        if not found:
            return data
        at = rng.choice(found)
        return data[: at.start()] + rng.choice(choices) + data[at.end() :]

    return mutate


MUTATIONS: dict[str, Mutation] = {
    "bit flips": _flip,
    "truncations": _truncate,
    "huge numbers": _replace(_NUMBER, HUGE),
    "wrong types": _replace(_VALUE, WRONG),
}


class Tally:
    """Cases per (input, class) and how each ended."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.examples: list[str] = []

    def add(self, what: str, kind: str, outcome: str, note: str = "") -> None:
        self.counts[what, kind, outcome] += 1
        if outcome in ("traceback", "silent") and len(self.examples) < 10:
            self.examples.append(f"{what} / {kind}: {outcome}: {note[:300]}")

    def table(self) -> str:
        """Per input and class: cases, contained (of which answered and refused), traceback,
        silent corruption."""
        rows = sorted({(w, k) for w, k, _ in self.counts})
        head = ("cases", "contained", "answered", "refused", "traceback", "silent")
        lines = [f"{'input':<30}{'class':<14}" + "".join(f"{h:>10}" for h in head)]
        for w, k in rows:
            got = {o: self.counts[w, k, o] for o in ("answered", "refused", "traceback", "silent")}
            figures = (sum(got.values()), got["answered"] + got["refused"], *got.values())
            lines.append(f"{w:<30}{k:<14}" + "".join(f"{n:>10}" for n in figures))
        return "\n".join(lines)

    def bad(self) -> int:
        return sum(n for (_, _, o), n in self.counts.items() if o in ("traceback", "silent"))


def _answered(result: Result, refusal: str = "Error: ") -> tuple[bool, str | None]:
    """(answered, problem): exit 0, or exit 1 with one refusal line; else what went wrong."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return False, f"{type(result.exception).__name__}: {result.exception}"
    if result.exit_code == 0:
        return True, None
    lines = result.output.strip().splitlines()
    failed = [line for line in lines if line.startswith(refusal)]
    if result.exit_code == 1 and len(failed) == 1:
        return False, None
    return False, f"exit {result.exit_code}: {result.output[-300:]}"


@pytest.fixture(scope="module")
def tally() -> Tally:
    return Tally()


def _cases(name: str) -> list[tuple[str, int]]:
    return [(kind, k) for kind in CLASSES for k in range(CASES_PER_CLASS)]


def _rng(*parts: object) -> random.Random:
    return random.Random(f"{SEED}:{':'.join(map(str, parts))}")


# -- tapes ------------------------------------------------------------------------------------


def _jsonl_bytes(tape: Tape, tmp: Path) -> tuple[bytes, str]:
    """The tape as it reads back from a file (an int volume in memory is a float there, and
    hashes so), in the readable form, and its content hash."""
    path = tmp / "base.tape.jsonl"
    save_tape(tape, path)
    reread = load_tape(path)
    save_tape(reread, path)
    return path.read_bytes(), reread.hash


def _mutated_tape(form: str, kind: str, rng: random.Random, text: bytes, folder: Path) -> Path:
    """A tape file of ``form`` whose text (the JSON lines, or a columnar tape's meta.json) or
    whose bytes were mutated."""
    path = folder / f"t{rng.randrange(10**9)}{form}"
    textual = kind in ("huge numbers", "wrong types")
    if form == ".tape.jsonl":
        path.write_bytes(MUTATIONS[kind](rng, text))
    elif form == ".tape.jsonl.gz":
        body = MUTATIONS[kind](rng, text) if textual else text
        packed = gzip.compress(body, mtime=0)
        path.write_bytes(packed if textual else MUTATIONS[kind](rng, packed))
    else:
        tape = load_tape(_write(folder / "base.tape.jsonl", text))
        save_tape(tape, path)
        if textual:
            _rewrite_meta(path, lambda meta: MUTATIONS[kind](rng, meta))
        else:
            path.write_bytes(MUTATIONS[kind](rng, path.read_bytes()))
    return path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _rewrite_meta(path: Path, change: Callable[[bytes], bytes]) -> None:
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    members["meta.json"] = change(members["meta.json"])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    path.write_bytes(buf.getvalue())


@pytest.mark.slow
@pytest.mark.parametrize("form", [".tape", ".tape.jsonl", ".tape.jsonl.gz"])
def test_tapes_validate_and_show_contain_every_mutation(
    arena: Arena, hand_tape: Tape, tmp_path: Path, form: str, tally: Tally
) -> None:
    text, original = _jsonl_bytes(hand_tape, tmp_path)
    assert arena("tapes", "validate", _write(tmp_path / "ok.tape.jsonl", text)).exit_code == 0
    for kind, k in _cases(form):
        rng = _rng(form, kind, k)
        path = _mutated_tape(form, kind, rng, text, tmp_path)
        what = f"tapes validate {form}"
        validated = arena("tapes", "validate", path)
        ok, problem = _answered(validated, refusal="FAIL ")
        if problem:
            tally.add(what, kind, "traceback", problem)
        elif ok and load_tape(path).hash != original:
            tally.add(what, kind, "silent", f"{path.name} passed with another content")
        else:
            tally.add(what, kind, "answered" if ok else "refused")
        shown, problem = _answered(arena("tapes", "show", path))
        outcome = "traceback" if problem else "answered" if shown else "refused"
        tally.add(f"tapes show {form}", kind, outcome, problem or "")
        path.unlink()
    assert tally.bad() == 0, "\n".join(tally.examples)


# -- the importer -----------------------------------------------------------------------------


MARKETS = [
    {"id": "253573", "question": "Will it rain?", "outcomes": '["Yes", "No"]',
     "clobTokenIds": '["11", "12"]', "volumeNum": 1234.5, "closed": True,
     "closedTime": "2024-01-09 00:00:00+00", "outcomePrices": '["1", "0"]',
     "startDate": "2024-01-01T00:00:00Z", "endDate": "2024-01-08T00:00:00Z",
     "category": "Weather"},
    {"id": "253574", "question": "Which colour?", "outcomes": '["red", "green", "blue"]',
     "clobTokenIds": '["21", "22", "23"]', "volume": "99.5",
     "events": [{"tags": [{"label": "All"}, {"label": "Art"}]}]},
]  # fmt: skip
HISTORIES = [
    {"token_id": "11", "history": [{"t": 1704067200, "p": 0.5}, {"t": 1704153600, "p": 0.75}]},
    {"token_id": "21", "history": [{"t": 1704067200, "p": 0.2}]},
    {"token_id": "22", "history": [{"t": 1704067200, "p": 0.3}, {"t": 1704070800, "p": 0.4}]},
    {"token_id": "23", "history": [{"t": 1704067200, "p": 0.5}]},
]


@pytest.mark.slow
@pytest.mark.parametrize("which", ["markets", "prices"])
def test_tapes_import_contains_every_mutation(
    arena: Arena, tmp_path: Path, which: str, tally: Tally
) -> None:
    markets = json.dumps(MARKETS, indent=1).encode()
    prices = b"\n".join(json.dumps(h).encode() for h in HISTORIES) + b"\n"
    out = tmp_path / "out.tape"
    for kind, k in _cases(which):
        rng = _rng(which, kind, k)
        mpath = _write(
            tmp_path / "markets.json",
            MUTATIONS[kind](rng, markets) if which == "markets" else markets,
        )
        ppath = _write(tmp_path / "prices.jsonl",
                       MUTATIONS[kind](rng, prices) if which == "prices" else prices)  # fmt: skip
        out.unlink(missing_ok=True)
        result = arena("tapes", "import", "polymarket", "--markets", mpath, "--prices", ppath,
                       "--out", out)  # fmt: skip
        ok, problem = _answered(result)
        what = f"tapes import ({which})"
        if problem:
            tally.add(what, kind, "traceback", problem)
            continue
        try:
            reread = load_tape(out, verify_hash=True) if ok else None
        except TapeError as exc:
            tally.add(what, kind, "silent", f"wrote a tape that does not load: {exc}")
            continue
        reprs = reread is not None and any("{'" in m.id or "['" in m.id for m in reread.markets)
        outcome = "silent" if reprs else "answered" if ok else "refused"
        tally.add(what, kind, outcome, "a Python repr as an id")
    assert tally.bad() == 0, "\n".join(tally.examples)


# -- the log ----------------------------------------------------------------------------------


def _events(db: Path) -> tuple[str, tuple[int, bytes]]:
    with EventStore.open(db, readonly=True) as store:
        return store.digest(), store.head()


def _mutated_log(kind: str, rng: random.Random, original: Path, db: Path) -> None:
    shutil.copy(original.with_name(original.name + ".head"), db.with_name(db.name + ".head"))
    if kind in ("bit flips", "truncations"):
        db.write_bytes(MUTATIONS[kind](rng, original.read_bytes()))
        return
    shutil.copy(original, db)  # a payload edited in place, the chain left as it was
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        (last,) = conn.execute("SELECT max(seq) FROM events").fetchone()
        seq = rng.randint(1, last)
        (payload,) = conn.execute("SELECT payload FROM events WHERE seq = ?", (seq,)).fetchone()
        changed = MUTATIONS[kind](rng, payload.encode()).decode("utf-8", "replace")
        conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (changed, seq))
    conn.close()


@pytest.mark.slow
def test_verify_contains_every_mutation(
    arena: Arena, weekly_log: Path, tmp_path: Path, tally: Tally
) -> None:
    original = _events(weekly_log)
    for kind, k in _cases("log"):
        rng = _rng("log", kind, k)
        db = tmp_path / f"log{k}.db"
        _mutated_log(kind, rng, weekly_log, db)
        result = arena("verify", db)
        ok, problem = _answered(result)
        if problem:
            tally.add("verify", kind, "traceback", problem)
        elif ok and _events(db) != original:
            tally.add("verify", kind, "silent", f"log{k}.db verified with other events")
        else:
            tally.add("verify", kind, "answered" if ok else "refused")
        for leftover in tmp_path.glob(f"log{k}.db*"):
            leftover.unlink()
    print("\n" + tally.table())
    assert tally.bad() == 0, "\n".join(tally.examples)
