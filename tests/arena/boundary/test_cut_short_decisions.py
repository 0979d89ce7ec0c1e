"""A decision cut short keeps every model call it made, sends nothing after, and replays.

A decision that passes the time limit, raises or is interrupted returns no trace; the calls it
made reach the log through the decision's ``CallLog`` (``strategies.llm.calls``), which the
boundary reads however the decision ended. Each test runs the hand tape of ``conftest.py``
against the fake server of ``llm_server.py`` on 127.0.0.1, which holds the questions it is told
to until the test lets them go: the time limit (0.5 s) is what ends those decisions, and no
assertion depends on how long anything took.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from arena.boundary.agents import InProcess
from arena.boundary.sandbox import INTERRUPTED, RunInterrupted, Sandbox
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import DecisionMade, ModelCalled
from ledger.store import EventStore
from ledger.usage import model_usage
from strategies.api import Decision, Strategy, View
from strategies.builtin.edge import ForecasterTrader
from strategies.llm.agent import LLMAgent
from strategies.llm.calls import ABORTED
from strategies.llm.client import Request
from strategies.llm.connection import Connection
from strategies.loader import build_strategy
from tests.conftest import Arena, hand_config, make_hand_tape
from tests.llm_server import HOLD, FakeLLM, Received

KEY_ENV = "ARENA_TEST_LLM_KEY"
KEY = "sk-test-SECRET-0123456789abcdef"
MODEL = "test/model"
GARBAGE = "I would rather not say."
LIMIT = 0.5
TIMED_OUT = f"DecisionTimeout: decision took longer than {LIMIT:g} s"
REASKED = "Your previous response could not be used"
_kill = os.kill  # the real one: the sandbox guards os.kill while plugin code runs


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    for name in Connection.model_fields:
        monkeypatch.setenv(f"ARENA_LLM_{name.upper()}", "")
        monkeypatch.delenv(f"ARENA_LLM_{name.upper()}")


class Held:
    """A responder that holds the questions ``held`` picks until ``release``, answering the
    others with ``answer``; how many it ever held, and whether any outlived its hold."""

    def __init__(self, held: Callable[[Received], bool], answer: Callable[[Received], str]):
        self.held = held
        self.answer = answer
        self.release = threading.Event()
        self.stuck = 0

    def __call__(self, request: Received) -> str:
        if self.held(request):
            if not self.release.wait(timeout=30):  # a hang detector, not a figure
                self.stuck += 1
            return HOLD
        return self.answer(request)


def week(n: int) -> Callable[[Received], bool]:
    return lambda request: f"DECISION WEEK: {n}\n" in request.user_prompt


def reask_of_week_1(request: Received) -> bool:
    return week(1)(request) and REASKED in request.user_prompt


def garbage_in_week_1(request: Received) -> str:
    return GARBAGE if week(1)(request) else HOLD


@pytest.fixture
def held_reask(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeLLM, Held]]:
    """Week 1: garbage, then the re-ask held past the limit; every other week HOLD at once."""
    responder = Held(reask_of_week_1, garbage_in_week_1)
    with FakeLLM(responder) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", KEY_ENV)
        monkeypatch.setenv("ARENA_LLM_BACKOFF", "0")
        try:
            yield fake, responder
        finally:
            responder.release.set()


def run(db: Path, agents: dict[str, str], **strategies: Strategy) -> None:
    settings = RunSettings(cohort=hand_config(agents), options=RunOptions(decision_timeout=LIMIT))
    with EventStore.open(db) as store:
        CohortRunner(make_hand_tape(), settings, strategies=strategies or None).run(store)


def logged(db: Path) -> list[Any]:
    with EventStore.open(db) as store:
        return [e for e in store.read() if isinstance(e, DecisionMade | ModelCalled)]


def test_a_timed_out_decision_keeps_the_calls_it_made_and_the_one_in_flight(
    tmp_path: Path, held_reask: tuple[FakeLLM, Held]
) -> None:
    """Week 1 asks twice: a garbage answer (rejected), then the re-ask, which the server holds
    past the limit. Both follow the decision, the second cut short with the reason; every
    request the server saw is a ModelCalled, and the usage counts them all."""
    fake, responder = held_reask
    db = tmp_path / "run.db"
    run(db, {"llm": f"llm:{MODEL}"})
    events = logged(db)
    first = events[0]
    assert isinstance(first, DecisionMade)
    assert (first.week, first.action, first.error) == (1, "HOLD", TIMED_OUT)
    asked, cut = events[1].call, events[2].call
    assert asked.status == 200 and asked.answer == GARBAGE and asked.rejected is not None
    assert cut.status is None and cut.reask == 1 and cut.error == ABORTED + TIMED_OUT
    assert cut.latency_ms is not None and cut.latency_ms >= LIMIT * 1000 / 2
    assert (first.tokens_in, first.retries, first.raw_response) == (1200, 1, GARBAGE)
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert len(fake.received) == len(calls) and responder.stuck == 0
    assert [e.n for e in events[1:3]] == [1, 2]
    with EventStore.open(db) as store:
        [usage] = model_usage(store).values()
    assert (usage["llm"].calls, usage["llm"].failures, usage["llm"].rejected) == (4, 1, 1)
    assert usage["llm"].calls == len(fake.received)


def test_a_decision_that_raises_keeps_its_calls(tmp_path: Path, monkeypatch: Any) -> None:
    """A strategy that asks a model twice, then fails: HOLD with the error, and both calls."""

    class AsksThenFails(Strategy):
        def __init__(self) -> None:
            super().__init__()
            agent = build_strategy(f"llm:{MODEL}")
            assert isinstance(agent, LLMAgent)
            self.completer = agent.completer

        def decide(self, view: View) -> Decision:
            question = Request([{"role": "user", "content": f"week {view.week}"}], "mine")
            self.completer.ask(question)
            self.completer.ask(question)
            raise ValueError("the strategy's own bug")

    with FakeLLM() as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        db = tmp_path / "run.db"
        run(db, {"mine": "hold"}, mine=AsksThenFails())
    events = logged(db)
    decided = [e for e in events if isinstance(e, DecisionMade)]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert all(d.action == "HOLD" and "ValueError: the strategy's own bug" in (d.error or "")
               for d in decided)  # fmt: skip
    assert len(calls) == len(fake.received) == 2 * len(decided)
    assert all(c.call.status == 200 and c.call.error is None for c in calls)


def test_ctrl_c_in_flight_keeps_the_calls_on_the_interrupt(monkeypatch: Any) -> None:
    """Ctrl-C while the server holds the question: the run stops (RunInterrupted), and the
    decision it cut short comes with it, as the log should record it: HOLD, the call cut
    short with the reason. Sent as a real SIGINT to this process while the request is out."""
    interrupted = threading.Event()

    def interrupt(request: Received) -> str:
        _kill(os.getpid(), signal.SIGINT)
        interrupted.wait(timeout=30)
        return HOLD

    with FakeLLM(interrupt) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        agent = build_strategy(f"llm:{MODEL}")
        sandbox = Sandbox(0)
        from tests.strategies.test_llm_agent import hand_view

        with sandbox.guarded(), pytest.raises(RunInterrupted) as stopped:
            InProcess(agent, sandbox).decide(hand_view())
        interrupted.set()
    assert stopped.value.recorded is not None
    decision, error = stopped.value.recorded
    assert decision.action == "HOLD" and error == INTERRUPTED
    assert decision.trace is not None
    [call] = decision.trace.calls
    assert call.error == ABORTED + INTERRUPTED and call.status is None
    assert len(fake.received) == 1


def test_an_aborted_forecaster_cancels_its_questions_and_never_sends_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two questions out at a time, three markets, three retries with no backoff: the first
    decision's two questions are held past the limit. They are cut (their sockets shut), the
    third is never sent, and once the server lets the held two go and every worker thread
    has ended, no question of that decision was sent again; the two are in the log, cut."""
    first_day = "Today: 2024-01-07\n"
    responder = Held(lambda r: first_day in r.user_prompt, lambda r: '{"p_yes": 0.65}')
    monkeypatch.setenv("ARENA_LLM_CONCURRENCY", "2")
    monkeypatch.setenv("ARENA_LLM_RETRIES", "3")
    monkeypatch.setenv("ARENA_LLM_BACKOFF", "0")
    monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", "")
    spec = f"sign?forecaster=llm:{MODEL}"
    with FakeLLM(responder) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        agent = build_strategy(spec)
        assert isinstance(agent, ForecasterTrader)
        db = tmp_path / "run.db"
        run(db, {"sign": spec}, sign=agent)
        responder.release.set()
        for thread in threading.enumerate():
            if thread.name.startswith("llm-forecast-"):
                thread.join(timeout=30)
        sent = [r for r in fake.received if first_day in r.user_prompt]
    events = logged(db)
    first = events[0]
    assert isinstance(first, DecisionMade) and first.error == TIMED_OUT
    cut = [e.call for e in events[1:] if isinstance(e, ModelCalled) and e.week == 1]
    assert len(sent) == 2 and len(cut) == 2
    assert all(c.error == ABORTED + TIMED_OUT and c.status is None for c in cut)
    asked = {r.user_prompt.split("Question: ")[1].split("?")[0] for r in sent}
    assert {c.question for c in cut} == asked
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert len(calls) == len(fake.received)


def replay_args(tape: Path, db: Path, *extra: str) -> list[str]:
    return [
        "--tape", str(tape), "--db", str(db), "--start", "2024-01-07", "--universe", "3",
        "--marks", "weekly", "--agent", f"llm=llm:{MODEL}", "--jobs", "1",
        "--timeout", str(LIMIT), *extra,
    ]  # fmt: skip


def test_a_run_with_a_timed_out_decision_replays_from_its_log_and_its_cassettes(
    arena: Arena,
    tmp_path: Path,
    hand_tape_file: Path,
    held_reask: tuple[FakeLLM, Held],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Live, recording a cassette: week 1 times out with a re-ask in flight. Replayed with
    ``--on-miss error`` from the log, from its export and from the cassette: the same digest
    and the very same decisions and calls, and not one request more."""
    fake, _ = held_reask
    cassette = tmp_path / "live.jsonl"
    monkeypatch.setenv("ARENA_LLM_MODE", "record")
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(cassette))
    live = arena.json("replay", *replay_args(hand_tape_file, tmp_path / "live.db"))
    asked = len(fake.received)
    live_events = logged(tmp_path / "live.db")
    assert live_events[0].error == TIMED_OUT and asked == sum(
        isinstance(e, ModelCalled) for e in live_events
    )
    exported = tmp_path / "export.jsonl"
    assert arena("cassette", tmp_path / "live.db", exported).exit_code == 0
    monkeypatch.setenv("ARENA_LLM_MODE", "replay")
    monkeypatch.delenv(KEY_ENV)
    for n, source in enumerate((tmp_path / "live.db", exported, cassette)):
        monkeypatch.setenv("ARENA_LLM_CASSETTE", str(source))
        db = tmp_path / f"again-{n}.db"
        again = arena.json("replay", *replay_args(hand_tape_file, db, "--on-miss", "error"))
        assert again["digest"] == live["digest"], source
        assert logged(db) == live_events, source
    assert len(fake.received) == asked


class AsksThenWaits(Strategy):
    """Asks its model once a week and, in week 1, then waits past the time limit in its own
    code: no call is in flight when the limit strikes."""

    def __init__(self) -> None:
        super().__init__()
        agent = build_strategy(f"llm:{MODEL}")
        assert isinstance(agent, LLMAgent)
        self.completer = agent.completer

    def decide(self, view: View) -> Decision:
        question = Request([{"role": "user", "content": f"week {view.week}"}], "mine")
        self.completer.ask(question)
        if view.week == 1:
            threading.Event().wait(timeout=30)  # the limit ends this; 30 s only if it did not
        return Decision()


def test_a_limit_striking_between_calls_marks_the_last_and_replays_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The week-1 answer came; the limit struck in the strategy's own code. Its call is kept,
    marked as the point where the decision ended; replayed from the log and from the cassette
    recorded with it, the replay ends week 1 at that call too: the same log, and no request."""
    with FakeLLM() as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_MODE", "record")
        monkeypatch.setenv("ARENA_LLM_CASSETTE", str(tmp_path / "live.jsonl"))
        run(tmp_path / "live.db", {"mine": "hold"}, mine=AsksThenWaits())
        asked = len(fake.received)
        live = logged(tmp_path / "live.db")
        monkeypatch.setenv("ARENA_LLM_MODE", "replay")
        for n, source in enumerate((tmp_path / "live.db", tmp_path / "live.jsonl")):
            monkeypatch.setenv("ARENA_LLM_CASSETTE", str(source))
            run(tmp_path / f"again-{n}.db", {"mine": "hold"}, mine=AsksThenWaits())
            assert logged(tmp_path / f"again-{n}.db") == live, source
        assert len(fake.received) == asked
    first, marked = live[0], live[1].call
    assert first.error == TIMED_OUT and marked.status == 200 and marked.answer == HOLD
    assert marked.error == (
        f"{ABORTED}{TIMED_OUT} | after: the answer came, but the decision ended before it was used"
    )
    assert asked == sum(isinstance(e, ModelCalled) for e in live)


def test_a_forecaster_decision_cut_short_replays_with_the_calls_it_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two questions out at a time: the first decision's question on market a is held past
    the limit while b's and then tie-w's are answered. Replayed from the log, where every
    answer comes at once and which questions a replay serves before a's ends it is a race, the
    decision still carries the calls the live one had, in their order: the same log."""
    first_day = "Today: 2024-01-07\n"
    responder = Held(
        lambda r: first_day in r.user_prompt and "Question: a?" in r.user_prompt,
        lambda r: '{"p_yes": 0.65}',
    )
    monkeypatch.setenv("ARENA_LLM_CONCURRENCY", "2")
    monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", "")
    spec = f"sign?forecaster=llm:{MODEL}"
    with FakeLLM(responder) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        run(tmp_path / "live.db", {"sign": spec}, sign=build_strategy(spec))
        responder.release.set()
        asked = len(fake.received)
        live = logged(tmp_path / "live.db")
        week1 = [e.call for e in live if isinstance(e, ModelCalled) and e.week == 1]
        assert sorted((c.question, c.error is None) for c in week1) == [
            ("a", False), ("b", True), ("tie-w", True),
        ]  # fmt: skip
        monkeypatch.setenv("ARENA_LLM_MODE", "replay")
        monkeypatch.setenv("ARENA_LLM_CASSETTE", str(tmp_path / "live.db"))
        for n in range(3):  # a race would show in one of them
            db = tmp_path / f"again-{n}.db"
            run(db, {"sign": spec}, sign=build_strategy(spec))
            assert logged(db) == live
        assert len(fake.received) == asked
