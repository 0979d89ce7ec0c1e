"""Errors for bad tapes and failed imports; the CLI prints them as one line."""


class TapeError(ValueError):
    """A tape or import source is unusable; the message names the file, market and problem.

    Market ids, outcome labels and file names come from the data and may hold line breaks;
    they are escaped here, once, so every message stays the one line the CLI prints.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))
