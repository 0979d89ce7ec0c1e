"""``arena replay``, ``arena report`` and ``arena verify`` end to end, through click.

The scripted scenario runs on the hand tape of ``conftest.py``; its numbers are worked out in
``test_runner.test_scripted_bet_then_half_sell_then_resolution`` and repeated here as the report
must show them.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from ledger.chain import verify_chain
from ledger.events import DecisionMade, OrderFilled
from ledger.store import EventStore, link_hash
from tests.conftest import Arena

SMALL = ("--universe", "5", "--marks", "weekly")
"""Keeps a replay of the sample quick: five markets, weekly marks."""

SCRIPT = [
    {
        "action": "BET",
        "bets": [
            {"market_id": "a", "side": "YES", "amount": 1000, "probability": 0.7},
            {"market_id": "b", "side": "YES", "amount": 40},
        ],
    },
    {"action": "SELL", "sells": [{"market_id": "a", "side": "YES", "percentage": 50}]},
]

STANDING_KEYS = {
    "agent",
    "cash",
    "positions_value",
    "total_value",
    "pnl",
    "return_pct",
    "brier",
    "n_resolved",
    "win_rate",
    "n_bets",
    "n_rejected",
}
LEADERBOARD_KEYS = {
    "agent",
    "cohorts",
    "total_pnl",
    "pnl_pct",
    "brier",
    "win_rate",
    "return_mean",
    "return_ci_low",
    "return_ci_high",
}


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_line_error(result: Result) -> str:
    """The whole output of a failed command: exactly one line, starting ``Error:``."""
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def scripted_args(tape: Path, script: Path, db: Path) -> list[Any]:
    """The replay of the scripted agent and a hold on the hand tape, as command-line words."""
    return [
        "--tape", tape, "--start", "2024-01-07", "--universe", "3", "--marks", "weekly",
        "--agent", f"s=scripted:{script}?checked=false", "--agent", "h=hold", "--db", db,
    ]  # fmt: skip


def scripted_replay(
    arena: Arena, tmp_path: Path, tape: Path, *extra: str
) -> tuple[Path, dict[str, Any]]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    db = tmp_path / "run.db"
    out = ok_json(arena("replay", *scripted_args(tape, script, db), "--json", *extra))
    return db, out


def fill_seqs(db: Path) -> list[int]:
    with EventStore.open(db, readonly=True) as store:
        return [seq for seq, _, _, e in store.read_with_seq() if isinstance(e, OrderFilled)]


# -- replay --------------------------------------------------------------------------------------


def test_replay_json_twice_gives_the_same_digest(arena: Arena, tmp_path: Path) -> None:
    one = ok_json(arena("replay", *SMALL, "--db", tmp_path / "one.db", "--json"))
    two = ok_json(arena("replay", *SMALL, "--db", tmp_path / "two.db", "--json"))
    assert one["digest"] == two["digest"]
    assert [c["cohort"] for c in one["cohorts"]] == [c["cohort"] for c in two["cohorts"]]
    with EventStore.open(tmp_path / "one.db", readonly=True) as store:
        assert store.digest() == one["digest"]
        events = store.last_seq()
    # again into the same log: nothing new, the same digest
    again = ok_json(arena("replay", *SMALL, "--db", tmp_path / "one.db", "--json"))
    assert again["digest"] == one["digest"]
    with EventStore.open(tmp_path / "one.db", readonly=True) as store:
        assert store.last_seq() == events
    # 'sample' names the embedded tape, as in `arena tapes show sample`: the same cohorts
    named = ok_json(
        arena("replay", *SMALL, "--tape", "sample", "--db", tmp_path / "s.db", "--json")
    )
    assert named["digest"] == one["digest"] and named["tape"] == one["tape"]
    # and in verify's fill check
    checked = ok_json(arena("verify", tmp_path / "s.db", "--tape", "sample", "--json"))
    assert checked["ok"] and checked["fills_checked"] > 0


def test_spelling_out_the_default_cadences_changes_nothing(arena: Arena, tmp_path: Path) -> None:
    """``--decisions weekly`` must log the same bytes as leaving it out (msgspec omits a default
    by identity, and a string from argv is not the literal default)."""
    weekly, daily = (bytes(word, "ascii").decode() for word in ("weekly", "daily"))  # as argv
    implicit = ok_json(
        arena("replay", "--universe", "5", "--db", tmp_path / "implicit.db", "--json")
    )
    explicit = ok_json(
        arena(
            "replay",
            "--universe",
            "5",
            "--decisions",
            weekly,
            "--marks",
            daily,
            "--db",
            tmp_path / "explicit.db",
            "--json",
        )
    )
    assert explicit["digest"] == implicit["digest"]


def test_scripted_agent_and_its_report(arena: Arena, tmp_path: Path, hand_tape_file: Path) -> None:
    db, replayed = scripted_replay(arena, tmp_path, hand_tape_file)
    reported = ok_json(arena("report", db, "--json"))
    assert reported["cohorts"] == replayed["cohorts"]  # the report is read back from the log
    [cohort] = reported["cohorts"]
    assert cohort["start"] == "2024-01-07T00:00:00Z" and cohort["closed"]
    agents = {a["agent"]: a for a in cohort["agents"]}
    assert set(agents["s"]) >= STANDING_KEYS
    s = agents["s"]
    # cash 10,000 - 1,000 (buy) + 750 (half sold at 0.75) + 1,000 (1,000 shares win) = 10,750
    assert (s["cash"], s["positions_value"], s["total_value"], s["pnl"]) == (
        10_750.0,
        0.0,
        10_750.0,
        750.0,
    )
    assert s["return_pct"] == pytest.approx(7.5)  # 750 / 10,000, in percent
    assert s["brier"] == pytest.approx(0.36)  # one buy, confidence 0.4, won: (0.4 - 1)^2
    assert (s["n_resolved"], s["win_rate"], s["n_bets"], s["n_rejected"]) == (1, 1.0, 1, 1)
    h = agents["h"]
    assert (h["cash"], h["pnl"], h["return_pct"], h["brier"], h["n_bets"]) == (
        10_000.0,
        0.0,
        0.0,
        None,
        0,
    )
    board = {row["agent"]: row for row in reported["leaderboard"]}
    assert set(board["s"]) >= LEADERBOARD_KEYS
    assert (board["s"]["cohorts"], board["s"]["total_pnl"]) == (1, 750.0)
    assert board["s"]["pnl_pct"] == pytest.approx(7.5)
    assert (board["s"]["return_ci_low"], board["s"]["return_ci_high"]) == (None, None)  # n = 1
    assert [row["agent"] for row in reported["leaderboard"]] == ["s", "h"]  # by total P/L


def test_a_malformed_script_is_a_one_line_error(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    db = tmp_path / "run.db"
    for name, content in [
        ("bad.json", "[{not json"),
        ("shape.json", '[{"action": "BET", "bets": [{"side": "YES", "amount": 60}]}]'),
        ("action.json", '[{"action": "BUY"}]'),
    ]:
        (tmp_path / name).write_text(content)
        result = arena(
            "replay",
            "--tape",
            hand_tape_file,
            "--start",
            "2024-01-07",
            "--agent",
            f"s=scripted:{tmp_path / name}",
            "--db",
            db,
        )
        assert one_line_error(result).startswith("Error: scripted: ")
    assert "unknown action 'BUY'" in result.output
    assert not db.exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--agent", "x=no_such_strategy"), "unknown strategy 'no_such_strategy'"),
        (("--agent", "x=random?bets=-1"), "random: bad settings: bets"),
        (("--tape", "missing.tape"), "missing.tape"),
        (("--decisions", "fortnightly"), "decision_cadence: cadence 'fortnightly'"),
        # JSON has no infinity: 'inf' was written as null, and the log could not be read again
        (("--cash", "inf"), "cash: Input should be less than or equal to 1000000000000"),
        (("--cash", "1e13"), "cash: Input should be less than or equal to 1000000000000"),
        (("--seed", "-1"), "seed: Input should be greater than or equal to 0"),  # a traceback
    ],
)
def test_bad_replay_input_is_a_one_line_error(
    arena: Arena, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = arena("replay", *args, "--db", tmp_path / "run.db")
    assert message in one_line_error(result)
    assert not (tmp_path / "run.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--agent", "favourite"), "'favourite' is not NAME=SPEC"),
        (
            ("--agent", "sign?B=10"),
            "'sign?B=10' is not NAME=SPEC; name the agent, e.g. a=sign?B=10",
        ),
        (("--agent", "a=hold", "--agent", "a=random"), "agent 'a' given twice"),
    ],
)
def test_a_bad_agent_option_is_a_usage_error(
    arena: Arena, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """Usage errors: ``arena`` itself prints them as one line (tests/arena/commands/test_cli.py
    shows how)."""
    result = arena("replay", *args, "--db", tmp_path / "run.db")
    assert result.exit_code == 2
    assert f"Error: Invalid value for --agent: {message}" in result.output
    assert not (tmp_path / "run.db").exists()


def test_a_reversed_range_of_starts_is_said_to_be_reversed(arena: Arena, tmp_path: Path) -> None:
    """It said "no Sunday in 2024-11-03..2024-05-12", a range of 26 Sundays the wrong way
    round, which sent a person looking for Sundays."""
    result = arena("replay", "--starts", "2024-11-03..2024-05-12", "--db", tmp_path / "run.db")
    assert result.exit_code == 2
    assert (
        "Error: Invalid value for --starts: 2024-11-03..2024-05-12 ends before it starts; "
        "did you mean 2024-05-12..2024-11-03?"
    ) in result.output
    assert not (tmp_path / "run.db").exists()


PLUGIN = """
import time
from strategies.api import Decision, Strategy


class Sleepy(Strategy):
    calls = 0

    def decide(self, view):
        Sleepy.calls += 1
        if Sleepy.calls == 1:
            time.sleep(5)
        return Decision.hold("awake")
"""


def test_the_timeout_option_interrupts_a_slow_plugin(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    plugin = tmp_path / "sleepy.py"
    plugin.write_text(PLUGIN)
    db = tmp_path / "run.db"
    ok_json(
        arena(
            "replay",
            "--tape",
            hand_tape_file,
            "--start",
            "2024-01-07",
            "--universe",
            "3",
            "--agent",
            f"z={plugin}:Sleepy",
            "--timeout",
            "0.05",
            "--db",
            db,
            "--json",
        )
    )
    with EventStore.open(db, readonly=True) as store:
        made = [e for e in store.read() if isinstance(e, DecisionMade)]
    assert made[0].error is not None
    assert made[0].error.splitlines()[0] == "DecisionTimeout: decision took longer than 0.05 s"
    assert {(d.error, d.reasoning) for d in made[1:]} == {(None, "awake")}


def test_a_plugin_whose_setup_fails_sits_the_cohort_out(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    plugin = tmp_path / "broken.py"
    plugin.write_text(
        "from strategies.api import Strategy\n\n\n"
        "class Broken(Strategy):\n"
        "    def setup(self, context):\n"
        "        raise OSError('model file missing')\n"
    )
    result = arena(
        "replay",
        "--tape",
        hand_tape_file,
        "--start",
        "2024-01-07",
        "--agent",
        f"b={plugin}:Broken",
        "--agent",
        "h=hold",
        "--db",
        tmp_path / "run.db",
    )
    assert result.exit_code == 0, result.output
    with EventStore.open(tmp_path / "run.db", readonly=True) as store:
        made = [e for e in store.read() if isinstance(e, DecisionMade) and e.agent == "b"]
    assert [d.error.splitlines()[0] for d in made if d.error] == [
        "sat out the cohort: setup failed: OSError: model file missing"
    ]
    assert len(made) == 1


def test_tables_for_people(arena: Arena, tmp_path: Path, hand_tape_file: Path) -> None:
    db, replayed = scripted_replay(arena, tmp_path, hand_tape_file)
    result = arena("report", db)
    assert result.exit_code == 0
    assert replayed["cohorts"][0]["cohort"] in result.output
    assert "10,750" in result.output and "+750.00" in result.output and "+7.50%" in result.output
    again = arena("replay", *scripted_args(hand_tape_file, tmp_path / "script.json", db))
    assert again.exit_code == 0
    assert "(0 new)" in again.output and f"digest {replayed['digest']}" in again.output


def test_many_starts_in_parallel_give_the_serial_log(arena: Arena, tmp_path: Path) -> None:
    args = (
        "--starts",
        "2024-05-12..2024-05-26",
        *SMALL,
        "--agent",
        "r=random",
        "--agent",
        "h=hold",
        "--json",
    )
    serial = ok_json(arena("replay", *args, "--jobs", "1", "--db", tmp_path / "serial.db"))
    parallel = ok_json(arena("replay", *args, "--jobs", "2", "--db", tmp_path / "parallel.db"))
    assert parallel["digest"] == serial["digest"]
    assert [c["start"][:10] for c in serial["cohorts"]] == [
        "2024-05-12",
        "2024-05-19",
        "2024-05-26",
    ]
    reported = ok_json(arena("report", tmp_path / "parallel.db", "--json"))
    assert reported["cohorts"] == serial["cohorts"]
    board = {row["agent"]: row for row in reported["leaderboard"]}
    r = board["r"]
    assert r["cohorts"] == 3
    returns = [
        a["return_pct"] for c in reported["cohorts"] for a in c["agents"] if a["agent"] == "r"
    ]
    assert r["return_mean"] == pytest.approx(sum(returns) / 3)
    assert r["return_ci_low"] < r["return_mean"] < r["return_ci_high"]
    assert r["total_pnl"] == pytest.approx(sum(returns) / 100 * 10_000)


def test_report_of_an_unknown_cohort_or_a_missing_file(arena: Arena, tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    EventStore.open(db).close()
    assert "has no cohort nope" in one_line_error(arena("report", db, "--cohort", "nope"))
    assert arena("report", tmp_path / "missing.db").exit_code != 0


# -- verify --------------------------------------------------------------------------------------


def raw(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, isolation_level=None)


def test_verify_passes_on_a_fresh_log(arena: Arena, tmp_path: Path, hand_tape_file: Path) -> None:
    db, _ = scripted_replay(arena, tmp_path, hand_tape_file)
    with EventStore.open(db, readonly=True) as store:
        events = store.last_seq()
    with EventStore.open(db, readonly=True) as store:
        head = f"{events}:{store.head()[1].hex()}"
    result = ok_json(arena("verify", db, "--json"))
    assert result == {
        "ok": True, "events": events, "cohorts": 1, "closed_cohorts_checked": 1,
        "snapshots_checked": 1, "snapshots_written": 0, "open_cohorts": [], "head": head,
        "head_checked_against": "head file",
    }  # fmt: skip
    plain = arena("verify", db)
    assert plain.exit_code == 0 and plain.output.startswith("OK ")


def test_the_database_itself_refuses_edits(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    db, _ = scripted_replay(arena, tmp_path, hand_tape_file)
    with raw(db) as conn:
        for sql in (
            "UPDATE events SET payload = payload WHERE seq = 1",
            "DELETE FROM events WHERE seq = 1",
        ):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(sql)


def test_verify_names_an_edited_payload(arena: Arena, tmp_path: Path, hand_tape_file: Path) -> None:
    db, _ = scripted_replay(arena, tmp_path, hand_tape_file)
    buy = fill_seqs(db)[0]
    with raw(db) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute(
            "UPDATE events SET payload = json_set(payload, '$.amount', 900.0) WHERE seq = ?", (buy,)
        )
    result = arena("verify", db)
    assert f"event {buy} was altered" in one_line_error(result)  # the seq, named once
    assert ok_json_failure(arena("verify", db, "--json"))["first_bad_seq"] == buy


def ok_json_failure(result: Result) -> dict[str, Any]:
    assert result.exit_code == 1
    out: dict[str, Any] = json.loads(result.stdout)
    assert out["ok"] is False
    return out


def test_verify_names_the_row_after_a_deleted_one(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    db, _ = scripted_replay(arena, tmp_path, hand_tape_file)
    with raw(db) as conn:
        conn.execute("DROP TRIGGER events_no_delete")
        conn.execute("DELETE FROM events WHERE seq = 5")
    # the chain breaks at the first surviving row after the hole
    assert "event 6 does not link to its predecessor" in one_line_error(arena("verify", db))
    assert ok_json_failure(arena("verify", db, "--json"))["first_bad_seq"] == 6


def test_verify_catches_an_edit_whose_hash_chain_was_rebuilt(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    """A forger who re-hashes every row after the edit still fails the checking fold."""
    db, _ = scripted_replay(arena, tmp_path, hand_tape_file)
    buy, sell = fill_seqs(db)
    with raw(db) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        payload = conn.execute("SELECT payload FROM events WHERE seq = ?", (buy,)).fetchone()[0]
        edited = json.loads(payload) | {"amount": 900.0}  # paid $900 instead of $1,000
        conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (json.dumps(edited), buy))
        rows = conn.execute(
            "SELECT seq, stream, CAST(payload AS BLOB) FROM events_view ORDER BY seq"
        ).fetchall()
        prev = bytes(32)
        for seq, stream, body in rows:
            prev = link_hash(prev, stream, body)
            conn.execute("UPDATE events SET hash = ? WHERE seq = ?", (prev, seq))
    # the chain is whole again; the sell then starts from cash 9,000 while the log implies 9,100
    with EventStore.open(db, readonly=True) as store:
        assert verify_chain(store) == len(rows)
    message = one_line_error(arena("verify", db))
    assert message == (
        f"Error: {db}: event {sell} starts a fill from cash 9000.0 but the log implies 9100.0"
    )


def test_a_range_skips_the_sundays_with_nothing_to_trade(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    """On the hand tape every market has resolved by 2024-01-28: that week is skipped, named."""
    db = tmp_path / "run.db"
    args = ("--tape", hand_tape_file, "--starts", "2024-01-07..2024-01-28", "--universe", "3",
            "--agent", "h=hold", "--jobs", "1", "--db", db)  # fmt: skip
    out = ok_json(arena("replay", *args, "--json"))
    assert out["skipped_starts"] == ["2024-01-28T00:00:00Z"]
    with EventStore.open(db, readonly=True) as store:
        assert [s[:10] for s in store.streams()] == ["2024-01-07", "2024-01-14", "2024-01-21"]
    shown = arena("replay", *args).output
    assert "skipped 1 start(s) with no open, priced market: 2024-01-28" in shown


def test_a_start_with_nothing_to_trade_is_refused_before_anything_runs(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    db = tmp_path / "run.db"
    result = arena("replay", "--tape", hand_tape_file, "--start", "2024-01-28", "--db", db)
    assert "is open with a price at 2024-01-28 00:00 UTC" in one_line_error(result)
    assert not db.exists()
    result = arena("replay", "--tape", hand_tape_file, "--starts", "2024-01-28..2024-02-04",
                   "--db", db)  # fmt: skip
    assert "is open with a price at 2024-01-28 00:00, 2024-02-04 00:00 UTC" in one_line_error(
        result
    )
    assert not db.exists()
