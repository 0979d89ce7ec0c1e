"""``llm``: a language model trades, as in Forecaster Arena v1.

Each decision is one chat (the v1 system prompt and this week's portfolio and markets), parsed
and checked by the v1 rules; a malformed answer is sent back once with the error, and an answer
that is still unusable, or a model that cannot be reached, becomes HOLD with the reason in the
log, so one bad week never stops the cohort. Every prompt, raw answer, token count, cost and
latency goes into the decision's trace.

``mode=record`` keeps every answer in a cassette file and ``mode=replay`` answers from it with
no network, so a recorded run can be replayed offline and gives the same log. The mode and the
cassette can also come from ``ARENA_LLM_MODE`` and ``ARENA_LLM_CASSETTE``: the agent spec is
part of a cohort's identity, and how the answers were fetched should not change it, so a run
recorded and replayed through the environment keeps its cohort id and its digest.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Literal, TypeVar

import httpx
import pydantic

from strategies.api import Context, Decision, Strategy, StrategyError, Trace, View
from strategies.llm_client import (
    DEFAULT_BASE_URL,
    Completer,
    Completion,
    LLMError,
    open_completer,
    total,
)
from strategies.llm_parse import ResponseError, parse_response
from strategies.llm_prompt import retry_prompt, system_prompt, user_prompt

T = TypeVar("T", int, float)


class LLMSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    base_url: str = pydantic.Field(default=DEFAULT_BASE_URL, description="chat-completions API")
    api_key_env: str = pydantic.Field(
        default="OPENROUTER_API_KEY", description="environment variable holding the API key"
    )
    timeout: float = pydantic.Field(default=40.0, gt=0, description="seconds per request")
    max_retries: int = pydantic.Field(default=1, ge=0, description="re-asks after a bad answer")
    network_retries: int = pydantic.Field(default=4, ge=0, description="on 429, 5xx, timeouts")
    backoff: float = pydantic.Field(default=3.0, ge=0, description="first retry wait, doubling")
    max_tokens: int = pydantic.Field(default=16_000, ge=1, description="longest answer")
    markets: int = pydantic.Field(default=500, ge=1, description="markets shown in the prompt")
    cassette: str | None = pydantic.Field(
        default_factory=lambda: os.environ.get("ARENA_LLM_CASSETTE") or None,
        validate_default=True,
        description="JSONL file of answers (default: $ARENA_LLM_CASSETTE)",
    )
    mode: Literal["live", "record", "replay"] = pydantic.Field(
        default_factory=lambda: os.environ.get("ARENA_LLM_MODE") or "live",
        validate_default=True,
        description="live, record or replay (default: $ARENA_LLM_MODE, else live)",
    )

    @pydantic.model_validator(mode="after")
    def _cassette_for_mode(self) -> LLMSettings:
        if self.mode != "live" and not self.cassette:
            raise ValueError(f"mode={self.mode} needs cassette=PATH")
        return self


class LLMAgent(Strategy):
    """Asks a chat model for each decision, with the Forecaster Arena v1 prompt and rules."""

    Settings = LLMSettings
    description = "a chat model trades with the Forecaster Arena v1 prompt (OpenRouter default)"
    settings: LLMSettings

    def __init__(
        self,
        path: str = "",
        *,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        completer: Completer | None = None,
        **values: Any,
    ) -> None:
        super().__init__(**values)
        if not path:
            raise StrategyError("llm needs a model: NAME=llm:openai/gpt-4o-mini")
        self.model = path
        self.initial_cash = 10_000.0
        self.completer = completer or self._completer(client, transport)

    def _completer(
        self, client: httpx.Client | None, transport: httpx.BaseTransport | None
    ) -> Completer:
        s = self.settings
        try:
            return open_completer(
                self.model, mode=s.mode, cassette=s.cassette, api_key_env=s.api_key_env,
                base_url=s.base_url, timeout=s.timeout, retries=s.network_retries,
                backoff=s.backoff, max_tokens=s.max_tokens, client=client, transport=transport,
            )  # fmt: skip
        except LLMError as exc:
            raise StrategyError(f"llm: {exc}") from None

    def setup(self, context: Context) -> None:
        super().setup(context)
        self.initial_cash = context.cash  # the P/L line of the prompt is against this

    def decide(self, view: View) -> Decision:
        system = system_prompt(view.min_bet, view.max_fraction)
        original = user_prompt(view, initial_cash=self.initial_cash, markets=self.settings.markets)
        prompt, retries = original, 0
        answers: list[Completion] = []
        while True:
            try:
                answers.append(
                    self.completer.complete(
                        [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
                    )
                )
            except LLMError as exc:
                reasoning = f"[SYSTEM DEFAULT] the model could not be asked: {exc}"
                return self._decision(Decision.hold(reasoning), prompt, answers, retries, str(exc))
            text = answers[-1].text
            try:
                parsed = parse_response(
                    text, cash=view.cash, min_bet=view.min_bet, max_fraction=view.max_fraction
                )
            except ResponseError as exc:
                if retries < self.settings.max_retries:
                    retries += 1
                    prompt = retry_prompt(original, str(exc), text)
                    continue
                reasoning = f"[SYSTEM DEFAULT] Failed after {retries} retries: {exc}"
                return self._decision(Decision.hold(reasoning), prompt, answers, retries, str(exc))
            return self._decision(
                Decision(parsed.bets, parsed.sells, parsed.reasoning), prompt, answers, retries
            )

    def _decision(
        self,
        decision: Decision,
        prompt: str,
        answers: list[Completion],
        retries: int,
        error: str | None = None,
    ) -> Decision:
        """``decision`` with its trace: the last prompt and answer, usage summed over calls."""
        trace = Trace(
            prompt=prompt,
            raw_response=answers[-1].text if answers else None,
            model=self.model,
            tokens_in=total(a.tokens_in for a in answers),
            tokens_out=total(a.tokens_out for a in answers),
            cost=total(a.cost for a in answers),
            latency_ms=total(a.latency_ms for a in answers),
            retries=retries,
            error=error,
        )
        return replace(decision, trace=trace)
