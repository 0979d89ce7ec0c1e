"""``arena bench llm``: how long the ``llm`` agent and the ``llm`` forecaster take against a
local model, and how much of each call is their own work rather than the model's.

Both run on the embedded election sample, one cohort from 2024-09-01 over its top ``markets``
markets, as ``llm:MODEL`` and ``sign?forecaster=llm:MODEL``:

- against the model (the bundled SmolLM2 started here on one thread, or ``base_url``): the
  first ``decisions`` weekly decisions of each are timed, and after them both hold without
  asking, so the bench stays short. Seconds per decision (and decisions per minute) is the
  agent's ``decide`` by the wall clock; seconds per question is the forecaster's ``decide``
  over its calls (each attempt is in the decision's trace); the parse rate is the share of the
  agent's decisions whose first answer parsed, and whose last did (after re-asks), with the
  tokens it spent;
- the agents' own work, the model left out, two ways: in memory against an instant model with
  500 markets shown (``strategies.llm.overhead``: prompt, schema, parse, trace), and through
  the whole path of a replay against ``CannedLLM``, an endpoint on 127.0.0.1 that answers at
  once (the above plus the runner, httpx and loopback HTTP), deciding daily. Both against a
  target of 5 ms a call;
- what committing each decision as it is made costs (``RunOptions.commit_every`` 0, what a
  model-backed agent slower than ``commit_every`` gets): the same daily cohort of rule-based
  agents written to a log once per decision and in one batch, the difference per decision.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any

import numpy as np

from arena.bench.canned_llm import CannedLLM
from arena.llm_server import serve
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import ModelCall
from ledger.store import EventStore
from replays.samples import sample_path
from replays.tapefile import load_tape
from strategies.api import Context, Decision, Strategy, Trace, View
from strategies.llm.connection import PREFIX
from strategies.llm.overhead import measure_overhead
from strategies.loader import build_strategy

START = datetime(2024, 9, 1, tzinfo=UTC)
OVERHEAD_TARGET_MS = 5.0
AGENT_ANSWER = '{"action": "HOLD", "reasoning": "nothing here is mispriced enough to trade"}'
FORECAST_ANSWER = '{"p_yes": 0.5}'
AGENT_MAX_TOKENS = 256
"""Enough for a three-bet answer (about 140 tokens from SmolLM2, pretty-printed)."""


def calls_of(decision: Decision) -> int:
    """The requests behind one decision: every attempt is in its trace."""
    return len(decision.trace.calls) if decision.trace else 0


class Timed(Strategy):
    """Times ``inner``'s first ``limit`` decisions and counts the requests behind each; after
    them it holds without asking.

    The clock is bound when the strategy is made: inside ``decide`` freezegun has replaced
    the module-level time functions with the simulated clock.
    """

    def __init__(
        self,
        inner: Strategy,
        limit: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(settings=inner.settings)
        self.inner = inner
        self.limit = limit
        self.seconds: list[float] = []
        self.per_call: list[float] = []
        self.calls = 0
        self.traces: list[Trace] = []
        self._clock = clock

    def setup(self, context: Context) -> None:
        self.inner.setup(context)

    def decide(self, view: View) -> Decision:
        if self.limit is not None and len(self.seconds) >= self.limit:
            return Decision()
        began = self._clock()
        decision = self.inner.decide(view)
        seconds = self._clock() - began
        calls = calls_of(decision)
        self.seconds.append(seconds)
        self.per_call.append(seconds / max(calls, 1))
        self.calls += calls
        if decision.trace is not None:
            self.traces.append(decision.trace)
        return decision


@contextmanager
def _connected(base_url: str) -> Iterator[None]:
    """A live connection to ``base_url`` with no key, for the agents built inside: the
    ``ARENA_LLM_*`` environment (read when an agent is built) is put back afterwards."""
    saved = {k: v for k, v in os.environ.items() if k.startswith(PREFIX)}
    for name in saved:
        del os.environ[name]
    os.environ |= {f"{PREFIX}BASE_URL": base_url, f"{PREFIX}API_KEY_ENV": ""}
    try:
        yield
    finally:
        for name in [k for k in os.environ if k.startswith(PREFIX)]:
            del os.environ[name]
        os.environ |= saved


def _agents(
    model: str, base_url: str, markets: int, max_tokens: int, limit: int | None
) -> tuple[Timed, Timed]:
    """The ``llm`` agent and ``sign`` over the ``llm`` forecaster, connected to ``base_url``."""
    with _connected(base_url):
        agent = build_strategy(f"llm:{model}?markets={markets}&max_tokens={max_tokens}")
        forecaster = build_strategy(f"sign?forecaster=llm:{model}")
    return Timed(agent, limit), Timed(forecaster, limit)


def _replay(markets: int, cadence: str, agent: Timed, forecaster: Timed) -> None:
    """One cohort of the sample with the two (the specs in the config only name them)."""
    config = CohortConfig(
        start=START,
        agents={"agent": "llm", "forecaster": "sign"},
        universe=markets,
        decision_cadence=cadence,
        mark_cadence="weekly",
    )
    strategies: dict[str, Strategy] = {"agent": agent, "forecaster": forecaster}
    CohortRunner(load_tape(sample_path()), config, strategies=strategies).run(None)


def parse_rates(traces: list[Trace]) -> tuple[float | None, float | None]:
    """Of the decisions that asked, the share whose first question's answer parsed, and whose
    last answer did (after re-asks): an answer parsed when its call has neither an error nor
    the parser's rejection."""
    asked = [t for t in traces if t.calls]
    if not asked:
        return None, None

    def parsed(call: ModelCall) -> bool:
        return call.error is None and call.rejected is None

    first = sum(parsed([c for c in t.calls if c.reask == 0][-1]) for t in asked)
    last = sum(parsed(t.calls[-1]) for t in asked)
    return round(first / len(asked), 3), round(last / len(asked), 3)


def _overhead_ms(timed: Timed) -> float:
    """The median decision's time per call: the first decision pays for imports and the
    connection, and a busy machine adds outliers; neither is the agent's own cost."""
    return round(float(np.median(timed.per_call)) * 1e3, 3)


def bench_llm(
    *,
    base_url: str | None = None,
    model: str | None = None,
    markets: int = 3,
    decisions: int = 2,
    max_tokens: int = AGENT_MAX_TOKENS,
) -> dict[str, Any]:
    """The figures of ``arena bench llm``; starts the bundled model unless ``base_url``."""
    server = serve(port=0) if base_url is None else nullcontext(None)
    with server as served:
        url = served.base_url if served else str(base_url)
        name = model or (served.model if served else "local")
        agent, forecaster = _agents(name, url, markets, max_tokens, decisions)
        _replay(markets, "weekly", agent, forecaster)
    with CannedLLM(AGENT_ANSWER) as canned_agent, CannedLLM(FORECAST_ANSWER) as canned_fc:
        bare_agent, _ = _agents(name, canned_agent.base_url, markets, max_tokens, None)
        _, bare_fc = _agents(name, canned_fc.base_url, markets, max_tokens, None)
        _replay(markets, "daily", bare_agent, bare_fc)
    own = measure_overhead(markets=500, repeats=20)
    commit_ms = commit_ms_per_decision(markets)
    http = {"agent": _overhead_ms(bare_agent), "forecaster": _overhead_ms(bare_fc)}
    first, after = parse_rates(agent.traces)
    spent = sum(agent.seconds)
    return {
        "model": name,
        "server": f"{url} ({'started here: llama.cpp, 1 thread' if served else 'given'})",
        "markets": markets,
        "agent_decisions": len(agent.seconds),
        "agent_calls": agent.calls,
        "seconds_per_decision": _mean(agent.seconds, len(agent.seconds)),
        "decisions_per_minute": round(60 * len(agent.seconds) / spent, 3) if spent else None,
        "parsed_first_try": first,
        "parsed_after_reasks": after,
        "agent_tokens_in": sum(t.tokens_in or 0 for t in agent.traces),
        "agent_tokens_out": sum(t.tokens_out or 0 for t in agent.traces),
        "forecaster_decisions": len(forecaster.seconds),
        "questions": forecaster.calls,
        "seconds_per_question": _mean(forecaster.seconds, forecaster.calls),
        "agent_own_ms_per_decision_500_markets": round(own["decision_ms_best"], 3),
        "forecaster_own_ms_per_question": round(own["forecast_question_ms"], 3),
        "agent_ms_per_call_with_http": http["agent"],
        "forecaster_ms_per_call_with_http": http["forecaster"],
        "calls_with_http": canned_agent.requests + canned_fc.requests,
        "commit_ms_per_decision": commit_ms,
        "overhead_target_ms": OVERHEAD_TARGET_MS,
        "within_target": all(
            v <= OVERHEAD_TARGET_MS for v in [own["decision_ms_best"], *http.values()]
        ),
    }


def commit_ms_per_decision(markets: int) -> float:
    """Milliseconds a commit after every decision adds to a decision: a daily cohort of the
    sample with two rule-based agents, written into a fresh log with ``commit_every`` 0 and
    with no commit before its close; the best of three each, the difference per decision."""
    tape = load_tape(sample_path())
    agents = {"fav": "favourite", "hold": "hold"}
    config = CohortConfig(
        start=START, agents=agents, universe=markets, decision_cadence="daily",
        mark_cadence="weekly",
    )  # fmt: skip

    def best(every: float) -> tuple[float, int]:
        times, decisions = [], 0
        for _ in range(3):
            options = RunOptions(commit_every=every)
            runner = CohortRunner(tape, RunSettings(cohort=config, options=options))
            decisions = runner.schedule.decisions * len(agents)
            with (
                tempfile.TemporaryDirectory() as folder,
                EventStore.open(os.path.join(folder, "bench.db")) as store,
            ):
                began = time.perf_counter()
                runner.run(store)
                times.append(time.perf_counter() - began)
        return min(times), decisions

    each, decisions = best(0.0)
    batched, _ = best(1e9)
    return round(max(each - batched, 0.0) / decisions * 1e3, 3)


def _mean(seconds: list[float], n: int) -> float | None:
    return round(sum(seconds) / n, 3) if n else None
