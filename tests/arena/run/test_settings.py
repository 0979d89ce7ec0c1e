"""The run settings (``arena.run.settings``) and the CLI's option groups that build them."""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from arena.commands.options import (
    DEFAULT_AGENTS,
    CohortChoice,
    agent_options,
    cohort_options,
    start_options,
)
from arena.engines.base import TapeSource
from arena.engines.driver import replay_cohorts
from arena.run.cohort import CohortConfig
from arena.run.settings import (
    DECISION_TIMEOUT,
    RunOptions,
    RunSettings,
    SettingsError,
    cohort_configs,
    run_options,
)
from ledger.store import EventStore
from tests.conftest import Arena

SUNDAY = datetime(2024, 1, 7, tzinfo=UTC)


@click.command()
@cohort_options
@start_options
@agent_options
def echo(cohort: CohortChoice, starts: list[datetime], agents: dict[str, str]) -> None:
    """What a command that declares the shared groups receives, as JSON."""
    click.echo(
        json.dumps(
            {
                "tape": str(cohort.tape_path),
                "settings": cohort.settings,
                "options": cohort.options.model_dump(),
                "starts": [s.isoformat() for s in starts],
                "agents": agents,
            }
        )
    )


def echoed(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(echo, list(args))
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_the_option_defaults_are_the_models_defaults() -> None:
    """Left out on the command line, a setting is what ``CohortConfig`` and ``RunOptions``
    say when left out in Python: the defaults live on the models alone."""
    out = echoed()
    config = CohortConfig(start=SUNDAY, agents={"a": "hold"})
    assert out["settings"] == config.model_dump(mode="json", exclude={"start", "agents"})
    assert out["options"] == RunOptions().model_dump()
    assert out["options"]["decision_timeout"] == DECISION_TIMEOUT == 300.0
    assert out["starts"] == ["2024-09-01T00:00:00+00:00"]
    assert out["agents"] == dict(item.split("=", 1) for item in DEFAULT_AGENTS)
    assert out["tape"] == "None"


def test_the_groups_hand_over_what_was_given(tmp_path: Path) -> None:
    out = echoed(
        "--rules", "v2", "--cash", "500", "--universe", "7", "--decisions", "6h",
        "--marks", "tick", "--seed", "9", "--jobs", "3", "--timeout", "0", "--isolate",
        "--commit-every", "0.5", "--engine", "ray", "--address", "auto",
        "--execution", "touch?spread_ticks=2",
        "--fees", "none",
        "--starts", "2024-01-01..2024-01-20", "--agent", "x=random?bets=2", "--agent", "y=hold",
        "--tape", str(tmp_path / "t.tape"),
    )  # fmt: skip
    assert out == {
        "tape": str(tmp_path / "t.tape"),
        "settings": {"rules": "v2", "cash": 500.0, "universe": 7, "decision_cadence": "6h",
                     "mark_cadence": "tick", "seed": 9, "execution": "touch?spread_ticks=2",
                     "fees": "none", "latency_ms": 0, "liquidity": "isolated",
                     "marks_at": "price", "listing": "start", "books": None, "latency": None,
                     "latency_by_agent": None},
        "options": {"decision_timeout": 0.0, "isolate": True, "commit_every": 0.5, "jobs": 3,
                    "engine": "ray", "address": "auto"},
        "starts": ["2024-01-07T00:00:00+00:00", "2024-01-14T00:00:00+00:00"],
        "agents": {"x": "random?bets=2", "y": "hold"},
    }  # fmt: skip


def test_the_cli_and_a_python_caller_make_the_same_cohorts(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    """``arena replay`` with only a tape, a start and agents, and ``replay_cohorts`` with a
    ``CohortConfig`` of the same three: the same cohort ids, the same log."""
    agents = {"f": "favourite", "r": "random"}
    cli_db, py_db = tmp_path / "cli.db", tmp_path / "py.db"
    args = ["--tape", hand_tape_file, "--start", "2024-01-07", "--db", cli_db]
    args += [f"--agent={name}={spec}" for name, spec in agents.items()]
    digest = arena.json("replay", *args)["digest"]
    source = TapeSource.load(hand_tape_file)
    replay_cohorts(source, [CohortConfig(start=SUNDAY, agents=agents)], py_db)
    with EventStore.open(cli_db, readonly=True) as a, EventStore.open(py_db, readonly=True) as b:
        assert a.streams() == b.streams() and len(a.streams()) == 1
        assert a.digest() == b.digest() == digest


def test_a_cohort_id_is_its_settings_hash_as_before() -> None:
    """The id hashes the tape and ``CohortConfig.model_dump()``; moving the settings into
    ``RunSettings`` changed neither (the value was computed before the move)."""
    config = CohortConfig(start=SUNDAY, agents={"a": "hold", "b": "random?bets=2"}, universe=3)
    assert config.cohort_id("0" * 64) == "2024-01-07-4ff985f5"
    run = RunSettings(cohort=config, options=RunOptions(decision_timeout=1, isolate=True))
    assert run.cohort.cohort_id("0" * 64) == "2024-01-07-4ff985f5"


def test_run_settings_cross_to_a_spawned_worker_whole() -> None:
    settings = RunSettings(
        cohort=CohortConfig(start=SUNDAY, agents={"a": "hold"}, rules="v2"),
        options=RunOptions(decision_timeout=2.5, isolate=True, jobs=4),
    )
    assert pickle.loads(pickle.dumps(settings)) == settings


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"decision_timeout": -1}, "decision_timeout: Input should be greater than or equal to 0"),
        *(
            (
                {"decision_timeout": seconds},
                "decision_timeout: Input should be less than or equal to 604800",
            )
            for seconds in (float("inf"), 1e308, 604_801)
        ),
        ({"jobs": -1}, "jobs: Input should be greater than or equal to 0"),
        (
            {"isolate": "maybe"},
            "isolate: Input should be a valid boolean, unable to interpret input",
        ),
        ({"threads": 2}, "threads: Extra inputs are not permitted"),
    ],
)
def test_bad_run_options_are_one_settings_error(values: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        run_options(**values)
    assert str(caught.value) == message


def test_bad_cohort_settings_name_every_field_on_one_line() -> None:
    with pytest.raises(SettingsError) as caught:
        cohort_configs([SUNDAY], {"a b": "hold"}, rules="v3", cash=0)
    assert str(caught.value) == (
        "agents: agent name 'a b' may use only letters, digits, _ . -; "
        "cash: Input should be greater than 0; "
        "rules: unknown rules version 'v3' (known: v1, v2)"
    )


@given(jobs=st.integers(0, 64), cohorts=st.integers(1, 64), cores=st.integers(1, 64))
def test_workers_never_exceed_the_cohorts_or_what_was_asked(
    jobs: int, cohorts: int, cores: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("os.cpu_count", lambda: cores)
        workers = RunOptions(jobs=jobs).workers(cohorts)
    assert workers == min(cohorts, jobs or cores)
