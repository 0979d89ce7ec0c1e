"""``--engine ray``: cohorts as Ray tasks, on a cluster or a local Ray instance.

Ray does what a home-made engine would do badly: it schedules the tasks over the cluster's
CPUs, re-runs a task whose worker process or node was lost (``max_retries``; a cohort is
deterministic, so a re-run records the same events), and moves data. The tape is put in Ray's
object store once; a task receives a reference, so the tape travels to each node once, and each
worker process unpickles it once (``_tape``) however many cohorts it runs. A task returns its
cohort's recording (``arena.engines.recorded``) to the object store, where it stays until the driver
appends it to the log, in the order the cohorts were asked for.

Workers get the ``ARENA_*`` variables of the driver (the model connection, ``--on-miss``) and
the API key the connection names, so an LLM agent connects as it would in a local worker;
paths in them (a cassette) must exist on every node. An error in a cohort (a plugin that
fails to load, a tape with nothing to decide) is raised here as itself, not retried.

A slow cohort is journaled as on a local worker (``arena.engines.recorded``), in the journal
folder beside the log, so a killed run's tasks resume from their journals without asking a
model again; on a cluster that folder, like a cassette, must be a path every node reaches (a
fast cohort runs without it; a slow one on a node without it is one line naming the folder).

When the driver watches the run (a progress display), each task sends its decisions, in
batches (``arena.run.pace.Batched``), to a Ray queue (an actor that takes no CPU, placed on the
driver's node where it can be); the driver empties it between waits for results
(``POLL`` seconds at most apart) and tells its watcher of each. A send waits for the queue to
take the batch, so a cohort's decisions are all in it before its recording is ready. A watcher
that raises ends the run then, as on every engine (``arena.engines.base.Engine``).

Ray is an optional extra (``pip install 'arena[ray]'``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from arena.engines.base import CohortWork, EngineError, Finished
from arena.engines.recorded import RecordedCohort, record_cohort
from arena.run.pace import Watcher
from arena.run.plan import CohortPlan, PlannedCohort
from arena.run.settings import RunSettings
from replays.bookfile import load_books
from replays.books import Books
from replays.tape import Tape
from strategies.llm.connection import OPENROUTER_KEY_ENV, PREFIX

MAX_RETRIES = 3
"""Re-runs of a cohort whose worker died (Ray's default for tasks, stated here on purpose)."""

POLL = 0.2
"""Seconds the driver waits for a result before it empties the queue of decisions again."""

_BOOKS: dict[str, Books] = {}
"""The order books this worker process has loaded, by path: one at a time."""

_TAPES: dict[str, Tape] = {}
"""Tapes this worker process has unpickled, by hash: one per process, not one per task."""


def _tape(tape_hash: str, boxed: list[Any]) -> Tape:
    """The tape behind the reference in ``boxed`` (boxed so that Ray passes the reference,
    not the tape, and the tape is fetched and unpickled only on a worker's first cohort)."""
    if tape_hash not in _TAPES:
        import ray

        _TAPES.clear()  # one tape at a time: a long-lived worker must not hoard old ones
        _TAPES[tape_hash] = ray.get(boxed[0])
    return _TAPES[tape_hash]


def _books(path: str | None) -> Books | None:
    """The run's books, loaded from their path once per worker (the path must exist on every
    node, as a cassette's must)."""
    if path is None:
        return None
    if path not in _BOOKS:
        _BOOKS.clear()
        _BOOKS[path] = load_books(path)
    return _BOOKS[path]


def _ray_cohort(
    tape_hash: str,
    boxed: list[Any],
    settings: RunSettings,
    plan: CohortPlan,
    environment: dict[str, str],
    books: str | None = None,
    decisions: Any = None,
) -> RecordedCohort:
    """One cohort in a Ray worker; its decisions put in the ``decisions`` queue, if any."""
    os.environ.update(environment)
    send = None if decisions is None else decisions.put
    return record_cohort(_tape(tape_hash, boxed), settings, plan, _books(books), send)


def forwarded_environment() -> dict[str, str]:
    """What a worker needs of the driver's environment: every ``ARENA_*`` variable, and the
    API key variable the model connection reads."""
    env = {k: v for k, v in os.environ.items() if k.startswith("ARENA_")}
    key_env = os.environ.get(PREFIX + "API_KEY_ENV") or OPENROUTER_KEY_ENV
    if key_env in os.environ:
        env[key_env] = os.environ[key_env]
    return env


def _check_reachable(address: str | None, seconds: float = 5.0) -> None:
    """A ``HOST:PORT`` address nothing answers at is one line now: ``ray.init`` retried the
    cluster's GCS for over six minutes (measured: still waiting at 400 s) before any word.
    ``auto``, ``ray://`` client addresses and none (a local instance) are Ray's to find."""
    if not address or address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # not an address: Ray says so in one line itself
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise EngineError(f"no Ray cluster answers at {address}: {reason}") from None


@dataclass
class RayEngine:
    """Connects to the cluster at ``address`` (``auto``: the one ``ray start`` left on this
    machine), or uses the Ray instance this process already has, or starts a local one with
    ``jobs`` CPUs (0: all); only a local instance it started is shut down after the run."""

    address: str | None = None
    jobs: int = 0

    def run(
        self, work: CohortWork, cohorts: Sequence[PlannedCohort], watch: Watcher | None = None
    ) -> Iterator[Finished]:
        try:
            import ray
            from ray.exceptions import RayError, RayTaskError
        except ImportError:
            raise EngineError("--engine ray needs Ray: pip install 'arena[ray]'") from None
        started = not ray.is_initialized()
        if started:
            _check_reachable(self.address)
            try:
                ray.init(
                    address=self.address,
                    num_cpus=(self.jobs or None) if self.address is None else None,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = self.address or "a local Ray instance"
                raise EngineError(f"cannot start Ray at {where}: {exc}") from None
        task = ray.remote(_ray_cohort).options(num_cpus=1, max_retries=MAX_RETRIES)
        tape = work.source.tape
        boxed = [ray.put(tape)]
        environment = forwarded_environment()
        books = None if work.source.books_path is None else str(work.source.books_path)
        decisions = None if watch is None else _decisions_queue()
        refs = {
            task.remote(
                tape.hash, boxed, work.settings(cohort), cohort.plan, environment, books, decisions
            ): k
            for k, cohort in enumerate(cohorts)
        }

        def tell() -> None:
            """Tell ``watch`` of every decision the queue holds."""
            if decisions is not None and watch is not None and (held := decisions.qsize()):
                for batch in decisions.get_nowait_batch(held):
                    for seen in batch:
                        watch(seen)

        def fetch(ref: Any) -> RecordedCohort:
            try:
                recorded: RecordedCohort = ray.get(ref)
            except RayTaskError as exc:  # the cohort's own error, raised as itself
                cause = exc.cause
                raise (cause if isinstance(cause, Exception) else EngineError(str(exc))) from None
            except RayError as exc:
                cohort = cohorts[refs[ref]].config.cohort_id(tape.hash)
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise EngineError(f"Ray lost cohort {cohort}: {first}") from None
            return recorded

        waiting = list(refs)
        try:
            # Ray's driver prints what the cluster reports (a worker that died, say) on standard
            # output; during a run it goes to standard error, so --json output stays JSON
            with contextlib.redirect_stdout(sys.stderr):
                while waiting:
                    poll = None if decisions is None else POLL
                    ready, waiting = ray.wait(waiting, num_returns=1, timeout=poll)
                    tell()
                    for ref in ready:
                        yield refs[ref], functools.partial(fetch, ref)
        finally:
            for ref in waiting:
                ray.cancel(ref)
            if decisions is not None:
                decisions.shutdown(force=True)
            if started:
                ray.shutdown()


def _decisions_queue() -> Any:
    """A queue for the tasks' decisions: an actor needing no CPU (it must not take a cohort's),
    on the driver's node when it can be, so that it is lost only with the driver."""
    import ray
    from ray.util.queue import Queue
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    return Queue(actor_options={"num_cpus": 0, "scheduling_strategy": here})
