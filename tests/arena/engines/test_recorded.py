"""A cohort recorded away from the log, then delivered to it: the same rows as a direct run,
and a stored prefix is checked and completed, never duplicated."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.engines.recorded import deliver, finished, record_cohort
from arena.run.runner import CohortRunner
from ledger.errors import LedgerError
from ledger.store import EventStore
from replays.tape import Tape
from tests.conftest import hand_config

AGENTS = {"fav": "favourite", "coin": "random?bets=2"}


def rows(db: Path) -> list[tuple[object, ...]]:
    with EventStore.open(db, readonly=True) as store:
        events = [(seq, stream, version) for seq, stream, version, _ in store.read_with_seq()]
        snaps = [(s.stream, s.version, s.seq, s.chain_hash, s.closing, s.hash)
                 for s in store.snapshots()]  # fmt: skip
        return [store.head(), store.digest(), events, snaps]


def test_a_delivered_recording_is_the_direct_run_row_for_row(
    tmp_path: Path, hand_tape: Tape
) -> None:
    configs = [hand_config(AGENTS), hand_config(AGENTS, seed=1)]
    with EventStore.open(tmp_path / "direct.db") as store:
        for config in configs:
            CohortRunner(hand_tape, config).run(store)
    with EventStore.open(tmp_path / "delivered.db") as store:
        for config in configs:
            done = deliver(store, record_cohort(hand_tape, config))
            assert done.appended == done.events > 0
    assert rows(tmp_path / "delivered.db") == rows(tmp_path / "direct.db")


def test_a_stored_prefix_is_checked_and_completed(tmp_path: Path, hand_tape: Tape) -> None:
    recorded = record_cohort(hand_tape, hand_config(AGENTS))
    with EventStore.open(tmp_path / "whole.db") as store:
        deliver(store, recorded)
    with EventStore.open(tmp_path / "cut.db") as store:
        store.append(recorded.cohort, recorded.events[:5], expected_version=0)
        assert finished(store, recorded.cohort) is None  # no closing snapshot yet
        done = deliver(store, recorded)
        assert (done.events, done.appended) == (len(recorded.events), len(recorded.events) - 5)
        assert finished(store, recorded.cohort) == done.__class__(done.cohort, done.events, 0)
        again = deliver(store, recorded)  # nothing left to add, nothing added
        assert again.appended == 0
    assert rows(tmp_path / "cut.db") == rows(tmp_path / "whole.db")


def test_a_stored_stream_that_differs_is_refused(tmp_path: Path, hand_tape: Tape) -> None:
    recorded = record_cohort(hand_tape, hand_config(AGENTS))
    other = record_cohort(hand_tape, hand_config(AGENTS, seed=1))
    with EventStore.open(tmp_path / "x.db") as store:
        # the other seed's events under this cohort's stream: the coin flips differ
        store.append(recorded.cohort, other.events, expected_version=0)
        with pytest.raises(LedgerError, match="diverges from this replay at version"):
            deliver(store, recorded)
