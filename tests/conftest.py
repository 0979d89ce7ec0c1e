"""Shared fixtures: a hand-made tape whose every number is known, and a small synthetic one.

The hand tape (``START`` is Sunday 2024-01-07 00:00 UTC, times are offsets from it)::

    id        volume  points (offset: YES price)                    resolution
    a            500  -1d 0.4, 0 0.5, +3d 0.6, +7d 0.75, +10d 0.9    Yes at +14d
    b            300  -2d 0.2, +1d 0.3, +20d 0.1                    No  at +21d
    tie-x        100  -1d 0.5                                        No  at +7d
    tie-w        100  -1d 0.5                                        Yes at +7d
    late       10000  +1d 0.5 (opens at +1d)                         Yes at +15d
    closed      9000  -3d 0.5 (closes at -1d)                        Yes at +2d
    gone        8000  -3d 0.5                                        No  at -1d
    unpriced    7000  +1h 0.5 (opens at -1d, first price after START) Yes at +5d

So the universe at START, by volume, is a, b, then the tie broken by id: tie-w before tie-x
(listed after it on the tape, so tape order would give the other answer). The last point of the
whole tape is b's at +20d, so trading ends at min(latest close +21d, last point + 1s) = +20d+1s
and weekly decisions fall on 0, +7d and +14d.
"""

from __future__ import annotations

# isort: off
import arena.forecasting.lab as _one_blas_thread  # noqa: F401  (set before numpy loads: see arena.forecasting.lab)

# isort: on
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from arena.run.cohort import CohortConfig
from replays.markets import MarketInfo, Resolution
from replays.synthetic import random_walk_tape
from replays.tape import Tape
from replays.tapefile import save_tape
from tests.llama_server import LlamaServer
from tests.tmux_terminal import Tmux

START = 1_704_585_600  # Sunday 2024-01-07 00:00 UTC
HOUR = 3_600
DAY = 86_400
WEEK = 7 * DAY

_HAND: list[tuple[str, float, dict[str, Any], list[tuple[int, float]], str | None, int]] = [
    # id, volume, extra MarketInfo fields, points, winner, resolution offset
    ("a", 500, {}, [(-DAY, 0.4), (0, 0.5), (3 * DAY, 0.6), (WEEK, 0.75), (10 * DAY, 0.9)],
     "Yes", 2 * WEEK),
    ("b", 300, {}, [(-2 * DAY, 0.2), (DAY, 0.3), (20 * DAY, 0.1)], "No", 3 * WEEK),
    ("tie-x", 100, {}, [(-DAY, 0.5)], "No", WEEK),
    ("tie-w", 100, {}, [(-DAY, 0.5)], "Yes", WEEK),
    ("late", 10_000, {"open_ts": START + DAY}, [(DAY, 0.5)], "Yes", 15 * DAY),
    ("closed", 9_000, {"close_ts": START - DAY}, [(-3 * DAY, 0.5)], "Yes", 2 * DAY),
    ("gone", 8_000, {}, [(-3 * DAY, 0.5)], "No", -DAY),
    ("unpriced", 7_000, {"open_ts": START - DAY}, [(HOUR, 0.5)], "Yes", 5 * DAY),
]  # fmt: skip


REAL_COMPONENTS = frozenset({"llama", "ray_cluster", "tmux"})
"""Fixtures that start a real component: the model server, a Ray instance, a tmux server."""


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts a real component is ``slow`` whatever module it sits in: seconds of
    starting and waiting that ``-m "not slow"`` leaves to CI, which runs every test."""
    for item in items:
        if REAL_COMPONENTS.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def make_hand_tape() -> Tape:
    markets, series, resolutions = [], {}, []
    for mid, volume, extra, points, winner, resolved in _HAND:
        markets.append(
            MarketInfo(id=mid, question=f"{mid}?", outcomes=("Yes", "No"), volume=volume, **extra)
        )
        series[mid] = (
            np.array([START + t for t, _ in points], dtype=np.int64),
            np.array([p for _, p in points]),
        )
        resolutions.append(Resolution(market=mid, ts=START + resolved, winner=winner))
    return Tape.from_series(markets, series, resolutions, source="hand")


def hand_config(agents: dict[str, str], **overrides: Any) -> CohortConfig:
    """A cohort on the hand tape at START: the three top markets, weekly decisions and marks."""
    values: dict[str, Any] = {
        "start": START,
        "agents": agents,
        "universe": 3,
        "decision_cadence": "weekly",
        "mark_cadence": "weekly",
    }
    return CohortConfig(**(values | overrides))


@pytest.fixture(scope="session")
def hand_tape() -> Tape:
    return make_hand_tape()


@pytest.fixture
def hand_tape_file(tmp_path: Path, hand_tape: Tape) -> Path:
    path = tmp_path / "hand.tape"
    save_tape(hand_tape, path)
    return path


@pytest.fixture(scope="session")
def synthetic_tape() -> Tape:
    """Six binary markets priced daily from START - 1d to START + 28d, all resolving at +29d."""
    return random_walk_tape(6, 30, seed=7, step_seconds=DAY, start_ts=START - DAY)


@pytest.fixture
def synthetic_tape_file(tmp_path: Path, synthetic_tape: Tape) -> Path:
    path = tmp_path / "synthetic.tape"
    save_tape(synthetic_tape, path)
    return path


@pytest.fixture(scope="session")
def weekly_log(tmp_path_factory: pytest.TempPathFactory, synthetic_tape: Tape) -> Path:
    """Three weekly cohorts of the synthetic tape with a favourite and a coin-flipper,
    replayed one after another (each cohort's events are contiguous in the log), with their
    closing snapshots and the head recorded beside the log. Copy it before changing it."""
    from arena.engines.base import TapeSource
    from arena.engines.driver import replay_cohorts
    from arena.run.settings import RunOptions

    folder = tmp_path_factory.mktemp("weekly")
    tape_path = folder / "synthetic.tape"
    save_tape(synthetic_tape, tape_path)
    agents = {"fav": "favourite", "coin": "random?bets=2"}
    configs = [hand_config(agents, start=START + k * WEEK, universe=6) for k in range(3)]
    db = folder / "arena.db"
    replay_cohorts(TapeSource.load(tape_path), configs, db, RunOptions(jobs=1))
    return db


def rechain(conn: sqlite3.Connection) -> None:
    """Renumber seqs (from 1) and stream versions and recompute every hash, as a careful forger
    would after removing rows: a chain that is whole on its own. Triggers must be dropped."""
    from ledger.store import GENESIS, link_hash

    rows = conn.execute(
        "SELECT seq, streams.key, CAST(payload AS BLOB) FROM events"
        " JOIN streams ON streams.id = stream_id ORDER BY seq"
    ).fetchall()
    prev, versions = GENESIS, dict[str, int]()
    for new_seq, (seq, key, payload) in enumerate(rows, start=1):
        prev = link_hash(prev, key, payload)
        versions[key] = versions.get(key, 0) + 1
        conn.execute(
            "UPDATE events SET seq = ?, version = ?, hash = ? WHERE seq = ?",
            (-new_seq, -versions[key], prev, seq),
        )
    conn.execute("UPDATE events SET seq = -seq, version = -version")


@pytest.fixture(scope="session")
def llama() -> Iterator[LlamaServer]:
    """The real local model (SmolLM2-135M on llama.cpp, one thread), shared by the session:
    its token counters only grow, so a test compares their change over what it did."""
    with LlamaServer() as server:
        yield server


class Arena:
    """``arena ARGS`` in process, through the CLI's edge (``arena.cli.cli``) as a user runs it:
    a domain error ends there as one ``Error:`` line and exit status 1, so every test sees the
    words a user would. Arguments may be paths or numbers; the result keeps ``stdout`` and
    ``stderr`` apart (``output`` is both, interleaved).

    Tables are laid out for a terminal 200 columns wide unless ``env`` says otherwise, so no
    output depends on the shell running the tests."""

    def __call__(
        self,
        *args: object,
        input: str | None = None,
        env: dict[str, str] | None = None,
        catch_exceptions: bool = True,
    ) -> Result:
        from arena.cli import cli

        return CliRunner().invoke(
            cli,
            [str(a) for a in args],
            input=input,
            env={"COLUMNS": "200"} | (env or {}),
            catch_exceptions=catch_exceptions,
            prog_name="arena",
        )

    def json(self, *args: object, **options: Any) -> Any:
        """``arena ARGS --json``, which must succeed, read from stdout alone: the document a
        script would parse, with nothing from stderr mixed in."""
        result = self(*args, "--json", **options)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


@pytest.fixture(scope="session")
def arena() -> Arena:
    """The one way tests run an ``arena`` command in process (see :class:`Arena`)."""
    return Arena()


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    """A tmux server for the test alone, killed after it."""
    server = Tmux()
    yield server
    server("kill-server")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A real Ray instance on this machine, started once for the whole session: two CPUs (the
    machines have two cores), no dashboard, on 127.0.0.1, a small object store. ``--engine
    ray`` uses the instance its process already has, so every Ray test shares this one."""
    import ray

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        object_store_memory=256 << 20,
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()
