"""The transcript is the log: every model call of a run as events, readable with SQL, folded
past by rebuilds, replayable as a cassette; and what the calls cost, in ``arena report`` and at
the end of ``arena replay``.

The runs are on the hand tape of ``conftest.py`` (three markets, weekly decisions), against the
fake server of ``llm_server.py`` on 127.0.0.1.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.run.runner import CohortRunner
from arena.verify.log import verify_store
from ledger.events import DecisionMade, ModelCalled, PromptStored
from ledger.rebuild import rebuild
from ledger.store import EventStore
from ledger.usage import model_usage, percentile
from strategies.llm.cassette import export_cassette
from strategies.llm.connection import Connection
from tests.conftest import Arena, hand_config, make_hand_tape
from tests.llm_server import HOLD, FakeLLM, Reply

KEY_ENV = "ARENA_TEST_LLM_KEY"
KEY = "sk-test-SECRET-0123456789abcdef"
MODEL = "test/model"
GARBAGE = "I would rather not say."


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A known key, and no ARENA_LLM_* variables, before and after: set then deleted, each is
    put back as it was when the test ends, even if a command set it (``--on-miss``, an agents
    file's ``[llm]`` table)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    for name in Connection.model_fields:
        monkeypatch.setenv(f"ARENA_LLM_{name.upper()}", "")
        monkeypatch.delenv(f"ARENA_LLM_{name.upper()}")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", KEY_ENV)
        monkeypatch.setenv("ARENA_LLM_RETRIES", "1")
        monkeypatch.setenv("ARENA_LLM_BACKOFF", "0")
        yield fake


def run(db: Path) -> str:
    with EventStore.open(db) as store:
        CohortRunner(make_hand_tape(), hand_config({"llm": f"llm:{MODEL}"})).run(store)
        return store.digest()


def events(db: Path) -> list[object]:
    with EventStore.open(db) as store:
        return list(store.read())


def test_every_attempt_is_logged_after_its_decision(tmp_path: Path, server: FakeLLM) -> None:
    """Week 1: a 503, then garbage, then (re-asked) HOLD: three attempts, two questions.
    Later weeks: HOLD at once. The system prompt is stored once, before its first use."""
    server.queue(Reply(status=503), GARBAGE, HOLD)
    run(tmp_path / "run.db")
    log = events(tmp_path / "run.db")
    kinds = [type(e).__name__ for e in log]
    first = kinds.index("DecisionMade")
    assert kinds[first : first + 5] == [
        "DecisionMade", "PromptStored", "ModelCalled", "ModelCalled", "ModelCalled",
    ]  # fmt: skip
    assert kinds.count("PromptStored") == 1
    stored = next(e for e in log if isinstance(e, PromptStored))
    assert "Forecaster Arena (v1)" in stored.text
    calls = [e for e in log if isinstance(e, ModelCalled)]
    decided = [e for e in log if isinstance(e, DecisionMade)]
    assert len(calls) == len(server.received) == len(decided) + 2
    week1 = calls[:3]
    assert [(c.n, c.call.attempt, c.call.reask, c.call.status) for c in week1] == [
        (1, 1, 0, 503), (2, 2, 0, 200), (3, 1, 1, 200),
    ]  # fmt: skip
    assert week1[1].call.rejected is not None and "not valid JSON" in week1[1].call.rejected
    assert all(c.call.system == stored.digest and c.agent == "llm" for c in calls)
    assert all(c.week == d.week for c, d in zip(calls[3:], decided[1:], strict=True))


def test_the_transcript_is_sql_and_the_fold_passes_it_by(tmp_path: Path, server: FakeLLM) -> None:
    server.queue(Reply(status=503), GARBAGE, HOLD)
    db = tmp_path / "run.db"
    run(db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT payload ->> '$.call.status', payload ->> '$.call.tokens_in' "
            "FROM events_view WHERE type = 'ModelCalled' ORDER BY seq LIMIT 3"
        ).fetchall()
    assert rows == [(503, None), (200, 1200), (200, 1200)]
    with EventStore.open(db) as store:
        result = verify_store(store)
        rebuilt = rebuild(store)
        live = CohortRunner(make_hand_tape(), hand_config({"llm": f"llm:{MODEL}"}))
    assert (result.cohorts, result.closed) == (1, 1)  # it raises on any mismatch
    [state] = rebuilt.cohorts.values()
    assert state.closed is not None and state.digest() == state.closed.state_digest
    assert live.cohort == state.cohort


def test_a_run_replays_from_its_own_log_and_from_an_export(
    tmp_path: Path, server: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded live (a 503 and a re-ask included), replayed with no server and no key from the
    log itself and from a JSON Lines export of it: the same digest every time."""
    server.queue(Reply(status=503), GARBAGE, HOLD)
    recorded = run(tmp_path / "live.db")
    asked = len(server.received)
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setenv("ARENA_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
    monkeypatch.setenv("ARENA_LLM_MODE", "replay")
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(tmp_path / "live.db"))
    assert run(tmp_path / "from-log.db") == recorded
    exported = tmp_path / "export.jsonl"
    assert export_cassette(tmp_path / "live.db", exported) == asked - 1  # the 503 is in a question
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(exported))
    assert run(tmp_path / "from-export.db") == recorded
    assert len(server.received) == asked


def test_usage_per_agent_by_hand(tmp_path: Path, server: FakeLLM) -> None:
    """Every 200 reports 1,200 tokens in, 40 out, $0.0021. Week 1 makes three attempts (a 503
    with no usage, a rejected answer, the re-asked HOLD); the other weeks one each."""
    server.queue(Reply(status=503), GARBAGE, HOLD)
    db = tmp_path / "run.db"
    run(db)
    decisions = sum(isinstance(e, DecisionMade) for e in events(db))
    with EventStore.open(db) as store:
        [agents] = model_usage(store).values()
    u = agents["llm"]
    answered = decisions + 1
    assert (u.calls, u.questions, u.reasks) == (decisions + 2, decisions + 1, 1)
    assert (u.failures, u.rejected) == (1, 1)
    assert (u.tokens_in, u.tokens_out) == (1200 * answered, 40 * answered)
    assert u.cost == pytest.approx(0.0021 * answered, abs=1e-12)
    d = u.as_dict()
    assert d["latency_median_ms"] == percentile(u.latencies, 50) is not None
    assert d["latency_p95_ms"] >= d["latency_median_ms"]
    median = d["latency_median_ms"] / 1000
    assert u.summary().endswith(f", median latency {median:.2f} s a call")  # says what it is


def test_percentile_is_the_nearest_rank() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 1)) == (3, 5, 1)
    assert percentile([], 50) is None


# -- through the command line --------------------------------------------------------------------


def replay_args(tape: Path, db: Path, *extra: str) -> list[str]:
    return [
        "--tape", str(tape), "--db", str(db), "--start", "2024-01-07", "--universe", "3",
        "--marks", "weekly", "--agent", f"llm=llm:{MODEL}", "--jobs", "1", *extra,
    ]  # fmt: skip


def test_replay_prints_the_cost_and_report_shows_usage(
    arena: Arena, tmp_path: Path, server: FakeLLM, hand_tape_file: Path
) -> None:
    db = tmp_path / "run.db"
    done = arena("replay", *replay_args(hand_tape_file, db), catch_exceptions=False)
    assert done.exit_code == 0, done.output
    n = len(server.received)
    assert f"run total: {n} model calls (0 re-asks, 0 failed), tokens {1200 * n:,} in / " in (
        done.output
    )
    assert f" / {40 * n:,} out" in done.output
    assert f"${0.0021 * n:,.4f}" in done.output
    shown = arena("report", db, "--json")
    data = json.loads(shown.output)
    usage = data["cohorts"][0]["model_usage"]["llm"]
    assert (usage["calls"], usage["tokens_in"], usage["failures"]) == (n, 1200 * n, 0)
    assert data["model_usage_total"]["calls"] == n
    assert data["model_usage_by_agent"]["llm"]["calls"] == n
    table = arena("report", db)
    assert "Model calls" in table.output and f"{1200 * n:,}" in table.output
    page = arena("report", db, "--html", tmp_path / "html")
    assert page.exit_code == 0, page.output
    html = (tmp_path / "html" / "index.html").read_text()
    assert "Cost of model calls" in html
    assert f">{1200 * n:,}<" in html and f">{0.0021 * n:,.4g}<" in html


def test_the_connection_never_changes_the_cohort_or_the_digest(
    arena: Arena,
    tmp_path: Path,
    server: FakeLLM,
    hand_tape_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recorded live into a cassette through an agents file's [llm] table, replayed from that
    cassette through the environment: the same cohort id and digest."""
    cassette = tmp_path / "answers.jsonl"
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f'[agents]\nllm = "llm:{MODEL}"\n\n'
        f'[llm]\nmode = "record"\ncassette = "{cassette}"\nconcurrency = 3\n'
    )
    args = [a for a in replay_args(hand_tape_file, tmp_path / "a.db") if a != f"llm=llm:{MODEL}"]
    args.remove("--agent")  # the agents come from the file
    live = arena("replay", *args, "--agents-file", agents, "--json", catch_exceptions=False)
    assert live.exit_code == 0, live.output
    assert cassette.read_text().count("\n") == len(server.received)
    monkeypatch.setenv("ARENA_LLM_MODE", "replay")  # the environment wins over the file
    monkeypatch.delenv(KEY_ENV)
    args_b = [a if a != str(tmp_path / "a.db") else str(tmp_path / "b.db") for a in args]
    again = arena("replay", *args_b, "--agents-file", agents, "--json", catch_exceptions=False)
    assert again.exit_code == 0, again.output
    first, second = json.loads(live.output), json.loads(again.output)
    assert first["digest"] == second["digest"]
    assert first["cohorts"][0]["cohort"] == second["cohorts"][0]["cohort"]


def test_a_cassette_miss_stops_the_run_unless_told_to_hold(
    arena: Arena, tmp_path: Path, hand_tape_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text("")
    monkeypatch.setenv("ARENA_LLM_MODE", "replay")
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(cassette))
    stopped = arena(
        "replay", *replay_args(hand_tape_file, tmp_path / "a.db"), catch_exceptions=False
    )
    assert stopped.exit_code == 1
    [line] = stopped.output.strip().splitlines()
    assert line.startswith("Error: agent llm, cohort 2024-01-07-")
    assert ", week 1: the recording " in line and "holds no answer from test/model" in line
    monkeypatch.setenv("ARENA_LLM_ON_MISS", "error")  # put back after the test; --on-miss sets it
    held = arena(
        "replay",
        *replay_args(hand_tape_file, tmp_path / "b.db", "--on-miss", "hold"),
        catch_exceptions=False,
    )
    assert held.exit_code == 0, held.output
    with EventStore.open(tmp_path / "b.db") as store:
        made = [e for e in store.read() if isinstance(e, DecisionMade)]
    assert made and all(d.action == "HOLD" and "holds no answer" in (d.error or "") for d in made)


def test_step_shows_each_decisions_calls_and_the_agents_so_far(
    arena: Arena, tmp_path: Path, server: FakeLLM
) -> None:
    """Week 1 takes a 503, a rejected answer and the re-asked HOLD: 3 calls, 2 answered
    (2 × 1,200 tokens in); week 2 one call, so far 4 calls and 3 × 1,200 in."""
    server.queue(Reply(status=503), GARBAGE, HOLD)
    db = tmp_path / "run.db"
    run(db)
    shown = arena("step", db, "--json")
    frames = json.loads(shown.output)
    first, second = frames[0], frames[1]
    assert (first["model_usage"]["calls"], first["model_usage"]["reasks"]) == (3, 1)
    assert (first["model_usage"]["failures"], first["model_usage"]["tokens_in"]) == (1, 2400)
    assert second["model_usage"]["calls"] == 1
    assert second["model_usage_so_far"]["calls"] == 4
    assert second["model_usage_so_far"]["tokens_in"] == 3600
    text = arena("step", db, "--no-input").output
    assert "this decision: 3 model calls (1 re-asks, 1 failed)" in text


def test_arena_cassette_exports_a_log(arena: Arena, tmp_path: Path, server: FakeLLM) -> None:
    db = tmp_path / "run.db"
    run(db)
    out = tmp_path / "answers.jsonl"
    done = arena("cassette", db, out)
    n = len(server.received)
    assert done.exit_code == 0 and done.output == f"{n} model question(s) written to {out}\n"
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == n and all(line["model"] == MODEL for line in lines)
    again = arena.json("cassette", db, tmp_path / "again.jsonl")
    assert again == {"questions": n, "cassette": str(tmp_path / "again.jsonl"), "db": str(db)}
    broken = tmp_path / "not-a-log.db"
    broken.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    failed = arena("cassette", broken, tmp_path / "x.jsonl")
    assert failed.exit_code == 1 and failed.output.startswith("Error: cassette ")
    assert not (tmp_path / "x.jsonl").exists()  # it was left behind, empty


def test_arena_cassette_never_writes_over_its_log_nor_reads_an_edited_one(
    arena: Arena, tmp_path: Path, server: FakeLLM
) -> None:
    """``arena cassette run.db run.db`` opened the output first: the log was emptied. A log
    edited after the run gave its edited answers, which a replay would take for the run's."""
    db = tmp_path / "run.db"
    run(db)
    kept = db.read_bytes()
    said = arena("cassette", db, tmp_path / "." / "run.db")
    assert said.exit_code == 1
    assert (
        said.output
        == f"Error: cassette {tmp_path / '.' / 'run.db'}: is the log itself; name another file\n"
    )
    assert db.read_bytes() == kept
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute(
        "UPDATE events SET payload = payload || ' '"
        " WHERE seq = (SELECT min(seq) FROM events_view WHERE type = 'ModelCalled')"
    )
    conn.commit()
    conn.close()
    out = tmp_path / "answers.jsonl"
    said = arena("cassette", db, out)
    assert said.exit_code == 1 and "was altered (hash mismatch)" in said.output
    assert not out.exists()
