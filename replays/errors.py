"""Errors for bad tapes and failed imports; the CLI prints them as one line."""


class TapeError(ValueError):
    """A tape or import source is unusable; the message names the file, market and problem."""
