"""``arena step``, ``arena sweep`` (on local cores and on Ray) under ``--isolate`` never build
a plugin in the driver: each spec is checked as ``arena replay`` checks it
(``arena.boundary.isolated.check_spec``, in a confined worker), so a constructor's attack runs
only in a worker. A constructor that patches ``Broker.execute`` leaves the command's own
process and every other agent's events as they are (the patch lives and dies in its worker); one
that calls ``os._exit(3)`` is refused in one line before any cohort starts (as ``arena replay
--isolate`` refuses it), never the end of the command.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger.events import AnyEvent, DecisionMade
from ledger.rules import Broker
from ledger.store import EventStore
from tests.arena.boundary.test_boundary import of_agent
from tests.conftest import Arena

PLUGIN = """
import os

import pydantic

from strategies.api import Decision, Strategy


class Hostile(Strategy):
    class Settings(pydantic.BaseModel):
        stake: float = 1.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        {attack}

    def decide(self, view):
        return Decision.hold("held")
"""

PATCH = "from ledger.rules import Broker\n        Broker.execute = lambda *a, **k: None"
EXIT = "os._exit(3)"
BENIGN = "pass"


def plugin(tmp_path: Path, attack: str) -> str:
    """The plugin file (in a folder of its own, named alike for every attack, so its agents'
    names are the same) and its spec."""
    folder = tmp_path / f"plugin-{abs(hash(attack))}"
    folder.mkdir(exist_ok=True)
    (folder / "hostile.py").write_text(PLUGIN.format(attack=attack))
    return f"{folder / 'hostile.py'}:Hostile"


def events(db: Path) -> list[AnyEvent]:
    with EventStore.open(db, readonly=True) as store:
        return list(store.read())


def made(log: list[AnyEvent], agent: str) -> list[DecisionMade]:
    return [e for e in log if isinstance(e, DecisionMade) and e.agent == agent]


def step_args(tape: Path, db: Path, agents: dict[str, str]) -> list[object]:
    pairs = [x for name, spec in agents.items() for x in ("--agent", f"{name}={spec}")]
    return ["step", "--tape", tape, "--start", "2024-01-07", "--universe", 3, *pairs,
            "--isolate", "--no-input", "--db", db, "--json"]  # fmt: skip


def sweep_args(tape: Path, db: Path, spec: str, *engine: str) -> list[object]:
    return ["sweep", spec, "--grid", "stake=1,2", "--against", "favourite", "--tape", tape,
            "--universe", 3, "--isolate", "--db", db, *engine]  # fmt: skip


def arena_in_child(*args: object) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from arena.cli import main; main()", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # confined workers started for the checks and the runs
def test_step_under_isolate_never_builds_a_plugin_here(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    execute = Broker.execute
    alone = tmp_path / "alone.db"
    result = arena(*step_args(hand_tape_file, alone, {"fav": "favourite"}))
    assert result.exit_code == 0, result.output

    patched = tmp_path / "patched.db"
    agents = {"fav": "favourite", "bad": plugin(tmp_path, PATCH)}
    result = arena(*step_args(hand_tape_file, patched, agents))
    assert result.exit_code == 0, result.output
    assert Broker.execute is execute  # the constructor ran in workers only
    log = events(patched)
    assert of_agent(log, "fav") == of_agent(events(alone), "fav")
    assert {(d.action, d.reasoning, d.error) for d in made(log, "bad")} == {("HOLD", "held", None)}

    agents["bad"] = plugin(tmp_path, EXIT)
    ended = arena_in_child(*step_args(hand_tape_file, tmp_path / "exits.db", agents))
    assert ended.returncode == 1, ended.stderr  # not 3: the driver went on to say why
    assert ended.stderr.strip().splitlines()[-1].startswith(f"Error: {agents['bad']}: ")
    assert "Traceback" not in ended.stderr


def swept_agents(db: Path) -> tuple[list[AnyEvent], list[DecisionMade]]:
    """The comparison agent's events (its cohort's, cohort id left out) and the swept
    settings' decisions."""
    log = events(db)
    setting = made(log, "Hostile-stake_1") + made(log, "Hostile-stake_2")
    return of_agent(log, "favourite"), setting


@pytest.mark.slow
def test_sweep_under_isolate_never_builds_a_plugin_here(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    execute = Broker.execute
    benign = tmp_path / "benign.db"
    result = arena(*sweep_args(hand_tape_file, benign, plugin(tmp_path, BENIGN), "--jobs", "1"))
    assert result.exit_code == 0, result.output
    patched = tmp_path / "patched.db"
    result = arena(*sweep_args(hand_tape_file, patched, plugin(tmp_path, PATCH), "--jobs", "1"))
    assert result.exit_code == 0, result.output
    assert Broker.execute is execute
    favourite, decisions = swept_agents(patched)
    assert favourite == swept_agents(benign)[0] and favourite
    assert decisions and {(d.action, d.reasoning, d.error) for d in decisions} == {
        ("HOLD", "held", None)
    }

    spec = plugin(tmp_path, EXIT)
    ended = arena_in_child(*sweep_args(hand_tape_file, tmp_path / "exits.db", spec, "--jobs", "1"))
    assert ended.returncode == 1, ended.stderr
    assert ended.stderr.strip().splitlines()[-1].startswith(f"Error: {spec}: ")
    assert "Traceback" not in ended.stderr


@pytest.mark.slow
def test_sweep_on_ray_under_isolate_never_builds_a_plugin_here(
    arena: Arena, tmp_path: Path, hand_tape_file: Path, ray_cluster: None
) -> None:
    execute = Broker.execute
    benign = tmp_path / "benign.db"
    result = arena(*sweep_args(hand_tape_file, benign, plugin(tmp_path, BENIGN), "--jobs", "1"))
    assert result.exit_code == 0, result.output
    patched = tmp_path / "patched.db"
    ray = ("--engine", "ray")
    result = arena(*sweep_args(hand_tape_file, patched, plugin(tmp_path, PATCH), *ray))
    assert result.exit_code == 0, result.output
    assert Broker.execute is execute
    favourite, decisions = swept_agents(patched)
    assert favourite == swept_agents(benign)[0] and favourite
    assert decisions and {(d.action, d.reasoning, d.error) for d in decisions} == {
        ("HOLD", "held", None)
    }
    result = arena(*sweep_args(hand_tape_file, tmp_path / "exits.db", plugin(tmp_path, EXIT),
                               *ray))  # fmt: skip
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip().splitlines()[-1].startswith("Error: ")
