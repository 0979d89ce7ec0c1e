"""Text a tape carries (market ids, categories) reaches ``arena report``'s tables as text: a
terminal's escape sequences are written out, not obeyed, and Rich's markup is not read.

Before, a category holding ``ESC ] 0 ; ... BEL`` and ``ESC [ 2 J`` retitled the terminal's
window and cleared its screen through ``arena report --all`` (issue 25).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arena.engines.base import TapeSource
from arena.engines.driver import replay_cohorts
from arena.run.settings import RunOptions
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import save_tape
from tests.conftest import DAY, START, WEEK, Arena, hand_config

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"


@pytest.fixture(scope="module")
def hostile_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three markets whose ids and categories carry escape sequences and markup, each in a
    category of its own (so ``--all`` shows the table per category)."""
    markets = [
        MarketInfo(id=f"m{k}{ESCAPES}", question=f"Q{k}?", outcomes=("Yes", "No"),
                   volume=100 + k, category=f"[b]c{k}[/b]{ESCAPES}")
        for k in range(3)
    ]  # fmt: skip
    series = {m.id: (np.array([START - DAY, START + DAY]), np.array([0.6, 0.7])) for m in markets}
    resolutions = [Resolution(market=m.id, ts=START + 2 * WEEK, winner="Yes") for m in markets]
    folder = tmp_path_factory.mktemp("hostile")
    tape = folder / "hostile.tape"
    save_tape(Tape.from_series(markets, series, resolutions, source="hostile"), tape)
    db = folder / "arena.db"
    config = hand_config({"fav": "favourite", "h": "hold"}, universe=3)
    replay_cohorts(TapeSource.load(tape), [config], db, RunOptions(jobs=1))
    return db


def test_report_all_writes_escape_sequences_out_and_reads_no_markup(
    arena: Arena, hostile_log: Path
) -> None:
    result = arena("report", hostile_log, "--all")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "[b]c0[/b]\\x1b]0;pwned\\x07" in result.output  # markup and escapes, as text
