"""``arena report``'s coverage ledger of the order books a run met, for the markets it traded:
found for the embedded sample, read from ``--books``, and one line when it cannot be shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.reports.coverage import coverage
from ledger.events import CohortOpened
from ledger.projection import Ledger
from replays.bookfile import load_books
from replays.samples import SAMPLE_BOOKS_HASH, sample_books_paths
from replays.validate_books import ledger
from tests.conftest import Arena

TRADED = "0xfb85ca82aa27f2ae7ea27513c8e341f029168fb664e78f8d82ab585af9af1028"


@pytest.fixture(scope="module")
def run(arena: Arena, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("books") / "run.db"
    args = ("--tape", "sample-books", "--execution", "l2", "--books", "sample-books")
    made = arena("replay", *args, "--db", db)
    assert made.exit_code == 0, made.output
    return db


def test_the_sample_books_are_found_and_only_the_traded_market_is_shown(
    arena: Arena, run: Path
) -> None:
    """The sample's cohort lists one market; ``favourite`` and ``contrarian`` bought in it. Its
    ledger is the one ``arena tapes validate`` counts for it: 2 × 1,016 snapshots, 56 gaps
    over 10 s, 218 one-sided books, 2 tick changes, 1,000 YES/NO pairs all mirrored."""
    data = arena.json("report", run)
    (books,) = data["coverage"]
    assert (books["books"], books["markets"], books["missing"]) == (
        SAMPLE_BOOKS_HASH, [TRADED], None
    )  # fmt: skip
    (entry,) = books["ledger"]
    expected = ledger(load_books(sample_books_paths()[1]), 10.0, {TRADED})[0].as_dict()
    assert entry == expected
    counts = ("snapshots", "gaps", "one_sided", "tick_changes", "mirror_pairs",
              "mirror_mismatches")  # fmt: skip
    assert [entry[k] for k in counts] == [2_032, 56, 218, 2, 1_000, 0]
    text = arena("report", run).stdout
    assert "coverage of the 1 market(s) traded" in text
    assert f"{TRADED[:14]}" in text


def test_a_file_that_is_not_the_cohorts_books_is_one_line(
    arena: Arena, run: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.books"
    other.write_bytes(b"not a zip")
    shown = arena("report", run, "--books", other)
    assert shown.exit_code == 0, shown.output
    lines = [line for line in shown.stdout.splitlines() if "coverage ledger" in line]
    assert lines == [
        f"coverage ledger: {other}: corrupt or unreadable book file: File is not a zip file"
    ]
    assert "Traceback" not in shown.output


def opened(cohort: str, **settings: object) -> Ledger:
    log = Ledger()
    log.apply(
        CohortOpened(
            cohort=cohort, ts=0, start=0, rules="v1", cash=10_000.0, agents=["a"],
            decision_cadence="weekly", mark_cadence="daily", settings=dict(settings),
        )
    )  # fmt: skip
    return log


def test_books_not_found_are_named_in_one_line() -> None:
    """A cohort whose books are not the sample's, with no ``--books``: no table, one line."""
    (found,) = coverage(list(opened("c", books="ab" * 32).cohorts.values()))
    assert found.missing == (
        "coverage ledger: books abababababab not found; pass --books FILE to show it"
    )
    assert found.entries == ()
    # a cohort that met no books has no coverage at all
    assert coverage(list(opened("d").cohorts.values())) == []


def test_the_html_page_repeats_the_ledger(arena: Arena, run: Path, tmp_path: Path) -> None:
    made = arena("report", run, "--html", tmp_path / "out")
    assert made.exit_code == 0, made.output
    page = (tmp_path / "out" / "index.html").read_text()
    section = page[page.index('<h2 id="books">') : page.index('<h2 id="equity">')]
    cells = [c.split("</td>")[0] for c in section.split("<td>")[1:]]
    # snapshots, gaps, crossed, locked, one-sided, empty, tick changes, pairs, not mirrored
    assert cells == ["2,032", "56", "0", "0", "218", "0", "2", "1,000", "0"]
    assert TRADED in section
