"""``arena verify --tape``: a log with a chain intact but fills the tape and rules could not
have produced fails, naming the first such fill by sequence number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arena.run.runner import CohortRunner
from ledger.events import OrderFilled
from ledger.rules import RULES, RuleSet
from ledger.store import EventStore
from replays.synthetic import random_walk_tape
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape
from strategies.api import Bet, Decision, Strategy, View
from tests.conftest import Arena, hand_config


class Buys(Strategy):
    """$100 of YES on market a at every decision, and $3,000 of b's NO at the second one."""

    def decide(self, view: View) -> Decision:
        bets = [Bet(market="a", side="YES", amount=100)]
        if view.week == 2:
            bets.append(Bet(market="b", side="NO", amount=3_000))
        return Decision(bets=bets)


def run(db: Path, tape_file: Path) -> None:
    """Replay the tape as ``arena replay`` would: from its file."""
    with EventStore.open(db) as store:
        config = hand_config({"x": "hold"})
        CohortRunner(load_tape(tape_file), config, strategies={"x": Buys()}).run(store)


def fill_seqs(db: Path) -> list[int]:
    with EventStore.open(db, readonly=True) as store:
        return [seq for seq, _, _, e in store.read_with_seq() if isinstance(e, OrderFilled)]


def test_an_honest_log_passes(
    arena: Arena, tmp_path: Path, hand_tape: Tape, hand_tape_file: Path
) -> None:
    run(tmp_path / "run.db", hand_tape_file)
    result = arena("verify", tmp_path / "run.db", "--tape", hand_tape_file, "--json")
    assert result.exit_code == 0, result.output
    # a at weeks 1 and 2 (it has resolved by week 3); b's $3,000 is refused (25% of $9,800)
    assert json.loads(result.output)["fills_checked"] == 2 == len(fill_seqs(tmp_path / "run.db"))


def test_a_patched_broker_is_caught_at_its_first_fill(
    arena: Arena,
    tmp_path: Path,
    hand_tape: Tape,
    hand_tape_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plugin that halves the prices the broker quotes writes a log whose chain is intact."""
    from ledger.rules import Broker

    real = Broker._side_price
    monkeypatch.setattr(Broker, "_side_price", lambda s, m, i, q: 0.5 * real(s, m, i, q))  # type: ignore[operator]
    db = tmp_path / "run.db"
    run(db, hand_tape_file)
    monkeypatch.undo()  # verify with the real rules
    plain = arena("verify", db, "--json")
    assert plain.exit_code == 0  # the chain and the fold see nothing wrong
    result = arena("verify", db, "--tape", hand_tape_file, "--json")
    assert result.exit_code == 1
    failure = json.loads(result.output)
    assert failure["first_bad_seq"] == fill_seqs(db)[0]
    assert failure["error"].endswith(
        "fills YES of market a at 0.25, but the tape's price at 1704585600 is 0.5"
    )


def test_a_broken_rule_is_caught(
    arena: Arena,
    tmp_path: Path,
    hand_tape: Tape,
    hand_tape_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker that lets v1 bets reach 90% of cash fills b's $3,000 (above 25% of $9,800)."""
    monkeypatch.setitem(RULES, "v1", RuleSet(version="v1", max_fraction=0.9))
    db = tmp_path / "run.db"
    run(db, hand_tape_file)
    monkeypatch.undo()  # verify with the real rules
    result = arena("verify", db, "--tape", hand_tape_file, "--json")
    failure = json.loads(result.output)
    assert failure["first_bad_seq"] == fill_seqs(db)[2]  # a, then a again, then b
    assert failure["error"].endswith("buys for 3000.0, above the 2450.0 the v1 rules allow")


def test_a_log_of_another_tape_is_refused(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    run(tmp_path / "run.db", hand_tape_file)
    other = tmp_path / "other.tape"
    save_tape(random_walk_tape(2, 5, seed=1), other)
    result = arena("verify", tmp_path / "run.db", "--tape", other, "--json")
    failure = json.loads(result.output)
    assert failure["first_bad_seq"] == 1
    assert f"on tape {load_tape(hand_tape_file).hash[:12]}, not " in failure["error"]
