"""``arena backtest --report``'s page at 1400 and 1900 px, as Chromium lays it out: every
column of every table in view, none behind a horizontal scroll. Long headers wrap instead of
widening their columns, the paired differences (``strategy − agent``, its interval and
``sig.``) are a table of their own, and the per-cohort table of four agents' twelve columns
names each agent once over its three."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from arena.backtests.page import cohort_table
from tests.browser import _run as chromium_run
from tests.conftest import Arena

_PROBE = """<script>
(() => {
  const cut = [];
  const viewport = document.documentElement.clientWidth;
  for (const table of document.querySelectorAll("table")) {
    const box = table.closest("div.scroll") || table.parentElement;
    const edge = Math.min(viewport, box.getBoundingClientRect().right);
    if (table.getBoundingClientRect().right <= edge + 1) continue;
    let h = box.previousElementSibling;
    while (h && h.tagName !== "H2") h = h.previousElementSibling;
    cut.push(`${h ? h.id : ""}: ${table.querySelector("th").textContent}`);
  }
  document.body.setAttribute("data-cut", JSON.stringify(cut));
})();
</script>"""


def tables_cut(html: str, width: int) -> list[str]:
    """Every table whose right edge Chromium lays out past the window's or past its box's (where
    a horizontal scroll hides it), in a window ``width`` × 900, as "section: first header"
    (the section its ``h2``'s id)."""
    with tempfile.TemporaryDirectory(prefix="arena-probe-") as tmp:
        page = Path(tmp) / "probe.html"
        page.write_text(html.replace("</body>", _PROBE + "</body>"))
        dom = chromium_run(page, "--dump-dom", f"--window-size={width},900")
    found = re.search(r'data-cut="([^"]*)"', dom)
    assert found, "the probe did not run"
    return list(json.loads(found.group(1).replace("&quot;", '"')))


def sections(cut: list[str]) -> set[str]:
    return {c.partition(":")[0] for c in cut}


@pytest.mark.slow  # headless Chromium started
def test_the_summary_and_the_per_cohort_table_fit_1400_px(arena: Arena, tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = ("--universe", "10", "--starts", "2024-09-01..2024-09-08", "--jobs", "1")
    made = arena("backtest", "favourite", *args, "--db", tmp_path / "b.db", "--report", out)
    assert made.exit_code == 0, made.output
    html = (out / "index.html").read_text()
    assert "strategy − agent" in html and "Brier (paid)" in html
    assert tables_cut(html, 1400) == []  # the summary and the per-cohort table
    # the probe sees a cut: at 700 px both do scroll
    assert {"summary", "per-cohort"} <= sections(tables_cut(html, 700))


def test_each_agent_is_named_once_over_its_three_columns() -> None:
    cohort = {"cohort": "2024-09-01-f8cb65df", "markets": 10, "agents": {
        "strategy": {"return_pct": 1.84, "brier": 0.5434, "win_rate": 0.7},
        "hold": {"return_pct": 0.0, "brier": None, "win_rate": None},
    }}  # fmt: skip
    table = cohort_table({"settings": {"agents": ["strategy", "hold"]}, "cohorts": [cohort]})
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert (
        heads
        == ["cohort", "markets", "strategy", "hold"] + ["return", "Brier (impl.)", "win rate"] * 2
    )
    assert table.count('colspan="3"') == 2
    cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", table)]
    assert cells == ["2024-09-01-f8cb65df", "10", "+1.84%", "0.543", "70%", "+0.00%", "—", "—"]


TOUR = ("backtest", "sign", "--against", "hold,favourite", "--starts", "2024-09-01..2024-09-08",
        "--jobs", "1")  # fmt: skip
"""README's tour backtest (``sign --against hold,favourite``) on two of its Sundays, with all
101 markets: on ten the figures are narrower, and the one table of thirteen columns fitted."""


@pytest.fixture(scope="module")
def tour(arena: Arena, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """The tour's backtest page and its ``results.json``."""
    out = tmp_path_factory.mktemp("tour") / "backtest"
    made = arena(*TOUR, "--report", out)
    assert made.exit_code == 0, made.output
    return (out / "index.html").read_text(), json.loads((out / "results.json").read_text())


@pytest.mark.slow  # headless Chromium started
@pytest.mark.parametrize("width", [1400, 1900])
def test_every_column_of_the_tour_s_backtest_is_in_view(
    tour: tuple[str, dict[str, Any]], width: int
) -> None:
    """In one table of thirteen columns the summary's last, "sig.", lay past the page's 1100 px
    behind a horizontal scroll at 1400 px and at 1900 px alike."""
    html, _ = tour
    assert tables_cut(html, width) == []


def test_the_paired_differences_have_a_table_of_their_own(tour: tuple[str, dict[str, Any]]) -> None:
    html, data = tour
    [paired] = [t for t in re.findall(r"<table>.*?</table>", html) if "compared with" in t]
    cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", paired)]
    expected = []
    for name, pair in data["paired"].items():
        mark = "✓" if pair["significant"] else "·"
        expected += [name, f"{pair['mean']:+.2f}%",
                     f"[{pair['ci_low']:+.2f}, {pair['ci_high']:+.2f}]%", mark]  # fmt: skip
    assert cells == expected and list(data["paired"]) == ["hold", "favourite"]


def test_the_page_says_the_order_its_summary_is_in(tour: tuple[str, dict[str, Any]]) -> None:
    """The rows are the strategy, hold, favourite, as given: the note said "ranked by return",
    the leaderboard's words, over them (and over the per-cohort table too)."""
    html, data = tour
    text = " ".join(re.sub("<[^>]+>", " ", html).split())
    assert "The strategy first, then the agents it is compared with" in text
    assert "ranked by return" not in text
    rows = re.findall(r'<tr><td class="l">([^<]*)</td><td>\d+</td>', html)
    assert rows[:3] == list(data["summary"]) == ["strategy", "hold", "favourite"]
