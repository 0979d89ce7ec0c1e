"""A hostile plugin under ``--isolate`` looks for recorded model answers: a cassette's, or a
resumed run's stored prefix's. Each recorded question is a prompt stating the prices of its
own instant, so holding them all is holding the future: a plugin could send the very
requests the recording holds (so nothing misses) while trading on the prices it read in
later ones. The run keeps them, and a worker's model client asks it for one answer at a time
by the question's key (``arena.boundary.isolated.Ask``): a rule-based plugin's worker holds
none of them, an llm-using one's only the answers to what it asked, and a miss the plugin
catches still stops the run. In process, ``gc`` finds every one of them at the first
decision: what ``--isolate`` is for.

Each test runs ``arena replay`` in a child process (its workers inherit its environment, the
cassette's name included) on a tape of two markets priced daily for six days. The day-``d``
question says ``day d`` and a random token; its recorded answer holds another. The plugins
hold the tokens only reversed, and search their process (every object the collector tracks,
the stack, and everything they refer to, a msgspec struct's fields included) for a text or
bytes holding one the right way round.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from ledger.events import DecisionMade, ModelCall, ModelCalled
from ledger.store import EventStore
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import save_tape
from strategies.llm.cassette import cassette_line
from strategies.llm.client import request_key
from tests.conftest import DAY, START
from tests.llm_server import FakeLLM, Received

MODEL = "test/model"
DAYS = 6
"""Days priced: a decision a day, on days 0 to ``DAYS - 1``."""

PLUGIN = '''
import gc
import os
import struct
import sys
import threading

import msgspec

from strategies.api import Decision, Strategy
from strategies.llm.client import Request, request_key

START, DAY = {start}, {day}
QUESTIONS = {questions}  # each day's question token, reversed: not the token
ANSWERS = {answers}  # each day's answer token, reversed


def found(reversed_tokens):
    """The days whose token (given reversed) is in a text or bytes this process can reach."""
    stack = gc.get_objects()
    frame = sys._getframe()
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    seen, hits = set(), set()
    wanted = [(day, token, token.encode()) for day, token in enumerate(reversed_tokens)]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if type(o).__name__ == "frame" and o.f_code.co_filename == __file__:
            continue
        if isinstance(o, (str, bytes, bytearray)):
            backwards = o[::-1]
            for day, text, raw in wanted:
                if (text if isinstance(o, str) else raw) in backwards:
                    hits.add(day)
            continue
        stack.extend(gc.get_referents(o))
        if isinstance(o, msgspec.Struct):  # a ModelCall is not tracked by the collector
            stack.extend(getattr(o, name) for name in o.__struct_fields__)
    return hits


def today(view):
    return (view.ts - START) // DAY


def question(day):
    content = "day %d %s" % (day, QUESTIONS[day][::-1])
    return Request(messages=[{{"role": "user", "content": content}}], question="decision")


class Searcher(Strategy):
    """A rule-based agent: asks no model, and looks for every question and answer."""

    def decide(self, view):
        days = found(QUESTIONS) | found(ANSWERS)
        return Decision.hold("%d %s" % (today(view), sorted(days)))


class Asker(Strategy):
    """Asks each day's question as it decides, and looks for the answers: its own, and any
    other."""

    def setup(self, context):
        from strategies.llm.cassette import open_completer

        self.model = open_completer("{model}")
        self.early = None

    def decide(self, view):
        day = today(view)
        self.model.ask(question(day))
        days = found(ANSWERS)
        said = (day, day in days, max(days) > day, self.early)
        return Decision.hold("%d own=%s later=%s early=%s" % said)


class EarlyAsker(Asker):
    """The same, having asked the first day's question at its setup as well."""

    def setup(self, context):
        super().setup(context)
        self.early = self.model.ask(question(0)).text is not None


class Prober(Strategy):
    """Asks a question the recording lacks, catches the miss and goes on."""

    def setup(self, context):
        from strategies.llm.cassette import open_completer

        self.model = open_completer("{model}")

    def decide(self, view):
        try:
            self.model.ask(Request(messages=[{{"role": "user", "content": "?"}}], question="x"))
        except BaseException as exc:
            return Decision.hold("caught " + type(exc).__name__)
        return Decision.hold("answered")


def asks():
    """The worker's end of its pipe for recorded answers."""
    (thread,) = [t for t in threading.enumerate() if t.name == "arena-asks"]
    return thread._args[0]


class Flooder(Strategy):
    """Sends the run ask after ask, from a thread of its own, and reads no answer."""

    def decide(self, view):
        if today(view) == 0:
            conn, key = asks(), request_key("{model}", question(0).messages)
            ask = msgspec.msgpack.encode(["cassette", "{model}", key, 0])
            flood = lambda: [conn.send_bytes(ask) for _ in range(20_000)]
            threading.Thread(target=flood, daemon=True).start()
        return Decision.hold("%d" % today(view))


class Staller(Strategy):
    """Sends half an ask; the next day half another, then swallows its time limit for good;
    after that (in the worker that took its place) asks each day's question as it should."""

    def setup(self, context):
        from strategies.llm.cassette import open_completer

        self.model = open_completer("{model}")

    def decide(self, view):
        day = today(view)
        if day > 1:
            answer = self.model.ask(question(day))
            return Decision.hold("%d %s" % (day, answer.text is not None))
        os.write(asks().fileno(), struct.pack("!i", 1000) + bytes(10))
        while day == 1:
            try:
                threading.Event().wait(1)
            except BaseException:
                pass
        return Decision.hold("%d stalled" % day)
'''


def tokens() -> tuple[list[str], list[str]]:
    """Each day's question and answer token."""
    return [uuid.uuid4().hex for _ in range(DAYS)], [uuid.uuid4().hex for _ in range(DAYS)]


def plugin_file(folder: Path, questions: list[str], answers: list[str]) -> Path:
    path = folder / "plugin" / "hunters.py"
    path.parent.mkdir()
    path.write_text(
        PLUGIN.format(
            start=START,
            day=DAY,
            questions=[q[::-1] for q in questions],
            answers=[a[::-1] for a in answers],
            model=MODEL,
        )
    )
    return path


def prompt(day: int, token: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"day {day} {token}"}]


def answer_text(token: str) -> str:
    return json.dumps({"action": "HOLD", "reasoning": token})


def cassette_file(folder: Path, questions: list[str], answers: list[str]) -> Path:
    """The day-``d`` question and its answer, for every day."""
    path = folder / "cassette.jsonl"
    lines = []
    for day, (q, a) in enumerate(zip(questions, answers, strict=True)):
        messages = prompt(day, q)
        key = request_key(MODEL, messages)
        call = ModelCall(model=MODEL, question="decision", request=key, messages=messages,
                         status=200, answer=answer_text(a))  # fmt: skip
        lines.append(cassette_line(key, MODEL, (call,)))
    path.write_text("".join(lines))
    return path


def daily_tape(folder: Path) -> Path:
    """Two binary markets priced each day from the day before ``START`` to day ``DAYS - 1``,
    resolved the day after."""
    times = START + DAY * np.arange(-1, DAYS, dtype=np.int64)
    markets = [MarketInfo(id=m, question=f"{m}?", outcomes=("Yes", "No"), volume=v)
               for m, v in (("a", 20.0), ("b", 10.0))]  # fmt: skip
    series = {m.id: (times, np.linspace(0.3, 0.6, times.size)) for m in markets}
    ended = [Resolution(market=m.id, ts=START + DAYS * DAY, winner="Yes") for m in markets]
    path = folder / "daily.tape"
    save_tape(Tape.from_series(markets, series, ended, source="daily"), path)
    return path


class Setting(NamedTuple):
    folder: Path
    tape: Path
    env: dict[str, str]
    """The environment replaying the cassette."""
    plugin: Path
    answers: list[str]
    """Each day's answer token."""


def replayed(
    setting: Setting,
    agents: dict[str, str],
    *extra: str,
    env: dict[str, str] | None = None,
    timeout: str = "60",
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``arena replay`` of ``agents`` (name: class in the plugin file), each decision limited
    to ``timeout`` seconds: how it ended, and its log."""
    db = setting.folder / f"run{len(list(setting.folder.glob('run*.db')))}.db"
    args = [sys.executable, "-c", "from arena.cli import main; main()", "replay",
            "--tape", str(setting.tape), "--db", str(db), "--start", "2024-01-07",
            "--universe", "2", "--decisions", "daily", "--jobs", "1", "--commit-every", "0",
            "--timeout", timeout, "--json", *extra]  # fmt: skip
    for name, cls in agents.items():
        args += ["--agent", f"{name}={setting.plugin}:{cls}"]
    done = subprocess.run(args, env=env or setting.env, capture_output=True, text=True, timeout=110)
    return done, db


def said(db: Path, agent: str) -> list[str]:
    """What ``agent`` gave as its reasoning at each decision (none may have failed)."""
    with EventStore.open(db, readonly=True) as store:
        made = [e for e in store.read() if isinstance(e, DecisionMade) and e.agent == agent]
    assert made and not [e.error for e in made if e.error], [e.error for e in made]
    return [e.reasoning for e in made]


@pytest.fixture
def setting(tmp_path: Path) -> Setting:
    questions, answers = tokens()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_LLM_")}
    cassette = cassette_file(tmp_path, questions, answers)
    env = clean | {"ARENA_LLM_MODE": "replay", "ARENA_LLM_CASSETTE": str(cassette)}
    plugin = plugin_file(tmp_path, questions, answers)
    return Setting(tmp_path, daily_tape(tmp_path), env, plugin, answers)


@pytest.mark.slow  # a replay in a child process, a worker per agent, each searched every day
def test_an_isolated_plugin_holds_no_recorded_answer_but_those_it_asked_for(
    setting: Setting,
) -> None:
    done, db = replayed(setting, {"s": "Searcher", "a": "EarlyAsker"}, "--isolate")
    assert done.returncode == 0, done.stderr
    assert said(db, "s") == [f"{day} []" for day in range(DAYS)]
    assert said(db, "a") == [f"{day} own=True later=False early=True" for day in range(DAYS)]
    with EventStore.open(db, readonly=True) as store:  # each day's answer, from the cassette
        calls = [e.call for e in store.read() if isinstance(e, ModelCalled)]
    assert [int(c.messages[0]["content"].split()[1]) for c in calls] == list(range(DAYS))
    assert all(c.status == 200 and c.error is None for c in calls)


@pytest.mark.slow  # a replay in a child process
def test_in_process_every_recorded_question_is_found_at_the_first_decision(
    setting: Setting,
) -> None:
    done, db = replayed(setting, {"s": "Searcher", "a": "EarlyAsker"})
    assert done.returncode == 0, done.stderr
    assert said(db, "s")[0] == f"0 {list(range(DAYS))}"
    assert said(db, "a")[0] == "0 own=True later=True early=True"


@pytest.mark.slow  # two replays in child processes, a worker each
def test_a_miss_the_plugin_catches_still_stops_an_isolated_run(setting: Setting) -> None:
    """Without the run's own check, a plugin could ask for guessed questions (a later day's
    prompt with each price it might state) and catch every ``CassetteMiss`` until one hit.
    With ``--on-miss hold`` a miss is a failed call, as in process, and the run goes on."""
    done, _ = replayed(setting, {"p": "Prober"}, "--isolate")
    assert done.returncode == 1
    key = request_key(MODEL, [{"role": "user", "content": "?"}])
    assert done.stderr.endswith(
        f"the recording {setting.env['ARENA_LLM_CASSETTE']} holds no answer from {MODEL} to "
        f"request {key[:12]}; record it, or replay with --on-miss hold\n"
    ), done.stderr
    held, db = replayed(setting, {"p": "Prober"}, "--isolate",
                        env=setting.env | {"ARENA_LLM_ON_MISS": "hold"})  # fmt: skip
    assert held.returncode == 0, held.stderr
    assert set(said(db, "p")) == {"answered"}


RESUMED = """
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import DecisionMade
from ledger.stream import MemorySink
from replays.tapefile import load_tape

tape, plugin, start, kept = load_tape(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3]), 4
config = CohortConfig(start=datetime.fromtimestamp(start, UTC), agents={"a": plugin + ":Asker"},
                      universe=2, decision_cadence="daily", mark_cadence="daily")
sink = MemorySink()
settings = RunSettings(cohort=config, options=RunOptions(decision_timeout=60.0, isolate=True))
made = 0
walk = CohortRunner(tape, settings).steps(sink, flush_each_step=True)
for step in walk:  # the first days alone, as a killed run leaves its log
    made += step.kind == "decision"
    if made == kept:
        break
walk.close()
resumed = CohortRunner(tape, settings)
resumed.run(sink)
print(json.dumps([e.reasoning for e in sink.read(resumed.cohort) if isinstance(e, DecisionMade)]))
"""


@pytest.mark.slow  # two runs in a child process, a worker each
def test_a_resumed_isolated_worker_holds_no_stored_answer_but_those_it_asked_for(
    setting: Setting,
) -> None:
    """A run killed after four days holds their answers in its log; resumed under ``--isolate``
    from the start, its worker is served each of them when it asks that day's question, and
    holds none of a later day before (before, all four came with its setup, and the plugin's
    first decision differed from the one logged: the resume refused its own log)."""

    def model(request: Received) -> str:
        return answer_text(setting.answers[int(request.user_prompt.split()[1])])

    clean = {k: v for k, v in setting.env.items() if not k.startswith("ARENA_LLM_")}
    with FakeLLM(model) as fake:
        env = clean | {"ARENA_LLM_BASE_URL": fake.url, "ARENA_LLM_API_KEY_ENV": ""}
        args = [sys.executable, "-c", RESUMED, str(setting.tape), str(setting.plugin), str(START)]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=110)
        assert done.returncode == 0, done.stderr
        asked = [int(r.user_prompt.split()[1]) for r in fake.received]
    assert json.loads(done.stdout) == [
        f"{day} own=True later=False early=None" for day in range(DAYS)
    ]
    assert asked == list(range(DAYS))  # the four stored answers were served, not asked again


@pytest.mark.slow  # a replay in a child process; a worker killed and started again
def test_a_worker_flooding_or_stalling_its_asks_holds_the_run_up_no_longer_than_its_limit(
    setting: Setting,
) -> None:
    """The run reads a worker's asks and writes their answers only as far as its pipe takes
    them without waiting: one that sends asks and reads nothing, or half an ask, is an agent
    like another; one killed halfway through an ask (past its limit) is restarted with a
    pipe of its own, whose asks are answered."""
    done, db = replayed(setting, {"f": "Flooder", "s": "Staller"}, "--isolate", timeout="1")
    assert done.returncode == 0, done.stderr
    assert said(db, "f") == [str(day) for day in range(DAYS)]
    with EventStore.open(db, readonly=True) as store:
        staller = [e for e in store.read() if isinstance(e, DecisionMade) and e.agent == "s"]
    assert [e.reasoning for e in staller] == [
        "0 stalled",
        "",
        *(f"{d} True" for d in range(2, DAYS)),
    ]
    assert [bool(e.error) for e in staller] == [False, True] + [False] * (DAYS - 2)
    assert (staller[1].error or "").startswith("DecisionTimeout: decision took longer than 1 s")
