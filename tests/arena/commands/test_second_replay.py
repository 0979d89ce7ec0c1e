"""A second ``arena replay`` into a log that holds another run says so, and ``arena report``
then counts the log's cohorts (issue #28).

The newcomer's case: the tour's ``arena replay`` (the sample's one cohort, seven built-in
agents, 915 events), then ``arena replay --agent fav=favourite --agent coin=random`` with no
``--db``, which went into the same log without a word (its last line said 469 events; the log
held 1,384), and a report that opened "Leaderboard across 1 cohort(s)" over two cohorts."""

from __future__ import annotations

import json
import re
import shutil
from html import unescape
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import Result

from tests.conftest import Arena

SECOND = ("--agent", "fav=favourite", "--agent", "coin=random")


@pytest.fixture(scope="module")
def first(arena: Arena, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tour's first replay, alone in its log."""
    db = tmp_path_factory.mktemp("first") / "arena.db"
    result = arena("replay", "--db", db)
    assert result.exit_code == 0, result.output
    assert "already held" not in result.output  # a fresh log: nothing to say
    return db


@pytest.fixture(scope="module")
def second(arena: Arena, first: Path, tmp_path_factory: pytest.TempPathFactory) -> Second:
    """The second replay, with other agents, into a copy of the first's log."""
    db = tmp_path_factory.mktemp("second") / "arena.db"
    shutil.copy(first, db)
    result = arena("replay", *SECOND, "--db", db)
    assert result.exit_code == 0, result.output
    return Second(db, result)


class Second(NamedTuple):
    db: Path
    result: Result


def said(text: str) -> str:
    return " ".join(text.split())


def test_a_second_replay_says_the_log_held_another_run(arena: Arena, second: Second) -> None:
    db, result = second
    assert "1 cohort(s), 469 events (469 new)" in said(result.stdout)
    assert (
        f"{db} already held 1 other cohort, with agents contrarian, extremized, favourite, "
        "hold, linear, random, sign: it now holds 2 cohorts, 1,384 events, and 'arena report "
        f"{db}' ranks them all together; --db NEW.db keeps a run apart"
    ) in said(result.stdout)
    # with --json (run again: nothing new), the line goes to stderr and stdout is the document
    again = arena("replay", *SECOND, "--db", db, "--json")
    assert again.exit_code == 0, again.output
    assert f"{db} already held 1 other cohort, with agents contrarian" in said(again.stderr)
    assert len(json.loads(again.stdout)["cohorts"]) == 1


def test_a_resumed_or_repeated_run_of_the_same_cohorts_says_nothing(
    arena: Arena, first: Path
) -> None:
    result = arena("replay", "--db", first)
    assert result.exit_code == 0, result.output
    assert "(0 new)" in result.stdout and "already held" not in result.output


def test_more_starts_of_the_same_agents_say_the_same_agents(
    arena: Arena, first: Path, tmp_path: Path
) -> None:
    db = tmp_path / "more.db"
    shutil.copy(first, db)
    result = arena("replay", "--start", "2024-09-08", "--db", db)
    assert result.exit_code == 0, result.output
    assert f"{db} already held 1 other cohort, with the same agents: it now holds 2 cohorts" in (
        said(result.stdout)
    )


def test_the_report_counts_the_logs_cohorts_and_marks_the_contrarian(
    arena: Arena, second: Second, tmp_path: Path
) -> None:
    """Two cohorts, each agent in one of them: the heading said "across 1 cohort(s)". The
    contrarian lost 33 of 33 bets with an implied Brier of 0.000: marked, on the terminal and
    on the page."""
    result = arena("report", second.db, "--html", tmp_path / "page")
    assert result.exit_code == 0, result.output
    text = said(result.stdout)
    assert text.startswith(
        "Leaderboard across 2 cohort(s), by mean return (each agent in 1 of them)"
    )
    assert "agents ran in different cohorts (replays added to one log)" in text
    contrarian = next(s for s in result.stdout.splitlines() if s.startswith(" contrarian "))
    assert "0.000†" in contrarian.split()
    assert "†: Brier (impl.) better than the median of the table's" in text
    page = unescape(re.sub(r"<[^>]+>", " ", (tmp_path / "page" / "index.html").read_text()))
    assert "Leaderboard across 2 cohort(s), by mean return (each agent in 1 of them)" in page
    assert "0.000†" in page and "Brier (impl., pooled)" in page
    assert "Agents ran in different cohorts" in said(page)
