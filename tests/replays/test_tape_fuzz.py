"""Fuzzing both tape forms: whatever the bytes, ``load_tape`` returns a sound tape or raises
``TapeError`` with one line naming the file, and never anything else.

Every mutation starts from a valid tape (binary and multi-outcome markets, a win and a void),
so most inputs are almost right, which is where loaders break: a field deleted, a value of the
wrong type, a number too big, negative or not a number, a duplicated key, a truncation, random
bytes. The columnar form is fuzzed the same way through its members (headers, dtypes, shapes,
lengths, truncation, bombs), within a 1 MiB budget so no example can allocate much.
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from replays.errors import TapeError
from replays.importers import import_polymarket
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape

LIMIT = 1 << 20
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
HOSTILE_NUMBERS = [2**70, 2**63, -(2**63) - 1, -1, 0, 4_102_444_800, 1e308, -0.0, 1.5, 10**11]


def base_tape() -> Tape:
    markets = [
        MarketInfo(id="bin", question="Yes or no?", outcomes=("Yes", "No"), volume=10.0,
                   open_ts=1_000, close_ts=5_000, end_ts=4_800, covered_until=4_000,
                   volume_history=((1_000, 2.5), (3_000, 10.0))),
        MarketInfo(id="no-first", question="Listed NO first", outcomes=("No", "Yes")),
        MarketInfo(id="three", question="Which?", outcomes=("A", "B", "C"), volume=3.5),
    ]  # fmt: skip
    series = {
        "bin": (np.array([1_000, 2_000, 3_000]), np.array([0.25, 0.5, 0.75])),
        "no-first": (np.array([1_500]), np.array([0.125])),
        "three": (np.array([1_000, 4_000]), np.array([[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]])),
    }
    resolutions = [
        Resolution(market="bin", ts=5_000, winner="Yes"),
        Resolution(market="three", ts=4_500, winner=None),
    ]
    return Tape.from_series(markets, series, resolutions)


@pytest.fixture(scope="module")
def readable_lines(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    path = tmp_path_factory.mktemp("base") / "base.tape.jsonl"
    save_tape(base_tape(), path)
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def columnar_members(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    path = tmp_path_factory.mktemp("base") / "base.tape"
    save_tape(base_tape(), path)
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def loads_or_refuses(path: Path) -> None:
    """The property: a sound tape, or one ``TapeError`` line starting with the file's name."""
    try:
        tape = load_tape(path, verify_hash=True, max_bytes=LIMIT)
    except TapeError as exc:
        message = str(exc)
        assert message.startswith(str(path)) and "\n" not in message, message
        event("refused")
        return
    event("loaded")
    again = path.with_name("again.tape")
    save_tape(tape, again)
    assert load_tape(again).hash == tape.hash
    for m in range(len(tape.markets)):
        values = tape.values(m)
        assert values.shape == (tape.times(m).size, len(tape.markets[m].outcomes))
        assert np.all((values >= 0) & (values <= 1))


# -- mutations of JSON values ---------------------------------------------------------------------

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.sampled_from(HOSTILE_NUMBERS)
)  # fmt: skip
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


def _slots(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document a mutation can touch (the root excluded)."""
    out = [path] if path else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _slots(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _slots(value, (*path, i))
    return out


def _mutate(doc: Any, data: st.DataObject) -> Any:
    """One structural mutation: delete, replace with any value or a hostile number, or
    duplicate a list element."""
    doc = json.loads(json.dumps(doc))
    slots = _slots(doc)
    if not slots:
        return data.draw(json_values)
    path = data.draw(st.sampled_from(slots))
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    key = path[-1]
    action = data.draw(st.sampled_from(["delete", "replace", "number", "duplicate"]))
    if action == "delete":
        del parent[key]
    elif action == "replace":
        parent[key] = data.draw(json_values)
    elif action == "number":
        parent[key] = data.draw(st.sampled_from(HOSTILE_NUMBERS) | st.floats())
    elif isinstance(parent, list):
        parent.insert(key, parent[key])
    else:
        parent[key] = [parent[key], parent[key]]
    return doc


def _damage_bytes(raw: bytes, data: st.DataObject) -> bytes:
    """Byte-level damage: truncation, random bytes over or into the text, a duplicated key."""
    action = data.draw(st.sampled_from(["none", "truncate", "overwrite", "insert", "dupkey"]))
    if action == "none" or not raw:
        return raw
    at = data.draw(st.integers(0, len(raw) - 1))
    if action == "truncate":
        return raw[:at]
    junk = data.draw(st.binary(min_size=1, max_size=8))
    if action == "overwrite":
        return raw[:at] + junk + raw[at + len(junk) :]
    if action == "insert":
        return raw[:at] + junk + raw[at:]
    return raw.replace(b'{"market":', b'{"market":"bin","market":', 1)


# -- the readable form ----------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_fuzz_readable_form(tmp_path: Path, readable_lines: list[Any], data: st.DataObject) -> None:
    lines = list(readable_lines)
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = _mutate(lines[i], data)
    raw = "\n".join(json.dumps(line) for line in lines).encode() + b"\n"
    raw = _damage_bytes(raw, data)
    compress = data.draw(st.booleans())
    path = tmp_path / ("t.tape.jsonl.gz" if compress else "t.tape.jsonl")
    if compress:
        raw = _damage_bytes(gzip.compress(raw, mtime=0), data)
    path.write_bytes(raw)
    loads_or_refuses(path)


def test_the_unmutated_tapes_load(tmp_path: Path, readable_lines: list[Any]) -> None:
    """The property is not vacuous: the fuzzers' starting points are sound tapes."""
    path = tmp_path / "t.tape.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in readable_lines))
    assert load_tape(path, verify_hash=True).hash == base_tape().hash


# -- the columnar form ----------------------------------------------------------------------------


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


arrays = st.builds(
    lambda dtype, shape, fill: np.full(shape, fill).astype(dtype),
    st.sampled_from(["<i8", "<f8", ">i8", "<f4", "<i4", "|b1", "<u8"]),
    st.sampled_from([(0,), (1,), (3,), (4,), (6,), (7,), (2, 3), (1 << 18,), ()]),
    st.sampled_from([0, 1, 1_000, 2**62, -1, 0.5]),
)


def _damage_member(name: str, member: bytes, data: st.DataObject) -> bytes:
    """A member replaced by another array, its header corrupted, or its bytes damaged."""
    action = data.draw(st.sampled_from(["array", "header", "bytes", "json"]))
    if action == "array":
        return _npy(data.draw(arrays))
    if action == "header" and name.endswith(".npy"):
        at = data.draw(st.integers(0, 127))
        junk = data.draw(st.binary(min_size=1, max_size=6))
        return member[:at] + junk + member[at + len(junk) :]
    if action == "json" and name == "meta.json":
        return json.dumps(_mutate(json.loads(member), data)).encode()
    return _damage_bytes(member, data)


@FUZZ
@given(data=st.data())
def test_fuzz_columnar_form(
    tmp_path: Path, columnar_members: dict[str, bytes], data: st.DataObject
) -> None:
    members = dict(columnar_members)
    names = sorted(members)
    for name in data.draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
        if data.draw(st.booleans()):
            members[name] = _damage_member(name, members[name], data)
        else:
            del members[name]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, member in members.items():
            zf.writestr(name, member)
    path = tmp_path / "t.tape"
    path.write_bytes(_damage_bytes(buf.getvalue(), data))
    loads_or_refuses(path)


# -- the importers' raw shapes --------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_fuzz_polymarket_import(tmp_path: Path, data: st.DataObject) -> None:
    """Gamma objects and CLOB histories, mutated the same way: an import gives a tape that
    saves and loads again, or one ``TapeError`` line; never a traceback."""
    from tests.replays.test_tape_import import gamma, write_inputs

    markets = [
        gamma(),
        gamma(id="4", outcomes='["A", "B", "C"]', clobTokenIds='["a", "b", "c"]',
              outcomePrices='["0", "0", "1"]', category="Sports"),
    ]  # fmt: skip
    histories = [
        {"token_id": t, "history": [{"t": 1704067200, "p": 0.25}, {"t": 1704070800, "p": 0.5}]}
        for t in ("111", "a", "b", "c")
    ]
    doc = [markets, histories]
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _mutate(doc, data)
    if not (isinstance(doc, list) and len(doc) == 2 and isinstance(doc[1], list)):
        doc = [doc, histories]
    mpath, ppath = write_inputs(tmp_path, doc[0], doc[1])
    try:
        result = import_polymarket(mpath, ppath)
    except TapeError as exc:
        assert "\n" not in str(exc)
        event("refused")
        return
    event("imported")
    save_tape(result.tape, tmp_path / "t.tape.jsonl")
    assert load_tape(tmp_path / "t.tape.jsonl", verify_hash=True).hash == result.tape.hash
