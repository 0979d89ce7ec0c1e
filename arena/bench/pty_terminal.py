"""A terminal for timing a full-screen program as a person sees it: the real program on a
pseudo-terminal, keys written to it, and each frame it draws timed as it arrives.

A terminal paints a frame when the program ends it. Textual ends each screen update with the
synchronized-output sequence (``ESC[?2026l``) once the terminal says it supports the mode, so
this terminal answers Textual's question for it (``ESC[?2026$p``) and then knows, byte for
byte, when a frame has been written: the time from writing a key to the end of the frame it
caused is what a person waits for, with nothing of a test harness in it (no polling for idle,
no in-process pilot). The program's CPU time is read from the kernel's per-thread scheduler
counts (``/proc/PID/task/*/schedstat``, nanoseconds), so it covers every thread of the program
and nothing of this process.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ASKS_SYNC = b"\x1b[?2026$p"
SUPPORTS_SYNC = b"\x1b[?2026;2$y"  # "supported, currently reset": Textual then uses it
FRAME_END = b"\x1b[?2026l"


class TerminalError(RuntimeError):
    """The program drew nothing in time, or ended."""


@dataclass(frozen=True)
class Press:
    """One key and what followed it: the first frame it caused and the last frame before the
    screen went quiet (a key may cause several), in seconds after the key was written, and
    the program's CPU time over the same span."""

    key: str
    first_frame: float
    settled: float
    frames: int
    cpu: float


class PtyTerminal:
    """``argv`` running on a pseudo-terminal of ``size`` (columns, rows)."""

    def __init__(
        self,
        argv: Sequence[str],
        size: tuple[int, int] = (200, 50),
        env: dict[str, str] | None = None,
    ) -> None:
        self._master, slave = os.openpty()
        columns, rows = size
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        environment = {**os.environ, "TERM": "xterm-256color", **(env or {})}
        environment.pop("NO_COLOR", None)
        self.process = subprocess.Popen(
            list(argv), stdin=slave, stdout=slave, stderr=slave, env=environment,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        self._started = time.perf_counter()
        self.output = bytearray()
        self._tail = b""  # the last bytes read, for a sequence split between two reads

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        os.close(self._master)

    def __enter__(self) -> PtyTerminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cpu(self) -> float:
        """The program's CPU seconds so far, every thread of it."""
        total = 0
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended between the listing and the read
        return total / 1e9

    def _read(self, until: float) -> int:
        """Read what the program wrote until ``until`` (a perf_counter instant) or the first
        read; answer its question about synchronized output; return the frames ended."""
        wait = max(until - time.perf_counter(), 0.0)
        ready, _, _ = select.select([self._master], [], [], wait)
        if not ready:
            return 0
        try:
            chunk = os.read(self._master, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            raise TerminalError(f"the program ended (exit {self.process.poll()})")
        seen = self._tail + chunk
        if ASKS_SYNC in seen:
            os.write(self._master, SUPPORTS_SYNC)
        self.output += chunk
        ended = seen.count(FRAME_END) - self._tail.count(FRAME_END)
        self._tail = seen[-16:]
        return ended

    def first_screen(self, quiet: float = 0.3, timeout: float = 120.0) -> float:
        """Read until the program has drawn and then drawn nothing for ``quiet`` seconds;
        the seconds from the start to the last frame."""
        began = self._started
        last: float | None = None
        while last is None or time.perf_counter() - last < quiet:
            now = time.perf_counter()
            if now - began > timeout:
                raise TerminalError(f"no quiet screen within {timeout:.0f} s")
            if self._read(min(last + quiet, began + timeout) if last else began + timeout):
                last = time.perf_counter()
        return last - began

    def press(self, key: str, quiet: float = 0.15, timeout: float = 10.0) -> Press:
        """Write ``key`` and time the frames it causes (TerminalError if it causes none)."""
        cpu = self.cpu()
        began = time.perf_counter()
        os.write(self._master, key.encode())
        first = last = None
        frames = 0
        while True:
            now = time.perf_counter()
            if first is None and now - began > timeout:
                raise TerminalError(f"no frame within {timeout:.0f} s of the key {key!r}")
            if last is not None and now - last >= quiet:
                break
            ended = self._read((last + quiet) if last is not None else began + timeout)
            if ended:
                last = time.perf_counter()
                first = first if first is not None else last
                frames += ended
        assert first is not None
        return Press(key, first - began, last - began, frames, self.cpu() - cpu)
