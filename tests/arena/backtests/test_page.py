"""``arena backtest --report``'s page at 1400 px, as Chromium lays it out: the summary's
paired difference (``strategy − agent``, its interval and ``sig.``) in view, not behind a
horizontal scroll, because long headers wrap instead of widening their columns; and the
per-cohort table of four agents' twelve columns too, each agent named once over its three."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from arena.backtests.page import cohort_table
from tests.browser import _run as chromium_run
from tests.conftest import Arena

_PROBE = """<script>
(() => {
  const cut = [];
  for (const box of document.querySelectorAll("div.scroll")) {
    let h = box.previousElementSibling;
    while (h && h.tagName !== "H2") h = h.previousElementSibling;
    if (box.scrollWidth > box.clientWidth + 1) cut.push(h ? h.id : "");
  }
  document.body.setAttribute("data-cut", JSON.stringify(cut));
})();
</script>"""


def tables_scrolled(html: str, width: int) -> list[str]:
    """The sections (their ``h2`` ids) whose table is wider than the page at ``width``."""
    with tempfile.TemporaryDirectory(prefix="arena-probe-") as tmp:
        page = Path(tmp) / "probe.html"
        page.write_text(html.replace("</body>", _PROBE + "</body>"))
        dom = chromium_run(page, "--dump-dom", f"--window-size={width},900")
    found = re.search(r'data-cut="([^"]*)"', dom)
    assert found, "the probe did not run"
    return list(json.loads(found.group(1).replace("&quot;", '"')))


@pytest.mark.slow  # headless Chromium started
def test_the_summary_and_the_per_cohort_table_fit_1400_px(arena: Arena, tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = ("--universe", "10", "--starts", "2024-09-01..2024-09-08", "--jobs", "1")
    made = arena("backtest", "favourite", *args, "--db", tmp_path / "b.db", "--report", out)
    assert made.exit_code == 0, made.output
    html = (out / "index.html").read_text()
    assert "strategy − agent" in html and "Brier (paid)" in html
    assert tables_scrolled(html, 1400) == []  # the summary and the per-cohort table
    # the probe sees a cut: at 700 px both do scroll
    assert {"summary", "per-cohort"} <= set(tables_scrolled(html, 700))


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
