"""Text a tape carries (market ids, questions, outcome labels) reaches ``arena step``'s printed
frames: piped, they are written as plain text, where an escape sequence in a question once went
to the terminal as it was (issue 25). Each control character is now shown as its picture
(``␛`` for ESC), one character for one, so the frames keep their widths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.text import Text

from arena.engines.base import TapeSource
from arena.engines.driver import replay_cohorts
from arena.run.settings import RunOptions
from arena.step.printed import visible
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import save_tape
from tests.conftest import DAY, START, WEEK, Arena, hand_config

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m"


def _obeyed(text: str) -> set[str]:
    return {c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0}


@pytest.fixture(scope="module")
def hostile_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two binary markets with escapes in id and question, and one of three outcomes with
    escapes in its labels; the favourite bets on them."""
    binary = [
        MarketInfo(id=f"m{k}{ESCAPES}", question=f"Q{k}{ESCAPES}?", outcomes=("Yes", "No"),
                   volume=100.0 + k)
        for k in range(2)
    ]  # fmt: skip
    three = MarketInfo(id="three", question="Which?", volume=50.0,
                       outcomes=(f"red{ESCAPES}", "green", "blue"))  # fmt: skip
    times = np.array([START - DAY, START + DAY])
    series = {m.id: (times, np.array([0.7, 0.8])) for m in binary}
    series["three"] = (times, np.array([[0.6, 0.3, 0.1], [0.7, 0.2, 0.1]]))
    resolutions = [Resolution(market=m.id, ts=START + 2 * WEEK, winner="Yes") for m in binary]
    resolutions.append(Resolution(market="three", ts=START + 2 * WEEK, winner=f"red{ESCAPES}"))
    folder = tmp_path_factory.mktemp("hostile-frames")
    tape = folder / "hostile.tape"
    save_tape(Tape.from_series([*binary, three], series, resolutions, source="hostile"), tape)
    db = folder / "arena.db"
    config = hand_config({"fav": "favourite", "h": "hold"}, universe=3)
    replay_cohorts(TapeSource.load(tape), [config], db, RunOptions(jobs=1))
    return db


def test_piped_frames_show_control_characters_and_obey_none(
    arena: Arena, hostile_log: Path
) -> None:
    result = arena("step", hostile_log, "--agent", "fav", "--no-input")
    assert result.exit_code == 0, result.output
    assert _obeyed(result.output) == set()
    assert "Q1␛]0;pwned␛[2J�31m?" in result.output  # the question, every character shown
    assert "red␛]0;pwned␛[2J" in result.output  # an outcome label among the prices seen
    assert "m1␛]0;pwned" in result.output  # the id, in the bet and in the markets seen


def test_a_frame_keeps_its_width_with_control_characters_in_it(
    arena: Arena, hostile_log: Path
) -> None:
    result = arena("step", hostile_log, "--agent", "fav", "--no-input", env={"COLUMNS": "90"})
    framed = [line for line in result.output.splitlines() if line[:1] in ("╭", "│", "╰")]
    assert framed and {len(line) for line in framed} == {90}


def test_visible_pictures_one_character_for_one_and_keeps_styles() -> None:
    text = Text.from_markup("[bold]a\x1b[2Jb[/] c\x9b\x7f\td\ne")
    shown = visible(text)
    assert shown.plain == "a␛[2Jb c�␡␉d\ne"
    assert shown.spans == text.spans  # bold still covers "a␛[2Jb"
    assert visible(Text("plain")).plain == "plain"
