"""The project's LLM forecaster where forecastbench plugs its AR model in: on the bits.

The connection (endpoint, key, cassette, concurrency) is the ``forecaster=llm:MODEL`` one,
built by ``strategies.llm.forecast.llm_forecaster`` from the ``ARENA_LLM_*`` environment,
asked for the same ``{"p_yes": …}`` schema and read by its ``parse_p_yes`` (methodology §2.8's
parser). Only the question differs:
a bit vector in one of the seed's two encodings instead of a market. As in the seed, an answer
that cannot be read (or a question that could not be asked) counts as ½ and as a failure,
so a model that says nothing scores as the constant forecaster rather than dropping rows.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from arena.forecasting.lab.parity import Encoding, encode
from arena.forecasting.lab.progress import Progress
from strategies.llm.client import Request
from strategies.llm.forecast import MAX_TOKENS, llm_forecaster, parse_p_yes
from strategies.llm.schema import FORECAST_SCHEMA

PROMPT = (
    "You are a probabilistic forecaster. An event happens with a probability that depends on "
    "the bits below in a way you must infer. Estimate the probability that it happens (YES), "
    "as a number between 0 and 1.\n"
    'Answer with this JSON object only, nothing else: {{"p_yes": <number>}}\n\n'
    "INFORMATION:\n{info}\n\nOUTPUT:\n"
)
FAILED = 0.5


class BitsModel(Protocol):
    """What the experiments need of a model that reads bit vectors."""

    name: str
    max_examples: int
    failures: int

    def forecast(self, z: np.ndarray, progress: Progress) -> np.ndarray: ...

    def describe(self) -> dict[str, Any]: ...


class LLMBits:
    """P(YES) per row of z from a chat model, one question per row."""

    def __init__(self, model: str, encoding: Encoding, max_examples: int) -> None:
        self._forecaster = llm_forecaster(model)
        self.name = f"llm:{self._forecaster.model}"
        self.encoding = encoding
        self.max_examples = max_examples
        self.failures = 0

    def describe(self) -> dict[str, Any]:
        return {
            "model": self._forecaster.model,
            "encoding": self.encoding,
            "max_examples": self.max_examples,
        }

    def _ask(self, row: tuple[int, np.ndarray]) -> float | None:
        index, z_row = row
        messages = [{"role": "user", "content": PROMPT.format(info=encode(z_row, self.encoding))}]
        request = Request(messages, f"row {index}", FORECAST_SCHEMA, 0, MAX_TOKENS)
        text = self._forecaster.completer.ask(request).text
        return None if text is None else parse_p_yes(text)

    def forecast(self, z: np.ndarray, progress: Progress) -> np.ndarray:
        """Rows asked ``concurrency`` at a time, answers kept in row order."""
        advance = progress.stage(f"asking {self.name}", len(z))
        out = np.empty(len(z))
        with ThreadPoolExecutor(self._forecaster.concurrency) as pool:
            for i, p in enumerate(pool.map(self._ask, enumerate(z))):
                if p is None:
                    self.failures += 1
                out[i] = FAILED if p is None else min(max(p, 0.0), 1.0)
                advance(1, f"{self.failures} failed")
        return out
