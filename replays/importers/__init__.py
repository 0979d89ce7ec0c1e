"""Importers that turn Polymarket's own data shapes into tapes (each returns an
``ImportResult``: the tape, and what was skipped or left undecided, and why)."""

from replays.importers.election2024 import import_election2024
from replays.importers.polymarket import ImportResult, import_polymarket

__all__ = ["ImportResult", "import_election2024", "import_polymarket"]
