"""What every attack test shares: a read that hangs fails its test instead of holding the
run (a flipped bit in an index once made ``arena export`` read for ever)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest

HUNG_AFTER_S = 120
"""Far beyond what any read of these small logs takes: a bound on a hang, not a speed test."""


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    def hung(signum: int, frame: FrameType | None) -> None:
        raise AssertionError(f"the read still ran after {HUNG_AFTER_S} s: it hangs")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HUNG_AFTER_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
