"""``arena report DB --html DIR``: the page as a person sees it, rendered by headless Chromium.

A replay of three weekly cohorts with a favourite-backer and an agent that only holds cash (a
flat line at $10,000, the case whose axis once read "10,000" five times). The screenshot is
decoded to pixels and checked for what the eye checks; the layout is measured in the browser.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.reports.charts import PALETTE, nice_ticks, padded, tick_labels
from arena.reports.html import (
    _categories_table,
    _leaderboard_table,
    cost_section,
    replay_settings,
)
from tests.browser import dates_wrapped, screenshot
from tests.conftest import Arena

AGENTS = ("--agent", "fav=favourite", "--agent", "idle=hold")


@pytest.fixture(scope="module")
def page(arena: Arena, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("html")
    db = tmp / "run.db"
    starts = ("--starts", "2024-09-01..2024-09-15")
    args = [*starts, "--universe", "8", *AGENTS, "--jobs", "1", "--db", str(db)]
    made = arena("replay", *args)
    assert made.exit_code == 0, made.output
    written = arena("report", db, "--html", tmp / "out")
    assert written.exit_code == 0, written.output
    return tmp / "out" / "index.html"


def hex_rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[k : k + 2], 16) for k in (1, 3, 5)])


def near(pixels: np.ndarray, colour: str, tolerance: int = 40) -> np.ndarray:
    """Pixels within ``tolerance`` of ``colour`` on every channel (lines are anti-aliased)."""
    return np.asarray((np.abs(pixels.astype(np.int64) - hex_rgb(colour)) <= tolerance).all(-1))


@pytest.mark.slow  # headless Chromium started, the page drawn and decoded
def test_the_page_as_chromium_draws_it(page: Path, tmp_path: Path) -> None:
    """At half scale a plot is 275 px wide; agents take the palette in leaderboard order."""
    board = json.loads((page.parent / "report.json").read_text())["leaderboard"]
    colour = {row["agent"]: PALETTE[k] for k, row in enumerate(board)}
    pixels = screenshot(page, tmp_path / "page.png", 1000, 2600)
    ink = (pixels < 200).any(-1)
    assert ink.mean() > 0.02, "the page is (nearly) blank"
    for agent in ("fav", "idle"):
        xs = np.nonzero(near(pixels, colour[agent]))[1]
        assert xs.size > 200, f"no curve drawn for {agent}"
        assert xs.max() - xs.min() > 200, f"{agent}'s strokes do not cross a plot"
    # the holder's line is flat: one row holds a straight run across the plot
    assert near(pixels, colour["idle"]).sum(axis=1).max() > 200
    # the favourite-backer's curves move: its colour is on many rows
    assert np.count_nonzero(near(pixels, colour["fav"]).any(axis=1)) > 40


@pytest.mark.slow  # headless Chromium started to measure the layout
def test_no_date_breaks_across_lines(page: Path) -> None:
    html = page.read_text()
    # in a window narrower than the tables, the tables scroll and the dates stay whole
    assert dates_wrapped(html, 500) == []
    # the probe can tell: without the rules that keep them whole, dates break at a hyphen
    loose = html.replace("white-space: nowrap;", "")
    assert dates_wrapped(loose, 500) != []


def test_flat_axes_read_distinct_labels(page: Path) -> None:
    html = page.read_text()
    idle = html[: html.index("<figcaption>idle</figcaption>")].split("<svg")[-1]  # its curve
    labels = re.findall(r'text-anchor="end">([^<]+)</text>', idle)
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
    assert "10,000" in labels


def test_the_page_holds_what_reproduces_the_run(page: Path) -> None:
    html = page.read_text()
    text = re.sub(r"<[^>]+>", "", html)  # what the reader sees
    data = json.loads((page.parent / "report.json").read_text())
    for needle in (data["digest"], data["package_version"], "arena replay --tape sample",
                   "--agent fav=favourite", "Brier (impl., pooled)", "BSS mkt",
                   "bootstrap over the", "By category", "Reliability"):  # fmt: skip
        assert needle in text
    tape = data["cohorts"][0]["settings"]["tape"]
    assert tape in html and "2024-09-15" in html
    for external in ("<script", "<link", "src=", "href=", "@import", "url("):
        assert external not in html
    assert "Cost of model calls" not in html  # no model calls, no cost section


def test_the_command_the_page_gives_replays_the_same_log(
    page: Path, arena: Arena, tmp_path: Path
) -> None:
    """Run as written (the embedded tape named ``sample``), it gives the log's digest; a
    tape other than the sample is named by its hash, for the reader to find."""
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
    line = next(s for s in text.splitlines() if "arena replay --tape" in s)
    words = shlex.split(line[line.index("arena replay") : line.index(" (")])
    data = json.loads((page.parent / "report.json").read_text())
    again = arena(*words[1:], "--db", tmp_path / "again.db", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["digest"] == data["digest"]
    for cohort in data["cohorts"]:
        cohort["settings"]["tape"] = "ab" * 32
    assert "arena replay --tape TAPE-abababababab" in re.sub(r"<[^>]+>", "", replay_settings(data))


def test_a_cost_section_appears_when_the_data_has_it() -> None:
    assert cost_section(None) == []
    usage = {"gpt": {"calls": 12, "tokens_in": 3400, "cost": 0.0315, "latency_median_ms": 1.5}}
    html = "".join(cost_section(usage))
    assert "Cost of model calls" in html
    for cell in ("gpt", "calls", "12", "tokens in", "3,400", "USD", "0.0315", "median ms"):
        assert f">{cell}<" in html


@given(
    low=st.floats(-1e6, 1e6, allow_nan=False),
    width=st.floats(0, 1e4, allow_nan=False),
)
def test_tick_labels_never_repeat(low: float, width: float) -> None:
    ticks = nice_ticks(*padded(low, low + width))
    labels = tick_labels(ticks, "{:,.0f}")
    assert len(set(labels)) == len(labels)


def test_a_flat_line_gets_a_readable_range() -> None:
    # ±1% of the value: 9,900 .. 10,100, ticks 50 apart, whole dollars
    low, high = padded(10_000.0, 10_000.0)
    assert (low, high) == (9_900.0, 10_100.0)
    assert tick_labels(nice_ticks(low, high), "{:,.0f}") == [
        "9,900", "9,950", "10,000", "10,050", "10,100",
    ]  # fmt: skip
    assert tick_labels([0.1, 0.15, 0.2], "{:.1f}") == ["0.10", "0.15", "0.20"]


def test_the_command_gives_back_the_execution_model_and_the_books(
    arena: Arena, tmp_path: Path
) -> None:
    """A run on the embedded books under l2 with a latency: the page's command, run as
    written, meets the same books the same way and gives the log's digest."""
    db = tmp_path / "btc.db"
    run = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                "--decisions", "1m", "--marks", "1m", "--execution", "l2", "--latency", "500",
                "--agent", "fav=favourite", "--db", db, "--json")  # fmt: skip
    assert run.exit_code == 0, run.output
    assert arena("report", db, "--html", tmp_path / "page").exit_code == 0
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "page" / "index.html").read_text()))
    line = next(s for s in text.splitlines() if "arena replay --tape" in s)
    words = shlex.split(line[line.index("arena replay") : line.index(" (")])
    assert words[words.index("--execution") + 1] == "l2" and "--books" not in words
    assert words[words.index("--latency") + 1] == "500"
    again = arena(*words[1:], "--db", tmp_path / "again.db", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["digest"] == json.loads(run.output)["digest"]


def test_categories_are_polymarkets_with_the_tapes_labels_kept(page: Path) -> None:
    """The election sample's Gamma labels ("senates", "Governor Races", …) are all Politics;
    the page and report.json keep the labels beside it."""
    rows = json.loads((page.parent / "report.json").read_text())["categories"]
    labels = ["Nevada", "pennsylvania", "presidential election", "republican party", "senates",
              "wisconsin"]  # fmt: skip
    assert [(r["agent"], r["category"], r["labels"]) for r in rows] == [("fav", "Politics", labels)]
    assert ", ".join(labels) in page.read_text()


def test_the_leaderboard_reads_as_the_terminal_does() -> None:
    """1,131 bets with its comma, and BSS to two decimals as the terminal shows them (the page
    said "1131" and "+0.123" where the terminal said "1,131" and "+0.12")."""
    row = {"agent": "fav", "cohorts": 26, "n_bets": 1131, "total_pnl": 91.85,
           "return_mean": 0.92, "return_ci_low": -1.0, "return_ci_high": 2.5, "brier": 0.385,
           "brier_paid": 0.0001, "bss": 0.1234, "bss_market": -0.5449, "win_rate": 1.0,
           "interval": "t"}  # fmt: skip
    cells = re.findall(r"<td[^>]*>(.*?)</td>", _leaderboard_table([row], [False]))
    assert cells[2] == "1,131" and cells[8:10] == ["+0.12", "-0.54"]


def test_the_tapes_labels_sit_left_under_a_left_heading() -> None:
    row = {"agent": "fav", "category": "Politics", "markets": 1200, "n_bets": 1131,
           "pnl": 5.0, "return_pp": 0.1, "brier": 0.3, "labels": ["senates", "Nevada"]}  # fmt: skip
    page = _categories_table([row])
    heads = re.findall(r"<th((?: [^>]*)?)>(.*?)</th>", page)
    cells = re.findall(r"<td([^>]*)>(.*?)</td>", page)
    aligned = [(h, c[0]) for (_, h), c in zip(heads, cells, strict=True)]
    assert aligned == [
        ("agent", ' class="l"'), ("category", ' class="l"'), ("markets", ""), ("bets", ""),
        ("P/L ($)", ""), ("return", ""), ("Brier (impl., pooled)", ""),
        ("labels (the tape&#x27;s)", ' class="l"'),
    ]  # fmt: skip
    assert [h[0] for h in heads] == [c[0] for c in cells]  # each heading as its column
    assert cells[2][1] == "1,200" and cells[3][1] == "1,131"
