"""A worker's cohort keeps what it committed in a journal beside the log, so a killed run's
worker picks up where it was, asking no model again; the journal is gone once the log holds
the cohort, and the log is the one a direct run writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.engines.base import TapeSource
from arena.engines.driver import replay_cohorts
from arena.engines.recorded import deliver, journal_folder, journal_path, record_cohort
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import ModelCalled
from ledger.store import EventStore
from replays.tape import Tape
from strategies.llm.connection import Connection
from tests.conftest import hand_config
from tests.llm_server import FakeLLM

AGENTS = {"fav": "favourite", "coin": "random?bets=2"}


def settings(folder: Path, agents: dict[str, str], after: float = 0.0) -> RunSettings:
    options = RunOptions(commit_every=after)
    return RunSettings(cohort=hand_config(agents), options=options, journal=str(folder))


def stream(db: Path) -> tuple[str, list[object]]:
    with EventStore.open(db, readonly=True) as store:
        return store.digest(), list(store.read())


def test_a_journaled_recording_delivers_the_direct_run_and_leaves_no_journal(
    tmp_path: Path, hand_tape: Tape
) -> None:
    folder = tmp_path / "run.db.journal"
    recorded = record_cohort(hand_tape, settings(folder, AGENTS))
    journal = journal_path(folder, recorded.cohort)
    assert stream(journal)[1] == recorded.events  # every commit reached the journal
    with EventStore.open(tmp_path / "run.db") as store:
        deliver(store, recorded)
    assert not folder.exists()
    with EventStore.open(tmp_path / "direct.db") as store:
        CohortRunner(hand_tape, hand_config(AGENTS)).run(store)
    assert stream(tmp_path / "run.db") == stream(tmp_path / "direct.db")


def test_a_fast_cohort_writes_no_journal(tmp_path: Path, hand_tape: Tape) -> None:
    """Done before ``commit_every`` passed: the recording stays in memory only."""
    folder = tmp_path / "run.db.journal"
    record_cohort(hand_tape, settings(folder, AGENTS, after=3600))
    assert not folder.exists()


def test_a_journal_left_by_a_killed_worker_is_the_stored_prefix(
    tmp_path: Path, hand_tape: Tape
) -> None:
    """A journal holding the first events (a worker killed there): the next worker checks
    them, records the rest, and journals them after them."""
    whole = record_cohort(hand_tape, hand_config(AGENTS))
    folder = tmp_path / "run.db.journal"
    journal = journal_path(folder, whole.cohort)
    folder.mkdir()
    with EventStore.open(journal) as store:
        store.append(whole.cohort, whole.events[:7], expected_version=0)
    resumed = record_cohort(hand_tape, settings(folder, AGENTS))
    assert resumed.events == whole.events
    assert stream(journal)[1] == whole.events


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    for name in Connection.model_fields:
        monkeypatch.delenv(f"ARENA_LLM_{name.upper()}", raising=False)
    with FakeLLM() as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", "")
        yield fake


def test_a_journaled_llm_cohort_is_not_asked_again(
    tmp_path: Path, hand_tape: Tape, server: FakeLLM
) -> None:
    """A worker that recorded an LLM cohort into its journal and never delivered it (killed
    before the driver took it): the next worker answers every question from the journal."""
    folder = tmp_path / "run.db.journal"
    agents = {"llm": "llm:test/model"}
    first = record_cohort(hand_tape, settings(folder, agents))
    asked = len(server.received)
    assert asked == sum(isinstance(e, ModelCalled) for e in first.events) > 0
    again = record_cohort(hand_tape, settings(folder, agents))
    assert len(server.received) == asked  # nothing sent twice
    assert again.events == first.events


def test_workers_journal_and_the_driver_cleans_up(tmp_path: Path, hand_tape_file: Path) -> None:
    """Two cohorts on two workers, every commit journaled: the log is the one a run in this
    process writes, and no journal is left beside it."""
    source = TapeSource.load(hand_tape_file)
    configs = [hand_config(AGENTS), hand_config(AGENTS, seed=1)]
    replay_cohorts(source, configs, tmp_path / "workers.db", RunOptions(jobs=2, commit_every=0))
    assert not journal_folder(tmp_path / "workers.db").exists()
    replay_cohorts(source, configs, tmp_path / "here.db", RunOptions(jobs=1))
    assert stream(tmp_path / "workers.db") == stream(tmp_path / "here.db")
