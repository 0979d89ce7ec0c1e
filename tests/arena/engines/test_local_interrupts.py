"""Ctrl-C and kill -9 against ``--engine local``'s pool, as a person at a terminal gives them.

A Ctrl-C (once, or twice) at any moment while the pool starts or runs ends the run at once
with no traceback, and the log it leaves resumes to the digest of a run never interrupted; a
driver killed with SIGKILL leaves no worker behind (pool workers, forkservers, and each
``--isolate`` agent's worker, which lives in a session of its own).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ARENA = Path(sys.executable).parent / "arena"
BOUND = 60.0
"""Seconds past which a run that has not ended hangs: a bound on a hang, not a speed test."""


def command(db: Path, *extra: str) -> list[str]:
    # 18 weekly cohorts: a run that is still going a second after its workers are up, however
    # fast the machine (3 cohorts ended in 1.4 s, before the test's Ctrl-C)
    return [str(ARENA), "replay", "--starts", "2024-07-07..2024-11-03", "--jobs", "2",
            "--agent", "f=favourite", "--agent", "h=hold", "--db", str(db), "--json",
            *extra]  # fmt: skip


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, by the kernel's lists of children."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:  # it ended since its parent's list was read
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def session(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[3])


def in_session(sid: int) -> list[int]:
    """The live processes of session ``sid`` (the run's: started with a session of its own),
    wherever they were reparented: a worker still starting when its driver ended included."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(stat.parent.name))
    return found


def wait_for(predicate: object, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = tmp_path_factory.mktemp("fresh") / "fresh.db"
    done = subprocess.run(command(db), capture_output=True, text=True, timeout=BOUND, check=True)
    return str(json.loads(done.stdout)["digest"])


@pytest.mark.slow  # replays as processes, interrupted and resumed
@pytest.mark.parametrize("presses", [1, 2])
@pytest.mark.parametrize("moment", ["first worker", "workers up", "cohorts running"])
def test_ctrl_c_while_the_pool_starts_ends_the_run_at_once_and_it_resumes(
    tmp_path: Path, uninterrupted: str, moment: str, presses: int
) -> None:
    db = tmp_path / "run.db"
    process = subprocess.Popen(command(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # fmt: skip
    try:
        need = {"first worker": 1, "workers up": 2, "cohorts running": 2}[moment]
        wait_for(lambda: len(descendants(process.pid)) >= need, f"{need} workers")
        if moment == "cohorts running":
            time.sleep(1.0)
        below = descendants(process.pid)
        for _ in range(presses):
            os.killpg(process.pid, signal.SIGINT)  # as the terminal sends it: the whole group
            time.sleep(0.05)
        _, err = process.communicate(timeout=BOUND)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err
    assert "Traceback" not in err, err  # the driver's, or any worker's, however far it started
    wait_for(lambda: not any(alive(p) for p in below), "the workers' end")
    wait_for(lambda: not in_session(process.pid), "the end of every process of the run")
    resumed = subprocess.run(command(db), capture_output=True, text=True, timeout=BOUND)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["digest"] == uninterrupted


def leaders(pids: list[int]) -> list[int]:
    """Those of ``pids`` that lead a session of their own (an isolated agent's worker)."""
    out = []
    for pid in pids:
        try:
            if session(pid) == pid:
                out.append(pid)
        except OSError:
            continue
    return out


@pytest.mark.slow  # a replay with isolated agents as processes, killed with SIGKILL
def test_no_worker_outlives_a_killed_driver(tmp_path: Path) -> None:
    process = subprocess.Popen(command(tmp_path / "run.db", "--isolate"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)  # fmt: skip
    below: list[int] = []
    try:
        wait_for(lambda: len(leaders(descendants(process.pid))) >= 2, "isolated agents")
        below = descendants(process.pid)
        process.kill()  # the driver alone, as kill -9 PID does
        process.wait(BOUND)
        wait_for(lambda: not any(alive(p) for p in below), "the end of every worker")
    finally:
        for pid in below:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
