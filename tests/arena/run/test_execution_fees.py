"""``--fees FILE``: a user's fee table on the command line, named in the cohort id by its hash,
recorded whole in the opening so every fee is derived again from the log alone; a table that
cannot be used is one line naming the file and the entry."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.run import execution
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.verify.fills import verify_fills
from ledger.events import CohortOpened
from ledger.fees import CATEGORIES, FeeSchedule, FeeTableError
from ledger.store import EventStore
from tests.arena.run.test_execution import crypto_tape, events, fills, scripted
from tests.conftest import Arena

FLAT = """\
# every market pays the same, forever
format = 1
name = "flat"

[[period]]
name = "always"
[period.categories]
crypto = 0.10
politics = 0.02
other = 0.05
"""

BAD = {
    "overlap": (
        '[[period]]\nname = "a"\nuntil = 2026-02-01\n[period.categories]\ncrypto = 0.1\n'
        '[[period]]\nname = "b"\nfrom = 2026-01-01\n[period.categories]\ncrypto = 0.1\n',
        "period 2 ('b'): starts 2026-01-01, before period 1 ('a') ends 2026-02-01: "
        "the periods overlap",
    ),
    "gap": (
        '[[period]]\nname = "a"\nuntil = 2026-01-01\n[period.categories]\ncrypto = 0.1\n'
        '[[period]]\nname = "b"\nfrom = 2026-02-01\n[period.categories]\ncrypto = 0.1\n',
        "period 2 ('b'): starts 2026-02-01, but period 1 ('a') ends 2026-01-01: "
        "the dates between are missing",
    ),
    "category": (
        '[[period]]\nname = "a"\n[period.categories]\ncrypto = 0.1\nsport = 0.03\n',
        "period 1 ('a'): unknown category 'sport'",
    ),
}


def table(tmp_path: Path, text: str = FLAT, name: str = "flat.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_table_written_back_is_the_same_schedule(tmp_path: Path) -> None:
    for schedule in (FeeSchedule.polymarket(), FeeSchedule.from_file(table(tmp_path))):
        again = FeeSchedule.from_mapping(json.loads(json.dumps(schedule.table())))
        assert again.schedule_hash() == schedule.schedule_hash()
        for period in schedule.periods:
            at = period.start if period.start is not None else 0
            assert again.period_at(at) == msgspec.structs.replace(period, source="")


def test_a_user_s_table_charges_its_rates_and_names_the_cohort_by_its_hash(
    tmp_path: Path,
) -> None:
    """$100 at the midpoint 0.50 of a crypto market buys 200 shares; the table's crypto rate
    0.10 makes the fee C x rate x p(1 - p) = 200 x 0.10 x 0.25 = $5.00 (Polymarket's own rate
    then, 0.07, would be $3.50)."""
    tape, t0 = crypto_tape()
    bet = [{"action": "BET", "bets": [{"market_id": "btc", "side": "YES", "amount": 100}]}]
    path = table(tmp_path)

    def config(fees: str) -> CohortConfig:
        return CohortConfig(start=datetime.fromtimestamp(t0, UTC), agents=scripted(tmp_path, bet),
                            universe=1,
                            execution="mid", fees=fees)  # fmt: skip

    log = events(tape, config(str(path)))
    [buy] = fills(log)
    assert (buy.price, buy.shares, buy.amount, buy.fee) == (0.5, 200.0, 100.0, 5.0)
    [auto] = fills(events(tape, config("auto")))
    assert auto.fee == 3.5
    opened = log[0]
    assert isinstance(opened, CohortOpened)
    digest = FeeSchedule.from_file(path).schedule_hash()
    assert opened.settings["fees"] == f"table:{digest}"
    assert execution.recorded_fees(opened.settings) == FeeSchedule.from_file(path)
    # the id hashes the table, not its path or its layout: the same rates as JSON, elsewhere
    same = table(tmp_path, json.dumps({"name": "flat", "period": [
        {"name": "always", "categories": {"other": "0.05", "politics": 0.02, "crypto": 0.1}}
    ]}), "elsewhere.json")  # fmt: skip
    assert config(str(same)).cohort_id(tape.hash) == config(str(path)).cohort_id(tape.hash)
    ids = {config(fees).cohort_id(tape.hash) for fees in (str(path), "auto", "none")}
    assert len(ids) == 3
    # verify reads the table from the opening alone, once the file is gone
    db = tmp_path / "run.db"
    with EventStore.open(db) as store:
        CohortRunner(tape, config(str(path))).run(store)
    path.unlink()
    with EventStore.open(db, readonly=True) as store:
        assert verify_fills(store, tape).derived == 1


def test_a_recorded_table_must_be_the_one_the_opening_names(tmp_path: Path) -> None:
    schedule = FeeSchedule.from_file(table(tmp_path))
    text = json.dumps(schedule.table())
    named = {"fees": f"table:{schedule.schedule_hash()}", "fee_table": text}
    assert execution.recorded_fees(named) == schedule
    cheaper = text.replace('"0.1"', '"0.01"')
    with pytest.raises(FeeTableError, match="is not the 'table:"):
        execution.recorded_fees({**named, "fee_table": cheaper})
    assert execution.recorded_fees({"fees": "auto"}) == "auto"
    assert execution.recorded_fees({}) is None


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_fee_table_is_one_line_naming_it(arena: Arena, tmp_path: Path, kind: str) -> None:
    text, said = BAD[kind]
    path = table(tmp_path, text, f"{kind}.toml")
    replay = ("replay", "--execution", "mid", "--db", tmp_path / "x.db")
    for command in (replay, ("ladder", tmp_path / "x.db")):
        result = arena(*command, "--fees", path)
        assert result.exit_code == 1, result.output
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("Error: ") and f"{path}: {said}" in line
    assert not (tmp_path / "x.db").exists()


def test_a_missing_table_and_fa_with_a_table_are_one_line(arena: Arena, tmp_path: Path) -> None:
    missing = arena("replay", "--execution", "mid", "--fees", tmp_path / "no.toml",
                    "--db", tmp_path / "x.db")  # fmt: skip
    [line] = missing.stderr.strip().splitlines()
    assert "is not auto, none or a fee table file: No such file or directory" in line
    fa = arena("replay", "--fees", table(tmp_path), "--db", tmp_path / "x.db")
    [line] = fa.stderr.strip().splitlines()
    assert "execution 'fa' charges no fee" in line


def test_the_ladder_s_fee_rung_charges_the_table(arena: Arena, tmp_path: Path) -> None:
    """The election sample's markets are politics: Polymarket charged them nothing in 2024,
    the flat table 0.02, so only with it does the fee take anything."""
    db = tmp_path / "run.db"
    assert arena("replay", "--agent", "f=favourite", "--db", db).exit_code == 0
    free = arena.json("ladder", db)["agents"][0]["took"]["the fee"]
    data = arena.json("ladder", db, "--fees", table(tmp_path))
    assert data["rungs"][-1]["fees"] == str(tmp_path / "flat.toml")
    assert free == 0.0 and data["agents"][0]["took"]["the fee"] > 0.0


@st.composite
def tables(draw: st.DrawFn) -> dict[str, object]:
    """A fee table as a file holds it: 1 to 4 periods meeting at distinct midnights, each with
    some categories at rates of up to 4 decimals."""
    n = draw(st.integers(1, 4))
    days = sorted(draw(st.sets(st.integers(0, 3000), min_size=n - 1, max_size=n - 1)))
    edges = [None, *(date(2020, 1, 1) + timedelta(days=d) for d in days), None]
    rate = st.integers(0, 10_000).map(lambda r: str(Decimal(r) / 10_000))
    periods = []
    for k in range(n):
        period: dict[str, object] = {
            "name": f"p{k}",
            "formula": draw(st.sampled_from(["min", "curve"])),
            "charged": draw(st.sampled_from(["proceeds", "collateral"])),
            "places": draw(st.integers(0, 8)),
            "rounding": draw(st.sampled_from(["down", "half_even", "half_up"])),
            "categories": draw(st.dictionaries(st.sampled_from(CATEGORIES), rate, max_size=4)),
        }
        if edges[k] is not None:
            period["from"] = str(edges[k])
        if edges[k + 1] is not None:
            period["until"] = str(edges[k + 1])
        periods.append(period)
    return {"format": 1, "name": "drawn", "period": periods}


@given(tables())
def test_any_table_written_back_is_the_same_schedule(data: dict[str, object]) -> None:
    """What the opening records of a table reads back as the table: the same hash, so the same
    cohort id, and the same rule for every category at every period's start."""
    schedule = FeeSchedule.from_mapping(data)
    again = FeeSchedule.from_mapping(json.loads(json.dumps(schedule.table())))
    assert again.schedule_hash() == schedule.schedule_hash()
    assert again.periods == schedule.periods
