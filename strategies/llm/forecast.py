"""``forecaster=llm:MODEL``: a chat model's P(YES) per market, for the ``sign``/``linear`` rules.

This is forecastbench's AR predictor (methodology §2.8) in its CoT-free form, asked through an
OpenAI-compatible endpoint at temperature 0: one question per open binary market per decision,
answered with ``{"p_yes": <number>}`` (sent as a JSON schema, see ``strategies.llm.schema``) and
read by §2.8's three-step parser.

Where §2.8 turns an unreadable answer into 0.5, we give NaN: the trader then leaves that market
alone instead of betting on a number the model never said. Unreadable answers are counted in
``parse_failures``; a market the model could not be asked about (network, HTTP error) is NaN
too, counted in ``ask_failures``, and the cohort goes on. Every attempt is in the decision's
trace for the log's transcript, as the ``llm`` agent's are.

How answers are fetched is the shared ``Connection`` (``ARENA_LLM_*``, see
``strategies.llm.connection``), no part of the agent spec, so a run recorded and replayed keeps
its cohort id. ``concurrency`` is how many of a decision's questions are out at once (default
8; 1 asks them one after another). It changes only how long a decision takes: answers are
gathered, and counted and summed for the log, in the universe's market order, never in the
order they arrive, so a run recorded at 8 and replayed at 1 logs the same events.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import numpy as np
import pydantic

from ledger.events import ModelCall
from strategies.api import StrategyError, Trace, View
from strategies.forecaster_registry import ForecasterSettings
from strategies.llm import calls as call_log
from strategies.llm.calls import calls_trace
from strategies.llm.cassette import open_completer
from strategies.llm.client import Answer, Completer, LLMError, Request
from strategies.llm.connection import Connection
from strategies.llm.schema import FORECAST_SCHEMA

DEFAULT_MODEL = "openai/gpt-4o-mini"
MAX_TOKENS = 64
"""§2.8's budget min(256, 64 + 32·L) with no reasoning steps (L = 0)."""
PRICE_DIGITS = 4
"""Decimals of the price shown: its rounding (at most 0.00005) is far below ``MIN_EDGE``, so a
model that echoes the price back has no edge to trade on."""
MIN_EDGE = 0.01
"""The ``min_edge`` a trader on this forecaster defaults to: above the price's rounding and a
model's habit of answering in whole percents near the price."""
TAIL = 600
"""Rules 2 and 3 of §2.8 look only at the end of an answer."""

INSTRUCTIONS = (
    "You are a probabilistic forecaster. Estimate the probability that the question below "
    "resolves YES, as a number between 0 and 1.\n"
    'Answer with this JSON object only, nothing else: {"p_yes": <number>}'
)

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_P_YES = re.compile(rf"""["']?p_yes["']?\s*:\s*["']?({_NUMBER})\s*(%)?""", re.IGNORECASE)
_NAMED = re.compile(
    rf"(?:p\s*\(\s*yes\s*\)|probability\s+(?:of\s+)?yes)\s*[:=]\s*({_NUMBER})\s*(%)?",
    re.IGNORECASE,
)
_ANY_NUMBER = re.compile(rf"({_NUMBER})\s*(%)?")


def parse_p_yes(text: str) -> float | None:
    """P(YES) from a model's answer by §2.8's rules, or None when it cannot be read.

    1. ``p_yes: <num>`` anywhere (key and number quoted or not), if the number is in [0, 1];
    2. else, in the last 600 characters, ``p(yes)`` or ``probability [of] yes`` then ``:`` or
       ``=`` and a number, if the result is in [0, 1];
    3. else the last number of the last 600 characters: as is in [0, 1], divided by 100 in
       (1, 100], otherwise unreadable.

    In every rule a number followed by ``%`` is a percentage, divided by 100 first: "59.5%"
    is 0.595 and "0.5%" is 0.005, never 0.5; a negative one is unreadable. Where a rule
    matches more than once the last match counts (a model's final word). §2.8 clips every
    value to [0, 1]; rules 1 and 2 instead fall through when out of range, so "P(YES) = 70"
    reads as 0.70 rather than being clipped to 1.
    """
    stated = _P_YES.findall(text)
    if stated and (value := _probability(*stated[-1])) is not None:
        return value
    tail = text[-TAIL:]
    named = _NAMED.findall(tail)
    if named and (value := _probability(*named[-1])) is not None:
        return value
    numbers = _ANY_NUMBER.findall(tail)
    if not numbers:
        return None
    number, percent = numbers[-1]
    value = float(number)
    if percent:
        return value / 100.0 if 0.0 <= value <= 100.0 else None
    if 0.0 <= value <= 1.0:
        return value
    if 1.0 < value <= 100.0:
        return value / 100.0
    return None


def _probability(number: str, percent: str) -> float | None:
    """``number`` (over 100 if ``percent``) if that is in [0, 1], else None."""
    value = float(number) / (100.0 if percent else 1.0)
    return value if 0.0 <= value <= 1.0 else None


def _date(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def forecast_prompt(view: View, market: str, *, show_price: bool = True) -> str:
    """The question about one market: only what is knowable at the decision instant (its
    static facts, today's date and, with ``show_price``, its YES price now). Without the price
    the model forecasts blind, so its edge over the market is its own rather than an echo."""
    meta = view.markets.meta(market)
    lines = [f"Question: {meta.question}"]
    if meta.category:
        lines.append(f"Category: {meta.category}")
    if meta.end_ts is not None:  # scheduled: when it actually closed is not knowable yet
        lines.append(f"Closes: {_date(meta.end_ts)}")
    lines.append(f"Today: {_date(view.ts)}")
    if show_price:
        q = float(view.markets.yes[view.markets.index(market)])
        lines.append(f"Current market price of YES: {q:.{PRICE_DIGITS}f}")
    return f"{INSTRUCTIONS}\n\nINFORMATION:\n" + "\n".join(lines) + "\n\nOUTPUT:\n"


@dataclass(frozen=True, slots=True)
class Forecast:
    """What one market's question gave: the forecast (NaN if none) and every attempt."""

    p: float
    calls: tuple[ModelCall, ...]
    error: str | None = None

    @property
    def text(self) -> str | None:
        return self.calls[-1].answer if self.calls else None


class LLMForecaster:
    """``forecaster=llm[:MODEL]``: asks ``completer`` for each open binary market's P(YES),
    once per decision instant.

    Answers are kept for the current instant only, so a strategy may call ``forecast`` as
    often as it likes within a decision without asking again.

    With ``concurrency`` above 1 the questions of one call go out on that many threads (the
    completer must be thread-safe; those of ``llm_client`` are). Prompts are built, and
    answers read and counted, on the calling thread in market order. A call interrupted while
    it waits (the runner's time limit raises from SIGALRM) re-raises at once: questions not yet
    sent are cancelled and never sent, those in flight are cut (``Completer.abort``) and never
    sent again, and nothing of the interrupted call is kept here, so the next call starts
    clean; the calls it made are in the decision's log (``strategies.llm.calls``), which the
    plugin boundary records with the decision.
    """

    class Settings(ForecasterSettings):
        show_price: bool = pydantic.Field(
            default=True, description="the model is shown the market's current price"
        )

    argument: ClassVar[str] = "[:MODEL]"
    trader_defaults: ClassVar[Mapping[str, Any]] = {"min_edge": MIN_EDGE}
    """A model that echoes the shown price differs from it only by rounding."""

    @classmethod
    def from_settings(cls, arg: str, settings: pydantic.BaseModel) -> LLMForecaster:
        assert isinstance(settings, cls.Settings)
        return llm_forecaster(arg, show_price=settings.show_price)

    def __init__(
        self, model: str, completer: Completer, *, show_price: bool = True, concurrency: int = 1
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
        self.model = model
        self.completer = completer
        self.show_price = show_price
        self.concurrency = concurrency
        self.parse_failures = 0
        self.ask_failures = 0
        self._ts: int | None = None
        self._answers: dict[str, Forecast] = {}

    def forecast(self, view: View) -> np.ndarray:
        markets = view.markets
        if view.ts != self._ts:
            self._ts, self._answers = view.ts, {}
        q = np.asarray(markets.yes, dtype=np.float64)
        rows = np.flatnonzero(markets.open & markets.binary & np.isfinite(q))
        new = [m for m in (markets.ids[i] for i in rows) if m not in self._answers]
        if new:
            prompts = [forecast_prompt(view, m, show_price=self.show_price) for m in new]
            for market, answer in zip(new, self._ask_all(new, prompts), strict=True):
                self._answers[market] = self._forecast(answer)
        p = np.full(len(markets), np.nan)
        for i in rows:
            p[i] = self._answers[markets.ids[i]].p
        return p

    def _ask_all(self, markets: Sequence[str], prompts: Sequence[str]) -> list[Answer]:
        """What each prompt got, in the order of ``prompts``.

        Identical prompts (two markets alike in every line shown) are one task, asked one
        after another in market order: a cassette holding two answers to one question then
        serves them to the same markets whatever the concurrency.
        """
        alike: dict[str, list[int]] = {}
        for k, prompt in enumerate(prompts):
            alike.setdefault(prompt, []).append(k)
        asked = [[markets[k] for k in ks] for ks in alike.values()]
        workers = min(self.concurrency, len(alike))
        if workers == 1:
            groups = [self._ask(prompt, ms) for prompt, ms in zip(alike, asked, strict=True)]
        else:
            tasks: list[tuple[str, Sequence[str]]] = list(zip(alike, asked, strict=True))
            futures = _asked_together(call_log.bound(self._ask), tasks, workers)
            try:
                groups = [future.result() for future in futures]
            except BaseException as exc:  # the time limit, above all: give up on the rest, now
                call_log.stop_current(f"{type(exc).__name__}: {exc}")  # none sent from now on
                for future in futures:
                    future.cancel()
                self.completer.abort()  # and cut those in flight
                raise
        by_index = {
            k: outcome
            for ks, answers in zip(alike.values(), groups, strict=True)
            for k, outcome in zip(ks, answers, strict=True)
        }
        return [by_index[k] for k in range(len(prompts))]

    def _ask(self, prompt: str, markets: Sequence[str]) -> list[Answer]:
        """``prompt`` asked once for each of ``markets``, one after another; runs on a worker
        thread, so it touches nothing of the forecaster's but the completer."""
        messages = [{"role": "user", "content": prompt}]
        return [
            self.completer.ask(Request(messages, market, FORECAST_SCHEMA, 0, MAX_TOKENS))
            for market in markets
        ]

    def _forecast(self, answer: Answer) -> Forecast:
        text = answer.text
        if text is None:
            self.ask_failures += 1
            return Forecast(np.nan, answer.calls, answer.error)
        p = parse_p_yes(text)
        if p is None:
            self.parse_failures += 1
            problem = "no probability in the answer"
            last = call_log.reject(answer.last, problem)
            return Forecast(np.nan, (*answer.calls[:-1], last), problem)
        return Forecast(p, answer.calls)

    def trace(self) -> Trace | None:
        """The current instant's questions summed up for the decision log: every raw answer by
        market, total usage, and which markets got no forecast and why (None before any)."""
        if not self._answers:
            return None
        calls = [c for a in self._answers.values() for c in a.calls]
        failed = {m: a.error for m, a in self._answers.items() if a.error is not None}
        error = "; ".join(f"{m}: {e}" for m, e in failed.items()) or None
        texts = {m: a.text for m, a in self._answers.items() if a.text is not None}
        return calls_trace(
            self.model, calls, raw_response=json.dumps(texts, ensure_ascii=False), error=error
        )


def llm_forecaster(model: str = "", *, show_price: bool = True) -> LLMForecaster:
    """The forecaster of ``forecaster=llm[:MODEL]``, connected as the ``ARENA_LLM_*``
    environment says; a missing key or cassette, or a bad setting, is a one-line
    StrategyError at build time."""
    name = model or DEFAULT_MODEL
    try:
        connection = Connection.from_env()
        completer = open_completer(name, connection)
    except (LLMError, ValueError) as exc:
        raise StrategyError(f"forecaster llm:{name}: {exc}") from None
    return LLMForecaster(name, completer, show_price=show_price, concurrency=connection.concurrency)


def _asked_together(
    ask: Callable[[str, Sequence[str]], list[Answer]],
    tasks: list[tuple[str, Sequence[str]]],
    workers: int,
) -> list[Future[list[Answer]]]:
    """Each task asked on one of ``workers`` threads of this call's own, as futures in task
    order. The threads are daemons: a question still in flight after a time-out (in a backoff
    wait, or in a read the server never answers) keeps its thread to itself, and neither holds
    up the next decision nor keeps the process from exiting, as a ``ThreadPoolExecutor``'s
    threads would (they are joined at exit). A cancelled future is skipped."""
    futures: list[Future[list[Answer]]] = [Future() for _ in tasks]
    pending = deque(range(len(tasks)))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not pending:
                    return
                k = pending.popleft()
            future = futures[k]
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(ask(*tasks[k]))
            except BaseException as exc:
                future.set_exception(exc)

    for n in range(workers):
        threading.Thread(target=work, name=f"llm-forecast-{n}", daemon=True).start()
    return futures
