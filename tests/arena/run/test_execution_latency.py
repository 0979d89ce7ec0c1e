"""``--latency llm``: a decision's orders meet the book standing when its model's answer was
in, by the think time the log records, so a slow model pays for being slow; ``verify`` derives
the fills again from that recorded time, never from a clock."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from arena.run.cohort import CohortConfig
from arena.run.execution import latency_settings
from arena.run.runner import CohortRunner
from arena.verify.fills import verify_fills
from ledger.errors import IntegrityError
from ledger.events import BetIntent, CohortOpened, DecisionMade, OrderFilled
from ledger.store import EventStore
from ledger.venue import Venue
from replays.books import Books
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.validate_books import BookToken
from strategies.api import Decision, Strategy, Trace, View
from tests.conftest import WEEK, Arena

START_AT = datetime(2026, 6, 7, tzinfo=UTC)
T0 = int(START_AT.timestamp())


class Canned(Strategy):
    """A model whose every answer is a $100 YES bet, taking ``think_ms`` as recorded."""

    def __init__(self, think_ms: float) -> None:
        super().__init__()
        self.think_ms = think_ms

    def decide(self, view: View) -> Decision:
        bet = BetIntent(market="m", side="YES", amount=100.0)
        return Decision(bets=[bet], trace=Trace(model="canned", latency_ms=self.think_ms))


def setting() -> tuple[Tape, Books]:
    """YES of m is asked at 0.50 a second before the decision and at 0.60 a second after it
    (10,000 shares each time); fees none, so only the price moves."""
    market = MarketInfo(id="m", question="m?", outcomes=("Yes", "No"), volume=1.0,
                        category="crypto")  # fmt: skip
    times = np.array([T0 - 60, T0 + WEEK - 60], dtype=np.int64)
    tape = Tape.from_series([market], {"m": (times, np.array([0.5, 0.5]))},
                            [Resolution(market="m", ts=T0 + WEEK, winner="Yes")])  # fmt: skip
    before, after = T0 * 1000 - 1000, T0 * 1000 + 1000
    yes = [(before, [(0.48, 100.0)], [(0.50, 10_000.0)]),
           (after, [(0.58, 100.0)], [(0.60, 10_000.0)])]  # fmt: skip
    no = [(before, [(0.48, 100.0)], [(0.52, 100.0)])]
    books = Books.from_snapshots(
        [BookToken(token="y", market="m", outcome="Yes"),
         BookToken(token="n", market="m", outcome="No")],
        {"y": yes, "n": no}, tick=0.01,
    )  # fmt: skip
    return tape, books


def fills(tmp_path: Path, latency: str, name: str = "run.db") -> dict[str, OrderFilled]:
    tape, books = setting()
    config = CohortConfig(start=START_AT, agents={"fast": "hold", "slow": "hold"}, universe=1,
                          execution="l2", fees="none", books=books.hash,
                          **latency_settings(latency))  # fmt: skip
    plays: dict[str, Strategy] = {"fast": Canned(400.0), "slow": Canned(999.5)}
    with EventStore.open(tmp_path / name) as store:
        CohortRunner(tape, config, strategies=plays, books=books).run(store)
        log = list(store.read())
        assert verify_fills(store, tape, books).derived == 2
    opened = log[0]
    assert isinstance(opened, CohortOpened)
    assert opened.settings.get("latency") == ("llm" if latency.startswith("llm") else None)
    made = [e for e in log if isinstance(e, DecisionMade)]
    assert sorted(d.latency_ms or 0.0 for d in made) == [400.0, 999.5]
    return {e.agent: e for e in log if isinstance(e, OrderFilled)}


def test_a_slow_model_meets_the_book_its_answer_arrived_at(tmp_path: Path) -> None:
    """400 ms: the book of a second before, $100 at 0.50 = 200 shares. 999.5 ms, rounded up
    to 1,000 (the answer is not in before): the snapshot at exactly +1 s counts, $100 at 0.60
    = 166.67 shares.
    Without llm both meet the first book; llm+600 brings the fast one to +1 s as well."""
    made = fills(tmp_path, "llm")
    assert (made["fast"].price, made["fast"].shares) == (0.5, 200.0)
    assert (made["slow"].price, made["slow"].shares) == (0.6, 100 / 0.6)
    plain = fills(tmp_path, "0", "plain.db")
    assert plain["slow"].price == plain["fast"].price == 0.5
    both = fills(tmp_path, "llm+600", "both.db")
    assert both["fast"].price == both["slow"].price == 0.6
    said = " ".join(Arena()("report", tmp_path / "run.db").stdout.split())
    assert "latency + each decision's recorded model time" in said


def test_the_cohort_id_names_llm_latency_only_when_chosen() -> None:
    tape, books = setting()
    base = CohortConfig(start=START_AT, agents={"a": "hold"}, universe=1, execution="l2",
                        books=books.hash)  # fmt: skip
    llm = base.model_copy(update={"latency": "llm"})
    assert base.cohort_id(tape.hash) != llm.cohort_id(tape.hash)
    explicit = CohortConfig(**{**base.model_dump(), **latency_settings("0")})
    assert explicit.cohort_id(tape.hash) == base.cohort_id(tape.hash)


def test_verify_uses_the_recorded_think_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker that ignored the think time (every order at the decision's book) writes a
    chained log; verify, reading the slow model's 999.5 ms from its decision, finds the
    fill the book at +1 s does not give."""
    tape, books = setting()
    config = CohortConfig(start=START_AT, agents={"fast": "hold", "slow": "hold"}, universe=1,
                          execution="l2", fees="none", books=books.hash, latency="llm")  # fmt: skip
    plays: dict[str, Strategy] = {"fast": Canned(400.0), "slow": Canned(999.5)}
    monkeypatch.setattr(Venue, "decided", lambda self, latency_ms: None)
    with EventStore.open(tmp_path / "patched.db") as store:
        CohortRunner(tape, config, strategies=plays, books=books).run(store)
    monkeypatch.undo()
    with EventStore.open(tmp_path / "patched.db") as store, pytest.raises(IntegrityError) as bad:
        verify_fills(store, tape, books)
    assert "fills YES of market m with price 0.5, where the l2 model gives 0.6" in str(bad.value)


@pytest.mark.parametrize("value", ["x", "llm+", "250llm", "llm+-5"])
def test_a_latency_that_is_not_ms_or_llm_is_one_line(
    arena: Arena, tmp_path: Path, value: str
) -> None:
    result = arena("replay", "--latency", value, "--db", tmp_path / "x.db")
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line == (f"Error: latency {value!r} is not MS, llm, FILE (.toml or .json), llm+MS "
                    "or llm+FILE (whole milliseconds, or with a unit: 250ms, 1.5s)")  # fmt: skip


def test_a_latency_file_delays_each_named_agent(tmp_path: Path) -> None:
    """``fast = 1000`` in the file: the fast model's orders arrive a second late and meet the
    0.60 book; the slow one, not named, waits nothing without llm (0.50). With llm+FILE and
    ``fast = 600``, 400 + 600 = 1,000 ms: both at 0.60."""
    (tmp_path / "late.toml").write_text("# milliseconds per agent\nfast = 1000\n")
    made = fills(tmp_path, str(tmp_path / "late.toml"), "file.db")
    assert (made["fast"].price, made["slow"].price) == (0.6, 0.5)
    (tmp_path / "less.json").write_text('{"fast": 600}')
    both = fills(tmp_path, f"llm+{tmp_path / 'less.json'}", "both.db")
    assert both["fast"].price == both["slow"].price == 0.6
    with EventStore.open(tmp_path / "file.db", readonly=True) as store:
        opened = next(iter(store.read()))
    assert isinstance(opened, CohortOpened)
    assert opened.settings["latency_by_agent"] == '{"fast":1000}'


def test_the_id_holds_the_latencies_not_the_file(tmp_path: Path) -> None:
    tape, books = setting()
    (tmp_path / "a.toml").write_text("slow = 250\nfast = 0\n")
    (tmp_path / "b.json").write_text('{"fast": 0, "slow": 250}')
    (tmp_path / "c.json").write_text('{"fast": 0, "slow": 251}')

    def cohort(path: str) -> str:
        config = CohortConfig(start=START_AT, agents={"fast": "hold", "slow": "hold"},
                              universe=1, execution="l2", books=books.hash,
                              **latency_settings(str(tmp_path / path)))  # fmt: skip
        return config.cohort_id(tape.hash)

    assert cohort("a.toml") == cohort("b.json") != cohort("c.json")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"nobody": 5}', "agent 'nobody' is not one of the cohort's (hold, favourite"),
        ('{"hold": -5}', "agent 'hold' has -5, not whole milliseconds from 0 to 86,400,000"),
        ('{"hold": 2.5}', "agent 'hold' has 2.5, not whole milliseconds"),
        ("[1, 2]", "not a table of agent names to milliseconds"),
        ("{", "not valid JSON"),
    ],
)
def test_a_bad_latency_file_is_one_line(arena: Arena, tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "latency.json"
    path.write_text(text)
    result = arena("replay", "--latency", path, "--db", tmp_path / "x.db")
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and said in line, line
    assert not (tmp_path / "x.db").exists()


def test_the_ladder_s_last_rung_waits_for_each_model_as_recorded(tmp_path: Path) -> None:
    """The ladder plays back each decision with its recorded model time: on ``--latency llm``
    the slow model's $100 buys 166.67 shares at 0.60 instead of 200 at 0.50, and YES wins, so
    the delay takes 200 − 166.67 = $33.33 from it and nothing from the fast one."""
    from arena.backtests.ladder import climb, rungs
    from arena.engines.base import TapeSource

    fills(tmp_path, "0")  # decisions with their think times recorded, no latency of its own
    tape, books = setting()
    with EventStore.open(tmp_path / "run.db", readonly=True) as store:
        events = list(store.read())
    source = TapeSource(tmp_path / "t.tape", tape, tmp_path / "b.books", books)
    ladder = climb(events, source, rungs(True, latency="llm", fees="none"))
    assert ladder.rungs[-1].name == "l2 + fees + model time"
    took = {row.agent: row.pnl[-2] - row.pnl[-1] for row in ladder.rows}
    assert took["fast"] == 0.0
    assert took["slow"] == pytest.approx(200 - 100 / 0.6)


@pytest.mark.parametrize(
    ("given", "ms"), [("250", 250), ("250ms", 250), ("1.5s", 1500), ("2s", 2000), ("llm+40ms", 40)]
)
def test_a_latency_may_carry_its_unit(given: str, ms: int) -> None:
    assert latency_settings(given)["latency_ms"] == ms


@pytest.mark.parametrize("given", ["1.5ms", "-3", "nan", "1e999s", "soon", "90000000"])
def test_a_latency_that_is_no_whole_millisecond_count_is_refused(given: str) -> None:
    with pytest.raises(ValueError, match="is not MS"):
        latency_settings(given)
