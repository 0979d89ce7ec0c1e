"""A worker's cohort keeps what it committed in a journal beside the log, so a killed run's
worker picks up where it was, asking no model again; the journal is gone once the log holds
the cohort, and the log is the one a direct run writes."""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
from collections.abc import Iterator
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from arena.engines.base import CohortWork, TapeSource
from arena.engines.driver import replay_cohorts
from arena.engines.local import LocalEngine
from arena.engines.ray import RayEngine
from arena.engines.recorded import (
    RecordedCohort,
    deliver,
    hold_journal,
    journal_folder,
    journal_path,
    record_cohort,
)
from arena.errors import ArenaError
from arena.run.plan import PlannedCohort, plan_cohort
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.errors import LedgerError
from ledger.events import Event as LogEvent
from ledger.events import ModelCalled
from ledger.store import EventStore
from replays.tape import Tape
from strategies.llm.connection import Connection
from tests.conftest import hand_config, make_hand_tape
from tests.llm_server import HOLD, FakeLLM, Received

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


def test_an_llm_cohort_journals_each_answer_before_it_asks_again(
    tmp_path: Path, hand_tape: Tape, server: FakeLLM
) -> None:
    """However long ``commit_every`` (an hour here), a cohort whose agent asks a model has
    each decision's call in its journal by the time it asks its next question: a worker
    killed between two decisions loses no answer (a model answering in 0.4 s, faster than the
    default two seconds, had its last answers asked again on the resume)."""
    folder = tmp_path / "run.db.journal"
    agents = {"llm": "llm:test/model"}
    journal = journal_path(folder, hand_config(agents).cohort_id(hand_tape.hash))
    journaled: list[int] = []

    def count_then_answer(_: Received) -> str:
        if not journal.exists():
            journaled.append(0)
        else:
            with EventStore.open(journal, readonly=True) as store:
                journaled.append(sum(isinstance(e, ModelCalled) for e in store.read()))
        return HOLD

    server.responder = count_then_answer
    recorded = record_cohort(hand_tape, settings(folder, agents, after=3600))
    assert journaled == [0, 1, 2]
    assert stream(journal)[1] == recorded.events[: len(stream(journal)[1])]


def test_workers_journal_and_the_driver_cleans_up(tmp_path: Path, hand_tape_file: Path) -> None:
    """Two cohorts on two workers, every commit journaled: the log is the one a run in this
    process writes, and no journal is left beside it."""
    source = TapeSource.load(hand_tape_file)
    configs = [hand_config(AGENTS), hand_config(AGENTS, seed=1)]
    replay_cohorts(source, configs, tmp_path / "workers.db", RunOptions(jobs=2, commit_every=0))
    assert not journal_folder(tmp_path / "workers.db").exists()
    replay_cohorts(source, configs, tmp_path / "here.db", RunOptions(jobs=1))
    assert stream(tmp_path / "workers.db") == stream(tmp_path / "here.db")


def _hold(journal: str, written: int, ready: Event, go: Event) -> None:
    """Another process's recording of the hand cohort (a worker of a run cut short, still
    ending): it journals the first ``written`` events, says so, and, once told to go on, four
    more before it ends."""
    whole = record_cohort(make_hand_tape(), hand_config(AGENTS))
    recording = RecordedCohort(whole.cohort, Path(journal))
    recording.append(whole.cohort, whole.events[:written], expected_version=0)
    ready.set()
    go.wait(60)
    recording.append(whole.cohort, whole.events[written : written + 4], expected_version=written)
    recording.close()


@pytest.fixture
def holder(tmp_path: Path, hand_tape: Tape) -> Iterator[tuple[Path, list[LogEvent], Event]]:
    """A process holding the hand cohort's journal, with three events in it; its ``go``."""
    whole = record_cohort(hand_tape, hand_config(AGENTS))
    journal = journal_path(tmp_path / "run.db.journal", whole.cohort)
    context = multiprocessing.get_context("spawn")
    ready, go = context.Event(), context.Event()
    process = context.Process(target=_hold, args=(str(journal), 3, ready, go))
    process.start()
    try:
        assert ready.wait(60), "the holder did not start"
        yield journal, whole.events, go
        go.set()
        process.join(60)
        assert process.exitcode == 0
    finally:
        if process.is_alive():
            process.kill()


def test_a_journal_another_process_writes_is_waited_for_then_read_whole(
    holder: tuple[Path, list[LogEvent], Event],
) -> None:
    """The race a resume once lost ("concurrent append"): started while the cut run's worker
    still wrote the journal, this recording waits for it to end and takes all it wrote (the
    three events there when it began waiting and the four written after)."""
    journal, events, go = holder
    threading.Timer(0.5, go.set).start()
    recording = RecordedCohort(events[0].cohort, journal)
    try:
        assert recording.events == events[:7]
    finally:
        recording.close()


def test_a_journal_held_past_the_wait_is_one_line_naming_it(
    holder: tuple[Path, list[LogEvent], Event],
) -> None:
    journal, events, _ = holder
    with pytest.raises(ArenaError) as raised:
        RecordedCohort(events[0].cohort, journal, wait=0.3)
    assert str(raised.value) == (
        f"journal {journal}: another run is still writing it (its workers may be ending); "
        "run the command again once it has ended"
    )


def test_a_ray_run_cut_short_resumes_from_its_journals_asking_no_model_again(
    tmp_path: Path, hand_tape_file: Path, server: FakeLLM, ray_cluster: None
) -> None:
    """Ray tasks journal as local workers do: two LLM cohorts recorded on Ray and never
    delivered (the driver killed first) leave their journals; the same run again asks the
    model nothing, logs what the cut run recorded (its answers, latencies and all), and leaves
    no journal."""
    source = TapeSource.load(hand_tape_file)
    agents = {"llm": "llm:test/model"}
    planned = [PlannedCohort(c, plan_cohort(source.tape, c))
               for c in (hand_config(agents), hand_config(agents, seed=1))]  # fmt: skip
    db = tmp_path / "run.db"
    options = RunOptions(engine="ray", commit_every=0)
    cut = RayEngine().run(CohortWork(source, options, journal_folder(db)), planned)
    recorded = [fetch() for _, fetch in cut]
    asked = len(server.received)
    assert asked == sum(isinstance(e, ModelCalled) for r in recorded for e in r.events) > 0
    assert all(journal_path(journal_folder(db), r.cohort).exists() for r in recorded)
    replay_cohorts(source, planned, db, options)
    assert len(server.received) == asked  # nothing sent twice
    assert not journal_folder(db).exists()
    with EventStore.open(db, readonly=True) as store:
        assert [list(store.read(stream=r.cohort)) for r in recorded] == [r.events for r in recorded]


def resume_after_the_first_cohort(tmp_path: Path, tape: Path, server: FakeLLM, engine: str) -> None:
    """A run of two LLM cohorts cut short once the driver had appended the first (written
    here by a run of the first alone), run again on ``engine``'s workers: the first cohort's
    stored answers are served again (asked again, their latencies alone made the log
    "diverge", and the resume failed), only the second's questions are asked, the first
    cohort's events stay as they were, and no journal is left."""
    source = TapeSource.load(tape)
    agents = {"llm": "llm:test/model"}
    configs = [hand_config(agents), hand_config(agents, seed=1)]
    db = tmp_path / "run.db"
    replay_cohorts(source, configs[:1], db, RunOptions(jobs=1))
    asked = len(server.received)
    _, first = stream(db)
    replay_cohorts(source, configs, db, RunOptions(engine=engine, jobs=2))
    assert len(server.received) == 2 * asked  # the second cohort asks as many questions
    assert stream(db)[1][: len(first)] == first
    assert not journal_folder(db).exists()


def test_a_cohort_the_log_holds_is_replayed_on_local_workers_asking_no_model_again(
    tmp_path: Path, hand_tape_file: Path, server: FakeLLM
) -> None:
    resume_after_the_first_cohort(tmp_path, hand_tape_file, server, "local")


def test_a_cohort_the_log_holds_is_replayed_on_ray_asking_no_model_again(
    tmp_path: Path, hand_tape_file: Path, server: FakeLLM, ray_cluster: None
) -> None:
    resume_after_the_first_cohort(tmp_path, hand_tape_file, server, "ray")


def missing_folder_error(folder: Path) -> str:
    return (
        f"journal folder {folder} on {socket.gethostname()}: the log's folder does not exist "
        "there; a worker keeps the journal of a slow cohort, or of one asking a model, beside "
        "the log, so on a Ray cluster the log must be on a path every node reaches and can write"
    )


def test_a_fast_cohort_touches_no_journal_folder_on_a_machine_without_the_logs_folder(
    tmp_path: Path, hand_tape: Tape
) -> None:
    """A Ray node where the log's folder does not exist: a cohort done before ``commit_every``
    runs as it did before journals, and makes nothing there (a journal folder made on a node's
    own disk, its parents and all, would never be read back or removed)."""
    folder = tmp_path / "elsewhere" / "run.db.journal"
    recorded = record_cohort(hand_tape, settings(folder, AGENTS, after=3600))
    assert recorded.events == record_cohort(hand_tape, hand_config(AGENTS)).events
    assert not (tmp_path / "elsewhere").exists()


def test_a_slow_cohort_on_a_machine_without_the_logs_folder_is_one_line_naming_it(
    tmp_path: Path, hand_tape: Tape
) -> None:
    folder = tmp_path / "elsewhere" / "run.db.journal"
    with pytest.raises(ArenaError) as raised:
        record_cohort(hand_tape, settings(folder, AGENTS, after=0))
    assert str(raised.value) == missing_folder_error(folder)
    assert not (tmp_path / "elsewhere").exists()


def test_local_workers_hand_back_a_journal_folder_they_cannot_make_as_that_one_line(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    """Through the pool, as the run's own error: the first slow cohort's, not a traceback."""
    source = TapeSource.load(hand_tape_file)
    planned = [PlannedCohort(c, plan_cohort(source.tape, c))
               for c in (hand_config(AGENTS), hand_config(AGENTS, seed=1))]  # fmt: skip
    folder = tmp_path / "elsewhere" / "run.db.journal"
    work = CohortWork(source, RunOptions(commit_every=0), folder)
    with pytest.raises(ArenaError) as raised:
        for _, fetch in LocalEngine(2).run(work, planned):
            fetch()
    assert str(raised.value) == missing_folder_error(folder)


def test_a_ray_task_without_the_logs_folder_runs_a_fast_cohort_and_says_so_for_a_slow_one(
    tmp_path: Path, hand_tape_file: Path, ray_cluster: None
) -> None:
    """On Ray, fast cohorts never touch the folder, and a slow one's missing folder is the
    task's error, raised in the driver as that one line."""
    source = TapeSource.load(hand_tape_file)
    planned = [PlannedCohort(c, plan_cohort(source.tape, c)) for c in (hand_config(AGENTS),)]
    folder = tmp_path / "elsewhere" / "run.db.journal"
    fast = CohortWork(source, RunOptions(engine="ray", commit_every=3600), folder)
    ((_, fetch),) = RayEngine().run(fast, planned)
    assert fetch().events == record_cohort(source.tape, hand_config(AGENTS)).events
    slow = CohortWork(source, RunOptions(engine="ray", commit_every=0), folder)
    with pytest.raises(ArenaError) as raised:
        for _, fetch in RayEngine().run(slow, planned):
            fetch()
    assert str(raised.value) == missing_folder_error(folder)
    assert not (tmp_path / "elsewhere").exists()


def test_a_journal_that_cannot_be_read_leaves_it_unlocked(tmp_path: Path) -> None:
    """Not an event log: the error says so, and the lock is let go (taken again here at once;
    kept, it would make every later recording of the cohort in this process wait, then fail)."""
    journal = journal_path(tmp_path / "run.db.journal", "c")
    journal.parent.mkdir()
    journal.write_bytes(b"garbage!")
    with pytest.raises(LedgerError, match="not an arena event log"):
        RecordedCohort("c", journal)
    os.close(hold_journal(journal, wait=0))


def test_a_journal_written_since_a_recording_began_is_replaced_by_its_events(
    tmp_path: Path, hand_tape: Tape
) -> None:
    """A recording that began with no journal folder (so nothing to read, nothing held) finds,
    when its cohort turns slow, a journal another recording of the cohort wrote meanwhile (a
    cut run's worker, still ending): it holds the journal, then replaces it with its own
    events, rather than appending after events it never read."""
    whole = record_cohort(hand_tape, hand_config(AGENTS))
    journal = journal_path(tmp_path / "run.db.journal", whole.cohort)
    now = [0.0]
    recording = RecordedCohort(whole.cohort, journal, after=10, clock=lambda: now[0])
    try:
        recording.append(whole.cohort, whole.events[:5], expected_version=0)
        assert not journal.parent.exists()
        journal.parent.mkdir()
        with EventStore.open(journal) as other:
            other.append(whole.cohort, whole.events[:3], expected_version=0)
        now[0] = 10.0
        recording.append(whole.cohort, whole.events[5:9], expected_version=5)
        assert stream(journal)[1] == whole.events[:9]
    finally:
        recording.close()
