"""Every "methodology §x.y" the code cites names a section of docs/methodology.md, so a
citation never points outside the repository or at a section that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"methodology §(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?) ", re.M)


def test_every_cited_section_exists() -> None:
    sections = set(HEADING.findall((ROOT / "docs" / "methodology.md").read_text()))
    cited: dict[str, str] = {}
    for folder in ("ledger", "replays", "strategies", "arena", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            for number in CITED.findall(path.read_text(encoding="utf-8")):
                cited.setdefault(number, str(path.relative_to(ROOT)))
    assert len(cited) >= 15  # the code leans on the document throughout
    missing = {n: where for n, where in cited.items() if n not in sections}
    assert not missing, f"cited but not in docs/methodology.md: {missing}"
