"""What a hostile plugin under ``--isolate`` sends the run on its worker's pipes, which its code
can reach (up its stack): the run unpickles none of it, and waits for none of it past the time
it would wait for an answer.

The check that a spec loads builds the plugin in a confined worker
(``arena.boundary.isolated._probe``), which says how the load went. Were the run to unpickle
what comes back, the plugin's code would run in the run's own process, outside every sandbox:
here a pickle that, unpickled, writes a file. The run reads it as msgspec bytes of one type
alone, so the check fails in one line and nothing runs. A decision's answer is read as it
arrives: half an answer, and nothing more, is a decision that timed out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger.events import DecisionMade
from ledger.store import EventStore
from tests.conftest import START

PLUGIN = """
import sys

from strategies.api import Decision, Strategy


class Planted:
    def __reduce__(self):
        return (open, ({marker!r}, "w"))


frame = sys._getframe()
while frame is not None and "conn" not in frame.f_locals:
    frame = frame.f_back
frame.f_locals["conn"].send(Planted())


class Quiet(Strategy):
    def decide(self, view):
        return Decision.hold()
"""


@pytest.mark.slow  # a command in a child process, which starts a worker
def test_a_plugin_that_answers_the_load_check_with_a_pickle_runs_nothing_in_the_run(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    marker = tmp_path / "ran-in-the-run"
    plugin = tmp_path / "plugin" / "planted.py"
    plugin.parent.mkdir()
    plugin.write_text(PLUGIN.format(marker=str(marker)))
    args = [sys.executable, "-c", "from arena.cli import main; main()", "replay",
            "--tape", str(hand_tape_file), "--db", str(tmp_path / "run.db"), "--start",
            "2024-01-07", "--agent", f"p={plugin}:Quiet", "--isolate"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=110)
    assert not marker.exists()
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: {plugin}:Quiet: its worker sent what is not a load's outcome\n"
    ), done.stderr


HALF = """
import os
import struct
import sys
import threading

from strategies.api import Decision, Strategy


class Half(Strategy):
    \"\"\"At the first decision, sends the run half an answer and swallows its time limit.\"\"\"

    def decide(self, view):
        if view.ts != {start}:
            return Decision.hold("whole")
        frame = sys._getframe()
        while frame.f_code.co_name != "serve":
            frame = frame.f_back
        os.write(frame.f_locals["conn"].fileno(), struct.pack("!i", 1000) + bytes(10))
        while True:
            try:
                threading.Event().wait(1)
            except BaseException:
                pass
"""


@pytest.mark.slow  # a replay in a child process; a worker killed and started again
def test_half_an_answer_is_a_decision_that_timed_out(tmp_path: Path, hand_tape_file: Path) -> None:
    plugin = tmp_path / "plugin" / "half.py"
    plugin.parent.mkdir()
    plugin.write_text(HALF.replace("{start}", str(START)))
    db = tmp_path / "run.db"
    args = [sys.executable, "-c", "from arena.cli import main; main()", "replay",
            "--tape", str(hand_tape_file), "--db", str(db), "--start", "2024-01-07",
            "--agent", f"h={plugin}:Half", "--isolate", "--timeout", "1"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    with EventStore.open(db, readonly=True) as store:
        made = [e for e in store.read() if isinstance(e, DecisionMade)]
    assert len(made) > 1
    assert (made[0].error or "").startswith("DecisionTimeout: decision took longer than 1 s")
    assert [(e.reasoning, e.error) for e in made[1:]] == [("whole", None)] * (len(made) - 1)
