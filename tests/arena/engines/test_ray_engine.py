"""``--engine ray`` on a real local Ray instance: the same log, head and tables as ``local``,
and a worker killed mid-sweep is re-run by Ray with nothing changed.

The instance is the session's ``ray_cluster`` (two CPUs on 127.0.0.1); the runs use the
embedded sample with ten markets and two or three Sundays, so each cohort takes well under a
second and the suite pays Ray's start-up once.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from arena.engines.ray import forwarded_environment
from arena.run.settings import SettingsError, run_options
from tests.conftest import Arena

pytestmark = pytest.mark.usefixtures("ray_cluster")

SMALL = ("--universe", "10", "--starts", "2024-09-01..2024-09-08")


def without_db(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "db"}


def test_a_sweep_on_ray_equals_the_local_one(arena: Arena, tmp_path: Path) -> None:
    args = ("favourite", "--grid", "stake=100,400", *SMALL, "--against", "hold,random")
    local = arena.json("sweep", *args, "--jobs", "2", "--db", str(tmp_path / "local.db"))
    on_ray = arena.json("sweep", *args, "--engine", "ray", "--db", str(tmp_path / "ray.db"))
    assert on_ray["cohort_runs"] == 6 and on_ray["reused"] == 0
    assert without_db(on_ray) == without_db(local)  # digest, every figure, the warning
    again = arena.json("sweep", *args, "--engine", "ray", "--db", str(tmp_path / "ray.db"))
    assert again["reused"] == 6 and again["digest"] == local["digest"]


def test_replay_heads_are_the_same_on_any_engine_and_worker_count(
    arena: Arena, tmp_path: Path
) -> None:
    """The driver appends cohorts in their order, so even the chain's head is reproducible
    (it used to depend on which worker committed first)."""
    args = ("--universe", "10", "--starts", "2024-09-01..2024-09-15",
            "--agent", "f=favourite", "--agent", "r=random")  # fmt: skip
    runs = [
        arena.json("replay", *args, "--jobs", "1", "--db", str(tmp_path / "one.db")),
        arena.json("replay", *args, "--jobs", "2", "--db", str(tmp_path / "two.db")),
        arena.json("replay", *args, "--engine", "ray", "--db", str(tmp_path / "ray.db")),
    ]
    assert len({(r["digest"], r["head"]) for r in runs}) == 1
    assert (tmp_path / "ray.db.head").read_text() == (tmp_path / "one.db.head").read_text()


def test_a_backtest_on_ray_equals_the_local_one(arena: Arena, tmp_path: Path) -> None:
    args = ("favourite", *SMALL, "--against", "hold,random")
    local = arena.json("backtest", *args, "--jobs", "1", "--db", str(tmp_path / "local.db"))
    on_ray = arena.json("backtest", *args, "--engine", "ray", "--db", str(tmp_path / "ray.db"))
    assert without_db(on_ray) == without_db(local)


KILLER = textwrap.dedent(
    '''
    """favourite, except that the first cohort to set it up anywhere kills its own process
    (SIGKILL: nothing in Python can catch it), as a lost worker or node would end."""
    import os
    import signal
    from pathlib import Path

    from strategies.builtin.price_side import Favourite

    MARK = Path(__file__).with_suffix(".killed")
    KILL = os.kill  # bound at import, before the sandbox guards os.kill (arena.boundary.sandbox)


    class Killer(Favourite):
        def setup(self, context):
            try:
                fd = os.open(MARK, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return super().setup(context)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            KILL(os.getpid(), signal.SIGKILL)
    '''
)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a killed worker its parent has not reaped yet is a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_a_worker_killed_mid_sweep_is_rerun_by_ray_with_the_same_result(
    arena: Arena, tmp_path: Path
) -> None:
    plugin = tmp_path / "killer.py"
    plugin.write_text(KILLER)
    mark = plugin.with_suffix(".killed")
    args = (f"{plugin}:Killer", "--grid", "stake=100,400", *SMALL, "--against", "hold")
    on_ray = arena.json("sweep", *args, "--engine", "ray", "--db", str(tmp_path / "ray.db"))
    killed = int(mark.read_text())
    assert killed != os.getpid()  # a worker died, not this process
    assert not alive(killed)
    # the local run, with the mark already there, kills nothing: the reference result
    local = arena.json("sweep", *args, "--jobs", "1", "--db", str(tmp_path / "local.db"))
    assert int(mark.read_text()) == killed
    assert without_db(on_ray) == without_db(local)
    assert on_ray["cohort_runs"] == 6


def test_workers_get_the_model_connection_of_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", "MY_KEY")
    monkeypatch.setenv("MY_KEY", "sk-test")
    monkeypatch.setenv("OPENROUTER_API_KEY", "not-named")
    env = forwarded_environment()
    assert env["ARENA_LLM_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert env["MY_KEY"] == "sk-test"
    assert "OPENROUTER_API_KEY" not in env  # only the key the connection names


def test_an_address_is_only_for_ray() -> None:
    with pytest.raises(SettingsError, match="address: only with --engine ray"):
        run_options(address="127.0.0.1:6379")
    assert run_options(engine="ray", address="auto").address == "auto"


def test_bench_sweep_reports_both_engines_and_the_estimate(arena: Arena) -> None:
    """Counts exactly, times only as numbers (speed is measured, never asserted)."""
    got = arena.json("bench", "sweep", "--settings", "1", "--starts", "1", "--jobs", "2")
    assert got["cohort_runs"] == 1 + 1  # the start's shared cohort and the setting's
    assert got["same_digest"] is True
    assert got["events_per_cohort_run"] > 0 and got["recording_bytes_per_cohort_run"] > 0
    parts = [got["estimate_workers_s"], got["estimate_driver_s"], got["estimate_network_s"]]
    assert got["estimate_total_s"] == max(parts)
    assert got["estimate_bound_by"] == ("workers", "driver", "network")[parts.index(max(parts))]
