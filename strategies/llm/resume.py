"""Answers a resumed run has already paid for: the model calls of a cohort's stored prefix,
served again instead of asked.

A run killed or interrupted mid-cohort leaves its log committed up to a decision (the runner
commits a slow run's decisions as they happen); the same command resumes it by replaying the
cohort from its start and checking the stored events against the new ones. The decisions in
that prefix asked a model live: asking again would pay twice, and might be answered otherwise,
so that the replay diverges from its own log. So while such a cohort runs (``answering``), the
live client (``strategies.llm.client.ChatClient``) looks here first: a question the prefix
holds an answer to, not served yet, is answered from it as a cassette player answers (a
question cut short live, by a time limit or a Ctrl-C, ends its decision the same way); every
other question goes to the model. An isolated agent's worker is sent none of them: it asks the
run for each as its agent asks the question (``serving``, ``arena.boundary.isolated``), since
the prefix's later questions state later prices.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.events import ModelCalled

if TYPE_CHECKING:
    from strategies.llm.cassette import Answers, Player, Source
    from strategies.llm.client import Answer, Request

_source: Source | None = None
_players: dict[str, Player] = {}
_lock = threading.Lock()
PREFIX = Path("the stored log")
"""What a resumed run's answers are named as (a ``Player`` names its recording)."""


def stored_answers(rows: Iterable[tuple[str, ModelCalled]]) -> Answers | None:
    """The questions of these ``(stream, ModelCalled)`` rows (a cohort's stored prefix, in log
    order) by question, or None when they hold none (a fresh run imports nothing for them)."""
    rows = list(rows)
    if not rows:
        return None
    from strategies.llm.cassette import Answers, questions_of

    answers = Answers(questions_of(rows))
    return answers if answers.questions else None


@contextmanager
def answering(rows: Iterable[tuple[str, ModelCalled]]) -> Iterator[int]:
    """Serve the questions of these ``(stream, ModelCalled)`` rows (a cohort's stored prefix,
    in log order) while the block runs; yields how many questions they hold."""
    answers = stored_answers(rows)
    with serving(answers):
        yield 0 if answers is None else answers.questions


@contextmanager
def serving(source: Source | None) -> Iterator[None]:
    """Serve stored answers from ``source`` (None: there are none) while the block runs: the
    rows' ``Answers`` in the run's process, the run itself in an isolated worker, which is
    sent no stored answer but those it asks for, one question at a time."""
    global _source
    if source is None:
        yield
        return
    with _lock:
        before = _source, dict(_players)
        _source = source
        _players.clear()
    try:
        yield
    finally:
        with _lock:  # a run stepped inside another's (a test's) gets its answers back
            _source = before[0]
            _players.clear()
            _players.update(before[1])


def stored_answer(model: str, request: Request) -> Answer | None:
    """The stored answer to ``request`` from ``model`` not served yet, or None (ask it)."""
    if _source is None:
        return None
    with _lock:
        if _source is None:
            return None
        player = _players.get(model)
        if player is None:
            from strategies.llm.cassette import Player

            player = _players[model] = Player(model, PREFIX, answers=_source)
    return player.serve(request)
