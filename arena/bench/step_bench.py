"""How fast ``arena step`` answers a key: the redraw on a wide universe, stepping back far.

Both logs are the rebuild benchmark's (``make_log``: the real broker, a decision per agent per
step, a mark every 50 steps), read back from SQLite as ``arena step`` reads them.

* ``redraw``: 500 markets and 20 agents. The Textual app runs headless (``App.run_test``) at
  200×50, from the middle of the log; each figure is from a key press until the screen has
  been redrawn (the pilot's ``pause`` returns after the app has processed the key and
  refreshed), for keys that move to the next decision, the next decision of the agent, back,
  and switch agent. ``unbound_key_to_screen`` is the same for a key bound to nothing: what the
  pilot and Textual's event loop cost by themselves. ``view`` is the projection alone
  (``build_view``) at cuts past the middle.
* ``live``: a live replay of the embedded sample (four built-in agents) stepped to each next
  decision instant, as ``arena step`` without a DB steps it (``bench_live``).
* ``step_back``: 1 M events, 200 markets, 5 agents. After one pass to the end (which leaves a
  checkpoint every ``CHECKPOINT_EVERY`` events), the time to show the view at decisions picked
  at random across the log, in random order: restore the nearest checkpoint, fold the rest,
  build the view. ``open`` is reading the log and indexing its stops (once per session).

Keys: ``d`` next decision (any agent), ``n`` this agent's next, ``p`` back (to the cut shown
before, a view the app still holds), ``a`` the next agent at the same cut.

Each figure is given twice: ``cpu`` is the process's CPU time (``time.process_time``: the
app, Textual and the projection all run in this one process), which other work on a shared
machine disturbs least; ``wall`` is the time a person waits, which on a loaded machine
includes waiting for a core. Best and median of the samples, and the worst.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from arena.bench.rebuild_bench import make_log
from arena.step_view import build_view
from arena.timeline import CHECKPOINT_EVERY, Timeline
from ledger.events import Event
from ledger.store import EventStore

COHORT = "bench-rebuild"


def _log(n_events: int, markets: int, agents: Sequence[str]) -> list[Event]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "step.db"
        with EventStore.open(path) as store:
            make_log(store, n_events, markets=markets, agents=agents)
        with EventStore.open(path, readonly=True) as store:
            return list(store.read(stream=COHORT))


def _timed(samples: list[tuple[float, float]]) -> dict[str, dict[str, float]]:
    """``cpu`` and ``wall`` figures of (cpu, wall) samples."""
    return {
        "cpu": _figures([cpu for cpu, _ in samples]),
        "wall": _figures([wall for _, wall in samples]),
    }


class Clock:
    """CPU and wall time since it started."""

    def __init__(self) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def read(self) -> tuple[float, float]:
        return time.process_time() - self.cpu, time.perf_counter() - self.wall


def _figures(samples: list[float]) -> dict[str, float]:
    return {
        "best_ms": round(min(samples) * 1e3, 2),
        "median_ms": round(statistics.median(samples) * 1e3, 2),
        "worst_ms": round(max(samples) * 1e3, 2),
        "samples": len(samples),
    }


def bench_redraw(
    markets: int = 500, agents: int = 20, presses: int = 40, n_events: int = 40_000
) -> dict[str, Any]:
    from arena.step_app import StepApp

    names = [f"agent{i:02d}" for i in range(agents)]
    events = _log(n_events, markets, names)
    line = Timeline(events, COHORT)
    keys = ["d", "n", "p", "a"]
    pressed: dict[str, list[tuple[float, float]]] = {key: [] for key in keys}
    idle: list[tuple[float, float]] = []

    async def run() -> None:
        app = StepApp(line, names, names[0])
        async with app.run_test(size=(200, 50)) as pilot:
            app.move(line.next_stop(len(events) // 2, "decision", names[0]))
            await pilot.pause()
            for i in range(presses):
                key = keys[i % len(keys)]
                for pressing, into in ((key, pressed[key]), ("x", idle)):
                    clock = Clock()
                    await pilot.press(pressing)
                    await pilot.pause()
                    into.append(clock.read())

    asyncio.run(run())
    half = len(events) // 2
    cuts = [s.cut for s in line.stops if s.kind == "decision" and s.cut > half][:presses]
    viewed = []
    for cut in cuts:
        clock = Clock()
        build_view(line, cut, names[0])
        viewed.append(clock.read())
    every = [sample for samples in pressed.values() for sample in samples]
    return {
        "markets": markets,
        "agents": agents,
        "events": len(events),
        "key_to_screen": _timed(every),
        **{f"key_{key}_to_screen": _timed(samples) for key, samples in pressed.items()},
        "unbound_key_to_screen": _timed(idle),
        "view": _timed(viewed),
    }


def bench_step_back(n_events: int = 1_000_000, samples: int = 40, seed: int = 0) -> dict[str, Any]:
    began = time.perf_counter()
    events = _log(n_events, 200, ("alpha", "bravo", "charlie", "delta", "echo"))
    read = time.perf_counter() - began
    began = time.perf_counter()
    line = Timeline(events, COHORT)
    index = time.perf_counter() - began
    began = time.perf_counter()
    line.state_at(len(events))
    first_pass = time.perf_counter() - began
    decisions = [s for s in line.stops if s.kind == "decision"]
    picks = random.Random(seed).sample(decisions, min(samples, len(decisions)))
    back = []
    for stop in picks:
        clock = Clock()
        build_view(line, stop.cut, stop.agent)
        back.append(clock.read())
    return {
        "events": len(events),
        "checkpoint_every": CHECKPOINT_EVERY,
        "open": {"read_s": round(read, 2), "index_s": round(index, 2)},
        "first_pass_to_end_s": round(first_pass, 2),
        "to_any_decision": _timed(back),
    }


def bench_live(
    agents: Sequence[str] = ("favourite", "contrarian", "random", "hold"),
) -> dict[str, Any]:
    """A live replay of the embedded sample stepped decision by decision, as ``arena step``
    without a DB does: ask the replay's process for the next decision, read the log up to the
    version it reports, extend the timeline and project the view. ``cpu`` is this process's
    share (reading and projecting); the replay's own work is in ``wall``."""
    from arena.cohort import CohortConfig
    from arena.step_live import LiveRun, LogTail
    from replays.samples import sample_path

    config = CohortConfig(
        start=datetime(2024, 9, 1, tzinfo=UTC), agents={name: name for name in agents}
    )
    steps: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        clock = Clock()
        run = LiveRun(sample_path(), config, Path(tmp) / "live.db")
        try:
            tail = LogTail(run.db, run.cohort)
            line = Timeline(tail.read(run.advance("open").version), run.cohort)
            started = clock.read()
            while not run.closed:
                clock = Clock()
                line.extend(tail.read(run.advance("decision").version))
                build_view(line, len(line.events), agents[0])
                steps.append(clock.read())
        finally:
            run.stop()
    return {
        "agents": len(agents),
        "events": len(line.events),
        "start_s": {"cpu": round(started[0], 2), "wall": round(started[1], 2)},
        "step": _timed(steps),
    }
