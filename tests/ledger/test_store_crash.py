"""The store across processes: a writer killed mid-batch, and writers racing on one file."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from ledger.chain import verify_chain
from ledger.store import EventStore

BATCH = 5_000  # more than one INSERT chunk, so a half-written batch would show

_WRITER = """
import sys
from ledger.events import Marked
from ledger.store import EventStore

path, stream, batch, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with EventStore.open(path) as store:
    version = store.stream_version(stream)
    for _ in range(rounds):
        events = [
            Marked(cohort=stream, ts=version + i, markets=["m"], prices=[[0.25, 0.75]])
            for i in range(batch)
        ]
        version = store.append(stream, events, expected_version=version)
"""


def _writer(path: Path, stream: str, batch: int, rounds: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), stream, str(batch), str(rounds)],
        stderr=subprocess.PIPE,
    )


def _wait_for_events(path: Path, at_least: int, writer: subprocess.Popen[bytes]) -> None:
    """Poll (not a timing assertion): give up only if the writer died or never got going."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and writer.poll() is None:
        if path.exists():
            try:
                with EventStore.open(path, readonly=True) as store:
                    if store.last_seq() >= at_least:
                        return
            except Exception:
                pass  # the writer may still be creating the schema
        time.sleep(0.02)
    raise AssertionError(f"writer did not reach {at_least} events (exit {writer.poll()})")


def _assert_whole_contiguous_streams(store: EventStore, batch: int) -> None:
    assert verify_chain(store) == store.last_seq()
    for stream in store.streams():
        versions = [version for _, key, version, _ in store.read_with_seq(stream)]
        assert versions == list(range(1, len(versions) + 1))
        assert len(versions) % batch == 0


def test_sigkill_mid_batch_leaves_last_committed_event(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    for kill_after in (3 * BATCH, 6 * BATCH):
        writer = _writer(path, "s", BATCH, rounds=10_000)
        _wait_for_events(path, kill_after, writer)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        with EventStore.open(path) as store:
            _assert_whole_contiguous_streams(store, BATCH)
            resumed_from = store.stream_version("s")
            assert resumed_from >= kill_after
    # a killed writer does not stop the next one from resuming where the log ends
    writer = _writer(path, "s", BATCH, rounds=1)
    assert writer.wait() == 0, writer.stderr.read() if writer.stderr else ""
    with EventStore.open(path, readonly=True) as store:
        assert store.stream_version("s") == resumed_from + BATCH
        _assert_whole_contiguous_streams(store, BATCH)


def test_two_processes_append_to_different_streams(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    EventStore.open(path).close()
    rounds = 15
    writers = [_writer(path, stream, 500, rounds) for stream in ("left", "right")]
    for writer in writers:
        assert writer.wait() == 0, writer.stderr.read() if writer.stderr else ""
    with EventStore.open(path, readonly=True) as store:
        assert store.streams() == ["left", "right"]
        assert store.stream_version("left") == store.stream_version("right") == rounds * 500
        _assert_whole_contiguous_streams(store, 500)


def test_stale_writer_gets_concurrency_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    writer = _writer(path, "s", 10, rounds=1)
    assert writer.wait() == 0
    # a second writer that read version 0 before the first appended
    stale = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from ledger.errors import ConcurrencyError\n"
            "from ledger.events import Marked\n"
            "from ledger.store import EventStore\n"
            "with EventStore.open(sys.argv[1]) as store:\n"
            "    try:\n"
            "        store.append('s', [Marked(cohort='s', ts=0, markets=[], prices=[])], 0)\n"
            "    except ConcurrencyError:\n"
            "        sys.exit(3)\n",
            str(path),
        ],
        check=False,
    )
    assert stale.returncode == 3
    with EventStore.open(path, readonly=True) as store:
        assert store.last_seq() == 10
        assert verify_chain(store) == 10
