"""``llm``: a language model trades, as in Forecaster Arena.

Each decision is one chat (the system prompt of the cohort's rules, v1 or v2, and this week's
portfolio and markets), sent with a JSON schema of what the answer may contain
(``strategies.llm.schema``), parsed and checked by the v1 rules. An unusable answer (prose,
broken or truncated JSON, an amount out of bounds) is sent back with the reason,
``max_retries`` times; one still unusable, or a model that cannot be reached, becomes HOLD with
the reason, so one bad week never stops the cohort. Every attempt goes into the log as a
``ModelCalled`` (see ``arena.run.transcript``); the decision keeps the last answer and the
totals.

The spec names the model and what shapes its answers (``max_tokens``, ``markets``, reasoning
settings, re-asks); how it is reached (URL, key, timeouts, cassettes) is the shared
``Connection`` of ``strategies.llm.connection``, which is no part of the cohort's identity.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import httpx
import pydantic

from ledger.events import ModelCall
from strategies.api import Context, Decision, Strategy, StrategyError, View
from strategies.llm.calls import calls_trace, reject
from strategies.llm.cassette import open_completer
from strategies.llm.client import Completer, LLMError, Request, prompt_digest
from strategies.llm.connection import Connection
from strategies.llm.parse import ResponseError, parse_response
from strategies.llm.prompt import (
    fitted_markets,
    retry_prompt,
    system_prompt,
    top_markets,
    user_prompt,
)
from strategies.llm.schema import decision_schema

TEMPLATE_TOKENS = 64
"""Tokens a chat template adds around two messages (SmolLM2's: about 20), with room to spare."""
REASK_TOKENS = 400
"""Tokens a re-ask adds to the prompt: the reason and up to 500 characters of the answer."""

CONNECTION_KEYS = frozenset(
    {"base_url", "api_key_env", "timeout", "network_retries", "backoff", "cassette", "mode"}
)


class LLMSettings(pydantic.BaseModel):
    """What shapes the model's answers: part of the agent spec, hence of the cohort id."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    max_retries: int = pydantic.Field(default=1, ge=0, description="re-asks after a bad answer")
    max_tokens: int = pydantic.Field(default=2048, ge=1, description="longest answer")
    markets: int = pydantic.Field(default=500, ge=1, description="markets shown in the prompt")
    context: int | None = pydantic.Field(
        default=None,
        ge=256,
        description="the model's context in tokens: the prompt shows only the markets that fit "
        "beside max_tokens (and says how many it left out)",
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = pydantic.Field(
        default=None, description="a thinking model's effort (OpenRouter's reasoning.effort)"
    )
    reasoning_tokens: int | None = pydantic.Field(
        default=None, ge=1, description="a thinking model's budget (reasoning.max_tokens)"
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _no_connection(cls, data: Any) -> Any:
        found = sorted(CONNECTION_KEYS & set(data)) if isinstance(data, dict) else []
        if found:
            raise ValueError(
                f"{found[0]} is a connection setting, not part of the agent: set "
                f"ARENA_LLM_{found[0].upper()} or the agents file's [llm] table"
            )
        return data

    def reasoning(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.reasoning_effort is not None:
            out["effort"] = self.reasoning_effort
        if self.reasoning_tokens is not None:
            out["max_tokens"] = self.reasoning_tokens
        return out or None


class LLMAgent(Strategy):
    """Asks a chat model for each decision, with Forecaster Arena's prompt (the wording of the
    cohort's rules, v1 or v2) and the v1 parser."""

    Settings = LLMSettings
    description = (
        "a chat model trades with Forecaster Arena's prompt for the cohort's rules "
        "(any OpenAI-style API)"
    )
    settings: LLMSettings

    def __init__(
        self,
        path: str = "",
        *,
        connection: Connection | None = None,
        transport: httpx.BaseTransport | None = None,
        completer: Completer | None = None,
        **values: Any,
    ) -> None:
        super().__init__(**values)
        if not path:
            raise StrategyError("llm needs a model: NAME=llm:openai/gpt-4o-mini")
        self.model = path
        self.initial_cash = 10_000.0
        if completer is None:
            try:
                completer = open_completer(path, connection, transport=transport)
            except (LLMError, ValueError) as exc:
                raise StrategyError(f"llm: {exc}") from None
        self.completer = completer

    def setup(self, context: Context) -> None:
        super().setup(context)
        self.initial_cash = context.cash  # the P/L line of the prompt is against this

    def decide(self, view: View) -> Decision:
        s = self.settings
        system = system_prompt(view.min_bet, view.max_fraction, view.rules.version)
        shown, left_out = self._shown(view, system)
        original = user_prompt(
            view, initial_cash=self.initial_cash, markets=shown, left_out=left_out
        )
        schema = decision_schema(
            view.markets, top_markets(view.markets, shown), view.positions,
            cash=view.cash, min_bet=view.min_bet, max_bet=view.max_bet, max_tokens=s.max_tokens,
        )  # fmt: skip
        prompt, reask = original, 0
        calls: list[ModelCall] = []
        while True:
            messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
            answer = self.completer.ask(
                Request(messages, "decision", schema, reask, s.max_tokens, s.reasoning())
            )
            calls += answer.calls
            text = answer.text
            problem: str
            if text is None and answer.last.finish_reason != "length":
                problem = answer.error or "no answer"
                reasoning = f"[SYSTEM DEFAULT] the model could not be asked: {problem}"
                return self._decision(Decision.hold(reasoning), system, calls, reask, problem)
            try:
                if text is None:
                    raise ResponseError(answer.error or "the answer was cut off")
                parsed = parse_response(
                    text, cash=view.cash, min_bet=view.min_bet, max_fraction=view.max_fraction
                )
            except ResponseError as exc:
                problem = str(exc)
                calls[-1] = reject(calls[-1], problem)
                if reask < s.max_retries:
                    reask += 1
                    prompt = retry_prompt(original, problem, answer.last.answer or "")
                    continue
                reasoning = f"[SYSTEM DEFAULT] Failed after {reask} retries: {problem}"
                return self._decision(Decision.hold(reasoning), system, calls, reask, problem)
            decision = Decision(parsed.bets, parsed.sells, parsed.reasoning)
            return self._decision(decision, system, calls, reask)

    def _shown(self, view: View, system: str) -> tuple[int, int]:
        """How many markets the prompt shows, and how many of the ``markets`` it leaves out
        to fit ``context``: room for the answer (``max_tokens``), the chat template and, if the
        agent may re-ask, the reason and the echo of the previous answer."""
        s = self.settings
        if s.context is None:
            return s.markets, 0
        room = s.context - s.max_tokens - TEMPLATE_TOKENS - (REASK_TOKENS if s.max_retries else 0)
        shown = fitted_markets(
            view, system=system, initial_cash=self.initial_cash, markets=s.markets, room=room
        )
        return shown, len(top_markets(view.markets, s.markets)) - shown

    def _decision(
        self,
        decision: Decision,
        system: str,
        calls: list[ModelCall],
        reasks: int,
        error: str | None = None,
    ) -> Decision:
        """``decision`` with its trace: the last answer, usage summed over every attempt, and
        the attempts themselves for the transcript."""
        answered = [c for c in calls if c.answer is not None]
        trace = calls_trace(
            self.model,
            calls,
            raw_response=answered[-1].answer if answered else None,
            retries=reasks,
            error=error,
            prompts={prompt_digest(system): system},
        )
        return replace(decision, trace=trace)
