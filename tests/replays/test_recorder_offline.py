"""``arena tapes record`` with nothing to reach (this machine offline, a wrong URL): one line,
and nothing left behind in the user's folder."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.conftest import Arena


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_first_request_that_fails_leaves_no_recording_folder(
    arena: Arena, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = arena(
        "tapes", "record", "--out", tmp_path / "live.tape", "--gamma-url", url,
        "--clob-url", url, "--max-retries", "0",
    )  # fmt: skip
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "live.tape.recording").exists()
    assert list(tmp_path.iterdir()) == []
