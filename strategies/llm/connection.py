"""How arena reaches a model: one connection configuration for the ``llm`` agent and the ``llm``
forecaster alike.

Everything here is about *how* answers are fetched, never *what* is asked, so none of it is part
of an agent spec and none of it enters a cohort id or the log's digest: a run recorded against
OpenRouter and replayed from a cassette, or from its own log, gives the same digest. It comes
from the environment, ``ARENA_LLM_<NAME>`` for each field below (``ARENA_LLM_BASE_URL``,
``ARENA_LLM_TIMEOUT``, ...); the commands that read an agents file copy its ``[llm]`` table
into the environment for the names the environment does not set, so the environment wins over
the file, for both agents the same way.

The defaults suit a slow local server (llama.cpp on two cores takes tens of seconds for one
decision) and OpenRouter alike: each attempt may take five minutes, a request the server may
still be working on (a read timeout) is not sent again unless ``retry_timeouts`` is set, and
rate limits, server errors, dropped connections and errors inside a 200 are tried again
``retries`` times with a doubling backoff (a 429's ``Retry-After`` wins over it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

import httpx
import pydantic

OPENROUTER = "https://openrouter.ai/api/v1"
OPENROUTER_KEY_ENV = "OPENROUTER_API_KEY"
PREFIX = "ARENA_LLM_"


class Connection(pydantic.BaseModel):
    """The connection settings, validated; ``Connection.from_env()`` is what agents use."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    base_url: str = pydantic.Field(default=OPENROUTER, description="chat-completions API root")
    api_key_env: str | None = pydantic.Field(
        default=None,
        description="variable holding the API key; unset: OPENROUTER_API_KEY for OpenRouter, "
        "none elsewhere; empty: none",
    )
    concurrency: int = pydantic.Field(default=8, ge=1, description="questions out at once")
    timeout: float = pydantic.Field(default=300.0, gt=0, description="seconds per attempt")
    connect_timeout: float = pydantic.Field(default=10.0, gt=0, description="seconds to connect")
    retries: int = pydantic.Field(default=3, ge=0, description="on 429, 5xx, drops, 200-errors")
    backoff: float = pydantic.Field(default=2.0, ge=0, description="first wait, doubling")
    max_wait: float = pydantic.Field(default=120.0, ge=0, description="longest Retry-After kept")
    retry_timeouts: bool = pydantic.Field(
        default=False, description="send again after a read timeout"
    )
    structured: bool = pydantic.Field(
        default=True, description="send a JSON schema as response_format"
    )
    mode: Literal["live", "record", "replay"] = "live"
    cassette: str | None = pydantic.Field(
        default=None, description="JSON Lines cassette, or a previous log (replay)"
    )
    on_miss: Literal["error", "hold"] = pydantic.Field(
        default="error", description="a replay question with no recording: stop, or HOLD"
    )

    @pydantic.field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        """Refused here, not at the first question: a URL httpx cannot send to made every
        call of a cohort a recorded failure and the run a column of HOLDs."""
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value

    @pydantic.model_validator(mode="after")
    def _cassette_for_mode(self) -> Connection:
        if self.mode != "live" and not self.cassette:
            raise ValueError(f"mode={self.mode} needs a cassette (ARENA_LLM_CASSETTE)")
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Connection:
        """The settings the ``ARENA_LLM_*`` variables give; a bad one is a ValueError naming
        the variable, in one line."""
        environ = os.environ if environ is None else environ
        values: dict[str, str] = {}
        for name in cls.model_fields:
            value = environ.get(PREFIX + name.upper())
            if value is not None and (value != "" or name == "api_key_env"):
                values[name] = value
        try:
            return cls.model_validate(values)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            where = PREFIX + str(error["loc"][0]).upper() if error["loc"] else PREFIX + "MODE"
            own = error.get("ctx", {}).get("error") if error["type"] == "value_error" else None
            raise ValueError(f"{where}: {own or error['msg']}") from None

    @property
    def key_env(self) -> str | None:
        """The variable that must hold the key, or None when no key is sent."""
        if self.api_key_env is not None:
            return self.api_key_env or None
        return OPENROUTER_KEY_ENV if self.base_url.rstrip("/") == OPENROUTER else None


def environment_defaults(table: Mapping[str, object]) -> dict[str, str]:
    """An agents file's ``[llm]`` table as ``ARENA_LLM_*`` variables, checked against the
    fields above (an unknown name is a ValueError); the caller sets those the environment
    lacks."""
    out: dict[str, str] = {}
    for name, value in table.items():
        if name not in Connection.model_fields:
            known = ", ".join(Connection.model_fields)
            raise ValueError(f"[llm] has no setting {name!r} (known: {known})")
        out[PREFIX + name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
    return out
