"""A real terminal for tests: a tmux server of our own, keys sent and the screen captured."""

from __future__ import annotations

import subprocess
import time
import uuid


class Tmux:
    """A tmux server of our own (its own socket), so nothing else's sessions are touched."""

    def __init__(self) -> None:
        self.socket = f"arena-test-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True)
        return done.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "step")

    def wait_for(self, text: str) -> str:
        """The screen once it shows ``text`` (a failing assertion if it never does)."""
        screen = ""
        for _ in range(300):
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{screen}")

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", "step"],
                              capture_output=True).returncode == 0  # fmt: skip
